"""The quickstart runs end to end in its reduced form (it runs in CI so that it cannot rot)."""

import json
from pathlib import Path

import numpy as np
import xarray as xr

from dandelion.cli.quickstart import compose_quickstart, quickstart


def test_quickstart_config_is_the_documented_default():
    cfg = compose_quickstart(["quickstart.output_dir=qs"])
    assert (cfg.dataset.name, cfg.dataset.nlat, cfg.dataset.nlon) == ("galewsky", 32, 64)
    assert list(cfg.quickstart.models) == ["dandelion", "sfno"] and cfg.quickstart.preset == "tiny"
    assert cfg.dataset.path == "qs/data"
    fast = compose_quickstart(["quickstart.output_dir=qs"], fast=True)
    assert fast.quickstart.fast and fast.dataset.nlat < cfg.dataset.nlat


def _vrmse_columns(table: str) -> list[list[str]]:
    """The VRMSE columns of the printed table (one list per model row)."""
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    cols = [i for i, h in enumerate(head) if "VRMSE" in h]
    return [[[c.strip() for c in line.strip("|").split("|")][i] for i in cols] for line in lines[1:]]


def test_quickstart_fast_end_to_end(tmp_path):
    """Reduced form: tiny Galewsky data, two models trained for two batches, rolled out, exported, tabulated;
    a second run (same seed, same data) prints the same VRMSE columns: the budget is a number of steps."""
    out = tmp_path / "qs"
    summary = quickstart(compose_quickstart([f"quickstart.output_dir={out}"], fast=True))
    again = quickstart(
        compose_quickstart([f"quickstart.output_dir={tmp_path / 'qs2'}", f"dataset.path={out / 'data'}"], fast=True)
    )
    assert _vrmse_columns(again["table"]) == _vrmse_columns(summary["table"])
    assert [(r["next"], r["mean"]) for r in again["rows"]] == [(r["next"], r["mean"]) for r in summary["rows"]]
    for r in summary["rows"]:
        assert r["stopped"] != "max_minutes" and r["step"] == r["total_steps"] > 0
    assert "stopped early" not in summary["table"]
    assert [r["model"] for r in summary["rows"]] == ["dandelion", "sfno"]
    for r in summary["rows"]:
        assert np.isfinite(r["next"]) and np.isfinite(r["mean"]) and r["next"] > 0
    assert "| dandelion" in summary["table"] and "VRMSE next" in summary["table"]
    for nc in summary["netcdf"].values():
        with xr.open_dataset(nc) as ds:
            assert {"h", "u", "v", "h_truth"} <= set(ds.data_vars)
            assert np.all(np.diff(ds.lat.values) > 0)
            assert np.isfinite(ds.h.values).all()
    for p in summary["plots"].values():
        assert Path(p).stat().st_size > 1000
    saved = json.loads((out / "quickstart.json").read_text())
    assert saved["rows"][0]["model"] == "dandelion"
    assert (out / "results.md").read_text().count("|") > 10


def test_quickstart_says_loudly_when_the_safety_stop_fires(tmp_path, capsys):
    """A tiny trainer.max_minutes cuts training after its first step: console and table say so."""
    out = tmp_path / "qs"
    summary = quickstart(
        compose_quickstart(
            [f"quickstart.output_dir={out}", "trainer.max_minutes=1e-9", "quickstart.models=[sfno]"], fast=True
        )
    )
    (row,) = summary["rows"]
    assert row["stopped"] == "max_minutes" and row["step"] < row["total_steps"]
    line = f"stopped early at step {row['step']} of {row['total_steps']}"
    assert line in summary["table"] and line in capsys.readouterr().out
    assert line in (out / "results.md").read_text()
