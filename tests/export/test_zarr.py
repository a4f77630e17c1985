"""Zarr export with WeatherBench-2 names: opens with xr.open_zarr and equals the netCDF export."""

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from dandelion.export.forecasts import forecasts_to_xarray, write_forecasts
from dandelion.sphere import SphereGrid

FIELDS = {
    "h": {"kind": "scalar", "units": "m", "long_name": "height anomaly"},
    "velocity": {"kind": "vector", "units": "m s-1", "long_name": "velocity", "components": ["u", "v"]},
}


def _dataset(grid, time_units="s", levels=None):
    """Forecasts whose values encode their position: h = sin(lat) * (lead + 1) + init, u = cos(lat) * traj, v = lon."""
    rng = np.random.default_rng(0)
    n_traj, n_init, n_lead = 2, 3, 4
    lat, lon = grid.lat.numpy()[:, None], grid.lon.numpy()[None, :]
    lead = np.arange(1, n_lead + 1)[None, None, :, None, None]
    init = np.arange(n_init)[None, :, None, None, None]
    h = np.sin(lat) * lead + init + 0 * lon + np.zeros((n_traj, 1, 1, 1, 1))
    u = np.cos(lat) * np.arange(1, n_traj + 1)[:, None, None, None, None] + 0 * h
    v = np.broadcast_to(lon, h.shape) + 0.01 * rng.standard_normal(h.shape)
    fc = {"h": h.astype(np.float32), "velocity": np.stack([u, v], -1).astype(np.float32)}
    dt = 3600.0 if time_units == "s" else 0.25
    return forecasts_to_xarray(
        fc,
        grid=grid,
        fields=FIELDS,
        init_time=dt * np.array([3, 5, 7]),
        lead_time=dt * np.arange(1, 5),
        time_units=time_units,
        trajectory=[4, 9],
    )


@pytest.mark.parametrize("grid", [SphereGrid(9, 16, "equiangular"), SphereGrid(8, 16, "legendre-gauss")])
def test_wb2_zarr_opens_with_wb2_names_and_equals_netcdf(tmp_path, grid):
    ds = _dataset(grid)
    nc = write_forecasts(ds, tmp_path / "f.nc")
    zr = write_forecasts(ds, tmp_path / "f.zarr", format="zarr", convention="wb2")
    with xr.open_dataset(nc) as a, xr.open_zarr(zr) as b:
        # WeatherBench 2 dimensions and coordinates
        assert b.h.dims == ("trajectory", "time", "prediction_timedelta", "latitude", "longitude")
        assert b.u.dims == b.v.dims == b.h.dims
        for name in ("time", "prediction_timedelta", "latitude", "longitude", "valid_time"):
            assert name in b.coords
        assert b.time.dtype.kind == "M" and b.prediction_timedelta.dtype.kind == "m"
        assert np.all(np.diff(b.latitude.values) > 0)
        assert b.longitude.values.min() >= 0 and b.longitude.values.max() < 360
        # one full map per chunk
        assert b.h.encoding["chunks"] == (1, 1, 1, grid.nlat, grid.nlon)
        # the same forecasts as the netCDF export (default names unchanged there)
        assert a.h.dims == ("trajectory", "init_time", "lead_time", "lat", "lon")
        renamed = b.rename(time="init_time", prediction_timedelta="lead_time", latitude="lat", longitude="lon")
        for var in ("h", "u", "v"):
            np.testing.assert_array_equal(renamed[var].values, a[var].values)
        for coord in ("init_time", "lead_time", "lat", "lon", "valid_time", "trajectory"):
            np.testing.assert_array_equal(renamed[coord].values, a[coord].values)
        # valid time = initialisation time + lead
        np.testing.assert_array_equal(b.valid_time.values, (b.time + b.prediction_timedelta).values)


def test_zarr_levels_nondimensional_chunks_and_overwrite(tmp_path):
    grid = SphereGrid(9, 16)
    ds = _dataset(grid, time_units="nondimensional")
    path = write_forecasts(ds, tmp_path / "f.zarr", format="zarr", convention="cf", chunks={"init_time": 3})
    with xr.open_zarr(path) as b:
        assert b.h.encoding["chunks"] == (1, 3, 1, grid.nlat, grid.nlon)
        assert b.init_time.dtype.kind == "f" and b.lead_time.attrs["units"] == "1"
        np.testing.assert_array_equal(b.h.values, ds.h.values)
    with pytest.raises(FileExistsError, match="overwrite"):
        write_forecasts(ds, path, format="zarr")
    write_forecasts(ds.isel(init_time=[0]), path, format="zarr", overwrite=True)
    with xr.open_zarr(path) as b:
        assert b.sizes["init_time"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.zarr"]  # no temporary stores left
    with pytest.raises(ValueError, match="convention"):
        write_forecasts(ds, tmp_path / "g.zarr", format="zarr", convention="weatherbench")
    with pytest.raises(ValueError, match="format"):
        write_forecasts(ds, tmp_path / "g.grib", format="grib")
    with pytest.raises(ValueError, match="dimensions"):
        write_forecasts(ds, tmp_path / "g.zarr", format="zarr", chunks={"time": 2})


def test_a_failed_rename_on_overwrite_keeps_the_old_store(tmp_path, monkeypatch):
    from dandelion.export import writers

    ds = _dataset(SphereGrid(9, 16))
    path = write_forecasts(ds, tmp_path / "f.zarr", format="zarr")
    real_replace, calls = writers.os.replace, []

    def replace(src, dst):
        if Path(dst).parent == tmp_path:  # a whole store (zarr's own renames inside a store pass through)
            calls.append((src, dst))
            if len(calls) == 2:  # the new store onto the final name
                raise OSError("disk gone")
        real_replace(src, dst)

    monkeypatch.setattr(writers.os, "replace", replace)
    with pytest.raises(OSError, match="disk gone"):
        write_forecasts(ds.isel(init_time=[0]), path, format="zarr", overwrite=True)
    monkeypatch.undo()
    assert calls[1][1] == path  # the failure was the rename of the new store onto the final name
    assert path.is_dir(), "the old store was deleted and nothing replaced it"
    with xr.open_zarr(path) as b:  # the old store, whole
        assert b.sizes["init_time"] == 3
        np.testing.assert_array_equal(b.h.values, ds.h.values)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.zarr"]
