"""Masked (ocean) datasets through metrics, loss, training, rollout and export (tests/helpers/tiny_dataset.py,
masked=True)."""

import json

import matplotlib.image as mpimg
import netCDF4
import numpy as np
import pytest
import tiny_model  # noqa: F401  (registers the tiny pointwise test model)
import torch
import xarray as xr
import yaml
from tiny_dataset import synthetic_wet_fraction
from train_config import train_cfg

from dandelion import api
from dandelion import metrics as M
from dandelion.checkpoint import load_checkpoint
from dandelion.cli.common import compose_config as compose
from dandelion.cli.export import export
from dandelion.cli.rollout import rollout
from dandelion.cli.train import build_trainer
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.evaluation.scoring import evaluate
from dandelion.export.forecasts import forecasts_to_xarray, write_netcdf
from dandelion.forecast import forcing_channels
from dandelion.forecast import rollout as rollout_steps
from dandelion.reporting.figures import LAND_GREY, plot_maps
from dandelion.sphere import SphereGrid

GRID = SphereGrid(9, 16, "equiangular")
WET = torch.from_numpy(synthetic_wet_fraction(GRID) >= 0.5)


def _fields(seed):
    g = torch.Generator().manual_seed(seed)
    return {
        "h": 1000 + 30 * torch.randn(3, 2, *GRID.shape, generator=g, dtype=torch.float64),
        "velocity": 10 * torch.randn(3, 2, *GRID.shape, 2, generator=g, dtype=torch.float64),
    }


def _garbage_on_land(fields, seed, nan=False):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for k, v in fields.items():
        junk = torch.full_like(v, float("nan")) if nan else 1e6 * torch.randn(v.shape, generator=g, dtype=v.dtype)
        land = ~WET if v.ndim == 4 else (~WET)[..., None]
        out[k] = torch.where(land, junk, v)
    return out


@pytest.mark.parametrize("nan", [False, True])
def test_values_on_land_change_no_metric_spectrum_or_loss(nan):
    pred, true = _fields(0), _fields(1)
    clim = {"h": 1000.0}
    ref = M.field_metrics(pred, true, GRID, clim, spectra=True, wet=WET)
    bad = M.field_metrics(
        _garbage_on_land(pred, 2, nan), _garbage_on_land(true, 3, nan), GRID, clim, spectra=True, wet=WET
    )
    assert set(ref) >= {"rmse", "vrmse", "vrmse_well", "acc", "spectrum_pred", "spectrum_true"}
    for m in ref:
        for var in ref[m]:
            assert torch.isfinite(ref[m][var]).all(), (m, var)
            torch.testing.assert_close(bad[m][var], ref[m][var], rtol=1e-12, atol=0, msg=f"{m} {var}")
    # ... but they do change the unmasked metrics: the test can fail
    assert not torch.allclose(
        M.field_metrics(_garbage_on_land(pred, 2), true, GRID)["rmse"]["h"],
        M.field_metrics(pred, true, GRID)["rmse"]["h"],
    )
    w = M.loss_weights(GRID, WET).float()
    p, t = torch.randn(4, 3, *GRID.shape), torch.randn(4, 3, *GRID.shape)
    jp = torch.where(WET, p, torch.full_like(p, float("nan") if nan else 1e6))
    assert M.area_weighted_mse(jp, t, w, WET) == M.area_weighted_mse(p, t, w, WET)


def test_constant_error_on_wet_points_gives_that_rmse():
    true = _fields(4)
    c = 0.37
    pred = _garbage_on_land(
        {"h": true["h"] + c, "velocity": true["velocity"] + torch.tensor([c, 0.0], dtype=torch.float64)}, 5
    )
    out = M.field_metrics(pred, true, GRID, wet=WET)
    for var in ("h", "u", "velocity"):
        torch.testing.assert_close(out["rmse"][var], torch.full_like(out["rmse"][var], c), rtol=1e-12, atol=0)
    torch.testing.assert_close(out["rmse"]["v"], torch.zeros_like(out["rmse"]["v"]), rtol=0, atol=1e-12)
    # the training loss is the same mean: the square of that constant
    w = M.loss_weights(GRID, WET)
    assert M.area_weighted_mse(pred["h"], true["h"], w, WET).item() == pytest.approx(c**2, rel=1e-12)


def test_masked_well_vrmse_is_the_plain_statistic_over_wet_points():
    pred, true = _fields(6), _fields(7)
    got = M.vrmse(pred["h"], true["h"], None, wet=WET)
    p, t = pred["h"][..., WET], true["h"][..., WET]  # (..., n_wet)
    expected = torch.sqrt(((p - t) ** 2).mean(-1) / (t.std(-1) ** 2 + M.WELL_EPS))
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=0)


