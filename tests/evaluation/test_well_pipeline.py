"""A dataset folder in the Well's layout (PlanetSWE's conventions, written by hand) through dandelion-train,
dandelion-rollout and dandelion-export (Zarr, WeatherBench-2 names)."""

import json
import math

import numpy as np
import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
import tiny_well
import xarray as xr
from hydra import compose, initialize_config_module
from train_config import train_cfg

from dandelion.cli.export import export
from dandelion.cli.rollout import rollout
from dandelion.cli.train import train
from dandelion.datasets.well import STATS_CACHE, UnsupportedGridError
from dandelion.sphere import SphereGrid

NLAT, NLON, T = 12, 24, 12


def _compose(name, overrides):
    with initialize_config_module(config_module="dandelion.configs", version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


def test_well_layout_folder_trains_rolls_out_and_exports(tmp_path):
    rows = SphereGrid(NLAT, NLON, "legendre-gauss").colat.numpy()[::-1].copy()  # stored south first, as PlanetSWE
    root = tiny_well.make_well_folder(tmp_path / "planetswe", rows, NLON, n_frames=T)
    result = train(train_cfg(root, tmp_path / "run", "trainer.max_steps=3", "trainer.finetune.epochs=0"))
    assert result["step"] == 3 and math.isfinite(result["val_loss"])
    assert (root / STATS_CACHE).is_file()  # our area-weighted statistics, computed once from data/train

    out = tmp_path / "roll"
    r = rollout(
        _compose(
            "rollout",
            [
                f"checkpoint={result['best']}",
                f"dataset.path={root}",
                "n_steps=2",
                f"output_dir={out}",
                "progress=false",
                "spectra_leads=[1]",
            ],
        )
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert np.isfinite(metrics["summary"]["next_step"]["vrmse"]["height"])
    assert r["results"]["metrics"]["vrmse"]["height"][0] == pytest.approx(
        metrics["summary"]["next_step"]["vrmse"]["height"]
    )

    store = tmp_path / "pswe.zarr"
    e = export(
        _compose(
            "export",
            [
                f"checkpoint={result['best']}",
                f"dataset.path={root}",
                f"output={store}",
                "n_steps=2",
                "max_inits=2",
                "include_truth=true",
                "format=zarr",
                "convention=wb2",
            ],
        )
    )
    assert e["n_forecasts"] == 2  # one test trajectory, two initial frames
    with xr.open_zarr(store) as ds:
        assert ds.height.dims == ("trajectory", "time", "prediction_timedelta", "latitude", "longitude")
        assert ds.prediction_timedelta.values.tolist() == [
            tiny_well.DT,
            2 * tiny_well.DT,
        ]  # the Well's hourly step, non-dimensional
        # the truth written is the test trajectory's analytic field at latitude ascending, with u east and v north
        colat = np.deg2rad(90.0 - ds.latitude.values)
        h, u, v = tiny_well.analytic(colat, np.deg2rad(ds.longitude.values), 4, T)
        frame = int(round(float(ds.time.values[0] + ds.prediction_timedelta.values[0]) / tiny_well.DT))
        np.testing.assert_allclose(ds.height_truth.values[0, 0, 0], h[frame], rtol=1e-5)
        np.testing.assert_allclose(ds.u_truth.values[0, 0, 0], u[frame], atol=1e-3)
        np.testing.assert_allclose(ds.v_truth.values[0, 0, 0], v[frame], atol=1e-3)
        assert np.isfinite(ds.height.values).all()


def test_unsupported_latitudes_stop_training_with_the_remedy(tmp_path):
    root = tiny_well.make_well_folder(tmp_path / "planetswe", tiny_well.planetswe_rows(NLAT), NLON, n_frames=T)
    with pytest.raises(UnsupportedGridError, match="dandelion-well-resample"):
        train(train_cfg(root, tmp_path / "run", "trainer.max_steps=1"))
