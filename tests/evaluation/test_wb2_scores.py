"""WeatherBench 2's score definitions in the rollout evaluation, checked against ``scores`` on an exported forecast.

``rmse_wb2`` (:mod:`dandelion.evaluation.definitions`) is ``sqrt((1/N) sum_i <(p_i - t_i)^2>)`` over the ``N``
forecasts (every initial time of every trajectory), ``<.>`` the area-weighted mean with the grid's quadrature
weights ``w`` normalised to sum 1. ``scores.continuous.rmse(fcst, obs, reduce_dims=[trajectory, time, latitude,
longitude], weights=W)`` is ``sqrt(sum_{n,i,j} W_i e_nij^2 / sum_{n,i,j} W_i)`` (xarray's weighted mean over all
reduced dimensions at once, weights broadcast over time and longitude). With ``W`` depending on latitude only and
no missing value, ``sum_{n,i,j} W_i = N nlon sum_i W_i``, the same for every forecast, so the ratio is
``(1/N) sum_n (sum_ij W_i e_nij^2 / (nlon sum_i W_i)) = (1/N) sum_n <e_n^2>``: WeatherBench 2's RMSE, whatever the
scale of ``W`` (``scores`` normalises the weights itself). ``W`` is our quadrature weight per latitude
(:attr:`SphereGrid.weights`), put in the file's ascending latitude order.
"""

import numpy as np
import pytest
import tiny_model  # noqa: F401 - registers "_pointwise_test"
import xarray as xr
from tiny_checkpoint import pointwise_checkpoint

from dandelion import api
from dandelion.benchmarks.grid.cells import metric_summaries
from dandelion.cli.common import compose_config as compose
from dandelion.cli.rollout import _definitions
from dandelion.evaluation.scoring import evaluate
from dandelion.export.forecasts import write_forecast

N_STEPS = 3
REL = 1e-6


def _setup(make_tiny_dataset, tmp_path, grid="equiangular"):
    splits = {"train": [0, 1], "valid": [2], "test": [3, 4]}
    path = make_tiny_dataset(tmp_path / "data", nlat=9, nlon=16, grid=grid, n_frames=12, splits=splits)
    data = api.open_dataset(path, "test", n_in=4)
    model = api.load_model(pointwise_checkpoint(path, tmp_path / "run" / "best.pt"), dataset=data)
    return data, model


@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
def test_rmse_wb2_equals_scores_on_the_exported_forecast(make_tiny_dataset, tmp_path, grid):
    continuous = pytest.importorskip("scores.continuous")
    data, model = _setup(make_tiny_dataset, tmp_path, grid)
    ev = evaluate(model, data, n_steps=N_STEPS, spectra_leads=[], keep_forecasts=True, sample=False)
    res = ev["results"]
    assert res["n_forecasts"] == 2 * (12 - 4 - N_STEPS + 1)
    store = write_forecast(ev["forecast"], tmp_path / "f.zarr", include_truth=True, format="zarr", convention="wb2")
    with xr.open_zarr(store) as ds:
        assert ds.h.dims == ("trajectory", "time", "prediction_timedelta", "latitude", "longitude")
        lat = np.degrees(data.grid.lat.numpy())[::-1]  # the file's latitude is ascending, the grid's north first
        np.testing.assert_allclose(ds.latitude.values, lat, atol=1e-9)
        w = xr.DataArray(data.grid.weights.numpy()[::-1, 0], coords={"latitude": ds.latitude}, dims="latitude")
        dims = ["trajectory", "time", "latitude", "longitude"]
        worst = 0.0
        for var in ("h", "u", "v"):
            want = continuous.rmse(ds[var], ds[f"{var}_truth"], reduce_dims=dims, weights=w).values
            got = np.asarray(res["metrics"]["rmse_wb2"][var])
            np.testing.assert_allclose(got, want, rtol=REL, err_msg=var)
            worst = max(worst, float(np.max(np.abs(got / want - 1))))
        # the vector field's frame-independent RMSE: sqrt of the summed component MSEs (WB2's wind vector RMSE)
        mse = [continuous.mse(ds[c], ds[f"{c}_truth"], reduce_dims=dims, weights=w).values for c in ("u", "v")]
        np.testing.assert_allclose(res["metrics"]["rmse_wb2"]["velocity"], np.sqrt(mse[0] + mse[1]), rtol=REL)
    print(f"largest relative difference from scores ({grid}): {worst:.2e}")
    assert res["summary"]["next_step"]["rmse_wb2"]["h"] == res["metrics"]["rmse_wb2"]["h"][0]
    assert res["metrics"]["acc_wb2"] == res["metrics"]["acc"]  # WB2's ACC is our aggregation: the mean over times
    assert set(res["definitions"]) == {"dandelion", "wb2"}


