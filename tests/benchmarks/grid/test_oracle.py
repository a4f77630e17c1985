"""The exact semi-Lagrangian oracle (benchmarks/grid/oracle.py): it applies only where the scenario declares its
flow, finds each forecast's trajectory and time, and forecasts a transported tracer far better than persistence;
with the exact departure points replaced by none (a zero flow) it is persistence, so the gain is the flow's."""

import pytest
import torch

from dandelion.benchmarks.grid.oracle import SemiLagrangianOracle, dataset_flow, declares_flow, oracle_forecaster
from dandelion.benchmarks.grid.references import Persistence, references_of
from dandelion.datasets.generate import generate
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.evaluation.scoring import evaluate
from dandelion.forecast import Forecaster, forcing_channels


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    cfg = {"name": "transport", "path": str(tmp_path_factory.mktemp("t") / "d"), "nlat": 16, "nlon": 32}
    cfg.update({"n_seeds": 1, "n_frames": 12})
    return generate({"dataset": cfg, "device": "cpu", "batch_size": 10, "progress": False})


def _score(model, data, n_steps):
    r = evaluate(model, data, n_steps=n_steps, init_stride=2, batch_size=4, spectra_leads=[], sample=False)
    return r["results"]["summary"]


def test_only_scenarios_with_a_flow_get_the_oracle():
    assert declares_flow("transport") and not declares_flow("solid_body") and not declares_flow("galewsky")
    assert not declares_flow("no_such_scenario")
    assert "oracle" in references_of("transport") and "oracle" not in references_of("galewsky")


def test_velocity_is_a_forcing_vector_field(folder):
    data = WindowDataset(folder, "train", n_in=4, n_out=1)
    idx = forcing_channels(data.layout, data.metadata)
    assert [data.layout.channels[i] for i in idx] == ["velocity_x", "velocity_y", "velocity_z"]


def test_oracle_beats_persistence_and_scores_the_tracer_only(folder):
    data = WindowDataset(folder, "train", n_in=4, n_out=1)
    flow = dataset_flow(data.metadata)
    assert flow is not None
    oracle = _score(oracle_forecaster(flow, data, 4, 6), data, 6)
    persistence = _score(Forecaster(Persistence(data.layout.n_channels), data.layout, 4), data, 6)
    assert set(oracle["next_step"]["vrmse"]) == {"h", "mean"}  # the prescribed velocity is not scored
    assert oracle["next_step"]["vrmse"]["h"] < 0.5 * persistence["next_step"]["vrmse"]["h"]
    assert oracle["mean_1_6"]["vrmse"]["h"] < 0.5 * persistence["mean_1_6"]["vrmse"]["h"]


def test_oracle_without_motion_is_persistence(folder):
    """Departure points equal to the nodes (no flow): the bilinear sampler returns the node values exactly, so the
    oracle's forecasts are persistence's, which shows the time and trajectory bookkeeping is all that is added."""
    data = WindowDataset(folder, "train", n_in=4, n_out=1)
    flow = dataset_flow(data.metadata)

    class Still:
        def parameters(self, tid):
            return flow.parameters(tid)

        def departure_points(self, params, xyz, t_from, t_to):
            return xyz

    still = SemiLagrangianOracle(Still(), data, 4, 5, forcing_channels(data.layout, data.metadata))
    a = _score(Forecaster(still, data.layout, 4), data, 5)
    b = _score(Forecaster(Persistence(data.layout.n_channels), data.layout, 4), data, 5)
    assert a["mean_1_5"]["vrmse"]["h"] == pytest.approx(b["mean_1_5"]["vrmse"]["h"], rel=1e-6)


def test_oracle_refuses_a_window_it_does_not_know(folder):
    data = WindowDataset(folder, "train", n_in=4, n_out=1)
    model = oracle_forecaster(dataset_flow(data.metadata), data, 4, 3)
    x = torch.zeros(1, 4 * data.layout.n_channels, *data.grid.shape)
    with pytest.raises(ValueError, match="not one of the split's"):
        model(x)


def test_the_oracle_is_a_reference_column_of_the_leaderboard(tmp_path):
    """With a cell and an oracle record for a dataset, the headline table shows the oracle beside persistence."""
    import importlib.util
    import json
    from pathlib import Path

    from omegaconf import OmegaConf

    from dandelion.benchmarks.grid.cells import cell_path, reference_path
    from dandelion.benchmarks.leaderboard import markdown as MD
    from dandelion.benchmarks.leaderboard import render as LB

    spec = importlib.util.spec_from_file_location(
        "leaderboard_order", Path(__file__).parents[1] / "leaderboard" / "test_order.py"
    )
    order = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(order)  # its synthetic cell (a test helper, not the code under test)
    key = "transport_32x64"
    path = cell_path(tmp_path, key, "dandelion", 0)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(order._cell(key, "dandelion", 0, 0.02, 0.5)))
    for name, (nxt, r20) in {"persistence": (0.12, 0.69), "oracle": (0.024, 0.145)}.items():
        rec = {"protocol_hash": "p" + key[:3], "next_step": order._summary(nxt), "rollout_mean": order._summary(r20)}
        reference_path(tmp_path, key, name).write_text(json.dumps(rec))
    LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": str(tmp_path), "plots": False}))
    table = [line for line in (tmp_path / "leaderboard.md").read_text().split(MD.HEADLINE)[1].splitlines()]
    header = next(line for line in table if line.startswith("| dataset"))
    assert "*exact semi-Lagrangian oracle*" in header and "*persistence*" in header
    row = next(line for line in table if line.startswith(f"| {key}"))
    assert "*0.02400* / *0.1450*" in row
