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
import difflib
import os
import re
import sys
from importlib import resources
from pathlib import Path

import hydra
import torch
import yaml
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, ListConfig, OmegaConf

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
]

CONFIG_MODULE = "dandelion.configs"

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


class UsageError(ValueError):
    """A mistake in a job's arguments; the message names the problem and the fix."""


#: Exceptions read as user mistakes: one line and exit status 2 (a traceback with ``--debug``).
USER_ERRORS = (
    ValueError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
    ImportError,
)


# ---------------------------------------------------------------------------------------------- composing
def compose_config(name: str, overrides: list[str] | None = None, return_hydra_config: bool = False) -> DictConfig:
    """``configs/<name>.yaml`` composed with ``overrides`` (hydra's compose API, no run folder, no logging setup).

    Works inside an initialised hydra context too (then that context's search path is used).
    """
    overrides = list(overrides or [])
    if GlobalHydra.instance().is_initialized():
        return compose(config_name=name, overrides=overrides, return_hydra_config=return_hydra_config)
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(config_name=name, overrides=overrides, return_hydra_config=return_hydra_config)


def _group_options(group: str) -> list[str]:
    if GlobalHydra.instance().is_initialized():
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))


def _own_groups(name: str) -> dict[str, str | None]:
    """The config groups of ``configs/<name>.yaml``'s defaults list, with their default choices."""
    cfg = compose_config(name, [], return_hydra_config=True)
    return {g: c for g, c in cfg.hydra.runtime.choices.items() if not g.startswith("hydra")}


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


def _suggest(word: str, candidates) -> str | None:
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


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
        return f"unknown key {key!r}: {hint}({prog} --help lists the keys; +{key}=VALUE adds it as a new key)"
    cause = f" ({err.__cause__})" if err.__cause__ is not None else ""
    return f"bad override: {' '.join((text + cause).split())}"


# ---------------------------------------------------------------------------------------------- errors
def fail(prog: str, message: str, status: int = 2):
    """Print ``<prog>: error: <message>`` (one line) on stderr and exit with ``status``."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)
    raise SystemExit(status)


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("HYDRA_FULL_ERROR", "") not in ("", "0")


@contextlib.contextmanager
def guard(
    prog: str, debug: bool = False, *, name: str | None = None, overrides: list[str] | None = None, in_job: bool = False
):
    """Turn a user mistake raised in the block into one line on stderr and exit status 2.

    Hydra composition errors are explained with :func:`_explain_compose_error` (``name`` and
    ``overrides`` are the configuration composed). With ``debug`` every exception propagates
    (full traceback). Other exceptions (bugs, numerical failures) propagate unchanged. ``in_job``
    adds a pointer to ``--debug`` (the error came from inside the job, where a traceback may help).
    """
    try:
        yield
    except HydraException as err:
        if debug:
            raise
        fail(prog, _explain_compose_error(err, prog, name or "", list(overrides or [])))
    except USER_ERRORS as err:
        if debug:
            raise
        fail(prog, f"{err}{' (--debug shows the traceback)' if in_job else ''}")


# ---------------------------------------------------------------------------------------------- help
def _yaml_text(name: str) -> str:
    return resources.files(CONFIG_MODULE).joinpath(f"{name}.yaml").read_text()


def _split_yaml(text: str) -> tuple[list[str], list[str]]:
    """The leading comment block (without '# ') and the body lines without the defaults and hydra blocks."""
    lines = text.splitlines()
    head = []
    while lines and lines[0].startswith("#"):
        head.append(lines.pop(0)[1:].removeprefix(" "))
    body, skip = [], False
    for line in lines:
        if line and not line[0].isspace() and not line.startswith("#"):
            skip = line.split(":", 1)[0] in ("defaults", "hydra")
        if not skip:
            body.append(line)
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    return head, body


def help_text(prog: str, name: str, intro: str | None = None) -> str:
    """The ``--help`` of a job: usage (the header of ``configs/<name>.yaml``), its own config groups with
    their options, its own keys with their defaults and comments."""
    head, body = _split_yaml(_yaml_text(name))
    parts = [intro.strip() if intro else "\n".join(head).strip(), ""]
    groups = _own_groups(name)
    if groups:
        parts.append("Config groups (GROUP=OPTION):")
        for g, default in reversed(list(groups.items())):  # in the order of the defaults list
            opts = [f"{o} (default)" if o == default else o for o in _group_options(g)]
            parts.append(f"  {g}: {', '.join(opts)}" + (" (none by default)" if default is None else ""))
        parts.append(f"  (the keys of an option: {prog} GROUP=OPTION --cfg job)")
        parts.append("")
    parts += ["Keys (KEY=VALUE; default and meaning):", *("  " + line if line else "" for line in body), ""]
    parts.append(f"{prog} [KEY=VALUE ...] --cfg job   prints the composed configuration without running the job.")
    parts.append(
        "Errors print one line and exit with status 2; --debug (or HYDRA_FULL_ERROR=1) shows the traceback. "
        f"Hydra's own flags: {prog} --hydra-help."
    )
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------- running
def run(prog: str, name: str, job, *, check=None, argv: list[str] | None = None) -> None:
    """Run a hydra job ``job(cfg)`` with ``configs/<name>.yaml``: checks first, one-line errors, own help.

    ``check(cfg, overrides)`` (optional) inspects the composed configuration and raises
    :class:`UsageError` (or another of :data:`USER_ERRORS`) for a bad value or path; it runs before
    hydra creates anything. With a flag of hydra's own (``--cfg``, ``--multirun``, ...) the
    arguments go to hydra unchecked.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
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


