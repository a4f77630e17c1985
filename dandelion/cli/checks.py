"""The checks every ``dandelion-*`` job runs on its configuration before any work (:mod:`dandelion.cli.common`).

Each raises :class:`UsageError` (or another of :data:`dandelion.cli.common.USER_ERRORS`) with one line naming
the key, the problem and the fix.
"""

from __future__ import annotations

import difflib
import zipfile
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from dandelion.datasets.folder import completeness_problem
from dandelion.locks import OutputLock
from dandelion.runtime import DamagedFileError, check_writable, is_zarr_store
from dandelion.runtime import check_device as _check_device

__all__ = [
    "UsageError",
    "is_set",
    "require",
    "explicit_choice",
    "check_dataset_folder",
    "check_checkpoint",
    "check_new_file",
    "check_unlocked",
    "damaged_checkpoint",
    "is_zarr_store",
    "check_device",
    "check_choice",
    "check_positive",
]


class UsageError(ValueError):
    """A mistake in a job's arguments; the message names the problem and the fix."""


def _suggest(word: str, candidates) -> str | None:
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


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
        the Well's layout either, an unfinished generation or resample
        (:func:`dandelion.datasets.folder.completeness_problem`), a dataset of another name, an unknown split, or a
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
        problem = completeness_problem(p)  # e.g. an unfinished dandelion-well-resample output
        if problem:
            raise UsageError(problem)
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
    problem = completeness_problem(p)
    if problem:
        raise UsageError(problem)
    meta = yaml.safe_load(meta_file.read_text())
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
    """An existing checkpoint file that opens as one (a readable torch zip archive with its pickle record).

    Reading the archive's directory is cheap (the tensors are not loaded); :func:`dandelion.checkpoint.load_checkpoint`
    refuses what passes here but still does not load.

    Raises
    ------
    UsageError
        For an unset path, a missing file or a folder, naming where checkpoints come from.
    DamagedFileError
        For a file that is not a readable checkpoint (garbage, truncated), naming the file and the fix.
    """
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
    try:
        with zipfile.ZipFile(p) as z:
            ok = any(n.endswith("/data.pkl") or n == "data.pkl" for n in z.namelist())
    except (zipfile.BadZipFile, OSError, EOFError):
        ok = False
    if not ok:
        raise DamagedFileError(damaged_checkpoint(p, key))
    return p


def damaged_checkpoint(p: Path, key: str = "checkpoint") -> str:
    """The one line for a file at ``key`` that is not a readable checkpoint."""
    return (
        f"{key}={p} is not a readable checkpoint (truncated, or not a file written by dandelion-train): pass the "
        f"best.pt or last.pt of a dandelion-train run, or retrain; last.pt and best.pt are written atomically, so "
        "the other one of the run may be sound"
    )


def check_unlocked(path, prog: str) -> None:
    """Refuse an output another process is writing now (its :class:`dandelion.locks.OutputLock`, in the folder
    ``path``): the one line of :class:`dandelion.locks.LockHeldError`. Nothing is created."""
    OutputLock.check_free(Path(str(path)).expanduser(), prog)


def check_new_file(path, *, key: str = "output", overwrite: bool = False, store: bool = False) -> Path:
    """An output file that may be written: set, not a folder, and absent unless ``overwrite``.

    With ``store=True`` the output is a Zarr store (a folder): an existing Zarr store may be replaced with
    ``overwrite``, any other existing folder is refused (replacing it would delete files that are not ours).

    Raises
    ------
    UsageError
        For an unset path, or a folder (``store=False``) or a folder that is not a Zarr store (``store=True``).
    PermissionError
        When the folder the output goes into refuses new files (:func:`dandelion.runtime.check_writable`).
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
    check_writable(p, key)
    return p


def check_device(name, key: str = "device") -> str:
    """``cpu``, ``auto``, ``cuda`` or ``cuda:N`` that this machine has (:func:`dandelion.runtime.check_device`)."""
    try:
        return _check_device(name, key)
    except ValueError as err:
        raise UsageError(str(err)) from err


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
