"""``dandelion-verify DIR``: check a dataset folder against its checksums and schema.

Checks, each problem reported as one line naming the file:

* ``dataset.yaml``, ``splits.json``, ``stats.yaml`` and ``checksums.sha256`` exist and the dataset
  is marked complete;
* every trajectory listed in ``splits.json`` exists, is listed in ``checksums.sha256`` and every
  listed file's SHA-256 matches;
* every trajectory file opens (not truncated or corrupt), follows the layout
  (:func:`dandelion.datasets.storage.open_trajectory`), agrees with ``dataset.yaml`` (grid, nlat,
  nlon, lmax, frames, fields, units, trajectory id), holds the parameters that the scenario
  regenerates for its trajectory id, and decodes to finite float32 values;
* no temporary leftovers or unlisted trajectory files lie in the split folders;
* ``stats.yaml`` has finite entries for every field (one per level, lists of length L, for the
  level fields of a leveled dataset);
* a masked dataset (``dataset.yaml`` ``masked: true``) has ``mask/wet`` (0/1, at least one wet point)
  and ``mask/wet_fraction`` (in [0, 1]) of shape (nlat, nlon) in every file, the same in all files;
  an unmasked dataset has no mask group;
* in a leveled dataset (``dataset.yaml`` ``levels``), each file's ``dimensions/level`` equals the
  listed values and exactly the listed level fields carry the level axis (the others are surface
  fields with a size-1 level axis).

Exit status 0 when the folder is sound, 1 otherwise, 2 for a path that is not a dataset folder.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .folder import SPLITS, load_metadata, load_stats, read_checksums, sha256_file
from .generate import build_scenario
from .storage import CorruptFileError, file_levels, is_surface, open_trajectory, trajectory_filename

__all__ = ["verify"]

PROG = "dandelion-verify"


def verify(path, *, check_data: bool = True) -> list[str]:
    """Problems found in the dataset folder ``path`` (empty list: the folder is sound).

    Parameters
    ----------
    path : path-like
        A dataset folder written by ``dandelion-generate``.
    check_data : bool
        Also decode every frame and check it is finite (default; the checksums already catch any
        changed byte, so ``False`` only skips the decode, which is slow for full-size datasets).

    Returns
    -------
    list of str, one line per problem, each naming the file concerned.
    """
    root = Path(path)
    if not root.is_dir():
        return [f"{root}: no such dataset folder"]
    problems: list[str] = []
    try:
        meta = load_metadata(root)
    except (FileNotFoundError, CorruptFileError, ValueError) as e:
        return [f"{root / 'dataset.yaml'}: {e}"]
    if not meta.get("complete", False):
        problems.append(
            f"{root / 'dataset.yaml'}: generation is not complete; rerun the same dandelion-generate command"
        )
    try:
        splits = json.loads((root / "splits.json").read_text())
    except (OSError, ValueError) as e:
        return problems + [f"{root / 'splits.json'}: unreadable ({e})"]
    try:
        sums = read_checksums(root)
    except (OSError, ValueError) as e:
        problems.append(f"{root / 'checksums.sha256'}: {e}")
        sums = {}

    for rel, digest in sums.items():
        p = root / rel
        if not p.is_file():
            problems.append(f"{p}: listed in checksums.sha256 but missing")
        elif sha256_file(p) != digest:
            problems.append(f"{p}: SHA-256 does not match checksums.sha256 (file changed or corrupt)")

    fields = meta.get("fields", {})
    scenario = _scenario(meta)
    if scenario is not None:
        problems += [f"{root / 'splits.json'}: {line}" for line in scenario.split_problems(splits)]
    listed = set()
    masks: list = []
    for split in SPLITS:
        for tid in splits.get(split, []):
            rel = f"{split}/{trajectory_filename(tid)}"
            listed.add(rel)
            p = root / rel
            if sums and rel not in sums:
                problems.append(f"{p}: not listed in checksums.sha256")
            if not p.is_file():
                problems.append(f"{p}: missing (trajectory {tid} of split {split})")
                continue
            problems += _check_file(p, int(tid), meta, fields, check_data, scenario)
            problems += _check_mask(p, meta, masks)
        folder = root / split
        if folder.is_dir():
            for p in sorted(folder.iterdir()):
                rel = f"{split}/{p.name}"
                if p.name.endswith(".tmp"):
                    problems.append(
                        f"{p}: temporary leftover of an interrupted run; rerun dandelion-generate to clean it"
                    )
                elif rel not in listed:
                    problems.append(f"{p}: not listed in splits.json")

    try:
        stats = load_stats(root)
        for name, spec in fields.items():
            entry = stats.get(name)
            keys = ("mean", "std", "delta_mean", "delta_std") if spec.get("kind") == "scalar" else ("rms", "delta_rms")
            n_lev = _n_levels(meta, name)
            if not isinstance(entry, dict) or any(not _finite(entry.get(k), n_lev) for k in keys):
                what = f"per-level lists of length {n_lev}" if n_lev else "single numbers"
                problems.append(
                    f"{root / 'stats.yaml'}: entry for field {name!r} missing or not finite (expected {what}); "
                    "rerun the dandelion-generate command to rewrite it"
                )
    except (FileNotFoundError, CorruptFileError, ValueError) as e:
        problems.append(f"{root / 'stats.yaml'}: {e}")
    return problems


def _finite(x, n_levels: int | None = None) -> bool:
    """``x`` is a finite number (``n_levels`` None) or a list of ``n_levels`` finite numbers."""
    if n_levels is not None:
        return isinstance(x, (list, tuple)) and len(x) == n_levels and all(_finite(v) for v in x)
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _n_levels(meta: dict, name: str) -> int | None:
    """Number of levels of field ``name`` in a leveled dataset, None for 2-D and surface fields."""
    lv = meta.get("levels")
    if not isinstance(lv, dict) or name not in lv.get("fields", []):
        return None
    return len(lv.get("values", []))


def _scenario(meta: dict):
    """The scenario that made the dataset (to regenerate each trajectory's parameters), or None."""
    try:
        return build_scenario(dict((meta.get("config") or {}).get("dataset") or {}))
    except Exception:  # unknown or changed scenario: the parameter check is skipped
        return None


def _check_mask(p: Path, meta: dict, masks: list) -> list[str]:
    """Mask problems of one file; ``masks`` collects the first file's mask to compare the others with."""
    try:
        with open_trajectory(p) as f:
            if not meta.get("masked", False):
                return (
                    [f"{p}: has a mask group but dataset.yaml does not mark the dataset masked"] if "mask" in f else []
                )
            if "mask" not in f or "wet" not in f["mask"] or "wet_fraction" not in f["mask"]:
                return [f"{p}: dataset.yaml marks the dataset masked but the file lacks mask/wet or mask/wet_fraction"]
            wet, frac = f["mask"]["wet"][()], f["mask"]["wet_fraction"][()]
            shape = (int(f.attrs["nlat"]), int(f.attrs["nlon"]))
    except (CorruptFileError, OSError):
        return []  # reported by _check_file
    if wet.shape != shape or frac.shape != shape:
        return [f"{p}: mask shapes {wet.shape}, {frac.shape}, expected {shape}"]
    out = []
    if not np.isin(wet, (0, 1)).all() or not wet.any():
        out.append(f"{p}: mask/wet must hold 0 (land) or 1 (ocean) with at least one ocean point")
    if not (np.isfinite(frac).all() and frac.min() >= 0 and frac.max() <= 1):
        out.append(f"{p}: mask/wet_fraction must lie in [0, 1]")
    if not masks:
        masks.append((wet, frac))
    elif not (np.array_equal(masks[0][0], wet) and np.array_equal(masks[0][1], frac)):
        out.append(f"{p}: mask differs from the other files' (one dataset has one land mask)")
    return out


def _check_file(p: Path, tid: int, meta: dict, fields: dict, check_data: bool = True, scenario=None) -> list[str]:
    try:
        f = open_trajectory(p, check_data=check_data)
    except (CorruptFileError, OSError) as e:
        return [f"{p}: {e}"]
    out = []
    with f:
        for key in ("grid", "nlat", "nlon", "lmax"):
            if key in meta and str(f.attrs.get(key)) != str(meta[key]):  # absent lmax: not band-limited
                out.append(f"{p}: attribute {key}={f.attrs.get(key)} but dataset.yaml says {meta[key]}")
        if int(f.attrs["trajectory_id"]) != tid:
            out.append(f"{p}: trajectory_id={int(f.attrs['trajectory_id'])}, expected {tid}")
        if "parameters" in meta and [str(x) for x in f.attrs["simulation_parameters"]] != list(meta["parameters"]):
            out.append(
                f"{p}: simulation_parameters {list(f.attrs['simulation_parameters'])} "
                f"differ from dataset.yaml's {meta['parameters']}"
            )
        if scenario is not None:
            want = scenario.parameters(tid)
            got = {k: float(f["scalars"][k][()]) for k in f["scalars"]}
            if got != want:
                out.append(f"{p}: scalars/ {got} differ from the parameters of trajectory {tid} {want}")
        T = f["dimensions"]["time"].shape[0]
        if "n_frames" in meta and T != int(meta["n_frames"]):
            out.append(f"{p}: {T} frames, dataset.yaml says {meta['n_frames']}")
        lv = meta.get("levels") if isinstance(meta.get("levels"), dict) else None
        levels = file_levels(f)
        if lv is None and levels is not None:
            out.append(f"{p}: has dimensions/level but dataset.yaml lists no levels")
        elif lv is not None:
            want = [float(x) for x in lv.get("values", [])]
            if levels is None:
                out.append(f"{p}: lacks dimensions/level; dataset.yaml lists levels {want}")
            elif levels.tolist() != want:
                out.append(f"{p}: dimensions/level {levels.tolist()} differ from dataset.yaml's {want}")
            elif "units" in lv and str(f["dimensions"]["level"].attrs.get("units")) != str(lv["units"]):
                out.append(
                    f"{p}: dimensions/level units {f['dimensions']['level'].attrs.get('units')!r}, "
                    f"dataset.yaml says {lv['units']!r}"
                )
        for name, spec in fields.items():
            group = "t0_fields" if spec.get("kind") == "scalar" else "t1_fields"
            if name not in f[group]:
                out.append(f"{p}: missing {group}/{name}")
                continue
            if str(f[group][name].attrs["units"]) != str(spec.get("units")):
                out.append(
                    f"{p}: {group}/{name} units {f[group][name].attrs['units']!r}, "
                    f"dataset.yaml says {spec.get('units')!r}"
                )
            if lv is not None and levels is not None:
                leveled = name in lv.get("fields", [])
                if leveled == is_surface(f[group][name]):
                    out.append(
                        f"{p}: {group}/{name} is stored as a {'surface' if leveled else 'level'} field, "
                        f"dataset.yaml lists it {'among' if leveled else 'outside'} the level fields "
                        f"{list(lv.get('fields', []))}"
                    )
    return out
