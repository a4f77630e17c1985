"""The quickstart runs end to end in its reduced form (issue 5: it runs in CI so that it cannot rot)."""

import json
from pathlib import Path

import numpy as np
import xarray as xr

from dandelion.benchmarks.quickstart import compose_quickstart, quickstart


def test_quickstart_config_is_the_documented_default():
    cfg = compose_quickstart(["quickstart.output_dir=qs"])
    assert (cfg.dataset.name, cfg.dataset.nlat, cfg.dataset.nlon) == ("galewsky", 32, 64)
    assert list(cfg.quickstart.models) == ["dandelion", "sfno"] and cfg.quickstart.preset == "tiny"
    assert cfg.dataset.path == "qs/data"
    fast = compose_quickstart(["quickstart.output_dir=qs"], fast=True)
    assert fast.quickstart.fast and fast.dataset.nlat < cfg.dataset.nlat


def test_quickstart_fast_end_to_end(tmp_path):
    """Reduced form: tiny Galewsky data, two models trained for two batches, rolled out, exported, tabulated."""
    out = tmp_path / "qs"
    summary = quickstart(compose_quickstart([f"quickstart.output_dir={out}"], fast=True))
    assert [r["model"] for r in summary["rows"]] == ["dandelion", "sfno"]
    for r in summary["rows"]:
        assert np.isfinite(r["next"]) and np.isfinite(r["mean"]) and r["next"] > 0
    assert "| dandelion" in summary["table"] and "VRMSE next" in summary["table"]
    for name, nc in summary["netcdf"].items():
        with xr.open_dataset(nc) as ds:
            assert {"h", "u", "v", "h_truth"} <= set(ds.data_vars)
            assert np.all(np.diff(ds.lat.values) > 0)
            assert np.isfinite(ds.h.values).all()
    for p in summary["plots"].values():
        assert Path(p).stat().st_size > 1000
    saved = json.loads((out / "quickstart.json").read_text())
    assert saved["rows"][0]["model"] == "dandelion"
    assert (out / "results.md").read_text().count("|") > 10

