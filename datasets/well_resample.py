"""Resample a Well-layout folder onto a grid Dandelion supports (``dandelion-well-resample``).

Dandelion's models, quadrature weights and spectral transforms need the rows of a torch-harmonics grid
(:data:`dandelion.sphere.GRIDS`). A Well-layout set stored on other latitudes (for example rows
equally spaced in colatitude without the poles) is resampled here, file by file, into a new folder of
the same layout: each field is interpolated along colatitude with a cubic spline
(:class:`scipy.interpolate.CubicSpline`, not-a-knot ends) and, when the longitudes change, along longitude
with a periodic cubic spline. torch-harmonics' :class:`~torch_harmonics.ResampleS2` only takes input rows
that are themselves one of its grids, which these sets are not, hence scipy.

Vector components are interpolated as stored (same meridians and parallels, so their directions do not
change). Target rows must lie within the stored rows: the default target, the Legendre-Gauss grid with
as many rows as the source, excludes the poles and lies inside any pole-excluding equiangular set of the
same size. An equiangular target (poles included) would need values at the poles, which are not stored:
it is refused rather than extrapolated.

Everything else in a file (attributes, scalars, boundary conditions, time) is copied; the latitude
(and longitude) coordinates are replaced in the file's own units and row order, and the root gets
attributes ``grid`` and ``resampled_from``. The Well's ``stats.yaml`` is copied as well (its values
are averages over the old rows: close, not exact).

Files are written under temporary names (with the writer's process id) and renamed. The output folder holds
:data:`dandelion.datasets.folder.RESAMPLE_MARK` saying ``complete: false`` (with the source, grid and command)
until every file is written, so no job reads a partial output
(:func:`dandelion.datasets.folder.completeness_problem`), and a lock (:class:`dandelion.locks.OutputLock`) while
it is written. Rerunning the same command on an unfinished output resumes it (finished files are kept); another
source or grid is refused.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import yaml
from scipy.interpolate import CubicSpline

from dandelion.locks import OutputLock, noting_state
from dandelion.runtime import temp_leftovers, temp_path, write_yaml_atomic
from dandelion.sphere import SphereGrid

from .folder import RESAMPLE_MARK, completeness_problem
from .storage import reading
from .well import LATITUDE_NAMES, open_well_file, to_radians, well_split_files

__all__ = ["resample_well_folder", "resample_well_file"]

_BLOCK = 16  # frames interpolated at once


def _coords(f: h5py.File):
    spatial = [str(d) for d in f["dimensions"].attrs["spatial_dims"]]
    lat_dim = next(d for d in spatial if d.lower() in LATITUDE_NAMES)
    lon_dim = next(d for d in spatial if d != lat_dim)
    d_lat, d_lon = f["dimensions"][lat_dim], f["dimensions"][lon_dim]
    raw = np.asarray(d_lat[()], dtype=np.float64)
    colat_kind = LATITUDE_NAMES[lat_dim.lower()] == "colat"
    units = str(d_lat.attrs.get("units", ""))
    colat = to_radians(raw, units, math.pi) if colat_kind else 0.5 * math.pi - to_radians(raw, units, 0.5 * math.pi)
    in_degrees = "deg" in units.lower() or np.abs(raw).max() > (math.pi if colat_kind else 0.5 * math.pi) + 1e-6
    lon_units = str(d_lon.attrs.get("units", ""))
    lon_raw = np.asarray(d_lon[()], dtype=np.float64)
    lon = np.mod(to_radians(lon_raw, lon_units, 2 * math.pi), 2 * math.pi)
    lon_degrees = "deg" in lon_units.lower() or np.abs(lon_raw).max() > 2 * math.pi + 1e-6
    return spatial, lat_dim, lon_dim, colat, colat_kind, in_degrees, lon, lon_degrees


def _interp_block(a: np.ndarray, lat_axis: int, lon_axis: int, colat_in, colat_out, lon_in, lon_out) -> np.ndarray:
    order = np.argsort(colat_in)
    out = CubicSpline(colat_in[order], np.take(a, order, axis=lat_axis), axis=lat_axis)(colat_out)
    if lon_out is not None:
        lo = np.argsort(lon_in)
        x = np.concatenate([lon_in[lo], [lon_in[lo][0] + 2 * math.pi]])
        y = np.take(out, lo, axis=lon_axis)
        y = np.concatenate([y, np.take(y, [0], axis=lon_axis)], axis=lon_axis)
        out = CubicSpline(x, y, axis=lon_axis, bc_type="periodic")(
            np.where(lon_out < x[0], lon_out + 2 * math.pi, lon_out)
        )
    return out


def resample_well_file(src, dst, grid: SphereGrid) -> Path:
    """Resample one Well-layout file onto ``grid`` (rows north first in our grid; written in the file's row order).

    Raises
    ------
    ValueError
        If ``grid`` has rows beyond the stored latitude range (module docstring), or the file is not 2-D.
    """
    src, dst = Path(src), Path(dst)
    tmp = temp_path(dst)
    try:
        _resample_into(src, tmp, grid)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, dst)
    return dst


def _resample_into(src: Path, tmp: Path, grid: SphereGrid) -> None:
    with open_well_file(src) as f:
        spatial, lat_dim, lon_dim, colat, colat_kind, lat_deg, lon, lon_deg = _coords(f)
        if len(spatial) != 2:
            raise ValueError(f"{src}: spatial_dims={spatial}; only 2-D (latitude, longitude) files can be resampled")
        descending = colat[0] > colat[-1]
        target = grid.colat.numpy()[::-1] if descending else grid.colat.numpy()  # keep the file's row order
        lo, hi = colat.min(), colat.max()
        if target.min() < lo - 1e-9 or target.max() > hi + 1e-9:
            raise ValueError(
                f"{src}: the {grid.grid} grid with nlat={grid.nlat} has rows at colatitudes "
                f"{np.rad2deg(grid.colat[0].item()):.3f}..{np.rad2deg(grid.colat[-1].item()):.3f} deg, beyond the "
                f"stored rows {np.rad2deg(lo):.3f}..{np.rad2deg(hi):.3f} deg: use grid=legendre-gauss (poles excluded) "
                "or fewer rows"
            )
        new_lon = grid.lon.numpy()
        lon_out = None if (len(lon) == len(new_lon) and np.allclose(lon, new_lon, atol=1e-7)) else new_lon
        lat_axis_sp, lon_axis_sp = spatial.index(lat_dim), spatial.index(lon_dim)
        sizes = {lat_dim: grid.nlat, lon_dim: grid.nlon}
        tmp.parent.mkdir(parents=True, exist_ok=True)
        with h5py.File(tmp, "w") as g:
            for k, v in f.attrs.items():
                g.attrs[k] = v
            g.attrs["grid"] = grid.grid
            g.attrs["resampled_from"] = (
                f"{src.name}: {len(colat)} x {len(lon)} rows x columns, cubic splines (dandelion-well-resample)"
            )
            for name, obj in f.items():
                if name in ("t0_fields", "t1_fields", "t2_fields", "dimensions", "boundary_conditions"):
                    continue
                f.copy(obj, g, name=name)
            dims = g.create_group("dimensions")
            for k, v in f["dimensions"].attrs.items():
                dims.attrs[k] = v
            for name, d in f["dimensions"].items():
                if name == lat_dim:
                    values = target if colat_kind else 0.5 * math.pi - target
                    values = np.rad2deg(values) if lat_deg else values
                elif name == lon_dim:
                    values = np.rad2deg(new_lon) if lon_deg else new_lon
                else:
                    f.copy(d, dims, name=name)
                    continue
                out = dims.create_dataset(name, data=values.astype(d.dtype))
                for k, v in d.attrs.items():
                    out.attrs[k] = v
            if "boundary_conditions" in f:
                bcs = g.create_group("boundary_conditions")
                for name, b in f["boundary_conditions"].items():
                    nb = bcs.create_group(name)
                    for k, v in b.attrs.items():
                        nb.attrs[k] = v
                    assoc = [str(x) for x in b.attrs.get("associated_dims", [])]
                    if len(assoc) == 1 and assoc[0] in sizes:
                        mask = np.zeros(sizes[assoc[0]], dtype=bool)
                        mask[[0, -1]] = True
                        nb.create_dataset("mask", data=mask)
                    else:
                        f.copy(b["mask"], nb, name="mask")
            for group in ("t0_fields", "t1_fields", "t2_fields"):
                if group not in f:
                    continue
                gg = g.create_group(group)
                for k, v in f[group].attrs.items():
                    gg.attrs[k] = v
                for name, d in f[group].items():
                    dv = [bool(x) for x in d.attrs.get("dim_varying", [True, True])]
                    if not all(dv):
                        raise ValueError(
                            f"{src}: {group}/{name} does not vary over every spatial dimension: not supported"
                        )
                    sample_axis, time_axis = (
                        bool(d.attrs.get("sample_varying", True)),
                        bool(d.attrs.get("time_varying", True)),
                    )
                    lead = int(sample_axis) + int(time_axis)
                    shape = list(d.shape)
                    shape[lead + lat_axis_sp], shape[lead + lon_axis_sp] = grid.nlat, grid.nlon
                    out = gg.create_dataset(
                        name,
                        shape=tuple(shape),
                        dtype=d.dtype,
                        chunks=tuple([1] * lead + shape[lead:]),
                        compression="gzip",
                        compression_opts=4,
                        shuffle=True,
                    )
                    for k, v in d.attrs.items():
                        out.attrs[k] = v
                    samples = range(d.shape[0]) if sample_axis else [None]
                    n_frames = d.shape[int(sample_axis)] if time_axis else 1
                    for smp in samples:
                        for t0 in range(0, n_frames, _BLOCK):
                            # index of this piece: (sample,) (time block,), each only where the axis exists
                            idx = ((smp,) if sample_axis else ()) + (
                                (slice(t0, min(n_frames, t0 + _BLOCK)),) if time_axis else ()
                            )
                            off = int(time_axis)  # the time block keeps its axis
                            with reading(src):  # a damaged chunk of the source: one line naming it
                                block = d[idx]
                            r = _interp_block(block, off + lat_axis_sp, off + lon_axis_sp, colat, target, lon, lon_out)
                            out[idx] = r.astype(d.dtype)


def resample_well_folder(
    src, dst, grid: str = "legendre-gauss", nlat: int | None = None, nlon: int | None = None
) -> Path:
    """Resample every file of a Well-layout folder ``src`` onto a supported grid, into ``dst`` (same layout).

    Parameters
    ----------
    src : folder with ``data/{train,valid,test}/*.hdf5``.
    dst : new folder (absent or empty), or the unfinished output of the same command, which is resumed.
    grid : target grid name (``"legendre-gauss"`` default, or ``"equiangular"`` when the stored rows reach the poles).
    nlat, nlon : target size (default: the source's).

    Returns the new folder.

    Raises
    ------
    FileExistsError
        If ``dst`` holds other files, or the output of another source or grid.
    dandelion.locks.LockHeldError
        If another process is writing ``dst``.
    dandelion.datasets.storage.CorruptFileError
        For a source file HDF5 cannot open (named).
    ValueError
        As :func:`resample_well_file`.
    """
    src, dst = Path(src), Path(dst)
    files = {s: well_split_files(src, s) for s in ("train", "valid", "test")}
    if not files["train"]:
        raise FileNotFoundError(f"{src / 'data' / 'train'} holds no .hdf5/.h5 file: not a folder in the Well's layout")
    problem = completeness_problem(src)
    if problem:
        raise ValueError(f"src: {problem}")
    with open_well_file(files["train"][0]) as f:
        spatial, lat_dim, lon_dim, colat, *_ = _coords(f)
        n_lon_src = f["dimensions"][lon_dim].shape[-1]
    target = SphereGrid(int(nlat or len(colat)), int(nlon or n_lon_src), grid)
    settings = {"src": str(src.resolve()), "grid": target.grid, "nlat": target.nlat, "nlon": target.nlon}
    command = f"dandelion-well-resample src={src} dst={dst} grid={target.grid} nlat={target.nlat} nlon={target.nlon}"
    _claim_output(dst, settings)
    with OutputLock.folder(dst, "dandelion-well-resample"):
        _claim_output(dst, settings)  # again, now that no other writer can change it
        mark = {**settings, "complete": False, "command": command}
        write_yaml_atomic(dst / RESAMPLE_MARK, mark)
        with noting_state(f"state in {dst} (finished files are kept); rerun `{command}` to continue"):
            for split, paths in files.items():
                for p in paths:
                    out = dst / "data" / split / p.name
                    for tmp in temp_leftovers(out):  # of an interrupted run (the lock is held)
                        tmp.unlink(missing_ok=True)
                    if not _finished(out):
                        resample_well_file(p, out, target)
            if (src / "stats.yaml").is_file():
                tmp = temp_path(dst / "stats.yaml")
                shutil.copyfile(src / "stats.yaml", tmp)
                os.replace(tmp, dst / "stats.yaml")
        write_yaml_atomic(dst / RESAMPLE_MARK, {**mark, "complete": True})
    return dst


def _claim_output(dst: Path, settings: dict) -> None:
    """``dst`` is absent, empty (hidden files aside), or the output of the same source and grid."""
    if not dst.exists():
        return
    if not dst.is_dir():
        raise FileExistsError(f"dst={dst} is a file: choose a new folder for the resampled set")
    mark = dst / RESAMPLE_MARK
    if mark.is_file():
        try:
            old = yaml.safe_load(mark.read_text())
        except yaml.YAMLError:
            old = None
        old = old if isinstance(old, dict) else {}
        if {k: old.get(k) for k in settings} != settings:
            raise FileExistsError(
                f"dst={dst} holds the resample of {old.get('src')} onto {old.get('grid')} {old.get('nlat')}x"
                f"{old.get('nlon')}, not of {settings['src']} onto {settings['grid']} {settings['nlat']}x"
                f"{settings['nlon']}: choose a new dst, or delete that folder to redo it"
            )
        return
    if any(not p.name.startswith(".") for p in dst.iterdir()):
        raise FileExistsError(f"{dst} is not empty: choose a new folder for the resampled set")


def _finished(path: Path) -> bool:
    """A file of an earlier run under its final name (renamed only once complete) that HDF5 opens."""
    if not path.is_file():
        return False
    try:
        with h5py.File(path, "r"):
            return True
    except OSError:
        path.unlink()
        return False