# ---------------------------------------------------------------------------------------------- checks
def is_set(cfg, key: str) -> bool:
    """Whether ``key`` holds a value (not absent, not ``null``, not ``???``)."""
    if OmegaConf.select(cfg, key, default=None, throw_on_missing=False) is None:
        return False
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return not OmegaConf.is_missing(node, leaf)


def require(cfg, key: str, fix: str):
    """The value of ``key``; :class:`UsageError` ``"<key> is not set: <fix>"`` when it has none."""
    if not is_set(cfg, key):
        raise UsageError(f"{key} is not set: {fix}")
    return OmegaConf.select(cfg, key)


def explicit_choice(overrides: list[str], group: str) -> str | None:
    """The option chosen on the command line for ``group`` (``group=X``), or None."""
    for o in overrides:
        k, _, v = o.partition("=")
        if k.lstrip("+") == group and v:
            return v
    return None


def _near(p: Path) -> str:
    """`` (did you mean SIBLING?)`` for a missing path whose folder holds a close name, else ``""``."""
    try:
        siblings = [c.name for c in p.parent.iterdir()] if p.parent.is_dir() else []
    except OSError:
        return ""
    close = _suggest(p.name, siblings)
    return f" (did you mean {p.parent / close}?)" if close else ""


def check_dataset_folder(path, *, key: str = "dataset.path", name: str | None = None, split: str | None = None) -> Path:
    """A complete dataset folder written by ``dandelion-generate`` (and of dataset ``name`` when given), or a
    folder in the Well's layout (``DIR/data/train/*.hdf5``, no ``dataset.yaml``), which the jobs read through
    :mod:`dandelion.datasets.well`.

    Raises
    ------
    UsageError
        For a missing path, a file, a folder without ``dataset.yaml`` (not a Dandelion dataset) that is not in
        the Well's layout either, an unfinished generation, a dataset of another name, an unknown split, or a
        Well-layout folder without files in the requested split.
    """
    p = Path(str(path)).expanduser()
    make = f"dandelion-generate dataset={name or 'NAME'} dataset.path={p}"
    if not p.exists():
        raise UsageError(
            f"{key}={p} does not exist{_near(p)}: pass the folder written by dandelion-generate, or make it "
            f"with `{make}`"
        )
    if not p.is_dir():
        raise UsageError(f"{key}={p} is a file, not a dataset folder: pass the folder written by dandelion-generate")
    meta_file = p / "dataset.yaml"
    if not meta_file.is_file() and _well_files(p, "train"):
        # a folder in the Well's layout (DIR/data/{train,valid,test}/*.hdf5): read by dandelion.datasets.well
        if split is not None and str(split) not in ("train", "valid", "val", "test"):
            raise UsageError(f"split={split} is not a split: use split=train, valid or test")
        if split is not None and not _well_files(p, str(split)):
            sub = "valid" if str(split) == "val" else str(split)
            raise UsageError(
                f"{key}={p} is in the Well's layout but {p / 'data' / sub} holds no HDF5 file: "
                "pass another split= or download that split"
            )
        return p
    if not meta_file.is_file():
        hint = (
            f" (did you mean {key}={p / 'datasets' / 'NAME'}? the Well's base path holds one folder per dataset)"
            if (p / "datasets").is_dir()
            else ""
        )
        raise UsageError(
            f"{key}={p} is not a Dandelion dataset folder (it has no dataset.yaml) nor one in the Well's layout "
            f"(DIR/data/train/*.hdf5){hint}: pass a folder written by dandelion-generate, or make one with `{make}`"
        )
    try:
        meta = yaml.safe_load(meta_file.read_text())
    except yaml.YAMLError as err:
        raise UsageError(
            f"{meta_file} is not valid YAML ({err}): regenerate the dataset with dandelion-generate"
        ) from err
    if not isinstance(meta, dict):
        raise UsageError(f"{meta_file} is not a YAML mapping: pass a folder written by dandelion-generate")
    if meta.get("complete") is False or not (p / "stats.yaml").is_file():
        raise UsageError(
            f"{key}={p} is incomplete (its generation did not finish): rerun the dandelion-generate command "
            "that made it (generation resumes)"
        )
    if name is not None and str(meta.get("name")) != str(name):
        raise UsageError(
            f"{key}={p} holds a {meta.get('name')} dataset, not {name}: pass dataset={meta.get('name')} "
            f"or the folder of a {name} dataset"
        )
    if split is not None and str(split) not in ("train", "valid", "val", "test"):
        close = _suggest(str(split), ["train", "valid", "test"])
        raise UsageError(
            f"split={split} is not a split: use split=train, valid or test"
            + (f" (did you mean split={close}?)" if close else "")
        )
    return p


