"""Writers of exported forecasts: CF netCDF4 and Zarr, in our CF names or WeatherBench 2's.

The layout of what they write, the naming conventions and the atomic-write rule are described in
:mod:`dandelion.export.forecasts`, which builds the xarray Dataset.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import xarray as xr

from dandelion.disk import disk_error
from dandelion.runtime import is_zarr_store, temp_path

__all__ = [
    "EPOCH",
    "EPOCH_UNITS",
    "FORMATS",
    "CONVENTIONS",
    "WB2_NAMES",
    "to_convention",
    "write_netcdf",
    "write_zarr",
    "write_forecasts",
]

#: Output formats of ``dandelion-export`` and naming conventions of the written variables.
FORMATS = ("netcdf", "zarr")
CONVENTIONS = ("cf", "wb2")
#: Renames of ``convention=wb2`` (WeatherBench 2 forecast stores).
WB2_NAMES = {"init_time": "time", "lead_time": "prediction_timedelta", "lat": "latitude", "lon": "longitude"}

#: Calendar epoch standing for time 0 of every simulated trajectory.
EPOCH = np.datetime64("2000-01-01T00:00:00", "ns")
EPOCH_UNITS = "hours since 2000-01-01 00:00:00"


def to_convention(ds: xr.Dataset, convention: str = "cf") -> xr.Dataset:
    """Rename a Dataset of :func:`forecasts_to_xarray` to ``convention`` (``"cf"``: unchanged; ``"wb2"``:
    :data:`WB2_NAMES`). Raises ``ValueError`` for an unknown convention."""
    if convention not in CONVENTIONS:
        raise ValueError(
            f"convention={convention!r}: expected one of {CONVENTIONS} (cf: our CF names; wb2: WeatherBench 2 names)"
        )
    if convention == "cf":
        return ds
    out = ds.rename({k: v for k, v in WB2_NAMES.items() if k in ds.variables or k in ds.dims})
    out.attrs["convention"] = (
        "WeatherBench 2 forecast names: time = initialisation time, prediction_timedelta = lead time"
    )
    return out


_SPATIAL = ("lat", "lon", "latitude", "longitude")


def _map_chunks(ds: xr.Dataset, var, chunks: dict | None) -> tuple:
    """One full map per chunk (1 along every other dimension), unless ``chunks`` names a dimension."""
    chunks = dict(chunks or {})
    return tuple(
        min(int(chunks[d]), ds.sizes[d]) if d in chunks else (ds.sizes[d] if d in _SPATIAL else 1) for d in var.dims
    )


def _time_encoding(var) -> dict:
    if np.issubdtype(var.dtype, np.datetime64):
        return dict(units=EPOCH_UNITS, calendar="proleptic_gregorian", dtype="float64")
    if np.issubdtype(var.dtype, np.timedelta64):
        return dict(units="hours", dtype="float64")
    return {}


def _fill(ds: xr.Dataset):
    """NaN (float32) as the CF ``_FillValue`` of the data of a masked dataset (land missing), else none."""
    return np.float32(np.nan) if "land_mask" in ds.variables else None


def _encoding(ds: xr.Dataset) -> dict:
    enc = {}
    for name, var in ds.data_vars.items():
        chunks = _map_chunks(ds, var, None)
        enc[name] = {
            "zlib": True,
            "complevel": 4,
            "shuffle": True,
            "dtype": "float32",
            "_FillValue": _fill(ds),
            "chunksizes": chunks,
        }
    for name, var in ds.coords.items():
        e = {"_FillValue": None}
        if np.issubdtype(var.dtype, np.datetime64):
            e.update(units=EPOCH_UNITS, calendar="proleptic_gregorian", dtype="float64")
        elif np.issubdtype(var.dtype, np.timedelta64):
            e.update(units="hours", dtype="float64")
        enc[name] = e
    return enc


def write_netcdf(ds: xr.Dataset, path, overwrite: bool = False) -> Path:
    """Write ``ds`` to ``path`` with the netCDF4 engine, compressed, atomically.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is false.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists: choose another path or pass overwrite=true to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        ds.to_netcdf(tmp, engine="netcdf4", format="NETCDF4", encoding=_encoding(ds))
        os.replace(tmp, path)
    except (OSError, RuntimeError) as err:  # a full disk ("NetCDF: HDF error"), a read-only folder: one line
        wrapped = disk_error(err, path)
        if wrapped is not None:
            raise wrapped from err
        raise
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def write_zarr(ds: xr.Dataset, path, overwrite: bool = False, chunks: dict | None = None) -> Path:
    """Write ``ds`` to a Zarr store at ``path`` (a folder), atomically.

    Zarr format 2 with consolidated metadata (opens with ``xr.open_zarr`` and older Zarr readers), float32
    data, no fill value, time coordinates encoded as in the netCDF export. Chunks: one full map per chunk
    (size 1 along every non-spatial dimension) unless ``chunks`` (``{dimension: size}``) says otherwise.
    The store is written under a temporary name in the same folder and renamed; an existing store is
    replaced only with ``overwrite=True``, and is put back if the new one cannot be renamed onto ``path``.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is false.
    ValueError
        If ``chunks`` names a dimension the Dataset does not have, or ``path`` exists and is not a Zarr store
        (a file or a foreign folder is never replaced).
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists: choose another path or pass overwrite=true to replace it")
    if path.exists() and not is_zarr_store(path):
        raise ValueError(f"{path} exists and is not a Zarr store: refusing to replace it, choose another path")
    unknown = sorted(set(chunks or {}) - set(ds.dims))
    if unknown:
        raise ValueError(f"chunks names dimensions {unknown} the forecasts do not have: use some of {list(ds.dims)}")
    enc = {}
    for name, var in ds.data_vars.items():
        enc[name] = {"dtype": "float32", "_FillValue": _fill(ds), "chunks": _map_chunks(ds, var, chunks)}
    for name, var in ds.coords.items():
        enc[name] = {"_FillValue": None, **_time_encoding(var)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, old = temp_path(path), temp_path(path, "old")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        ds.to_zarr(tmp, mode="w", encoding=enc, zarr_format=2, consolidated=True)
        if path.exists():  # overwrite: move the old store aside first, so a failure never leaves no store
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not path.exists():  # the new store never reached path: put the old one back
            os.replace(old, path)
        shutil.rmtree(old, ignore_errors=True)
    return path


def write_forecasts(
    ds: xr.Dataset,
    path,
    *,
    format: str = "netcdf",
    convention: str = "cf",
    overwrite: bool = False,
    chunks: dict | None = None,
) -> Path:
    """Write a Dataset of :func:`forecasts_to_xarray` as ``format`` (``"netcdf"`` or ``"zarr"``) with the names of
    ``convention`` (``"cf"`` or ``"wb2"``, :func:`to_convention`). ``chunks`` applies to Zarr only.

    Raises
    ------
    ValueError
        For an unknown format or convention, or ``chunks`` with ``format="netcdf"``.
    FileExistsError
        If ``path`` exists and ``overwrite`` is false.
    """
    if format not in FORMATS:
        raise ValueError(f"format={format!r}: expected one of {FORMATS}")
    ds = to_convention(ds, convention)
    if format == "zarr":
        return write_zarr(ds, path, overwrite=overwrite, chunks=chunks)
    if chunks:
        raise ValueError("chunks applies to format=zarr only (the netCDF export always stores one map per chunk)")
    return write_netcdf(ds, path, overwrite=overwrite)
