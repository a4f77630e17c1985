"""Export of forecasts: xarray Datasets with CF metadata, written to netCDF4 or Zarr
(:mod:`dandelion.export.forecasts`).

* :func:`to_xarray`: a :class:`dandelion.forecast.Forecast` as a CF-annotated :class:`xarray.Dataset`, dims
  ``(trajectory, init_time, lead_time, [level,] lat, lon)`` (with the truth when ``include_truth=True``);
* :func:`write_forecast`: ``write_forecast(fc, path, format="netcdf"|"zarr", convention="cf"|"wb2", ...)``, written
  atomically, refusing to overwrite unless ``overwrite=True``;
* :func:`forecasts_to_xarray`, :func:`write_forecasts`, :func:`to_convention`: the same from arrays and Datasets;
* :mod:`dandelion.export.cf_names`: the CF standard names of the exported variables.

``dandelion-export`` (:mod:`dandelion.cli.export`) wraps these; nothing here imports hydra or omegaconf.
"""

from dandelion.export.forecasts import forecasts_to_xarray, to_convention, to_xarray, write_forecast, write_forecasts

__all__ = ["to_xarray", "write_forecast", "forecasts_to_xarray", "write_forecasts", "to_convention"]
