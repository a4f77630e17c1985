"""Streaming export: forecasts written to netCDF or Zarr batch by batch as the rollout makes them, so that the memory
a job needs is one batch of forecasts (and one trajectory's frames), not the file.

:func:`stream_forecasts` writes the same file :func:`dandelion.export.forecasts.write_forecast` writes from a whole
:class:`dandelion.forecast.Forecast` (the same variables, coordinates, attributes and encodings: one map per chunk,
float32, time coordinates in hours since the epoch; the names of ``convention``):

1. the coordinates and global attributes (:func:`dandelion.export.forecasts.forecasts_to_xarray` with no field, all
   ``trajectory`` and ``init_time`` values known before the rollout) are written by xarray under the temporary name;
2. every data variable is created empty (netCDF4: ``createVariable``; Zarr: ``create_array`` with xarray's
   ``_ARRAY_DIMENSIONS``) with the attributes of the first Dataset written;
3. each batch (one trajectory, ``batch_size`` initial times) is written into its region forecast by forecast
   (:data:`WRITE_FORECASTS`); the temporary file is renamed onto ``path`` only when complete
   (:func:`dandelion.export.writers.write_netcdf`'s rule), and removed when the job fails (a full disk:
   :func:`dandelion.disk.disk_error`'s one line).

Memory: one rollout batch (its normalised and decoded forecasts and truth; the batch before it is released first,
:func:`dandelion.forecast.iter_rollout`), one forecast's Dataset and one trajectory's frames; the heap's freed pages
are returned to the system after each batch (:func:`dandelion.heap.release_free_memory`). docs/jobs/export.md gives
the measured peaks.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import netCDF4
import numpy as np
import xarray as xr
import zarr

from dandelion.disk import check_free_space, disk_error
from dandelion.export.forecasts import forecasts_to_xarray, to_xarray
from dandelion.export.writers import _encoding, _fill, _time_encoding, to_convention
from dandelion.forecast import collect_forecast, iter_rollout, select_files
from dandelion.heap import release_free_memory
from dandelion.runtime import is_zarr_store, temp_path

__all__ = ["stream_forecasts", "WRITE_FORECASTS"]

#: Forecasts made into one xarray Dataset and written at a time. Each step of the conversion (gathering, flipping
#: the latitudes, splitting vector components) copies the data, so a Dataset of a whole rollout batch costs a few
#: times the batch; one forecast's costs a few MB. The file is the same whatever the number (one map per chunk).
WRITE_FORECASTS = 1


def _parts(batch: dict, size: int):
    """The forecasts of one :func:`dandelion.forecast.iter_rollout` batch, ``size`` at a time (views, no copy)."""
    for s in range(0, len(batch["init"]), size):
        cut = slice(s, s + size)
        yield {
            **batch,
            "init": batch["init"][cut],
            "init_slot": batch["init_slot"][cut],
            "pred": {name: v[cut] for name, v in batch["pred"].items()},
            "true": {name: v[cut] for name, v in batch["true"].items()},
        }


def _batch_dataset(batch: dict, model, dataset, n_steps: int, include_truth: bool, convention: str) -> xr.Dataset:
    """One batch of :func:`dandelion.forecast.iter_rollout` as the Dataset of its forecasts (trajectory axis of 1)."""
    fc = collect_forecast([{**batch, "traj_index": 0}], model, dataset, n_steps, keep_truth=include_truth)
    init = np.asarray(batch["init"])
    fc = dataclasses.replace(fc, init_index=init, init_time=np.asarray(batch["times"])[init])
    return to_convention(to_xarray(fc, include_truth), convention)


def _coordinates(ds: xr.Dataset, var: str) -> str | None:
    """The CF ``coordinates`` attribute xarray writes for ``var``: the non-dimension coordinates on its dimensions."""
    dims = set(ds[var].dims)
    names = [c for c in ds.coords if c not in ds.dims and set(ds[c].dims) <= dims]
    return " ".join(names) or None


def stream_forecasts(
    model,
    dataset,
    path,
    *,
    n_steps: int,
    init_stride: int = 1,
    max_inits: int | None = None,
    trajectories=None,
    max_trajectories: int | None = None,
    batch_size: int = 8,
    amp: bool = False,
    include_truth: bool = False,
    format: str = "netcdf",
    convention: str = "cf",
    chunks: dict | None = None,
    overwrite: bool = False,
) -> tuple[Path, int]:
    """Roll ``model`` out on ``dataset`` (as :func:`dandelion.forecast.forecast`) and write each batch as it comes.

    Returns ``(path, number of forecasts)``.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is false.
    DiskFullError / PermissionError
        When the estimate of the file's size exceeds the free space, or a write fails for want of space or rights
        (:mod:`dandelion.disk`): the temporary file is removed and an existing ``path`` is untouched.
    ValueError
        As :func:`dandelion.forecast.iter_rollout` and :func:`dandelion.export.writers.write_zarr`.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists: choose another path or pass overwrite=true to replace it")
    if format == "zarr" and path.exists() and not is_zarr_store(path):
        raise ValueError(f"{path} exists and is not a Zarr store: refusing to replace it, choose another path")
    ids = [dataset.trajectory_ids[f] for f in select_files(dataset, trajectories, max_trajectories)]
    batches = iter_rollout(
        model, dataset, n_steps, init_stride, max_inits, trajectories, max_trajectories, batch_size, False, amp
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    writer = None
    n = 0
    try:
        for batch in batches:
            for part in _parts(batch, WRITE_FORECASTS):
                ds = _batch_dataset(part, model, dataset, n_steps, include_truth, convention)
                if writer is None:
                    full = _full_coordinates(ds, part, ids, model, dataset, n_steps, include_truth, convention)
                    _check_space(path, full, ds)
                    writer = (_ZarrWriter if format == "zarr" else _NetcdfWriter)(tmp, full, ds, chunks)
                writer.write(ds, ids.index(int(part["trajectory"])), int(part["init_slot"][0]))
                del ds, part  # before the next part's copies are made
            n += len(batch["init"])
            del batch  # before the rollout makes the next one
            release_free_memory()  # the batch's freed pages, not kept in the heap beside the next one's
        if writer is None:
            raise ValueError("the rollout produced no forecast: check the trajectories and initial frames chosen")
        writer.close()
        writer = None
        _replace(tmp, path)
    except BaseException as err:
        if writer is not None:
            writer.abort()
        _remove(tmp)
        wrapped = disk_error(err, path, "output") if isinstance(err, OSError | RuntimeError) else None
        if wrapped is not None:
            raise wrapped from err
        raise
    return path, n


def _full_coordinates(ds, batch, ids, model, dataset, n_steps, include_truth, convention) -> xr.Dataset:
    """The whole file's coordinates and global attributes (no data variable)."""
    fc = collect_forecast([{**batch, "traj_index": 0}], model, dataset, n_steps, keep_truth=False)
    inits = np.asarray(batch["inits"])
    header = forecasts_to_xarray(
        {},
        grid=fc.grid,
        fields=fc.fields_meta,
        init_time=np.asarray(batch["times"])[inits],
        lead_time=fc.lead_time,
        time_units=fc.time_units,
        trajectory=np.asarray(ids, dtype=np.int64),
        levels=fc.levels,
        attrs=fc.attrs,
        wet=fc.wet,
    )
    return to_convention(header, convention)


def _check_space(path: Path, full: xr.Dataset, first: xr.Dataset) -> None:
    """Refuse before writing when the file's uncompressed size (float32 data of every variable) exceeds the free
    space: compression usually halves it, so the check is on half of it."""
    n = 0
    for var in first.data_vars.values():
        shape = [full.sizes.get(d, first.sizes[d]) for d in var.dims]
        n += 4 * int(np.prod(shape))
    check_free_space(path, n // 2, "output")


def _shape(full: xr.Dataset, var: xr.DataArray) -> tuple[int, ...]:
    return tuple(full.sizes.get(d, var.sizes[d]) for d in var.dims)


def _region(var: xr.DataArray, traj: int, slot: int) -> tuple:
    """The index of a batch's values in the full variable: trajectory ``traj``, initial times from ``slot``."""
    out = []
    for d in var.dims:
        if d == "trajectory":
            out.append(slice(traj, traj + 1))
        elif d in ("init_time", "time"):
            out.append(slice(slot, slot + var.sizes[d]))
        else:
            out.append(slice(None))
    return tuple(out)


class _NetcdfWriter:
    """Coordinates by xarray, data variables by netCDF4 (the encodings of
    :func:`dandelion.export.writers._encoding`)."""

    def __init__(self, tmp: Path, full: xr.Dataset, first: xr.Dataset, chunks):
        if chunks:
            raise ValueError("chunks applies to format=zarr only (the netCDF export always stores one map per chunk)")
        full.to_netcdf(tmp, engine="netcdf4", format="NETCDF4", encoding=_encoding(full))
        self.nc = netCDF4.Dataset(tmp, "a")
        self.nc.set_auto_mask(False)
        enc = _encoding(first)
        for name, var in first.data_vars.items():
            e = enc[name]
            v = self.nc.createVariable(
                name,
                "f4",
                var.dims,
                zlib=True,
                complevel=4,
                shuffle=True,
                chunksizes=e["chunksizes"],  # one map per chunk
                fill_value=e["_FillValue"],
            )
            # each chunk (one map) is written whole in one call: a small cache keeps the memory of one batch, where
            # netCDF's default (16 MB per variable) grows with the file up to that bound
            v.set_var_chunk_cache(size=1 << 20)
            attrs = dict(var.attrs)
            coords = _coordinates(first, name)
            if coords:
                attrs["coordinates"] = coords
            v.setncatts(attrs)

    def write(self, ds: xr.Dataset, traj: int, slot: int) -> None:
        for name, var in ds.data_vars.items():
            self.nc[name][_region(var, traj, slot)] = np.asarray(var.values, dtype=np.float32)

    def close(self) -> None:
        self.nc.close()

    def abort(self) -> None:
        try:
            self.nc.close()
        except (OSError, RuntimeError):
            pass


class _ZarrWriter:
    """Coordinates by xarray (Zarr format 2), data arrays by zarr with xarray's ``_ARRAY_DIMENSIONS``; metadata
    consolidated at the end (as :func:`dandelion.export.writers.write_zarr`)."""

    def __init__(self, tmp: Path, full: xr.Dataset, first: xr.Dataset, chunks):
        unknown = sorted(set(chunks or {}) - set(first.dims))
        if unknown:
            raise ValueError(
                f"chunks names dimensions {unknown} the forecasts do not have: use some of {list(first.dims)}"
            )
        shutil.rmtree(tmp, ignore_errors=True)
        enc = {name: {"_FillValue": None, **_time_encoding(var)} for name, var in full.coords.items()}
        full.to_zarr(tmp, mode="w", encoding=enc, zarr_format=2, consolidated=False)
        self.tmp = tmp
        self.group = zarr.open_group(str(tmp), mode="a", zarr_format=2)
        fill = _fill(first)
        chunks = dict(chunks or {})
        for name, var in first.data_vars.items():
            shape = _shape(full, var)
            size = {d: s for d, s in zip(var.dims, shape)}
            spec = tuple(
                min(int(chunks[d]), size[d])
                if d in chunks
                else (size[d] if d in ("lat", "lon", "latitude", "longitude") else 1)
                for d in var.dims
            )
            arr = self.group.create_array(
                name, shape=shape, chunks=spec, dtype="float32", fill_value=None if fill is None else float(fill)
            )
            attrs = {"_ARRAY_DIMENSIONS": list(var.dims), **var.attrs}
            coords = _coordinates(first, name)
            if coords:
                attrs["coordinates"] = coords
            arr.attrs.update(attrs)

    def write(self, ds: xr.Dataset, traj: int, slot: int) -> None:
        for name, var in ds.data_vars.items():
            self.group[name][_region(var, traj, slot)] = np.asarray(var.values, dtype=np.float32)

    def close(self) -> None:
        zarr.consolidate_metadata(str(self.tmp), zarr_format=2)

    def abort(self) -> None:
        pass


def _replace(tmp: Path, path: Path) -> None:
    """Rename the complete ``tmp`` onto ``path``; an existing Zarr store is moved aside first and put back if the
    rename fails, so a failure never leaves no store."""
    if not tmp.is_dir():
        os.replace(tmp, path)
        return
    old = temp_path(path, "old")
    try:
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        if old.exists() and not path.exists():
            os.replace(old, path)
        shutil.rmtree(old, ignore_errors=True)


def _remove(tmp: Path) -> None:
    if tmp.is_dir():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.unlink(missing_ok=True)
