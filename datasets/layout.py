"""What the trajectory-file layout of :mod:`dandelion.datasets.storage` requires, as a list of problems.

:func:`layout_problems` is what :func:`dandelion.datasets.storage.open_trajectory` checks in an open file: the root
attributes, the groups, the coordinates and the shape, dtype and attributes of every field (and, with
``check_data``, that every frame is finite).
"""

from __future__ import annotations

import h5py
import numpy as np

__all__ = ["layout_problems", "is_surface"]

_REQUIRED_ROOT_ATTRS = (
    "dataset_name",
    "grid_type",
    "grid",
    "nlat",
    "nlon",
    "n_spatial_dims",
    "n_trajectories",
    "trajectory_id",
    "simulation_parameters",
    "time_units",
    "dandelion_version",
)
_REQUIRED_GROUPS = ("dimensions", "scalars", "t0_fields", "t1_fields", "t2_fields")


def layout_problems(f: h5py.File, *, check_data: bool) -> list[str]:
    """The ways an open trajectory file departs from the layout (empty: none), each a short phrase."""
    problems = [f"missing root attribute {a!r}" for a in _REQUIRED_ROOT_ATTRS if a not in f.attrs]
    if "lmax" not in f.attrs and bool(f.attrs.get("band_limited", True)):
        problems.append("missing root attribute 'lmax' (and band_limited is not False)")
    problems += [f"missing group {g!r}" for g in _REQUIRED_GROUPS if g not in f]
    if problems:
        return problems
    nlat, nlon = int(f.attrs["nlat"]), int(f.attrs["nlon"])
    leveled = "level" in f["dimensions"]
    if leveled != (int(f.attrs["n_spatial_dims"]) == 3):
        problems.append(
            f"n_spatial_dims={int(f.attrs['n_spatial_dims'])} but dimensions/level is "
            + ("present" if leveled else "absent")
        )
    for name, n in (("time", None), ("lat", nlat), ("lon", nlon)) + ((("level", None),) if leveled else ()):
        if name not in f["dimensions"]:
            problems.append(f"missing dimensions/{name}")
            continue
        d = f["dimensions"][name]
        if d.ndim != 1 or (n is not None and d.shape[0] != n):
            problems.append(f"dimensions/{name} has shape {d.shape}")
    if problems:
        return problems
    T = f["dimensions"]["time"].shape[0]
    L = f["dimensions"]["level"].shape[0] if leveled else None
    for p in f.attrs["simulation_parameters"]:
        if p not in f["scalars"]:
            problems.append(f"missing scalars/{p}")
    for group, trailing in (("t0_fields", ()), ("t1_fields", (2,))):
        for name, d in f[group].items():
            want = (1, T, nlat, nlon) + trailing
            if leveled:
                surface = is_surface(d)
                want = (1, T, 1 if surface else L, nlat, nlon) + trailing
                if len(d.attrs.get("dim_varying", [])) != 3:
                    problems.append(f"{group}/{name} dim_varying has not 3 entries (level, lat, lon)")
            if d.shape != want:
                problems.append(f"{group}/{name} has shape {d.shape}, expected {want}")
            if d.dtype != np.float32:
                problems.append(f"{group}/{name} has dtype {d.dtype}, expected float32")
            for a in ("units", "long_name"):
                if a not in d.attrs:
                    problems.append(f"{group}/{name} lacks attribute {a!r}")
            if trailing and list(d.attrs.get("component_names", [])) != ["u", "v"]:
                problems.append(f"{group}/{name} component_names is not ['u', 'v']")
            if check_data and not problems:
                for k in range(T):
                    if not np.isfinite(d[0, k]).all():
                        problems.append(f"{group}/{name} has non-finite values at frame {k}")
                        break
    if "mask" in f:  # a masked dataset: mask/wet (nlat, nlon), 1 = ocean
        wet = f["mask"].get("wet")
        if wet is None or wet.shape != (nlat, nlon):
            problems.append(
                f"mask/wet is {'missing' if wet is None else f'of shape {wet.shape}'}, expected ({nlat}, {nlon})"
            )
    if check_data:
        for name in ("time", "lat", "lon") + (("level",) if leveled else ()):
            if not np.isfinite(f["dimensions"][name][()]).all():
                problems.append(f"dimensions/{name} has non-finite values")
    return problems


def is_surface(d: h5py.Dataset) -> bool:
    """True for a surface field of a leveled file: size-1 level axis, ``dim_varying[0] == False``."""
    dv = d.attrs.get("dim_varying", None)
    return dv is not None and len(dv) == 3 and not bool(dv[0])
