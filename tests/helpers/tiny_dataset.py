"""Tiny dataset folders for tests (tests/conftest.py puts tests/helpers on sys.path: ``import tiny_dataset``).

``make_tiny_dataset(path, ...)`` writes a tiny dataset folder in the docs/ARCHITECTURE.md layout
(``train/ valid/ test/`` of ``traj_XXXXXX.h5``, ``dataset.yaml``, ``stats.yaml``, ``splits.json``,
``checksums.sha256``) with analytic fields: a scalar ``h`` and a tangent vector ``velocity``.
Use it through the fixture of the same name::

    def test_something(make_tiny_dataset, tmp_path):
        path = make_tiny_dataset(tmp_path / "data", nlat=9, nlon=16)
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from dandelion.datasets import folder, statistics, storage
from dandelion.runtime import write_json_atomic, write_yaml_atomic
from dandelion.sphere import SphereGrid

DT = 3600.0  # seconds between frames


def analytic_fields(grid: SphereGrid, traj: int, n_frames: int) -> dict[str, np.ndarray]:
    """Smooth fields of trajectory ``traj``: ``h`` (T, nlat, nlon) in m, ``velocity`` (T, nlat, nlon, 2) in m/s.

    ``h = 1000 + 50 p + 20 p**2`` with ``p = x . a(t)``, ``a`` turning about the z axis;
    velocity is the solid-body rotation ``w(t) x r`` projected on east/north (exactly tangent).
    """
    xyz, east, north = (g.numpy() for g in (grid.xyz, grid.east, grid.north))
    h, uv = [], []
    for f in range(n_frames):
        t = f * DT
        phase = 0.3 * traj + 2.0 * math.pi * t / (24 * DT)
        a = np.array([math.cos(phase), math.sin(phase), 0.5 + 0.1 * traj])
        p = np.einsum("c,cij->ij", a, xyz)
        h.append(1000.0 + 50.0 * p + 20.0 * p**2)
        w = (1.0 + 0.05 * f) * np.array([0.3 * traj, 0.2, 1.0]) * 1e-5 * 6.37e6
        vel = np.cross(w[:, None, None], xyz, axis=0)
        uv.append(np.stack([(vel * east).sum(0), (vel * north).sum(0)], axis=-1))
    return {"h": np.stack(h), "velocity": np.stack(uv)}


FIELDS = {
    "h": {"kind": "scalar", "units": "m", "long_name": "height anomaly"},
    "velocity": {"kind": "vector", "units": "m s-1", "long_name": "velocity", "components": ["u", "v"]},
}


def synthetic_wet_fraction(grid: SphereGrid) -> np.ndarray:
    """Ocean fraction (nlat, nlon) of a synthetic coastline: land is a meridional continent 90..180 degrees east and
    the polar caps beyond 60 degrees; 1 elsewhere (every cell wholly wet or dry)."""
    lat = np.degrees(grid.lat.numpy())[:, None]
    lon = np.degrees(grid.lon.numpy())[None, :]
    land = ((lon >= 90.0) & (lon < 180.0)) | (np.abs(lat) > 60.0)
    return np.where(land, 0.0, 1.0) * np.ones(grid.shape)


def write_frames(file: Path, grid: SphereGrid, traj: int, name: str, dt: float, frames: dict, **writer) -> None:
    """Write trajectory ``traj`` of dataset ``name``: ``frames`` maps each field to its (T, ...) array, frame ``k``
    at time ``k dt`` [s]; ``writer`` holds the remaining :class:`~dandelion.datasets.storage.TrajectoryWriter`
    arguments (``scalars``, ``fields``, a mask or levels)."""
    n_frames = len(next(iter(frames.values())))
    with storage.TrajectoryWriter(
        file,
        dataset_name=name,
        grid=grid,
        lmax=grid.lmax,
        trajectory_id=traj,
        times=np.arange(n_frames) * dt,
        time_units="s",
        **writer,
    ) as w:
        for k in range(n_frames):
            w.write_frame(k, {n: a[k] for n, a in frames.items()})


def _write_trajectory(file: Path, grid: SphereGrid, traj: int, n_frames: int, name: str, mask=None) -> None:
    frames = analytic_fields(grid, traj, n_frames)
    write_frames(
        file, grid, traj, name, DT, frames, scalars={"u_max": (60.0 + traj, "m s-1")}, fields=FIELDS, mask=mask
    )


def compute_stats(files, grid: SphereGrid = None) -> dict:
    """Train statistics through the storage module (``grid`` unused, kept for call compatibility)."""
    return statistics.compute_stats(files, FIELDS)


def folder_meta(name: str, g: SphereGrid, n_frames: int, dt: float, splits: dict, fields: dict) -> dict:
    """The ``dataset.yaml`` keys every tiny folder shares: its name, reduced grid ``g``, frames and fields."""
    return {
        "name": name,
        "grid": g.grid,
        "nlat": g.nlat,
        "nlon": g.nlon,
        "lmax": g.lmax,
        "solver_lmax": g.lmax,
        "reduced": True,
        "dt_frame": dt,
        "time_units": "s",
        "n_frames": n_frames,
        "n_trajectories": sum(len(v) for v in splits.values()),
        "fields": fields,
    }


def write_folder_files(path: Path, meta: dict, stats: dict, splits: dict, checksummed: tuple = ()) -> Path:
    """Write ``dataset.yaml``, ``stats.yaml``, the fixed ``splits.json`` and the checksums of the trajectory files
    (and of the folder files named in ``checksummed``) of the dataset folder ``path``; return ``path``."""
    write_yaml_atomic(path / "dataset.yaml", meta)
    write_yaml_atomic(path / "stats.yaml", stats)
    write_json_atomic(
        path / "splits.json", {"seed": 0, "strategy": "fixed", **{k: sorted(v) for k, v in splits.items()}}
    )
    rel = [f.relative_to(path).as_posix() for f in sorted(path.glob("*/*.h5"))]
    folder.write_checksums(path, rel + list(checksummed))
    return path


def make_tiny_dataset(
    path,
    nlat: int = 9,
    nlon: int = 16,
    grid: str = "equiangular",
    n_frames: int = 10,
    splits: dict | None = None,
    name: str = "tiny",
    masked: bool = False,
) -> Path:
    """Write a tiny dataset folder at ``path`` (created) and return it as a Path.

    ``splits`` maps split name -> trajectory ids (default train [0, 1, 2], valid [3], test [4]).
    ``masked``: every file stores the land mask of :func:`synthetic_wet_fraction` (``mask/wet``), statistics
    are over wet points and ``dataset.yaml`` says ``masked: true`` (as a global_ocean folder).
    """
    path = Path(path)
    splits = splits or {"train": [0, 1, 2], "valid": [3], "test": [4]}
    g = SphereGrid(nlat, nlon, grid)
    for split, ids in splits.items():
        (path / split).mkdir(parents=True, exist_ok=True)
        for i in ids:
            _write_trajectory(
                path / split / f"traj_{i:06d}.h5", g, i, n_frames, name, synthetic_wet_fraction(g) if masked else None
            )
    stats = statistics.compute_stats([path / "train" / storage.trajectory_filename(i) for i in splits["train"]], FIELDS)
    meta = {
        **folder_meta(name, g, n_frames, DT, splits, FIELDS),
        "parameters": ["u_max"],
        "config": {},
        "command": "tests/tiny_dataset.py make_tiny_dataset",
        "versions": {},
    }
    if masked:
        meta["masked"] = True
    return write_folder_files(path, meta, stats, splits)