def test_rmse_wb2_is_at_least_the_mean_rmse_with_equality_for_one_forecast(make_tiny_dataset, tmp_path):
    data, model = _setup(make_tiny_dataset, tmp_path)
    res = evaluate(model, data, n_steps=N_STEPS, spectra_leads=[], sample=False)["results"]
    assert res["n_forecasts"] > 1
    gap = []
    for var, ours in res["metrics"]["rmse"].items():
        wb2 = np.asarray(res["metrics"]["rmse_wb2"][var])
        assert np.all(wb2 >= np.asarray(ours) * (1 - 1e-12)), var
        gap.append(np.max(wb2 / np.asarray(ours) - 1))
    assert max(gap) > 1e-6  # forecasts of different RMSE: strictly above
    one = evaluate(model, data, n_steps=N_STEPS, trajectories=[3], max_inits=1, spectra_leads=[], sample=False)
    one = one["results"]
    assert one["n_forecasts"] == 1
    for var, ours in one["metrics"]["rmse"].items():
        np.testing.assert_allclose(one["metrics"]["rmse_wb2"][var], ours, rtol=1e-12, err_msg=var)


def test_definitions_select_the_scores(make_tiny_dataset, tmp_path):
    data, model = _setup(make_tiny_dataset, tmp_path)
    kw = dict(n_steps=2, spectra_leads=[], sample=False, max_inits=2)
    both = evaluate(model, data, **kw)["results"]
    ours = evaluate(model, data, definitions=("dandelion",), **kw)["results"]
    wb2 = evaluate(model, data, definitions="wb2", **kw)["results"]
    assert {"rmse", "acc", "rmse_wb2", "acc_wb2", "vrmse", "vrmse_well"} <= set(both["metrics"])
    assert "rmse_wb2" not in ours["metrics"] and ours["metrics"] == {
        m: c for m, c in both["metrics"].items() if not m.endswith("_wb2")
    }
    assert {"rmse", "acc"}.isdisjoint(wb2["metrics"]) and wb2["metrics"]["rmse_wb2"] == both["metrics"]["rmse_wb2"]
    assert wb2["metrics"]["vrmse"] == both["metrics"]["vrmse"]  # no WB2 counterpart: always reported
    assert list(ours["definitions"]) == ["dandelion"] and list(wb2["definitions"]) == ["wb2"]
    assert "sqrt(mean_i <(p_i - t_i)^2>)" in wb2["definitions"]["wb2"]
    with pytest.raises(ValueError, match="definitions"):
        evaluate(model, data, definitions=("weatherbench",), **kw)
    kept = metric_summaries(both)  # what a benchmark cell keeps: our RMSE and WB2's
    assert kept["next_step"]["rmse_wb2"] == both["summary"]["next_step"]["rmse_wb2"]


def test_rollout_config_passes_definitions():
    base = ["checkpoint=x.pt", "dataset.path=d"]
    assert _definitions(compose("rollout", base)) == ("dandelion", "wb2")
    assert _definitions(compose("rollout", base + ["definitions=[wb2]"])) == ("wb2",)
    assert _definitions(compose("rollout", base + ["definitions=dandelion"])) == ("dandelion",)
    with pytest.raises(ValueError, match="definitions"):
        _definitions(compose("rollout", base + ["definitions=[]"]))
