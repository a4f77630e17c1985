"""A metric registered in one place reaches the rollout JSON and CSV, a benchmark cell and the leaderboard."""

import csv
import json

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from dandelion import metrics as M
from dandelion.benchmarks.grid.cells import CELL_SCHEMA, cell_path, metric_summaries
from dandelion.benchmarks.leaderboard.render import leaderboard
from dandelion.datasets import folder, storage
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.evaluation.scoring import evaluate, write_results
from dandelion.forecast import Forecaster
from dandelion.runtime import write_json_atomic

N_IN, N_STEPS = 2, 3


@pytest.fixture
def toy_metric():
    """``toy_max_error``: the largest absolute error over the sphere, registered for the test only."""

    @M.metric("toy_max_error", mean=True, cell=True, curve=True, title="Toy maximum error", label="max error")
    def toy_max_error(pred, true, weights, climatology):
        return (pred - true).abs().amax((-2, -1))

    yield "toy_max_error"
    M.unregister_metric("toy_max_error")


class Persistence(torch.nn.Module):
    def __init__(self, n_channels):
        super().__init__()
        self.n_channels = n_channels

    def forward(self, x):
        return x[:, -self.n_channels :]


def _cell(results, key="tiny_9x16"):
    """A cell record as dandelion-benchmark writes it, around the metric summaries of ``results``."""
    g = results["grid"]
    return {
        "schema": CELL_SCHEMA,
        "protocol_hash": "x",
        "scale": "cpu",
        "dataset_key": key,
        "dataset": results["dataset"],
        "nlat": g["nlat"],
        "nlon": g["nlon"],
        "grid": g["grid"],
        "reduced": False,
        "model": "persistence_model",
        "preset": "tiny",
        "seed": 0,
        "n_parameters": 0,
        "lr": 1e-3,
        "steps": 0,
        "selection": "none",
        "target": "frame",
        "sweep": [{"lr": 1e-3, "val_loss": 1.0}],
        "trainer": {"n_in": N_IN},
        "trainer_resolved": {},
        "evaluation": {"n_steps": N_STEPS},
        "lead_time": results["lead_time"],
        "lead_time_hours": results["lead_time_hours"],
        "minutes": {"train_wall": 0.0, "eval_wall": 0.0},
        "machine": {},
        "versions": {},
        "commands": {"benchmark": "dandelion-benchmark scale=cpu", "train": [], "rollout": "dandelion-rollout"},
        **metric_summaries(results),
    }


def test_a_registered_metric_reaches_rollout_cells_and_leaderboard(toy_metric, make_tiny_dataset, tmp_path):
    data_path = make_tiny_dataset(tmp_path / "data", n_frames=8)
    data = WindowDataset(data_path, "test", n_in=N_IN, n_out=1)
    model = Forecaster(Persistence(data.layout.n_channels), data.layout, N_IN, name="persistence_model")
    results = evaluate(model, data, n_steps=N_STEPS, spectra_leads=[], sample=False)["results"]
    paths = write_results(results, tmp_path / "rollout")

    # rollout JSON: per lead and variable, with the mean over variables and the summaries
    saved = json.loads(paths["json"].read_text())
    toy = saved["metrics"][toy_metric]
    assert set(toy) == {"h", "u", "v", "mean"}  # scalar field and vector components, no vector form
    assert saved["summary"]["next_step"][toy_metric]["h"] == toy["h"][0]
    assert np.allclose(toy["mean"], np.mean([toy[v] for v in ("h", "u", "v")], axis=0))
    # its value, recomputed from the stored frames: persistence's lead-k error is frame i+k minus frame i
    # (up to the float32 round trip through the normalisation)
    h = storage.read_fields(folder.list_split(data_path, "test")[0])["h"].astype(np.float64)
    inits = np.arange(N_IN - 1, h.shape[0] - N_STEPS)
    for k in range(1, N_STEPS + 1):
        want = np.mean([np.abs(h[i + k] - h[i]).max() for i in inits])
        assert toy["h"][k - 1] == pytest.approx(want, rel=1e-3)
    with open(paths["csv"]) as fh:
        rows = [r for r in csv.DictReader(fh) if r["metric"] == toy_metric]
    assert len(rows) == 4 * N_STEPS

    # a benchmark cell keeps it, and the leaderboard gives it a table with the cell's value
    cell = _cell(saved)
    assert cell["next_step"][toy_metric]["mean"] == toy["mean"][0]
    assert toy_metric in cell["curves"]
    results_dir = tmp_path / "results"
    write_json_atomic(cell_path(results_dir, cell["dataset_key"], cell["model"], 0), cell)
    out = leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": str(results_dir), "plots": True}))
    md = (results_dir / "leaderboard.md").read_text()
    section = md.split("## Toy maximum error", 1)[1].split("\n## ", 1)[0]
    assert f"**{toy['mean'][0]:.4f} ± n/a**" in section  # next step, the only model: bold
    assert f"{float(np.mean(toy['mean'])):.4f} ± n/a" in section  # 1:N_STEPS mean
    assert out["plots"] and all((results_dir / p).exists() for p in out["plots"].values())


def test_the_registry_refuses_a_second_metric_of_the_same_name(toy_metric):
    with pytest.raises(ValueError, match="already registered"):
        M.metric(toy_metric)(lambda pred, true, weights, climatology: pred)
    with pytest.raises(ValueError, match="mean=True and cell=True"):
        M.metric("toy_untabulable", title="a table of nothing")
    assert "toy_untabulable" not in M.METRICS
