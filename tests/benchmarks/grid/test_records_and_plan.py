"""What a cell records besides its losses (generalisation ratio, training CPU-seconds) and how a 64x128 key brackets
its learning rates around its 32x64 key's choice (dandelion.benchmarks.grid.records, lr_plan)."""

import json
import math

import pytest
from omegaconf import OmegaConf

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid import cells, lr_plan
from dandelion.benchmarks.grid.records import (
    cell_cpu_seconds,
    cell_sweep_cpu_seconds,
    cell_valid_over_train,
    cost_fields,
    stability_summary,
    valid_over_train,
)
from dandelion.benchmarks.grid.runs import _run_record
from dandelion.benchmarks.paths import resolve_scale_dirs

LADDER = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1]


def _curve(train, val, phase="pretrain"):
    return [{"phase": phase, "train_loss": t, "val_loss": v} for t, v in zip(train, val)]


def test_valid_over_train_is_the_ratio_of_the_last_pretraining_means():
    curve = _curve([9.0] * 4 + [1.0, 2.0, 3.0, 4.0, 5.0], [99.0] * 4 + [2.0, 4.0, 6.0, 8.0, 10.0])
    curve += _curve([1.0], [100.0], phase="finetune")  # the fine-tune is not part of the ratio
    assert valid_over_train({"curve": curve}) == pytest.approx(2.0)
    nan = _curve([1.0, math.nan, 1.0], [3.0, 3.0, 3.0])  # an epoch with a missing loss is left out
    assert valid_over_train({"curve": nan}, n_epochs=2) == pytest.approx(3.0)
    assert valid_over_train({"curve": []}) is None


def test_run_records_and_cells_carry_the_cost_fields():
    run = {
        "lr": 1e-3,
        "val_loss": 0.2,
        "val_vrmse": 0.3,
        "train_loss": 0.1,
        "step": 10,
        "run_dir": "r",
        "curve": _curve([1.0] * 5, [1.5] * 5),
        "train_cpu_seconds": 42.0,
        "train_threads": 1,
    }
    rec = _run_record(run)
    assert rec["valid_over_train"] == pytest.approx(1.5)
    assert rec["train_cpu_seconds"] == 42.0 and rec["train_threads"] == 1
    assert cost_fields({**run, "train_cpu_seconds": None})["train_cpu_seconds"] is None
    # a cell made before the fields existed: the ratio from its kept curve, the cost unknown
    old = {"run": {k: v for k, v in run.items() if k not in ("train_cpu_seconds", "train_threads")}}
    assert cell_valid_over_train(old) == pytest.approx(1.5)
    assert cell_cpu_seconds(old) is None
    assert cell_cpu_seconds({"train_cpu_seconds": 7.0}) == 7.0
    assert B._sum_known([1.0, 2.0]) == 3.0 and B._sum_known([1.0, None]) is None


@pytest.mark.parametrize(
    "cell, seconds",
    [
        ({"seed": 0, "sweep_cpu_seconds": 600.0, "sweep_cpu_seconds_on_seed": 0}, 600.0),
        ({"seed": 1, "sweep_cpu_seconds": None, "sweep_cpu_seconds_on_seed": 0}, None),
        # a cell written before the fix copied the sweep's cost into every seed: only the sweep seed's counts
        ({"seed": 1, "sweep_cpu_seconds": 600.0, "lr_selection": {"sweep_seed": 0}}, None),
        ({"seed": 0, "sweep_cpu_seconds": 600.0, "lr_selection": {"sweep_seed": 0}}, 600.0),
        ({"seed": 2, "sweep_cpu_seconds": 90.0}, 90.0),  # each seed swept for itself (sweep_seed null)
        ({"seed": 0, "sweep_cpu_seconds": None, "sweep_cpu_seconds_on_seed": 0}, None),  # cost unknown
    ],
)
def test_a_sweep_is_counted_once_on_its_seeds_cell(cell, seconds):
    assert cell_sweep_cpu_seconds(cell) == seconds


def test_a_cell_keeps_the_rollouts_blow_up_counts():
    stab = {
        "threshold_vrmse": 10.0,
        "n_forecasts": 8,
        "n_unstable": 2,
        "unstable_by_lead": [0, 0, 1, 2],
        "first_unstable_lead_step": 3,
        "median_vrmse": [0.1, 0.2, 0.3, 0.4],
    }
    kept = stability_summary(stab)
    assert kept["unstable_by_lead"] == [0, 0, 1, 2] and kept["n_unstable"] == 2 and "median_vrmse" not in kept
    assert stability_summary(None) is None


def _cfg(tmp_path, **fine):
    cfg = B.compose("benchmark", ["scale=cpu", f"scale.results_dir={tmp_path}"])
    OmegaConf.set_struct(cfg, False)
    cfg.scale.lr_ladder = LADDER
    spec = OmegaConf.to_container(cfg.scale.datasets.galewsky_32x64)
    cfg.scale.datasets["fine"] = {**spec, "lr_from": "galewsky_32x64", **fine}
    return cfg