def test_all_wet_mask_equals_no_mask():
    pred, true = _fields(8), _fields(9)
    a = M.field_metrics(pred, true, GRID, {"h": 1000.0}, spectra=True)
    b = M.field_metrics(pred, true, GRID, {"h": 1000.0}, spectra=True, wet=torch.ones(GRID.shape, dtype=torch.bool))
    for m in a:
        for var in a[m]:
            torch.testing.assert_close(b[m][var], a[m][var], rtol=1e-12, atol=1e-12)


def test_bad_mask_is_refused():
    pred, true = _fields(0), _fields(1)
    with pytest.raises(ValueError, match="bool"):
        M.field_metrics(pred, true, GRID, wet=WET.float())
    with pytest.raises(ValueError, match="no wet point"):
        M.field_metrics(pred, true, GRID, wet=torch.zeros(GRID.shape, dtype=torch.bool))


def test_exported_netcdf_has_land_missing_and_where_land_mask_recovers_the_wet_field(tmp_path):
    h = 1000 + np.random.default_rng(0).normal(size=(2, 3, *GRID.shape)).astype(np.float32)
    ds = forecasts_to_xarray(
        {"h": h},
        grid=GRID,
        fields={"h": {"kind": "scalar", "units": "m"}},
        init_time=[0.0, 3600.0],
        lead_time=[3600.0, 7200.0, 10800.0],
        wet=WET.numpy(),
    )
    path = write_netcdf(ds, tmp_path / "f.nc")
    with netCDF4.Dataset(path) as raw:  # the file itself: CF _FillValue NaN of the variable's float32 type
        assert (
            raw["h"].dtype == np.float32 and np.isnan(raw["h"]._FillValue) and raw["h"]._FillValue.dtype == np.float32
        )
    with xr.open_dataset(path) as back:
        wet_north_first = back.land_mask.values[::-1].astype(bool)
        np.testing.assert_array_equal(wet_north_first, WET.numpy())
        assert back.land_mask.attrs["standard_name"] == "sea_binary_mask"
        vals = back.h.values[..., ::-1, :]  # back to rows north first
        assert np.isnan(vals[..., ~WET.numpy()]).all()
        np.testing.assert_array_equal(vals[..., WET.numpy()], h[..., WET.numpy()])
        rec = back.where(back.land_mask).h.values[..., ::-1, :]
        np.testing.assert_array_equal(rec[..., WET.numpy()], h[..., WET.numpy()])
        assert np.isnan(rec[..., ~WET.numpy()]).all()


def test_unmasked_export_is_unchanged(tmp_path):
    h = np.ones((1, 1, *GRID.shape), dtype=np.float32)
    ds = forecasts_to_xarray(
        {"h": h}, grid=GRID, fields={"h": {"kind": "scalar", "units": "m"}}, init_time=[0.0], lead_time=[1.0]
    )
    assert "land_mask" not in ds.variables
    with netCDF4.Dataset(write_netcdf(ds, tmp_path / "u.nc")) as raw:
        assert "_FillValue" not in raw["h"].ncattrs()


