"""Command-line plumbing shared by the ``dandelion-*`` jobs: checks before the work, one-line errors, own ``--help``.

Every job's ``main`` goes through :func:`run` (hydra jobs) or :func:`guard` (the others):

* the overrides are composed first (hydra's compose API) and the job's ``check`` looks at the paths
  and values (:func:`check_dataset_folder`, :func:`check_checkpoint`, :func:`check_new_file`,
  :func:`check_device`, ...) before hydra makes any folder and before any model or solver is built;
* a user mistake (a bad override, a missing or foreign folder, an existing output, a value out of
  range) prints ONE line, ``<prog>: error: <problem>: <fix>``, on stderr and exits with status 2;
  an unknown key or group option gets a "did you mean" (:func:`difflib.get_close_matches` against the
  configuration's keys or the group's options);
* ``--debug`` (or ``HYDRA_FULL_ERROR=1``) shows the traceback instead;
* ``--help`` prints the job's own usage, its own config groups with their options and its own keys
  with their comments (from ``configs/<job>.yaml``), not every group of the configuration package.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import sys

import hydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, ListConfig, OmegaConf

from dandelion.locks import note_state, noted_state
from dandelion.runtime import DamagedFileError

from .checks import (
    UsageError,
    _suggest,
    check_checkpoint,
    check_choice,
    check_dataset_folder,
    check_device,
    check_new_file,
    check_positive,
    check_unlocked,
    explicit_choice,
    is_set,
    is_zarr_store,
    require,
)
from .help import CONFIG_MODULE, _group_options, _own_groups, compose_config, help_text

__all__ = [
    "UsageError",
    "USER_ERRORS",
    "compose_config",
    "run",
    "guard",
    "fail",
    "help_text",
    "config_keys",
    "is_set",
    "require",
    "explicit_choice",
    "check_dataset_folder",
    "check_checkpoint",
    "check_new_file",
    "is_zarr_store",
    "check_device",
    "check_choice",
    "check_positive",
    "check_unlocked",
    "INTERRUPTED",
    "NUMERICAL_ERRORS",
    "NUMERICAL_FAILURE",
]

#: Flags of hydra's own command line; with any of them the arguments go to hydra unchecked.
HYDRA_FLAGS = (
    "--cfg",
    "-c",
    "--info",
    "-i",
    "--package",
    "-p",
    "--resolve",
    "--hydra-help",
    "--version",
    "--shell-completion",
    "-sc",
    "--multirun",
    "-m",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--experimental-rerun",
)


#: Exceptions read as user mistakes: one line and exit status 2 (a traceback with ``--debug``).
USER_ERRORS = (
    ValueError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
    ImportError,
    DamagedFileError,
)

#: Exit status of a job stopped with Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130

#: Exit status when the reader of stdout went away (``dandelion-benchmark dry_run=true | head``): the shell's
#: 128 + SIGPIPE, as a command killed by the signal would report it.
BROKEN_PIPE = 141

#: Numerical failures during the work (a solver state or a model output that is not finite): one line naming what
#: failed and what to change, exit status :data:`NUMERICAL_FAILURE` (not a usage mistake, so not 2).
NUMERICAL_ERRORS = (FloatingPointError,)
NUMERICAL_FAILURE = 1


# ---------------------------------------------------------------------------------------------- composing
def config_keys(cfg) -> list[str]:
    """Every dotted key of a configuration (mappings walked, lists are leaves), interpolations unresolved."""
    keys: list[str] = []

    def walk(node, prefix):
        for k, v in node.items():
            key = f"{prefix}{k}"
            keys.append(key)
            if isinstance(v, dict):
                walk(v, key + ".")

    walk(OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, (DictConfig, ListConfig)) else cfg, "")
    return keys


def _value_of(overrides: list[str], key: str) -> str:
    """The value the command line gave ``key`` (``key=V``, ``+key=V`` or ``++key=V``), else ``VALUE``."""
    for o in overrides:
        k, eq, v = o.partition("=")
        if eq and k.lstrip("+") == key:
            return v
    return "VALUE"


def _explain_compose_error(err: Exception, prog: str, name: str, overrides: list[str]) -> str:
    """One line for a hydra composition error: the bad override and, where one is close, a suggestion."""
    text = str(err)
    if isinstance(err, OverrideParseException):
        parser = OverridesParser.create()
        bad = None
        for o in overrides:
            try:
                parser.parse_override(o)
            except Exception:  # noqa: BLE001 - hydra raises several types for a bad override
                bad = o
                break
        what = f"cannot read the override {bad!r}" if bad else "cannot read the overrides"
        return (
            f"{what} ({text.splitlines()[0]}): write KEY=VALUE, with lists as KEY=[a,b] in single quotes for the "
            "shell; strings with spaces or special characters in quotes"
        )
    m = re.search(r"Could not find '([^']+)/([^'/]+)'", text)
    if isinstance(err, MissingConfigException) and m:
        group, option = m.group(1), m.group(2)
        options = _group_options(group)
        close = _suggest(option, options)
        hint = f"did you mean {group}={close}? " if close else ""
        return f"unknown {group} {option!r}: {hint}choose one of {', '.join(options)}"
    m = re.search(r"An item is already at '([^']+)'", text)
    if m:  # +KEY=VALUE for a KEY that exists: the + only adds new keys
        key = m.group(1)
        return f"{key} already exists: write {key}={_value_of(overrides, key)} without the + (a + adds a new key only)"
    m = re.search(r"Could not override '([^']+)'", text)
    if m:
        key = m.group(1)
        groups = [o.split("=", 1) for o in overrides if "=" in o and not o.startswith(("+", "~"))]
        own = _own_groups(name)
        chosen = [f"{k}={v}" for k, v in groups if k in own]
        try:
            keys = config_keys(compose_config(name, chosen))
        except Exception:  # noqa: BLE001 - a second bad override: suggest from the defaults
            keys = config_keys(compose_config(name, []))
        # neither a config group nor a key's own parent node is a fix for a dotted key: "dataset" for "dataset.K=1"
        candidates = [k for k in keys if not key.startswith(k + ".")] + ([] if "." in key else list(own))
        close = _suggest(key, candidates)
        if close is None:  # a misspelt last part under a right prefix: compare the last parts of siblings
            head, _, leaf = key.rpartition(".")
            siblings = {k.rpartition(".")[2]: k for k in keys if k.rpartition(".")[0] == head}
            leaf_match = _suggest(leaf, siblings)
            close = siblings[leaf_match] if leaf_match else None
        hint = f"did you mean {close}={_value_of(overrides, key)}? " if close else ""  # an existing key: no +
        listing = f"{prog} --cfg job prints every key" if "." in key else f"{prog} --help lists the keys"
        return f"unknown key {key!r}: {hint}({listing}; +{key}=VALUE adds it as a new key)"
    cause = f" ({err.__cause__})" if err.__cause__ is not None else ""
    return f"bad override: {' '.join((text + cause).split())}"


# ---------------------------------------------------------------------------------------------- errors
def fail(prog: str, message: str, status: int = 2):
    """Print ``<prog>: error: <message>`` (one line) on stderr and exit with ``status``."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)
    raise SystemExit(status)


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("HYDRA_FULL_ERROR", "") not in ("", "0")


