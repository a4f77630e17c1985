"""Where a benchmark job reads and writes: ``scale.results_dir`` and ``scale.work_dir`` made independent of the cwd.

The scales (``configs/scale/<scale>.yaml``) give both folders relative to the checkout (``results_dir:
benchmarks/results/cpu``, ``work_dir: data/benchmark/cpu``). :func:`resolve_scale_dirs` reads such a configured
path against the checkout, found as the folder above this package when it is installed from one (an editable
install: the package ``dandelion.benchmarks`` is the checkout's ``benchmarks/``), so that a job started from any
directory uses the committed results. A path given on the command line (``scale.results_dir=DIR``) is the
user's: an absolute one is kept, a relative one is read against the current directory, as a shell would. A
configured relative path with no checkout to read it against (the package installed elsewhere) is refused in one
line naming the option to pass. Run from the checkout's root, the configured paths stay relative, so the paths
the records store do not name the machine's folders.
"""

from __future__ import annotations

from pathlib import Path

from dandelion.cli.common import UsageError

__all__ = ["DIR_OPTIONS", "checkout_root", "resolve_scale_dirs"]

#: The folders of a scale that a job resolves: config key -> what it holds (for the message).
DIR_OPTIONS = {
    "results_dir": "the committed results",
    "work_dir": "datasets, checkpoints and rollouts",
}


def checkout_root() -> Path | None:
    """The checkout this package is installed from (the folder holding ``pyproject.toml`` and this package as its
    ``benchmarks/``), or None when the package lives elsewhere (a wheel in site-packages)."""
    here = Path(__file__).resolve().parent
    root = here.parent
    if here.name == "benchmarks" and (root / "pyproject.toml").is_file() and (root / "configs" / "scale").is_dir():
        return root
    return None


def _given(overrides, key: str) -> bool:
    """Whether the command line sets ``scale.<key>`` (``scale.key=``, ``+scale.key=``, ``++scale.key=``)."""
    return any(str(o).split("=", 1)[0].lstrip("+") == f"scale.{key}" for o in overrides or ())


def resolve_scale_dirs(cfg, overrides=None, keys=tuple(DIR_OPTIONS)) -> None:
    """Resolve ``cfg.scale.<key>`` for every key of ``keys`` in place (see the module docstring).

    ``overrides``: the job's command-line arguments (a path named there is the user's, read against the cwd).

    Raises
    ------
    dandelion.cli.common.UsageError
        If a configured path is relative and the package is not installed from a checkout.
    """
    root = checkout_root()
    for key in keys:
        value = cfg.scale.get(key)
        if value is None:
            continue
        p = Path(str(value)).expanduser()
        if p.is_absolute():
            continue
        if _given(overrides, key):
            cfg.scale[key] = str(Path.cwd() / p)
        elif root is None:
            raise UsageError(
                f"scale.{key}={value} is relative to a checkout of dandelion, and this installation is not one: "
                f"pass scale.{key}=DIR (where {DIR_OPTIONS.get(key, 'it')} go)"
            )
        elif Path.cwd().resolve() != root:
            cfg.scale[key] = str(root / p)
