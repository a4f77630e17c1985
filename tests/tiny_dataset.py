"""Tiny dataset folders for tests (imported by tests/conftest.py, importable as ``tiny_dataset``).

``make_tiny_dataset(path, ...)`` writes a tiny dataset folder in the INTERFACES.md layout
(``train/ valid/ test/`` of ``traj_XXXXXX.h5``, ``dataset.yaml``, ``stats.yaml``, ``splits.json``,
``checksums.sha256``) with analytic fields: a scalar ``h`` and a tangent vector ``velocity``.
Use it through the fixture of the same name::

    def test_something(make_tiny_dataset, tmp_path):
        path = make_tiny_dataset(tmp_path / "data", nlat=9, nlon=16)
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import h5py
import numpy as np
import yaml

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


def _write_trajectory(file: Path, grid: SphereGrid, traj: int, n_frames: int, name: str) -> None:
    fields = analytic_fields(grid, traj, n_frames)
    nlat, nlon = grid.shape
    with h5py.File(file, "w") as h:
        h.attrs.update(dataset_name=name, grid_type="spherical", grid=grid.grid, nlat=nlat, nlon=nlon, lmax=grid.lmax, n_spatial_dims=2,
                       n_trajectories=1, trajectory_id=traj, simulation_parameters=["u_max"], time_units="s", dandelion_version="test")
        d = h.create_group("dimensions")
        d.attrs["spatial_dims"] = ["lat", "lon"]
        d["time"] = np.arange(n_frames, dtype=np.float64) * DT
        d["lat"] = np.degrees(grid.lat.numpy())
        d["lon"] = np.degrees(grid.lon.numpy())
        s = h.create_group("scalars")
        s.attrs["field_names"] = ["u_max"]
        s["u_max"] = np.float64(60.0 + traj)
        t0 = h.create_group("t0_fields")
        t0.attrs["field_names"] = ["h"]
        ds = t0.create_dataset("h", data=fields["h"][None].astype(np.float32), chunks=(1, 1, nlat, nlon))
        ds.attrs.update(units="m", long_name="height anomaly", dim_varying=[True, True], sample_varying=True, time_varying=True)
        t1 = h.create_group("t1_fields")
        t1.attrs["field_names"] = ["velocity"]
        ds = t1.create_dataset("velocity", data=fields["velocity"][None].astype(np.float32), chunks=(1, 1, nlat, nlon, 2))
        ds.attrs.update(units="m s-1", long_name="velocity", component_names=["u", "v"], dim_varying=[True, True], sample_varying=True, time_varying=True)
        h.create_group("t2_fields")


def compute_stats(files: list[Path], grid: SphereGrid) -> dict:
    """Area-weighted statistics over all frames of ``files`` (INTERFACES.md stats.yaml format)."""
    w = (grid.weights / grid.weights.sum() / grid.nlon).numpy()  # sums to 1 over the grid
    acc = {"h": [], "dh": [], "v2": [], "dv2": []}
    for f in files:
        with h5py.File(f, "r") as h:
            hh = h["t0_fields/h"][0].astype(np.float64)
            uv = h["t1_fields/velocity"][0].astype(np.float64)
        acc["h"].append(hh)
        acc["dh"].append(np.diff(hh, axis=0))
        acc["v2"].append((uv**2).sum(-1))
        acc["dv2"].append((np.diff(uv, axis=0) ** 2).sum(-1))

    def amean(arrs, fn=lambda a: a):
        return float(np.mean([(fn(a) * w).sum((-2, -1)).mean() for a in arrs]))

    mean, dmean = amean(acc["h"]), amean(acc["dh"])
    return {
        "h": {"kind": "scalar", "mean": mean, "std": math.sqrt(amean(acc["h"], lambda a: (a - mean) ** 2)),
              "delta_mean": dmean, "delta_std": math.sqrt(amean(acc["dh"], lambda a: (a - dmean) ** 2))},
        "velocity": {"kind": "vector", "rms": math.sqrt(amean(acc["v2"])), "delta_rms": math.sqrt(amean(acc["dv2"]))},
    }


def make_tiny_dataset(path, nlat: int = 9, nlon: int = 16, grid: str = "equiangular", n_frames: int = 10,
                      splits: dict | None = None, name: str = "tiny") -> Path:
    """Write a tiny dataset folder at ``path`` (created) and return it as a Path.

    ``splits`` maps split name -> trajectory ids (default train [0, 1, 2], valid [3], test [4]).
    """
    path = Path(path)
    splits = splits or {"train": [0, 1, 2], "valid": [3], "test": [4]}
    g = SphereGrid(nlat, nlon, grid)
    for split, ids in splits.items():
        (path / split).mkdir(parents=True, exist_ok=True)
        for i in ids:
            _write_trajectory(path / split / f"traj_{i:06d}.h5", g, i, n_frames, name)
    stats = compute_stats([path / "train" / f"traj_{i:06d}.h5" for i in splits["train"]], g)
    meta = {
        "name": name, "grid": grid, "nlat": nlat, "nlon": nlon, "lmax": g.lmax, "solver_lmax": g.lmax, "reduced": True,
        "dt_frame": DT, "time_units": "s", "n_frames": n_frames, "n_trajectories": sum(len(v) for v in splits.values()),
        "fields": {"h": {"kind": "scalar", "units": "m", "long_name": "height anomaly"},
                   "velocity": {"kind": "vector", "units": "m s-1", "long_name": "velocity", "components": ["u", "v"]}},
        "parameters": ["u_max"], "config": {}, "command": "tests/conftest.py make_tiny_dataset", "versions": {},
    }
    (path / "dataset.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    (path / "stats.yaml").write_text(yaml.safe_dump(stats, sort_keys=False))
    (path / "splits.json").write_text(json.dumps({"seed": 0, "strategy": "fixed", **{k: list(v) for k, v in splits.items()}}))
    lines = [f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.relative_to(path).as_posix()}" for f in sorted(path.glob("*/*.h5"))]
    (path / "checksums.sha256").write_text("\n".join(lines) + "\n")
    return path