def _stdout_reader_gone() -> bool:
    """Whether the reader of stdout's pipe has gone (``| head`` after its lines): on Linux ``poll`` reports
    ``POLLERR`` on the write end of a pipe with no reader (``POLLHUP`` on a socket whose peer closed). A regular
    file, ``/dev/null`` or a live terminal answers ``False``. On other systems, or where stdout has no file
    descriptor (``None``, a ``StringIO``, pytest's ``capsys``), it cannot tell and answers ``True``, so that a
    closed ``| head`` never prints a traceback. Not seen: a socket whose peer only shut down its reading side."""
    if not sys.platform.startswith("linux"):
        return True
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))


@contextlib.contextmanager
def guard(
    prog: str, debug: bool = False, *, name: str | None = None, overrides: list[str] | None = None, in_job: bool = False
):
    """Turn a user mistake raised in the block into one line on stderr and exit status 2.

    Ctrl-C (``KeyboardInterrupt``) becomes one line, ``interrupted: <where the state is; how to continue>`` (what
    the job said with :func:`dandelion.locks.note_state`), and exit status :data:`INTERRUPTED`. Hydra composition
    errors are explained with :func:`_explain_compose_error` (``name`` and
    ``overrides`` are the configuration composed). With ``debug`` every exception propagates
    (full traceback). A numerical failure (:data:`NUMERICAL_ERRORS`: a solver state or a model output that is not
    finite) is one line too, with exit status :data:`NUMERICAL_FAILURE`. Other exceptions (bugs) propagate
    unchanged. ``in_job`` adds a pointer to ``--debug`` (the error came from inside the job, where a traceback may
    help). When the reader of stdout closes the pipe (``| head``), the job stops silently with status
    :data:`BROKEN_PIPE`; stdout is pointed at ``os.devnull`` first so that the interpreter's final flush does not
    raise again (the recipe of the Python documentation, "Note on SIGPIPE" in the ``signal`` module). A broken
    pipe while stdout's reader is still there (another pipe or socket of the job) is not that, and propagates.
    """
    try:
        yield
    except BrokenPipeError:
        if debug or not _stdout_reader_gone():
            raise
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(BROKEN_PIPE) from None
    except HydraException as err:
        if debug:
            raise
        fail(prog, _explain_compose_error(err, prog, name or "", list(overrides or [])))
    except USER_ERRORS as err:
        if debug:
            raise
        fail(prog, f"{err}{' (--debug shows the traceback)' if in_job else ''}")
    except NUMERICAL_ERRORS as err:
        if debug:
            raise
        fail(prog, f"{err}{' (--debug shows the traceback)' if in_job else ''}", NUMERICAL_FAILURE)
    except KeyboardInterrupt:
        if debug:
            raise
        state = noted_state()
        fail(
            prog,
            f"interrupted: {state}" if state else "interrupted before the job wrote anything: rerun the same command",
            INTERRUPTED,
        )


