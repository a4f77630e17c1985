"""A dataset folder's cheap integrity check before training and rollout, and its data fingerprint against a
checkpoint's.

:func:`check_folder` reads only the folder's small files, the trajectory files' sizes and each file's
``trajectory_id`` attribute (no data): every listed file's id against its name and split, no id in two splits, every
size against ``checksums.sha256``'s size lines (:func:`dandelion.datasets.folder.read_sizes`). Full SHA-256 hashes,
the layout and finite values stay ``dandelion-verify``'s job (:mod:`.verify`). A folder written before sizes were
recorded is checked for ids only, and says so once per process.

:func:`check_checkpoint_data` compares a checkpoint's ``extra["data_fingerprint"]`` (written by the trainer,
:func:`dandelion.datasets.folder.data_fingerprint`) with a folder's: resuming or rolling out on other data is refused
unless ``allow_other_data`` says it is meant (fine-tuning on new data).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

import h5py

from .folder import SPLITS, data_fingerprint, load_splits, read_sizes
from .storage import CorruptFileError, trajectory_filename

__all__ = ["integrity_problems", "check_folder", "check_checkpoint_data"]

log = logging.getLogger(__name__)

_WARNED_NO_SIZES: set[str] = set()


def integrity_problems(root: str | os.PathLike) -> list[str]:
    """What :func:`check_folder` finds wrong with the dataset folder ``root`` (module docstring), one line each;
    empty for a sound folder. A Well-layout folder (no ``splits.json``) has nothing to check here."""
    root = Path(root)
    if not (root / "splits.json").is_file():
        return []
    splits = load_splits(root)
    problems, seen = [], {}
    for split in SPLITS:
        for tid in splits.get(split, []):
            if int(tid) in seen:
                problems.append(f"trajectory {tid} is listed in both the {seen[int(tid)]} and the {split} split")
            seen[int(tid)] = split
    try:
        sizes = read_sizes(root)
    except FileNotFoundError:
        sizes = {}
    if sizes is None and str(root) not in _WARNED_NO_SIZES:
        _WARNED_NO_SIZES.add(str(root))
        log.warning(
            "%s: checksums.sha256 lists no file sizes (written before they were recorded): trajectory ids checked "
            "only; dandelion-verify %s checks the full hashes",
            root,
            root,
        )
    for split in SPLITS:
        for tid in splits.get(split, []):
            rel = f"{split}/{trajectory_filename(tid)}"
            p = root / rel
            if not p.is_file():
                continue  # the dataset reader names a missing file with its own fix
            try:
                with h5py.File(p, "r") as f:
                    stored = f.attrs.get("trajectory_id")
            except (OSError, RuntimeError, KeyError):
                stored = None  # damaged: the size below, or the reader's storage.damaged_file_message, names it
            if stored is not None and int(stored) != int(tid):
                where = next((s for s in SPLITS if int(stored) in map(int, splits.get(s, []))), None)
                hint = f" (a file of the {where} split)" if where else ""
                problems.append(f"{p} holds trajectory {int(stored)}{hint}, not {tid}")
                continue
            size = p.stat().st_size
            if sizes and rel in sizes and size != sizes[rel]:
                how = "truncated" if size < sizes[rel] else "changed"
                problems.append(f"{p} is {how} ({size} bytes where checksums.sha256 lists {sizes[rel]})")
    return problems


def check_folder(root: str | os.PathLike) -> None:
    """Refuse a dataset folder edited after generation (:func:`integrity_problems`) in one line.

    Raises
    ------
    CorruptFileError
        Naming the first problems, ``dandelion-verify DIR`` and regeneration as the fix.
    """
    problems = integrity_problems(root)
    if problems:
        more = f" (and {len(problems) - 2} more)" if len(problems) > 2 else ""
        raise CorruptFileError(
            f"dataset folder {root} was changed after generation: {'; '.join(problems[:2])}{more}: run "
            f"dandelion-verify {root}, then delete the files it names and rerun the dandelion-generate command that "
            "made the folder (it regenerates missing files), or restore them"
        )


def check_checkpoint_data(
    checkpoint, extra: Mapping, root: str | os.PathLike, allow_other_data: bool, what: str
) -> None:
    """Refuse ``what`` (``"resume"``, ``"rollout"``, ``"export"``) of ``checkpoint`` (its ``extra`` record, as
    :func:`dandelion.checkpoint.load_checkpoint` returns it) on the folder ``root`` when the checkpoint was trained on
    other data, unless ``allow_other_data``.

    Checkpoints written before the fingerprint was recorded, and folders without ``checksums.sha256`` (the Well's
    layout), are not compared.

    Raises
    ------
    ValueError
        Naming both fingerprints, the folder the checkpoint was trained on and the option.
    """
    if allow_other_data:
        return
    saved, mine = extra.get("data_fingerprint"), data_fingerprint(root)
    if saved is None or mine is None or saved == mine:
        return
    raise ValueError(
        f"{what}: checkpoint {checkpoint} was trained on other data (dataset {extra.get('dataset_path')}, "
        f"fingerprint {saved}) than {root} (fingerprint {mine}): pass the dataset it was trained on, or "
        "allow_other_data=true if this is meant (fine-tuning or evaluating on new data)"
    )
