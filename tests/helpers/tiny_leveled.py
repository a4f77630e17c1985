"""A tiny LEVELED dataset folder for tests (pressure levels as a third spatial dimension, like held_suarez).

Fields (analytic, so the per-level statistics can be checked by hand; z = sin(latitude)):

* ``T`` (level field, K): ``T_l(f) = A_l + C_l f + (B_l + D_l f) z``;
* ``ps`` (surface field, Pa): ``1e5 + 100 traj + 300 z + 5 f``;
* ``velocity`` (level field, m/s): solid-body rotation about the z axis, ``u = W_l(f) cos(lat)``,
  ``v = 0``, with ``W_l(f) = W0_l + DW f`` (Cartesian ``W (-y, x, 0)``, no z component).

Frame f = 0..n_frames-1, every trajectory has the same T and velocity. Area means over the sphere:
``<z> = 0``, ``<z^2> = 1/3``, ``<cos^2 lat> = 2/3`` (exact under both grids' quadrature for these
low degrees), which give the expected statistics in :func:`expected_stats`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tiny_dataset import folder_meta, write_folder_files, write_frames

from dandelion.datasets import statistics, storage
from dandelion.sphere import SphereGrid

DT = 21600.0  # s between frames (6 h)
LEVELS = [250.0, 500.0, 850.0]  # hPa, top to bottom
A = [220.0, 250.0, 280.0]
B = [10.0, 20.0, 30.0]
C = [1.0, 2.0, 3.0]
D = [2.0, 4.0, 6.0]
W0 = [30.0, 20.0, 10.0]
DW = 2.0

FIELDS = {
    "T": {"kind": "scalar", "units": "K", "long_name": "air temperature"},
    "ps": {"kind": "scalar", "units": "Pa", "long_name": "surface pressure"},
    "velocity": {"kind": "vector", "units": "m/s", "long_name": "horizontal wind", "components": ["u", "v"]},
}
LEVEL_INFO = {"name": "level", "units": "hPa", "values": LEVELS, "fields": ["T", "velocity"]}


def analytic_fields(grid: SphereGrid, traj: int, n_frames: int) -> dict[str, np.ndarray]:
    """``T`` (F, L, nlat, nlon), ``ps`` (F, nlat, nlon), ``velocity`` (F, L, nlat, nlon, 2), float64."""
    z = np.broadcast_to(np.sin(grid.lat.numpy())[:, None], grid.shape)
    coslat = np.cos(grid.lat.numpy())[:, None] * np.ones(grid.shape)
    f = np.arange(n_frames, dtype=np.float64)[:, None, None, None]
    T = (
        np.asarray(A)[:, None, None]
        + np.asarray(C)[:, None, None] * f
        + (np.asarray(B)[:, None, None] + np.asarray(D)[:, None, None] * f) * z
    )
    W = np.asarray(W0)[:, None, None] + DW * f  # (F, L, 1, 1)
    vel = np.stack([W * coslat, np.zeros_like(W * coslat)], axis=-1)
    ps = 1e5 + 100.0 * traj + 300.0 * z + 5.0 * f[:, 0]
    return {"T": T, "ps": ps, "velocity": vel}


def expected_stats(n_frames: int) -> dict:
    """Hand-derived area-weighted statistics of ``T`` and ``velocity`` per level (any set of trajectories)."""
    f = np.arange(n_frames, dtype=np.float64)
    out = {"T": {"mean": [], "std": [], "delta_mean": [], "delta_std": []}, "velocity": {"rms": [], "delta_rms": []}}
    for a, b, c, d, w0 in zip(A, B, C, D, W0):
        out["T"]["mean"].append(a + c * f.mean())
        out["T"]["std"].append(np.sqrt(c**2 * f.var() + np.mean((b + d * f) ** 2) / 3.0))
        out["T"]["delta_mean"].append(c)
        out["T"]["delta_std"].append(abs(d) / np.sqrt(3.0))
        out["velocity"]["rms"].append(np.sqrt(2.0 / 3.0 * np.mean((w0 + DW * f) ** 2)))
        out["velocity"]["delta_rms"].append(abs(DW) * np.sqrt(2.0 / 3.0))
    return out


def write_trajectory(file: Path, grid: SphereGrid, traj: int, n_frames: int, name: str = "tiny_leveled") -> None:
    write_frames(
        file,
        grid,
        traj,
        name,
        DT,
        analytic_fields(grid, traj, n_frames),
        scalars={"delta_T_y": (40.0 + traj, "K")},
        fields=FIELDS,
        levels=LEVELS,
        level_units="hPa",
        level_fields=LEVEL_INFO["fields"],
    )


def make_tiny_leveled_dataset(
    path,
    nlat: int = 9,
    nlon: int = 16,
    grid: str = "equiangular",
    n_frames: int = 6,
    splits: dict | None = None,
    name: str = "tiny_leveled",
) -> Path:
    """Write a tiny leveled dataset folder at ``path`` and return it (train [0, 1], valid [2], test [3] by default)."""
    path = Path(path)
    splits = splits or {"train": [0, 1], "valid": [2], "test": [3]}
    g = SphereGrid(nlat, nlon, grid)
    for split, ids in splits.items():
        for i in ids:
            write_trajectory(path / split / storage.trajectory_filename(i), g, i, n_frames, name)
    stats = statistics.compute_stats([path / "train" / storage.trajectory_filename(i) for i in splits["train"]], FIELDS)
    meta = {
        **folder_meta(name, g, n_frames, DT, splits, FIELDS),
        "levels": LEVEL_INFO,
        "parameters": ["delta_T_y"],
        "config": {},
        "command": "tests/helpers/tiny_leveled.py make_tiny_leveled_dataset",
        "versions": {},
        "complete": True,
    }
    return write_folder_files(path, meta, stats, splits, ("dataset.yaml", "splits.json", "stats.yaml"))