# ---------------------------------------------------------------------------------------------- help
# ---------------------------------------------------------------------------------------------- running
def run(prog: str, name: str, job, *, check=None, argv: list[str] | None = None) -> None:
    """Run a hydra job ``job(cfg)`` with ``configs/<name>.yaml``: checks first, one-line errors, own help.

    ``check(cfg, overrides)`` (optional) inspects the composed configuration and raises
    :class:`UsageError` (or another of :data:`USER_ERRORS`) for a bad value or path; it runs before
    hydra creates anything. With a flag of hydra's own (``--cfg``, ``--multirun``, ...) the
    arguments go to hydra unchecked.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    note_state(None)
    debug = _debug_requested(argv)
    argv = [a for a in argv if a != "--debug"]
    if any(a in ("-h", "--help") for a in argv):
        print(help_text(prog, name))
        return
    if not any(a.split("=", 1)[0] in HYDRA_FLAGS for a in argv):
        with guard(prog, debug, name=name, overrides=argv):
            cfg = compose_config(name, argv)
            if check is not None:
                check(cfg, argv)

    @hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name=name, version_base="1.3")
    def _app(cfg: DictConfig) -> None:
        with guard(prog, debug, name=name, overrides=argv, in_job=True):
            job(cfg)

    saved, saved_env = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    sys.argv = [prog, *argv]
    if debug:  # hydra's own error report then shows the whole traceback
        os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        _app()
    finally:
        sys.argv = saved
        if saved_env is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = saved_env
