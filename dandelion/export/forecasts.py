"""Forecast export: xarray Datasets with CF metadata, written to netCDF4 (``dandelion-export``).

Layout of an exported file (CF-1.8 conventions):

* dimensions ``([trajectory,] init_time, lead_time, [level,] lat, lon)``; ``trajectory`` (the test
  trajectory id) is present when forecasts of several trajectories go in one file, since their
  simulated init times coincide;
* ``lat`` strictly ASCENDING in ``degrees_north`` (the grid's north-first rows are flipped),
  ``lon`` in ``[0, 360)`` ``degrees_east``; ``level`` in hPa where a dataset has levels;
* ``lead_time``: for datasets in seconds a ``timedelta64`` coordinate (encoded as float ``hours``),
  ``standard_name = forecast_period``; for non-dimensional datasets a float with ``units = "1"``
  (the dataset's non-dimensional time unit);
* ``init_time``: ``standard_name = forecast_reference_time``. Simulated time has no calendar, so a
  trajectory's time 0 is mapped to the **epoch 2000-01-01 00:00:00** (proleptic Gregorian) and
  ``init_time`` is encoded as ``hours since 2000-01-01 00:00:00``: a CF-aware reader sees
  ``init_time - 2000-01-01`` = time since the trajectory started. Non-dimensional datasets store a
  float (``units = "1"``, time since the trajectory start);
* ``valid_time(init_time, lead_time) = init_time + lead_time`` (``standard_name = time``);
* every variable has ``units`` and ``long_name``, and a CF ``standard_name`` where the quantity has one
  (``air_temperature``, ``eastward_wind``, ...: the table per dataset field of
  :mod:`dandelion.export.cf_names`); vector fields are split into eastward and northward
  variables (``u``/``v`` for ``velocity``, ``<field>_u``/``<field>_v`` otherwise,
  :func:`dandelion.metrics.variable_names`) with ``eastward ...``/``northward ...`` long names;
* float32 data, zlib level 4 with byte shuffle, chunks of one full map, no ``_FillValue``
  (forecasts hold no missing data), except for a masked dataset (an ocean): land points are missing
  values, NaN, declared by the CF ``_FillValue = NaN`` (float32), and the coordinate variable
  ``land_mask(lat, lon)`` (int8, ``standard_name = sea_binary_mask``: 1 on wet points, 0 on land)
  is written, so that ``ds.where(ds.land_mask)`` is the wet field;
* the file is written to a temporary name in the same folder and renamed, and an existing file is
  never replaced unless ``overwrite=True`` (:class:`FileExistsError` otherwise).

Zarr and WeatherBench-style names (``dandelion-export format=zarr convention=wb2``):

* ``format=zarr`` writes the same Dataset as a Zarr store (through :meth:`xarray.Dataset.to_zarr`, Zarr
  format 2 with consolidated metadata, readable by ``xr.open_zarr``), chunked one map per chunk by
  default (``chunks`` overrides per dimension), written to a temporary folder and renamed;
* ``convention=wb2`` renames to the names of WeatherBench 2 forecast stores (Rasp et al. 2024,
  "WeatherBench 2", Sec. 3): ``init_time`` -> ``time`` (the initialisation time),
  ``lead_time`` -> ``prediction_timedelta``, ``lat``/``lon`` -> ``latitude``/``longitude`` (latitude
  ascending, longitude in [0, 360)); ``level`` keeps its name; ``valid_time`` and ``trajectory`` stay.
  ``convention=cf`` (default) keeps the names above. Both conventions can be written in both formats.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from dandelion import __version__
from dandelion.export.cf_names import cf_attributes
from dandelion.export.writers import (
    CONVENTIONS,
    EPOCH,
    FORMATS,
    WB2_NAMES,
    to_convention,
    write_forecasts,
    write_netcdf,
    write_zarr,
)
from dandelion.forecast import Forecast
from dandelion.metrics import variable_names
from dandelion.sphere import SphereGrid

__all__ = [
    "EPOCH",
    "FORMATS",
    "CONVENTIONS",
    "WB2_NAMES",
    "forecasts_to_xarray",
    "to_xarray",
    "to_convention",
    "write_netcdf",
    "write_zarr",
    "write_forecasts",
    "export_forecasts",
    "write_forecast",
]


def _to_numpy(a) -> np.ndarray:
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a)


def _seconds_to_timedelta(t: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(t, dtype=np.float64) * 1e9).astype("int64").astype("timedelta64[ns]")


def forecasts_to_xarray(
    forecast: dict,
    *,
    grid: SphereGrid,
    fields: dict,
    init_time,
    lead_time,
    time_units: str = "s",
    trajectory=None,
    levels=None,
    truth: dict | None = None,
    attrs: dict | None = None,
    dataset: str | None = None,
    wet=None,
) -> xr.Dataset:
    """Forecasts in physical units to a CF-annotated :class:`xarray.Dataset`.

    Parameters
    ----------
    forecast : dict[str, array]
        Per field, scalars of shape ``([n_traj,] n_init, n_lead, [n_level,] nlat, nlon)`` and vectors
        ``(..., nlat, nlon, 2)`` with components (u east, v north), rows in the grid's order
        (north first), as :meth:`ChannelLayout.decode` returns them.
    grid : SphereGrid
    fields : dict[str, dict]
        ``dataset.yaml``'s ``fields``: ``{name: {kind, units, long_name[, components]}}``.
    init_time : array of shape (n_init,)
        Simulated time of the last input frame of each forecast, in ``time_units`` since the
        trajectory start.
    lead_time : array of shape (n_lead,)
        Forecast period of each step (``k * dt_frame``), in ``time_units``.
    time_units : str
        ``"s"`` (seconds: datetime/timedelta coordinates) or ``"nondimensional"`` (floats).
    trajectory : array of shape (n_traj,), optional
        Trajectory ids; when given, the arrays carry a leading trajectory axis.
    levels : array of shape (n_level,), optional
        Pressure levels in hPa for fields with a level axis.
    truth : dict, optional
        The true fields, same shapes; written as ``<variable>_truth``.
    attrs : dict, optional
        Extra global attributes (plain str/int/float values).
    dataset : str, optional
        The dataset's name, for the CF ``standard_name`` and ``long_name`` of each variable
        (:data:`dandelion.export.cf_names.CF_NAMES`); default ``attrs["dataset"]``. A dataset
        or field not in that table keeps the long names of ``fields``, without standard names.
    wet : bool array of shape (nlat, nlon), optional
        Ocean mask (rows north first) of a masked dataset: land values become NaN and ``land_mask`` is added.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    ValueError
        For a field missing from ``fields``, an unknown time unit or shapes that do not match.
    """
    dataset = dataset if dataset is not None else (attrs or {}).get("dataset")
    if time_units not in ("s", "nondimensional"):
        raise ValueError(f"time_units={time_units!r}: expected 's' (seconds) or 'nondimensional' (see dataset.yaml)")
    init = np.asarray(_to_numpy(init_time), dtype=np.float64).reshape(-1)
    lead = np.asarray(_to_numpy(lead_time), dtype=np.float64).reshape(-1)
    lead_dims = ["init_time", "lead_time"]
    if trajectory is not None:
        lead_dims = ["trajectory"] + lead_dims
    expected = ([len(np.asarray(trajectory).reshape(-1))] if trajectory is not None else []) + [len(init), len(lead)]

    coords = _space_coords(grid, trajectory, levels)
    coords.update(_time_coords(init, lead, time_units))
    if wet is not None:
        wet = np.asarray(_to_numpy(wet), dtype=bool)
        coords["land_mask"] = _land_mask(wet, grid)
    data_vars = _data_vars(forecast, truth, fields, dataset, grid, lead_dims, expected, levels, wet)
    return xr.Dataset(data_vars=data_vars, coords=coords, attrs=_global_attrs(grid, attrs))


def _space_coords(grid: SphereGrid, trajectory, levels) -> dict:
    """``lat`` (ascending), ``lon``, and ``trajectory`` and ``level`` where given, with their CF attributes."""
    lat_deg = np.rad2deg(grid.lat.numpy())[::-1].copy()  # ascending
    lon_deg = np.rad2deg(grid.lon.numpy()) % 360.0
    coords = {
        "lat": (
            "lat",
            lat_deg,
            {"units": "degrees_north", "standard_name": "latitude", "long_name": "latitude", "axis": "Y"},
        ),
        "lon": (
            "lon",
            lon_deg,
            {"units": "degrees_east", "standard_name": "longitude", "long_name": "longitude", "axis": "X"},
        ),
    }
    if trajectory is not None:
        coords["trajectory"] = (
            "trajectory",
            np.asarray(trajectory, dtype=np.int64).reshape(-1),
            {"long_name": "trajectory id in the dataset", "units": "1", "cf_role": "trajectory_id"},
        )
    if levels is not None:
        coords["level"] = (
            "level",
            np.asarray(levels, dtype=np.float64),
            {
                "units": "hPa",
                "standard_name": "air_pressure",
                "long_name": "pressure level",
                "axis": "Z",
                "positive": "down",
            },
        )

    return coords


def _time_coords(init: np.ndarray, lead: np.ndarray, time_units: str) -> dict:
    """``init_time``, ``lead_time`` and ``valid_time`` (datetimes and timedeltas for ``time_units="s"``, floats for
    ``"nondimensional"``), with their CF attributes."""
    coords = {}
    if time_units == "s":
        init_c = EPOCH + _seconds_to_timedelta(init)
        lead_c = _seconds_to_timedelta(lead)
        coords["init_time"] = (
            "init_time",
            init_c,
            {
                "standard_name": "forecast_reference_time",
                "long_name": "forecast initialisation time (simulated; time 0 of the trajectory = 2000-01-01)",
            },
        )
        coords["lead_time"] = (
            "lead_time",
            lead_c,
            {"standard_name": "forecast_period", "long_name": "forecast lead time"},
        )
        coords["valid_time"] = (
            ("init_time", "lead_time"),
            init_c[:, None] + lead_c[None, :],
            {"standard_name": "time", "long_name": "valid time of the forecast"},
        )
    else:
        coords["init_time"] = (
            "init_time",
            init,
            {
                "standard_name": "forecast_reference_time",
                "units": "1",
                "long_name": "forecast initialisation time (non-dimensional time since the trajectory start)",
            },
        )
        coords["lead_time"] = (
            "lead_time",
            lead,
            {"standard_name": "forecast_period", "units": "1", "long_name": "forecast lead time (non-dimensional)"},
        )
        coords["valid_time"] = (
            ("init_time", "lead_time"),
            init[:, None] + lead[None, :],
            {"standard_name": "time", "units": "1", "long_name": "valid time of the forecast (non-dimensional)"},
        )
    return coords


def _land_mask(wet: np.ndarray, grid: SphereGrid) -> tuple:
    """The ``land_mask`` coordinate (CF ``sea_binary_mask``, rows north to south flipped to ascending latitude).
    Raises ValueError for a mask that does not fit the grid."""
    if wet.shape != grid.shape:
        raise ValueError(
            f"wet mask of shape {wet.shape} does not fit the {grid.nlat}x{grid.nlon} grid: pass WindowDataset.wet"
        )
    return (
        ("lat", "lon"),
        wet[::-1].astype(np.int8),
        {
            "standard_name": "sea_binary_mask",
            "long_name": "ocean mask (1 = wet, 0 = land)",
            "units": "1",
            "flag_values": np.array([0, 1], dtype=np.int8),
            "flag_meanings": "land sea",
        },
    )


def _data_vars(forecast, truth, fields, dataset, grid, lead_dims, expected, levels, wet) -> dict:
    """The data variables (forecast, then ``<variable>_truth``): one per scalar field and vector component, in float32,
    latitude ascending, land NaN on a masked dataset, with units, long and CF standard names. Raises ValueError for
    a field not in ``fields`` or shapes that do not match."""
    n_lead_axes = len(lead_dims)
    data_vars = {}
    sources = [("", forecast)] + ([("_truth", truth)] if truth is not None else [])
    for suffix, arrays in sources:
        for name, arr in arrays.items():
            if name not in fields:
                raise ValueError(
                    f"field {name!r} is not described in the dataset's fields {sorted(fields)}: "
                    "pass dataset.yaml's 'fields'"
                )
            meta = fields[name]
            kind = meta.get("kind", "scalar")
            a = _to_numpy(arr).astype(np.float32, copy=False)
            comps = [a] if kind == "scalar" else [a[..., i] for i in range(a.shape[-1])]
            if kind == "vector" and a.shape[-1] != 2:
                raise ValueError(f"vector field {name!r} has {a.shape[-1]} components: expected 2 (u east, v north)")
            names = variable_names(name, kind, tuple(meta.get("components", ("u", "v"))))
            for i, (var, comp) in enumerate(zip(names, comps)):
                if list(comp.shape[:n_lead_axes]) != expected or tuple(comp.shape[-2:]) != grid.shape:
                    raise ValueError(
                        f"field {name!r} has shape {tuple(a.shape)}: expected ({', '.join(lead_dims)}) = "
                        f"{tuple(expected)} "
                        f"followed by [level,] (nlat, nlon) = {grid.shape}"
                    )
                extra = comp.ndim - n_lead_axes - 2
                if extra == 1 and levels is None:
                    raise ValueError(f"field {name!r} has a level axis: pass levels (hPa)")
                if extra not in (0, 1):
                    raise ValueError(f"field {name!r} has shape {tuple(a.shape)} with unexpected extra axes")
                dims = lead_dims + (["level"] if extra == 1 else []) + ["lat", "lon"]
                cf = cf_attributes(dataset, name, None if kind == "scalar" else i)
                long_name = cf.get("long_name") or (
                    meta.get("long_name", name)
                    if kind == "scalar"
                    else f"{('eastward', 'northward')[i]} component of {meta.get('long_name', name)}"
                )
                var_attrs = {
                    "units": str(meta.get("units", "1")),
                    "long_name": long_name + (" (ground truth)" if suffix else ""),
                }
                if "standard_name" in cf:
                    var_attrs["standard_name"] = cf["standard_name"]
                comp = comp if wet is None else np.where(wet, comp, np.float32(np.nan))
                data_vars[var + suffix] = (dims, np.ascontiguousarray(comp[..., ::-1, :]), var_attrs)

    return data_vars


def _global_attrs(grid: SphereGrid, attrs) -> dict:
    """CF-1.8 global attributes: title, grid, source, our comment on the axes; ``attrs`` added as plain values."""
    global_attrs = {
        "Conventions": "CF-1.8",
        "title": "Dandelion forecasts",
        "grid": grid.grid,
        "nlat": grid.nlat,
        "nlon": grid.nlon,
        "comment": (
            "lat ascending (the model grid stores rows north first); init_time epoch 2000-01-01 stands for the "
            "trajectory start"
        ),
    }
    global_attrs["source"] = f"dandelion {__version__}"
    for k, v in (attrs or {}).items():
        global_attrs[k] = (
            v if isinstance(v, (str, int, float, np.integer, np.floating)) and not isinstance(v, bool) else str(v)
        )
    return global_attrs


def export_forecasts(forecast: dict, path, *, overwrite: bool = False, **kwargs) -> Path:
    """:func:`forecasts_to_xarray` then :func:`write_netcdf`; returns the written path.

    ``kwargs`` are those of :func:`forecasts_to_xarray` (grid, fields, init_time, lead_time,
    time_units, trajectory, levels, truth, attrs).

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is false (checked before any work).
    """
    if Path(path).exists() and not overwrite:
        raise FileExistsError(f"{path} exists: choose another path or pass overwrite=true to replace it")
    return write_netcdf(forecasts_to_xarray(forecast, **kwargs), path, overwrite=overwrite)


def to_xarray(fc: Forecast, include_truth: bool = False) -> xr.Dataset:
    """A :class:`dandelion.forecast.Forecast` as a CF-annotated :class:`xarray.Dataset` (:func:`forecasts_to_xarray`).

    Raises
    ------
    ValueError
        If ``include_truth`` but the forecast holds no truth (roll out with ``keep_truth=True``).
    """
    if include_truth and fc.truth is None:
        raise ValueError("the forecast holds no truth: roll out with keep_truth=True")
    return forecasts_to_xarray(
        fc.fields,
        grid=fc.grid,
        fields=fc.fields_meta,
        init_time=fc.init_time,
        lead_time=fc.lead_time,
        time_units=fc.time_units,
        trajectory=fc.trajectory,
        truth=fc.truth if include_truth else None,
        attrs=fc.attrs,
        levels=getattr(fc, "levels", None),
        wet=getattr(fc, "wet", None),
    )


def write_forecast(
    fc: Forecast,
    path,
    overwrite: bool = False,
    include_truth: bool = False,
    format: str = "netcdf",
    convention: str = "cf",
    chunks: dict | None = None,
) -> Path:
    """Write a :class:`dandelion.forecast.Forecast` to a netCDF4 file or a Zarr store (atomic).

    ``format`` is ``"netcdf"`` (default) or ``"zarr"``; ``convention`` ``"cf"`` (default names) or ``"wb2"``
    (WeatherBench 2 names); ``chunks`` sets Zarr chunk sizes per dimension (default one map per chunk).
    See :func:`write_forecasts`.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is false.
    ValueError
        For an unknown format or convention.
    """
    if Path(path).exists() and not overwrite:
        raise FileExistsError(f"{path} exists: choose another path or pass overwrite=true to replace it")
    return write_forecasts(
        to_xarray(fc, include_truth), path, format=format, convention=convention, overwrite=overwrite, chunks=chunks
    )
