"""Forecast export to CF netCDF."""

import numpy as np
import pytest
import xarray as xr

from dandelion.export.forecasts import export_forecasts, forecasts_to_xarray
from dandelion.sphere import SphereGrid

FIELDS = {
    "h": {"kind": "scalar", "units": "m", "long_name": "height anomaly"},
    "velocity": {"kind": "vector", "units": "m s-1", "long_name": "velocity", "components": ["u", "v"]},
}


def _forecast(grid, n_traj=2, n_init=3, n_lead=4):
    """h = sin(latitude) * (1 + lead index), u = cos(lat) * traj, v = lon in radians: all positions recognisable."""
    lat = grid.lat.numpy()[:, None]
    lon = grid.lon.numpy()[None, :]
    k = np.arange(1, n_lead + 1)[None, None, :, None, None]
    h = np.sin(lat) * k * np.ones((n_traj, n_init, 1, 1, grid.nlon))
    u = (
        np.cos(lat)
        * np.ones_like(lon)
        * np.arange(1, n_traj + 1)[:, None, None, None, None]
        * np.ones((1, n_init, n_lead, 1, 1))
    )
    v = np.broadcast_to(lon, h.shape)
    return {"h": h.astype(np.float32), "velocity": np.stack([u, v], -1).astype(np.float32)}


def _write(tmp_path, grid, time_units="s", name="f.nc", **kw):
    dt = 14400.0 if time_units == "s" else 0.5
    times = np.arange(20) * dt  # the truth's frame times
    init_idx = np.array([3, 5, 7])
    kw.setdefault("overwrite", False)
    path = export_forecasts(
        _forecast(grid),
        tmp_path / name,
        grid=grid,
        fields=FIELDS,
        init_time=times[init_idx],
        lead_time=dt * np.arange(1, 5),
        time_units=time_units,
        trajectory=[11, 42],
        **kw,
    )
    return path, times, init_idx


@pytest.mark.parametrize("nlat,nlon,grid", [(9, 16, "equiangular"), (8, 16, "legendre-gauss")])
def test_sin_lat_positive_in_north_and_lat_ascending(tmp_path, nlat, nlon, grid):
    sg = SphereGrid(nlat, nlon, grid)
    path, _, _ = _write(tmp_path, sg)
    with xr.open_dataset(path) as ds:
        assert ds.h.dims == ("trajectory", "init_time", "lead_time", "lat", "lon")
        lat = ds.lat.values
        assert np.all(np.diff(lat) > 0)
        assert ds.lat.attrs["units"] == "degrees_north" and ds.lon.attrs["units"] == "degrees_east"
        assert ds.lon.values.min() >= 0 and ds.lon.values.max() < 360
        h = ds.h.isel(trajectory=0, init_time=0, lead_time=0)
        # a field equal to sin(latitude): positive at 60N, negative at 60S, and equal to sin(lat) everywhere
        assert float(h.interp(lat=60.0).mean()) > 0.5
        assert float(h.interp(lat=-60.0).mean()) < -0.5
        np.testing.assert_allclose(h.values, np.sin(np.deg2rad(lat))[:, None] * np.ones(nlon), atol=1e-6)
        # u and v separate, with eastward/northward long names and units
        assert ds.u.attrs["long_name"].startswith("eastward") and ds.v.attrs["long_name"].startswith("northward")
        for var in ds.data_vars.values():
            assert var.attrs["units"] and var.attrs["long_name"]
        np.testing.assert_allclose(
            ds.v.isel(trajectory=0, init_time=0, lead_time=0, lat=0).values, np.deg2rad(ds.lon.values), atol=1e-6
        )


def test_valid_times_and_cf_time_attributes(tmp_path):
    sg = SphereGrid(9, 16)
    path, times, init_idx = _write(tmp_path, sg)
    with xr.open_dataset(path) as ds:
        assert ds.lead_time.dtype.kind == "m" and ds.lead_time.attrs["standard_name"] == "forecast_period"
        assert ds.init_time.attrs["standard_name"] == "forecast_reference_time"
        valid = ds.init_time + ds.lead_time  # datetime64
        seconds = (valid - np.datetime64("2000-01-01")).values / np.timedelta64(1, "s")
        expected = times[init_idx[:, None] + np.arange(1, 5)[None, :]]
        np.testing.assert_array_equal(seconds, expected)
        np.testing.assert_array_equal(ds.valid_time.values, valid.values)
    with xr.open_dataset(path, decode_times=False, decode_timedelta=False) as raw:
        assert raw.init_time.attrs["units"].startswith("hours since 2000-01-01")
        assert raw.lead_time.attrs["units"] == "hours"


def test_nondimensional_time_is_float_with_units(tmp_path):
    sg = SphereGrid(9, 16)
    path, times, init_idx = _write(tmp_path, sg, time_units="nondimensional")
    with xr.open_dataset(path) as ds:
        assert ds.lead_time.dtype.kind == "f" and ds.lead_time.attrs["units"] == "1"
        np.testing.assert_allclose(
            (ds.init_time + ds.lead_time).values, times[init_idx[:, None] + np.arange(1, 5)[None, :]]
        )


def test_refuses_overwrite_and_no_fill_values(tmp_path):
    sg = SphereGrid(9, 16)
    path, _, _ = _write(tmp_path, sg)
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite"):
        _write(tmp_path, sg)
    assert path.read_bytes() == before
    _write(tmp_path, sg, overwrite=True)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind
    with xr.open_dataset(path, mask_and_scale=False) as raw:
        for name, var in raw.variables.items():
            assert (
                "_FillValue" not in var.attrs and "_FillValue" not in var.encoding or var.encoding["_FillValue"] is None
            ), name
    with xr.open_dataset(path) as ds:
        fc = _forecast(sg)
        for name in ("h", "u", "v"):
            assert not np.isnan(ds[name].values).any()
        np.testing.assert_array_equal(ds.h.values[..., ::-1, :], fc["h"])
        assert ds.h.encoding["zlib"] and ds.h.encoding["complevel"] == 4


def test_bad_field_or_shape_raises():
    sg = SphereGrid(9, 16)
    fc = _forecast(sg)
    kw = dict(grid=sg, init_time=[0, 1, 2], lead_time=[1, 2, 3, 4], trajectory=[0, 1])
    with pytest.raises(ValueError, match="not described"):
        forecasts_to_xarray(fc, fields={"h": FIELDS["h"]}, **kw)
    with pytest.raises(ValueError, match="expected"):
        forecasts_to_xarray({"h": fc["h"][:, :2]}, fields=FIELDS, **kw)
