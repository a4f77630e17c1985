"""What the Well's format asks of a file and of its statistics, for the files we write and the folders we read.

The Well's data format (Ohana et al. 2024, "The Well", App. B; the ``Data format`` page of its
documentation) wants, besides the groups our files already have:

* a ``boundary_conditions`` group with one subgroup per boundary, each with ``bc_type``
  (``PERIODIC``, ``OPEN`` or ``WALL``), ``associated_dims``, ``associated_fields``, ``sample_varying``,
  ``time_varying`` and a boolean ``mask`` over its dimension (True at the boundary points). A sphere is
  periodic in longitude and has no boundary in latitude, which the Well marks ``OPEN`` (as its spherical
  PlanetSWE set does); a vertical level axis has the ground and the model top, marked ``WALL``;
* every name of the root attribute ``simulation_parameters`` also as a root attribute holding its value;
* ``stats.yaml`` with the top-level keys ``mean``, ``std``, ``mean_delta``, ``std_delta``, ``rms`` and
  ``rms_delta``, each mapping a field name to a number (scalars) or a list with one number per vector
  component (in the file's component order). The Well's loader normalises with
  ``(x - mean) / std`` (``ZScoreNormalization``) or ``x / rms`` (``RMSNormalization``).

Our trajectory files get the first two from :class:`dandelion.datasets.storage.TrajectoryWriter`.
:func:`well_stats` computes the statistics keys from files of ours (area-weighted with the grid's quadrature
weights, like all our statistics; level fields pooled over their levels, since the Well's normaliser has
one value per field or component) and :func:`write_well_stats` adds them to ``stats.yaml`` next to our
own per-field entries, which stay as they are. :func:`area_weighted_stats` computes OUR statistics
(``stats.yaml`` per-field entries) for a folder in the Well's layout.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Iterable, Mapping

import h5py
import numpy as np

from dandelion.sphere import SphereGrid

from dandelion.runtime import write_text_atomic, write_yaml_atomic

from .folder import SPLITS, list_split, load_metadata, load_stats, read_checksums, sha256_file
from .statistics import _Moments
from .storage import CorruptFileError, open_trajectory, read_field, read_mask, temp_path, write_boundary_conditions

__all__ = ["WELL_STATS_KEYS", "well_stats", "folder_well_stats", "write_well_stats", "area_weighted_stats", "add_well_metadata"]

#: Top-level keys of the Well's ``stats.yaml``.
WELL_STATS_KEYS = ("mean", "std", "mean_delta", "std_delta", "rms", "rms_delta")
_BLOCK = 32  # frames read at once when streaming statistics


class _FieldAccumulator:
    """Weighted moments of each component of a field and of its one-step differences (float64, streaming)."""

    def __init__(self, n_components: int):
        self.x = [_Moments() for _ in range(n_components)]
        self.dx = [_Moments() for _ in range(n_components)]

    def add(self, frames: np.ndarray, prev: np.ndarray | None, w: np.ndarray, vector: bool) -> None:
        """``frames``: ``(T, ..., nlat, nlon[, 2])`` consecutive frames; ``prev``: the frame before them or None."""
        a = np.asarray(frames, dtype=np.float64)
        both = a if prev is None else np.concatenate([np.asarray(prev, dtype=np.float64)[None], a])
        d = np.diff(both, axis=0)
        for c in range(len(self.x)):
            pick = (lambda z: z[..., c]) if vector else (lambda z: z)
            self.x[c].add(pick(a), w)
            if d.shape[0]:
                self.dx[c].add(pick(d), w)


def _mean_sq(m: _Moments) -> float:
    return m.mean ** 2 + (m.std ** 2 if m.w else float("nan"))


def _stream(read, w: np.ndarray, fields: Mapping[str, Mapping], n_frames: int, acc: dict) -> None:
    prev = {}
    for start in range(0, n_frames, _BLOCK):
        block = read(start, min(n_frames, start + _BLOCK))
        for name, spec in fields.items():
            acc[name].add(block[name], prev.get(name), w, spec["kind"] == "vector")
            prev[name] = block[name][-1]


def area_weighted_stats(reader, items: Iterable[tuple[Path, int]]) -> dict:
    """Our statistics (``stats.yaml`` per-field entries) of trajectories read through ``reader``.

    Parameters
    ----------
    reader : a :class:`dandelion.datasets.well.WellFolder` (``grid``, ``fields`` and
        ``read(file, sample, start, stop)`` giving our convention: rows north first, vectors (u, v)).
    items : ``(file, sample)`` pairs, the train split.

    Returns
    -------
    ``{field: {kind: "scalar", mean, std, delta_mean, delta_std}}`` for scalars and
    ``{field: {kind: "vector", rms, delta_rms}}`` for vectors, weighted with the grid's quadrature weights
    (the same definitions as :func:`dandelion.datasets.statistics.compute_stats`).

    Raises ValueError if ``items`` is empty.
    """
    items = list(items)
    if not items:
        raise ValueError("no train trajectory to compute statistics from: the folder's data/train is empty")
    w = reader.grid.weights.numpy()
    acc = {n: _FieldAccumulator(2 if s["kind"] == "vector" else 1) for n, s in reader.fields.items()}
    for path, sample in items:
        with h5py.File(path, "r") as f:
            reader.check_file(f, path)
            T = int(f["dimensions"]["time"].shape[-1])
            _stream(lambda a, b: reader.read(f, sample, a, b), w, reader.fields, T, acc)
    out = {}
    for name, spec in reader.fields.items():
        a = acc[name]
        if spec["kind"] == "scalar":
            out[name] = {"kind": "scalar", "mean": float(a.x[0].mean), "std": float(a.x[0].std),
                         "delta_mean": float(a.dx[0].mean) if a.dx[0].w else float("nan"), "delta_std": float(a.dx[0].std)}
        else:
            out[name] = {"kind": "vector", "rms": math.sqrt(sum(_mean_sq(m) for m in a.x)),
                         "delta_rms": math.sqrt(sum(_mean_sq(m) for m in a.dx))}
    return out


def well_stats(files: Iterable, fields: Mapping[str, Mapping], grid: SphereGrid) -> dict:
    """The Well's statistics (:data:`WELL_STATS_KEYS`) of trajectory files of ours (the train split).

    Computed over the raw stored arrays, in the files' component order (``u``, ``v``) and row order, with
    the grid's quadrature weights; a level field's levels are pooled. ``*_delta`` are over one-step
    differences within a trajectory. In a masked dataset (files with ``mask/wet``, e.g. ``global_ocean``) the
    weights are zero on land, as in :func:`dandelion.datasets.statistics.compute_stats`: the statistics cover
    wet points only (land holds a placeholder 0). Returns ``{key: {field: value or [value per component]}}``.

    Raises FileNotFoundError / CorruptFileError as :func:`dandelion.datasets.storage.open_trajectory` does.
    """
    w = grid.weights.numpy()
    acc = {n: _FieldAccumulator(2 if s["kind"] == "vector" else 1) for n, s in fields.items()}
    for path in files:
        with open_trajectory(path) as f:
            ds = {n: f["t1_fields" if s["kind"] == "vector" else "t0_fields"][n] for n, s in fields.items()}
            T = int(f["dimensions"]["time"].shape[0])
            wet = read_mask(f)
            _stream(lambda a, b: {n: read_field(d, a, b) for n, d in ds.items()}, w if wet is None else w * wet, fields, T, acc)
    out = {k: {} for k in WELL_STATS_KEYS}
    for name, spec in fields.items():
        a = acc[name]
        vals = {"mean": [m.mean for m in a.x], "std": [m.std for m in a.x], "mean_delta": [m.mean for m in a.dx],
                "std_delta": [m.std for m in a.dx], "rms": [math.sqrt(_mean_sq(m)) for m in a.x],
                "rms_delta": [math.sqrt(_mean_sq(m)) for m in a.dx]}
        for key, v in vals.items():
            out[key][name] = [float(x) for x in v] if spec["kind"] == "vector" else float(v[0])
    return out


def folder_well_stats(root) -> dict:
    """:func:`well_stats` of the train split of one of our dataset folders (``dataset.yaml`` gives fields and grid)."""
    meta = load_metadata(root)
    grid = SphereGrid(int(meta["nlat"]), int(meta["nlon"]), str(meta["grid"]))
    return well_stats(list_split(root, "train"), meta["fields"], grid)


def write_well_stats(root) -> dict:
    """Add the Well's statistics keys (:func:`folder_well_stats`) to ``root/stats.yaml`` (atomically); our per-field
    entries stay unchanged. Returns the merged mapping.

    Raises ValueError if a field is named like one of the Well's keys (the two would collide).
    """
    root = Path(root)
    ours = load_stats(root)
    clash = sorted(set(load_metadata(root)["fields"]) & set(WELL_STATS_KEYS))
    if clash:
        raise ValueError(f"fields {clash} are named like the Well's statistics keys {WELL_STATS_KEYS}: rename the fields")
    merged = {k: v for k, v in ours.items() if k not in WELL_STATS_KEYS}
    merged.update(folder_well_stats(root))
    write_yaml_atomic(root / "stats.yaml", merged)
    return merged


def add_well_metadata(root) -> list[Path]:
    """Bring a folder made by an earlier ``dandelion-generate`` (files without the Well's ``boundary_conditions``)
    up to the Well's format, in place and file by file atomically.

    Each trajectory file lacking the group is copied under a temporary name, given the group and the
    simulation parameters as root attributes (:class:`dandelion.datasets.storage.TrajectoryWriter` writes both
    today) and renamed over the original; ``stats.yaml`` gets the Well's keys (:func:`write_well_stats`);
    ``checksums.sha256`` is rewritten for the files it lists. The data themselves are not touched.

    Returns the trajectory files that were changed. Raises as :func:`dandelion.datasets.storage.open_trajectory`
    for a damaged file (run ``dandelion-verify`` first).
    """
    root = Path(root)
    digests = read_checksums(root)
    changed = []
    for split in SPLITS:
        for path in list_split(root, split):
            with open_trajectory(path) as f:
                if "boundary_conditions" in f:
                    continue
            rel = path.relative_to(root).as_posix()
            if rel in digests and sha256_file(path) != digests[rel]:
                raise CorruptFileError(f"{path} does not match checksums.sha256: run dandelion-verify {root} and regenerate it first")
            tmp = temp_path(path)
            shutil.copyfile(path, tmp)
            try:
                with h5py.File(tmp, "r+") as f:
                    dims = f["dimensions"]
                    spatial = [str(d) for d in dims.attrs["spatial_dims"]]
                    write_boundary_conditions(f, spatial, {d: dims[d].shape[0] for d in spatial})
                    for name in f.attrs.get("simulation_parameters", []):
                        f.attrs[str(name)] = float(f["scalars"][str(name)][()])
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            changed.append(path)
            if rel in digests:
                digests[rel] = sha256_file(path)
    write_well_stats(root)
    if "stats.yaml" in digests:
        digests["stats.yaml"] = sha256_file(root / "stats.yaml")
    write_text_atomic(root / "checksums.sha256", "".join(f"{d}  {r}\n" for r, d in digests.items()))
    return changed