def _well_files(root: Path, split: str) -> bool:
    """Whether ``root/data/<split>`` holds HDF5 files (``*.hdf5`` or ``*.h5``, as dandelion.datasets.well reads)."""
    folder = root / "data" / ("valid" if split == "val" else split)
    return folder.is_dir() and any(f for pattern in ("*.hdf5", "*.h5") for f in folder.glob(pattern))


def check_checkpoint(path, key: str = "checkpoint") -> Path:
    """An existing checkpoint file. Raises :class:`UsageError` naming where checkpoints come from."""
    if path is None or str(path) in ("", "???"):
        raise UsageError(f"{key} is not set: pass {key}=RUN_DIR/best.pt (written by dandelion-train)")
    p = Path(str(path)).expanduser()
    if not p.exists():
        raise UsageError(
            f"{key}={p} does not exist{_near(p)}: pass the best.pt or last.pt of a dandelion-train run folder"
        )
    if p.is_dir():
        hint = f" (did you mean {key}={p / 'best.pt'}?)" if (p / "best.pt").is_file() else ""
        raise UsageError(f"{key}={p} is a folder: pass a checkpoint file, RUN_DIR/best.pt or RUN_DIR/last.pt{hint}")
    return p


def is_zarr_store(path) -> bool:
    """True when ``path`` is a folder holding Zarr (format 2 or 3) root metadata."""
    p = Path(path)
    return p.is_dir() and any((p / name).is_file() for name in (".zgroup", ".zarray", ".zmetadata", "zarr.json"))


def check_new_file(path, *, key: str = "output", overwrite: bool = False, store: bool = False) -> Path:
    """An output file that may be written: set, not a folder, and absent unless ``overwrite``.

    With ``store=True`` the output is a Zarr store (a folder): an existing Zarr store may be replaced with
    ``overwrite``, any other existing folder is refused (replacing it would delete files that are not ours).

    Raises
    ------
    UsageError
        For an unset path, or a folder (``store=False``) or a folder that is not a Zarr store (``store=True``).
    FileExistsError
        If the file (or store) exists and ``overwrite`` is false.
    """
    if path is None or str(path) in ("", "???"):
        raise UsageError(f"{key} is not set: pass {key}=FILE")
    p = Path(str(path)).expanduser()
    if p.is_dir() and not store:
        raise UsageError(f"{key}={p} is a folder: pass a file name, e.g. {key}={p / 'forecasts.nc'}")
    if p.is_dir() and not is_zarr_store(p):
        raise UsageError(
            f"{key}={p} is a folder but not a Zarr store (it would be replaced): pass a new name, "
            f"e.g. {key}={p / 'forecasts.zarr'}"
        )
    if p.is_file() and store:
        raise UsageError(f"{key}={p} is a file, not a Zarr store: pass a new name, e.g. {key}={p.with_suffix('.zarr')}")
    if p.exists() and not overwrite:
        raise FileExistsError(f"{key}={p} exists: choose another path or pass overwrite=true to replace it")
    return p


def check_device(name, key: str = "device") -> str:
    """``cpu``, ``auto``, ``cuda`` or ``cuda:N`` that this machine has."""
    name = str(name)
    if name in ("cpu", "auto"):
        return name
    m = re.fullmatch(r"cuda(?::(\d+))?", name)
    if not m:
        raise UsageError(f"{key}={name} is not a device: use {key}=cpu, cuda, cuda:N or auto")
    if not torch.cuda.is_available():
        raise UsageError(f"{key}={name} but CUDA is not available on this machine: use {key}=cpu (or {key}=auto)")
    if m.group(1) is not None and int(m.group(1)) >= torch.cuda.device_count():
        raise UsageError(
            f"{key}={name} but this machine has {torch.cuda.device_count()} CUDA device(s): "
            f"use {key}=cuda:0 .. cuda:{torch.cuda.device_count() - 1}"
        )
    return name


def check_choice(value, choices, key: str) -> str:
    """``value`` must be one of ``choices``; the error suggests the closest."""
    value, choices = str(value), [str(c) for c in choices]
    if value not in choices:
        close = _suggest(value, choices)
        raise UsageError(
            f"{key}={value} is not one of {', '.join(choices)}" + (f": did you mean {key}={close}?" if close else "")
        )
    return value


def check_positive(cfg, keys) -> None:
    """Each of ``keys`` that is set must be a positive integer."""
    for key in keys:
        if is_set(cfg, key):
            v = OmegaConf.select(cfg, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"{key}={v} must be a positive integer")
