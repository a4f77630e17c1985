"""A dataset folder: its metadata, splits and checksums (the trajectory files are :mod:`.storage`'s)::

    DIR/train/traj_XXXXXX.h5     one trajectory per file, XXXXXX = trajectory id
    DIR/valid/traj_XXXXXX.h5
    DIR/test/traj_XXXXXX.h5
    DIR/dataset.yaml             how the data was made (grid, band limits, fields, config, command, versions)
    DIR/stats.yaml               area-weighted statistics of the train split (:mod:`.statistics`)
    DIR/splits.json              trajectory ids per split
    DIR/checksums.sha256         ``sha256sum`` format, paths relative to DIR

Small files are written atomically with :func:`dandelion.runtime.write_yaml_atomic` and
:func:`dandelion.runtime.write_json_atomic`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import yaml

from dandelion.runtime import write_text_atomic

from .storage import CorruptFileError, trajectory_filename

__all__ = [
    "SPLITS",
    "is_complete",
    "load_metadata",
    "load_stats",
    "load_splits",
    "list_split",
    "make_splits",
    "split_of",
    "sha256_file",
    "write_checksums",
    "read_checksums",
]

#: Split folder names, in order.
SPLITS = ("train", "valid", "test")


def _load_yaml(path: Path, what: str, fix: str) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: {what}; {fix}")
    with open(path) as fh:
        data = yaml.safe_load(fh)
    if not isinstance(data, dict):
        raise CorruptFileError(f"{path} is not a YAML mapping; {fix}")
    return data


def is_complete(path: str | os.PathLike) -> bool:
    """Whether the folder's generation finished: its ``checksums.sha256`` and ``stats.yaml`` are written (both
    last, atomically)."""
    path = Path(path)
    return (path / "checksums.sha256").exists() and (path / "stats.yaml").exists()


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
    with open(p) as fh:
        return json.load(fh)


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
def make_splits(n_trajectories: int, *, seed: int = 42, ratios=(0.8, 0.1, 0.1), note: str = "") -> dict:
    """Random split of trajectory ids ``0..n-1`` (docs/datasets/README.md).

    A permutation from ``numpy.random.default_rng(seed)``; ``n_train = round(0.8 n)``,
    ``n_valid = round(0.1 n)``, the rest is test. Lists are sorted. Returns the ``splits.json`` dict.
    For ``n >= 8`` this is exactly the reference rule; for ``3 <= n < 8``, where rounding would leave
    the valid or test split empty (and training or rollout would fail later), each of them gets at
    least one trajectory, taken from train. One or two trajectories (for inspection) all go to train.
    """
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
    """Write ``root/checksums.sha256`` in ``sha256sum`` format (``HASH  relative/path``), atomically."""
    root = Path(root)
    lines = [f"{sha256_file(root / p)}  {p}" for p in relpaths]
    out = root / "checksums.sha256"
    write_text_atomic(out, "\n".join(lines) + "\n")
    return out


def read_checksums(root: str | os.PathLike) -> dict[str, str]:
    """``{relative path: hex digest}`` from ``root/checksums.sha256``. Raises ``FileNotFoundError``."""
    p = Path(root) / "checksums.sha256"
    if not p.is_file():
        raise FileNotFoundError(
            f"{p} does not exist: generation has not finished; rerun the same dandelion-generate command"
        )
    out = {}
    for line in p.read_text().splitlines():
        if line.strip():
            digest, rel = line.split(None, 1)
            out[rel.strip().lstrip("*")] = digest
    return out
