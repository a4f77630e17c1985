"""Tiny folders in the Well's layout, written by hand to its documented format (PlanetSWE's conventions).

PlanetSWE (the Well's spherical shallow-water set): ``spatial_dims = ["theta", "phi"]`` (colatitude and
longitude in radians, float32), fields ``t0_fields/height`` ``(1, T, ntheta, nphi)`` and
``t1_fields/velocity`` ``(1, T, ntheta, nphi, 2)`` with components along ``spatial_dims`` (theta: southward,
phi: eastward), rows stored south first, frames one model hour apart, ``boundary_conditions`` PERIODIC in
phi and OPEN in theta, and a ``stats.yaml`` with the Well's keys.
"""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import yaml

DT = 1.0  # model hours between frames


def analytic(colat: np.ndarray, lon: np.ndarray, traj: int, n_frames: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``height (T, nlat, nlon)``, ``u`` and ``v`` (eastward, northward) ``(T, nlat, nlon)`` at given nodes.

    The nodes are the given rows and columns. height: a smooth quadratic in the position vector turning
    about the z axis; velocity: a solid-body rotation about an axis that depends on the trajectory,
    exactly tangent.
    """
    th, ph = colat[:, None], lon[None, :]
    xyz = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th) + 0 * ph])
    east = np.stack([-np.sin(ph) + 0 * th, np.cos(ph) + 0 * th, 0 * th + 0 * ph])
    north = np.stack([-np.cos(th) * np.cos(ph), -np.cos(th) * np.sin(ph), np.sin(th) + 0 * ph])
    h, u, v = [], [], []
    for k in range(n_frames):
        a = np.array([math.cos(0.2 * k + traj), math.sin(0.2 * k + traj), 0.4])
        p = np.einsum("c,cij->ij", a, xyz)
        h.append(500.0 + 80.0 * p + 30.0 * p**2)
        w = np.array([0.2 * traj, 0.1, 1.0]) * (10.0 + k)
        vel = np.cross(w[:, None, None], xyz, axis=0)
        u.append((vel * east).sum(0))
        v.append((vel * north).sum(0))
    return np.stack(h), np.stack(u), np.stack(v)


def write_well_file(path, colat_rows: np.ndarray, nlon: int, traj: int, n_frames: int, name: str = "planetswe") -> Path:
    """One trajectory file; ``colat_rows`` are the stored rows in file order (radians)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lon = 2 * math.pi * np.arange(nlon) / nlon
    colat_rows = np.asarray(colat_rows, dtype=np.float32)
    h, u, v = analytic(colat_rows.astype(np.float64), lon, traj, n_frames)
    with h5py.File(path, "w") as f:
        f.attrs["dataset_name"] = name
        f.attrs["grid_type"] = "equiangular"
        f.attrs["n_spatial_dims"] = 2
        f.attrs["n_trajectories"] = 1
        f.attrs["simulation_parameters"] = []
        dims = f.create_group("dimensions")
        dims.attrs["spatial_dims"] = ["theta", "phi"]
        t = dims.create_dataset("time", data=(np.arange(n_frames) * DT).astype(np.float32))
        t.attrs["sample_varying"] = False
        for key, values in (("theta", colat_rows), ("phi", lon.astype(np.float32))):
            d = dims.create_dataset(key, data=values)
            d.attrs["sample_varying"] = False
            d.attrs["time_varying"] = False
        sc = f.create_group("scalars")
        sc.attrs["field_names"] = []
        g0 = f.create_group("t0_fields")
        g0.attrs["field_names"] = ["height"]
        d = g0.create_dataset("height", data=h[None].astype(np.float32))
        g1 = f.create_group("t1_fields")
        g1.attrs["field_names"] = ["velocity"]
        # components along spatial_dims: theta (southward = -v), phi (eastward = u)
        d1 = g1.create_dataset("velocity", data=np.stack([-v, u], -1)[None].astype(np.float32))
        for ds in (d, d1):
            ds.attrs["time_varying"] = True
            ds.attrs["sample_varying"] = True
            ds.attrs["dim_varying"] = [True, True]
        f.create_group("t2_fields").attrs["field_names"] = []
        bcs = f.create_group("boundary_conditions")
        for key, dim, kind, n in (
            ("x_periodic", "phi", "PERIODIC", nlon),
            ("y_open", "theta", "OPEN", len(colat_rows)),
        ):
            g = bcs.create_group(key)
            g.attrs["associated_dims"] = [dim]
            g.attrs["bc_type"] = kind
            g.attrs["associated_fields"] = []
            g.attrs["sample_varying"] = False
            g.attrs["time_varying"] = False
            mask = np.zeros(n, dtype=bool)
            mask[[0, -1]] = True
            g.create_dataset("mask", data=mask)
    return path


def make_well_folder(
    root, colat_rows: np.ndarray, nlon: int, n_frames: int = 12, splits=None, name: str = "planetswe"
) -> Path:
    """A folder ``root/data/{train,valid,test}/planetswe_ICxx_s1.hdf5`` plus a ``stats.yaml`` with the Well's keys
    (plain grid-point averages, as the Well computes them)."""
    root = Path(root)
    splits = splits or {"train": [0, 1, 2], "valid": [3], "test": [4]}
    for split, ids in splits.items():
        for i in ids:
            write_well_file(root / "data" / split / f"{name}_IC{i:02d}_s1.hdf5", colat_rows, nlon, i, n_frames, name)
    lon = 2 * math.pi * np.arange(nlon) / nlon
    hs, vel = [], []
    for i in splits["train"]:
        h, u, v = analytic(np.asarray(colat_rows, dtype=np.float64), lon, i, n_frames)
        hs.append(h)
        vel.append(np.stack([-v, u], -1))
    h, vel = np.stack(hs), np.stack(vel)
    dh, dvel = np.diff(h, axis=1), np.diff(vel, axis=1)
    stats = {
        "mean": {"height": float(h.mean()), "velocity": vel.mean((0, 1, 2, 3)).tolist()},
        "std": {"height": float(h.std()), "velocity": vel.std((0, 1, 2, 3)).tolist()},
        "mean_delta": {"height": float(dh.mean()), "velocity": dvel.mean((0, 1, 2, 3)).tolist()},
        "std_delta": {"height": float(dh.std()), "velocity": dvel.std((0, 1, 2, 3)).tolist()},
        "rms": {"height": float(np.sqrt((h**2).mean())), "velocity": np.sqrt((vel**2).mean((0, 1, 2, 3))).tolist()},
        "rms_delta": {
            "height": float(np.sqrt((dh**2).mean())),
            "velocity": np.sqrt((dvel**2).mean((0, 1, 2, 3))).tolist(),
        },
    }
    (root / "stats.yaml").write_text(yaml.safe_dump(stats))
    return root


def planetswe_rows(nlat: int) -> np.ndarray:
    """The colatitudes PlanetSWE's generation script interpolated its fields to: ``linspace(pi - d/2, d/2, nlat)``,
    ``d = pi / (nlat + 1)`` (south first, poles excluded, not a torch-harmonics grid)."""
    d = math.pi / (nlat + 1)
    return np.linspace(math.pi - d / 2, d / 2, nlat)
