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

import functools
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import h5py

from dandelion.runtime import write_yaml_atomic

from .folder import SPLITS, list_split, load_metadata, load_stats, read_checksums, sha256_file, write_checksum_lines
from .statistics import WELL_STATS_KEYS, FieldMoments, compute_stats, stream_trajectory
from .storage import CorruptFileError, open_hdf5, open_trajectory, temp_path, write_boundary_conditions

__all__ = [
    "WELL_STATS_KEYS",
    "well_stats",
    "folder_well_stats",
    "write_well_stats",
    "area_weighted_stats",
    "add_well_metadata",
]


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
    acc = {n: FieldMoments(s["kind"] == "vector") for n, s in reader.fields.items()}
    for path, sample in items:
        with open_hdf5(path, "download it again, or move it out of the folder") as f:
            reader.check_file(f, path)
            read = functools.partial(reader.read, f, sample)
            stream_trajectory(read, int(f["dimensions"]["time"].shape[-1]), acc, w, where=f"{path} (sample {sample})")
    return {name: m.entry() for name, m in acc.items()}


def well_stats(files: Iterable, fields: Mapping[str, Mapping]) -> dict:
    """The Well's statistics (:data:`WELL_STATS_KEYS`) of trajectory files of ours (the train split).

    Computed over the raw stored arrays, in the files' component order (``u``, ``v``) and row order, with
    the grid's quadrature weights; a level field's levels are pooled. ``*_delta`` are over one-step
    differences within a trajectory. In a masked dataset (files with ``mask/wet``, e.g. ``global_ocean``) the
    weights are zero on land, as in :func:`dandelion.datasets.statistics.compute_stats` (which computes these
    keys with ``well=True``, in the same pass as our own entries): the statistics cover wet points only (land
    holds a placeholder 0). Returns ``{key: {field: value or [value per component]}}``.

    Raises ValueError as :func:`dandelion.datasets.statistics.compute_stats` does (no files, mixed grids, a field
    named like a Well key), FileNotFoundError / CorruptFileError as :func:`dandelion.datasets.storage.open_trajectory`.
    """
    stats = compute_stats(files, fields, well=True)
    return {k: stats[k] for k in WELL_STATS_KEYS}


def folder_well_stats(root) -> dict:
    """:func:`well_stats` of the train split of one of our dataset folders (``dataset.yaml`` gives fields and grid)."""
    return well_stats(list_split(root, "train"), load_metadata(root)["fields"])


def write_well_stats(root) -> dict:
    """Add the Well's statistics keys (:func:`folder_well_stats`) to ``root/stats.yaml`` (atomically); our per-field
    entries stay unchanged. Returns the merged mapping.

    Raises ValueError if a field is named like one of the Well's keys (the two would collide).
    """
    root = Path(root)
    ours = load_stats(root)
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
                raise CorruptFileError(
                    f"{path} does not match checksums.sha256: run dandelion-verify {root} and regenerate it first"
                )
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
    write_checksum_lines(root, digests)
    return changed
