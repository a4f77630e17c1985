"""A dataset folder: its metadata, splits and checksums (the trajectory files are :mod:`.storage`'s)::

    DIR/train/traj_XXXXXX.h5     one trajectory per file, XXXXXX = trajectory id
    DIR/valid/traj_XXXXXX.h5
    DIR/test/traj_XXXXXX.h5
    DIR/dataset.yaml             how the data was made (grid, band limits, fields, config, command, versions)
    DIR/stats.yaml               area-weighted statistics of the train split (:mod:`.statistics`)
    DIR/splits.json              trajectory ids per split
    DIR/checksums.sha256         ``sha256sum`` format, paths relative to DIR, then one comment line per file
                                 ``# size BYTES  relative/path`` (``sha256sum -c`` skips it; folders written
                                 before sizes were recorded lack them)

Small files are written atomically with :func:`dandelion.runtime.write_yaml_atomic` and
:func:`dandelion.runtime.write_json_atomic`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import yaml

from dandelion.runtime import write_text_atomic

from .storage import CorruptFileError, trajectory_filename

__all__ = [
    "SPLITS",
    "RESAMPLE_MARK",
    "completeness_problem",
    "is_complete",
    "load_metadata",
    "load_stats",
    "load_splits",
    "list_split",
    "make_splits",
    "check_split_ratios",
    "DEFAULT_SPLIT_RATIOS",
    "split_of",
    "sha256_file",
    "write_checksums",
    "read_checksums",
    "read_sizes",
    "write_checksum_lines",
    "data_fingerprint",
]

#: Split folder names, in order.
SPLITS = ("train", "valid", "test")


def _load_yaml(path: Path, what: str, fix: str) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: {what}; {fix}")
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise CorruptFileError(f"{path} is not valid YAML ({' '.join(str(err).split())[:120]}); {fix}") from err
    if not isinstance(data, dict):
        raise CorruptFileError(f"{path} is not a YAML mapping; {fix}")
    return data


#: The mark ``dandelion-well-resample`` keeps in its output folder: ``complete: false`` until every file is written.
RESAMPLE_MARK = "dandelion_resample.yaml"


def completeness_problem(path: str | os.PathLike) -> str | None:
    """Why the dataset folder ``path`` is not complete, or None when it is. The one definition every reader uses.

    * A folder written by ``dandelion-generate`` (it has ``dataset.yaml``) is complete when ``dataset.yaml`` does
      not say ``complete: false`` and ``stats.yaml`` and ``checksums.sha256`` are written (both last, atomically);
    * a folder written by ``dandelion-well-resample`` (it has :data:`RESAMPLE_MARK`) when the mark says
      ``complete: true``;
    * any other folder holding a split folder (``train/``, ``valid/`` or ``test/``, or under ``data/`` as in the
      Well's layout as downloaded) is taken as complete; a missing folder, or one with no split folder, is not.

    The text names the folder and the command that finishes it.
    """
    path = Path(path)
    meta_file, mark = path / "dataset.yaml", path / RESAMPLE_MARK
    if meta_file.is_file():
        try:
            meta = yaml.safe_load(meta_file.read_text())
        except yaml.YAMLError:
            meta = None
        if not isinstance(meta, dict):
            return f"{meta_file} is not a readable YAML mapping: regenerate the dataset with dandelion-generate"
        missing = [n for n in ("stats.yaml", "checksums.sha256") if not (path / n).is_file()]
        if meta.get("complete") is False or missing:
            return (
                f"{path} is incomplete (its generation did not finish): rerun the dandelion-generate command that "
                f"made it ({meta.get('command') or 'the same command'}; generation resumes)"
            )
        return None
    if mark.is_file():
        try:
            info = yaml.safe_load(mark.read_text())
        except yaml.YAMLError:
            info = None
        if not isinstance(info, dict) or info.get("complete") is not True:
            command = (info or {}).get("command") if isinstance(info, dict) else None
            return (
                f"{path} is an unfinished dandelion-well-resample output ({mark} says it is not complete): rerun "
                f"`{command or 'dandelion-well-resample src=SRC dst=' + str(path)}` to finish it (it resumes), "
                "or delete the folder"
            )
        return None
    if not path.is_dir():
        return f"{path} does not exist: generate it with dandelion-generate dataset=NAME dataset.path={path}"
    if not any((root / split).is_dir() for root in (path, path / "data") for split in ("train", "valid", "test")):
        return (
            f"{path} holds no dataset (no dataset.yaml and no train/, valid/ or test/ folder, nor under data/): "
            f"generate it with dandelion-generate dataset=NAME dataset.path={path}"
        )
    return None


def is_complete(path: str | os.PathLike) -> bool:
    """Whether the folder is complete (:func:`completeness_problem` finds nothing)."""
    return completeness_problem(path) is None


def load_metadata(path: str | os.PathLike) -> dict:
    """The dataset folder's ``dataset.yaml`` as a dict. Raises ``FileNotFoundError`` naming the file."""
    return _load_yaml(
        Path(path) / "dataset.yaml",
        "not a dataset folder, or its generation never started",
        "generate it with dandelion-generate dataset=NAME dataset.path=DIR",
    )


def load_stats(path: str | os.PathLike) -> dict:
    """The dataset folder's ``stats.yaml`` (train-split statistics) as a dict.

    Returns ``{field: {kind: "scalar", mean, std, delta_mean, delta_std}}`` for scalar fields and
    ``{field: {kind: "vector", rms, delta_rms}}`` for vector fields. Raises ``FileNotFoundError``
    naming the file if generation has not finished.
    """
    return _load_yaml(
        Path(path) / "stats.yaml",
        "the dataset's generation has not finished",
        "rerun the same dandelion-generate command to finish the dataset",
    )


def load_splits(path: str | os.PathLike) -> dict:
    """The dataset folder's ``splits.json`` as a dict. Raises ``FileNotFoundError`` naming the file."""
    p = Path(path) / "splits.json"
    if not p.is_file():
        raise FileNotFoundError(
            f"{p} does not exist: not a dataset folder, or generation never started; "
            "generate it with dandelion-generate dataset=NAME dataset.path=DIR"
        )
    try:
        data = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptFileError(
            f"{p} is not valid JSON ({err}): rerun the dandelion-generate command that made the folder to rewrite it"
        ) from err
    if not isinstance(data, dict):
        raise CorruptFileError(f"{p} is not a JSON mapping: rerun the dandelion-generate command that made the folder")
    return data


def list_split(path: str | os.PathLike, split: str) -> list[Path]:
    """Trajectory files of one split, in trajectory-id order, as listed in ``splits.json``.

    Raises
    ------
    ValueError
        If ``split`` is not one of ``train``, ``valid``, ``test`` (``"val"`` is accepted for ``valid``).
    FileNotFoundError
        If ``splits.json`` is missing.
    """
    split = "valid" if split == "val" else split
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use one of {SPLITS}")
    splits = load_splits(path)
    if split not in splits:
        raise ValueError(f"{Path(path) / 'splits.json'} has no split {split!r}: regenerate the dataset")
    return [Path(path) / split / trajectory_filename(i) for i in splits[split]]


# ---------------------------------------------------------------------------------------------- splits
DEFAULT_SPLIT_RATIOS = (0.8, 0.1, 0.1)


def check_split_ratios(ratios) -> list[float]:
    """``ratios`` as three floats (train, valid, test), each positive, summing to 1 (within 1e-6).

    Raises
    ------
    ValueError
        Naming the value and the fix.
    """
    try:
        r = [float(x) for x in ratios]
    except (TypeError, ValueError):
        r = []
    if len(r) != 3 or min(r) <= 0 or abs(sum(r) - 1.0) > 1e-6:
        raise ValueError(
            f"dataset.split_ratios={ratios!r}: give three positive fractions (train, valid, test) that sum to 1, "
            "e.g. dataset.split_ratios=[0.8,0.1,0.1] (the default, null)"
        )
    return r


def make_splits(n_trajectories: int, *, seed: int = 42, ratios=DEFAULT_SPLIT_RATIOS, note: str = "") -> dict:
    """Random split of trajectory ids ``0..n-1`` (docs/datasets/README.md).

    A permutation from ``numpy.random.default_rng(seed)``; ``n_train = round(ratios[0] n)``,
    ``n_valid = round(ratios[1] n)``, the rest is test (default ratios 0.8, 0.1, 0.1; checked by
    :func:`check_split_ratios`). Lists are sorted. Returns the ``splits.json`` dict.
    For ``n >= 8`` this is exactly the reference rule; for ``3 <= n < 8``, where rounding would leave
    the valid or test split empty (and training or rollout would fail later), each of them gets at
    least one trajectory, taken from train. One or two trajectories (for inspection) all go to train.
    """
    ratios = check_split_ratios(ratios)
    n = int(n_trajectories)
    perm = np.random.default_rng(seed).permutation(n)
    if n < 3:
        n_train, n_valid = n, 0
    else:
        n_valid = max(1, int(round(ratios[1] * n)))
        n_train = min(int(round(ratios[0] * n)), n - n_valid - 1)
    parts = {
        "train": sorted(int(i) for i in perm[:n_train]),
        "valid": sorted(int(i) for i in perm[n_train : n_train + n_valid]),
        "test": sorted(int(i) for i in perm[n_train + n_valid :]),
    }
    return {
        "seed": int(seed),
        "strategy": "random",
        "stratify_on": None,
        "ratios": [float(r) for r in ratios],
        "counts": {k: len(v) for k, v in parts.items()},
        "note": note,
        **parts,
    }


def split_of(splits: dict) -> dict[int, str]:
    """Map trajectory id -> split name."""
    return {int(i): s for s in SPLITS for i in splits[s]}


# ---------------------------------------------------------------------------------------------- checksums
def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def write_checksums(root: str | os.PathLike, relpaths: Iterable[str]) -> Path:
    """Write ``root/checksums.sha256`` in ``sha256sum`` format (``HASH  relative/path``) with each file's size
    (module docstring), atomically."""
    root = Path(root)
    return write_checksum_lines(root, {p: sha256_file(root / p) for p in relpaths})


def write_checksum_lines(root: str | os.PathLike, digests: Mapping[str, str]) -> Path:
    """Write ``root/checksums.sha256`` from ``{relative path: hex digest}``, with the files' sizes, atomically."""
    root = Path(root)
    lines = [f"{d}  {p}" for p, d in digests.items()]
    lines += [f"{_SIZE_MARK} {(root / p).stat().st_size}  {p}" for p in digests]
    out = root / "checksums.sha256"
    write_text_atomic(out, "\n".join(lines) + "\n")
    return out


_SIZE_MARK = "# size"


def read_checksums(root: str | os.PathLike) -> dict[str, str]:
    """``{relative path: hex digest}`` from ``root/checksums.sha256`` (size lines skipped). Raises
    ``FileNotFoundError``."""
    out = {}
    for line in _checksum_lines(root):
        if line.strip() and not line.startswith("#"):
            digest, rel = line.split(None, 1)
            out[rel.strip().lstrip("*")] = digest
    return out


def read_sizes(root: str | os.PathLike) -> dict[str, int] | None:
    """``{relative path: bytes}`` from ``root/checksums.sha256``'s size lines; ``None`` for a folder written before
    sizes were recorded. Raises ``FileNotFoundError``."""
    out = {}
    for line in _checksum_lines(root):
        if line.startswith(_SIZE_MARK + " "):
            size, rel = line[len(_SIZE_MARK) :].split(None, 1)
            out[rel.strip()] = int(size)
    return out or None


def data_fingerprint(root: str | os.PathLike) -> str | None:
    """SHA-256 (16 hex digits) of a folder's ``checksums.sha256`` digests (every data file, the splits, the statistics
    and ``dataset.yaml``), in path order: two folders share it only when they hold the same bytes. ``None`` for a
    folder without the list (a folder in the Well's layout)."""
    try:
        digests = read_checksums(root)
    except FileNotFoundError:
        return None
    text = "".join(f"{digests[p]}  {p}\n" for p in sorted(digests))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _checksum_lines(root) -> list[str]:
    p = Path(root) / "checksums.sha256"
    if not p.is_file():
        raise FileNotFoundError(
            f"{p} does not exist: generation has not finished; rerun the same dandelion-generate command"
        )
    return p.read_text().splitlines()