def _source_cell(tmp_path, monkeypatch, lr, model="m", finished=True):
    p = B.cell_path(str(tmp_path), "galewsky_32x64", model, 0)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"lr": lr}))
    monkeypatch.setattr(lr_plan, "cell_finished", lambda *a: finished)
    monkeypatch.setattr(lr_plan, "model_architecture", lambda *a: "arch")


@pytest.mark.parametrize("lr, bracket", [(3e-3, [1e-3, 3e-3, 1e-2]), (1e-1, [3e-2, 1e-1])])
def test_bracket_is_the_source_rate_and_its_ladder_neighbours(tmp_path, monkeypatch, lr, bracket):
    _source_cell(tmp_path, monkeypatch, lr)
    plan = lr_plan.sweep_plan(_cfg(tmp_path), "fine", "m", 0, [1e-3, 3e-3, 1e-2], LADDER)
    assert plan["start"] == pytest.approx(bracket) and plan["widen"] is False
    assert plan["source"]["lr"] == pytest.approx(lr)


def test_sweep_with_a_bracket_never_widens_and_flags_an_edge(tmp_path, monkeypatch):
    _source_cell(tmp_path, monkeypatch, 3e-3)
    calls = []

    def fake(cfg, key, model, seed, lr, data_path):  # loss falls with the rate: the best is the bracket's top
        calls.append(lr)
        return {"lr": lr, "val_loss": -math.log10(lr), "val_vrmse": 0, "train_loss": 0, "step": 1, "run_dir": "r"}

    monkeypatch.setattr(B, "_train_one", fake)
    _, best, info = B.sweep_lr(_cfg(tmp_path), "fine", "m", 0, None)
    assert sorted(calls) == pytest.approx([1e-3, 3e-3, 1e-2])  # not widened to 3e-2
    assert best["lr"] == pytest.approx(1e-2) and info["inside"] is False and "bracket" in info["rule"]


def test_fixed_model_trains_at_the_source_rate_only(tmp_path, monkeypatch):
    _source_cell(tmp_path, monkeypatch, 1e-2, model="disco")
    plan = lr_plan.sweep_plan(_cfg(tmp_path, lr_fixed_models=["disco"]), "fine", "disco", 0, [1e-3], LADDER)
    assert plan["start"] == pytest.approx([1e-2]) and plan["widen"] is False


def test_unfinished_source_and_unknown_key_are_refused(tmp_path, monkeypatch):
    _source_cell(tmp_path, monkeypatch, 3e-3, finished=False)
    with pytest.raises(RuntimeError, match="only.datasets=\\[galewsky_32x64\\]"):
        lr_plan.sweep_plan(_cfg(tmp_path), "fine", "m", 0, [1e-3], LADDER)
    cfg = _cfg(tmp_path)
    cfg.scale.datasets.fine.lr_from = "nowhere"
    with pytest.raises(ValueError, match="not a dataset key"):
        lr_plan.sweep_plan(cfg, "fine", "m", 0, [1e-3], LADDER)


def test_the_bracket_enters_the_protocol_only_where_set(tmp_path):
    cfg = _cfg(tmp_path)
    assert B.protocol_hash(cfg, "fine") != B.protocol_hash(cfg, "galewsky_32x64")
    cfg.scale.datasets.fine.lr_from = None
    assert B.protocol_hash(cfg, "fine") == B.protocol_hash(cfg, "galewsky_32x64")


def test_cells_made_with_the_first_validation_windows_are_stale_unless_the_scale_keeps_that_rule():
    """``val_subset`` came after cells were made with the old capped validation (the first windows): the scale that
    sets ``val_subset: first`` (cpu_v1) keeps its fingerprints, so its committed cells stay finished; the default
    (spread, the cpu scale) makes such cells stale and trains in other run folders."""
    v1 = B.compose("benchmark", ["scale=cpu_v1"])
    resolve_scale_dirs(v1)  # the committed results of the checkout, from any working directory
    assert v1.scale.trainer.val_subset == "first" and "val_subset" not in cells.resolved_trainer(v1)
    v1_trainer = cells.resolved_trainer(v1)
    committed = cells.load_cells(v1.scale.results_dir)
    assert len(committed) > 50  # (the model architecture is not judged here: six old-SFNO cells are stale by it)
    assert {cells.record_state(r, cells.protocol_hash(v1, r["dataset_key"]), v1_trainer) for r in committed} == {
        "finished"
    }
    cpu = B.compose("benchmark", ["scale=cpu"])
    key = next(iter(cpu.scale.datasets))
    spread_trainer = cells.resolved_trainer(cpu)
    assert spread_trainer["val_subset"] == "spread"
    made_before = {"protocol_hash": cells.protocol_hash(cpu, key), "trainer_resolved": v1_trainer}
    assert cells.record_state(made_before, made_before["protocol_hash"], spread_trainer) == "stale"
    OmegaConf.set_struct(cpu, False)
    cpu.scale.trainer.val_subset = "first"  # the same scale keeping the old rule: the same fingerprint
    assert cells.protocol_hash(cpu, key) == made_before["protocol_hash"]
    assert cells.training_hash(cpu, key) != cells.training_hash(B.compose("benchmark", ["scale=cpu"]), key)