def test_masked_training_rollout_export_end_to_end(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data", masked=True, n_frames=8)
    ds = WindowDataset(data, "test", n_in=2)
    torch.testing.assert_close(ds.wet, WET, rtol=0, atol=0)
    result = build_trainer(train_cfg(data, tmp_path / "run", "trainer.max_steps=3")).fit()
    # the model saw the mask as one more input channel, recorded in the checkpoint; land stays fixed in a rollout
    ckpt = load_checkpoint(result["last"])
    model = api.load_model(result["last"], dataset=ds)
    assert ckpt["extra"]["model_spec"]["in_channels"] == model.n_in * ds.layout.n_channels + 1
    assert torch.equal(ckpt["extra"]["wet"], WET)
    fc = api.rollout(model, ds, n_steps=3)
    raw = ds.read_frames(0, 0, ds.n_frames[0])
    land = ~WET.numpy()
    for a, i in enumerate(fc.init_index):
        for k in range(3):
            np.testing.assert_allclose(fc.fields["h"][0, a, k][land], raw["h"][i][land], rtol=1e-6)
            np.testing.assert_allclose(
                fc.fields["velocity"][0, a, k][land], raw["velocity"][i][land], rtol=1e-5, atol=1e-4
            )
        assert not np.allclose(fc.fields["h"][0, a, 0][~land], raw["h"][i][~land])  # wet points are predicted
    unmasked = make_tiny_dataset(tmp_path / "plain", n_frames=8)
    with pytest.raises(ValueError, match="land mask"):
        api.load_model(result["last"], dataset=WindowDataset(unmasked, "test", n_in=2))
    out = tmp_path / "roll"
    rollout(
        compose(
            "rollout",
            [
                f"checkpoint={result['last']}",
                "dataset=galewsky",
                f"dataset.path={data}",
                "n_steps=2",
                f"output_dir={out}",
                "spectra_leads=[1]",
                "progress=false",
                "plots=true",
            ],
        )
    )
    metrics = json.loads((out / "metrics.json").read_text())["metrics"]
    assert all(np.isfinite(v).all() for m in metrics.values() for v in m.values())
    with xr.open_dataset(out / "sample_forecast.nc") as s:
        assert (
            np.isnan(s.h.values[..., ~WET.numpy()[::-1]]).all()
            and np.isfinite(s.h.values[..., WET.numpy()[::-1]]).all()
        )
    nc = tmp_path / "exp.nc"
    export(
        compose(
            "export",
            [f"checkpoint={result['last']}", f"dataset.path={data}", f"output={nc}", "n_steps=2", "max_inits=1"],
        )
    )
    with xr.open_dataset(nc) as e:
        assert int(e.land_mask.sum()) == int(WET.sum())
        assert np.isnan(e.u.values[..., ~WET.numpy()[::-1]]).all()


def test_maps_grey_out_land(tmp_path):
    g = SphereGrid(17, 32, "equiangular")
    wet = synthetic_wet_fraction(g) >= 0.5
    h = np.cos(g.lat.numpy())[:, None] * np.sin(2 * g.lon.numpy())[None]
    h = np.broadcast_to(h, (1, 1, *g.shape)).astype(np.float32)
    grey = []
    for mask in (None, wet):
        ds = forecasts_to_xarray(
            {"h": h + 0.1},
            truth={"h": h},
            grid=g,
            fields={"h": {"kind": "scalar", "units": "m"}},
            init_time=[0.0],
            lead_time=[3600.0],
            wet=mask,
        )
        rgb = mpimg.imread(plot_maps(ds, tmp_path / f"maps_{mask is None}.png", leads=(1,)))[..., :3]
        grey.append(int((np.abs(rgb - float(LAND_GREY)) < 0.02).all(-1).sum()))
    assert (
        grey[1] > grey[0] + 0.05 * rgb.shape[0] * rgb.shape[1]
    )  # land area shows grey (anti-aliased text has a few grey pixels)


def test_rollout_takes_forcing_channels_from_the_truth():
    class Noise(torch.nn.Module):
        def forward(self, x):
            return torch.randn(x.shape[0], 3, *x.shape[-2:], dtype=x.dtype)

    x, truth = torch.randn(2, 6, *GRID.shape), torch.randn(2, 4, 3, *GRID.shape)
    out = rollout_steps(Noise(), x, 4, 3, forcing=(torch.tensor([1]), truth))
    torch.testing.assert_close(out[:, :, 1], truth[:, :, 1], rtol=0, atol=0)
    assert not torch.allclose(out[:, :, 0], truth[:, :, 0])


def test_forcing_fields_are_inputs_not_scored(make_tiny_dataset, tmp_path):
    """A dataset whose dataset.yaml lists ``h`` as a forcing field: training and rollout take it from the truth, no
    metric scores it."""
    data = make_tiny_dataset(tmp_path / "data", masked=True, n_frames=8)
    meta = yaml.safe_load((data / "dataset.yaml").read_text())
    (data / "dataset.yaml").write_text(yaml.safe_dump({**meta, "forcing_fields": ["h"]}))
    result = build_trainer(train_cfg(data, tmp_path / "run", "trainer.max_steps=2")).fit()
    ds = WindowDataset(data, "test", n_in=2)
    model = api.load_model(result["last"], dataset=ds)
    fc = api.rollout(model, ds, n_steps=3)
    np.testing.assert_allclose(fc.fields["h"], fc.truth["h"], rtol=1e-6)
    res = evaluate(model, ds, n_steps=3, spectra_leads=[1])["results"]
    assert (
        "h" not in res["metrics"]["vrmse"]
        and "u" in res["metrics"]["vrmse"]
        and "h" not in res["spectra"]["pred"]
        and "u" in res["spectra"]["pred"]
    )
    with pytest.raises(ValueError, match="forcing_fields"):
        forcing_channels(ds.layout, {"forcing_fields": ["nope"]})
