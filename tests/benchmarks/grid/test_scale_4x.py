"""scale=cpu_4x, the budget axis (configs/scale/cpu_4x.yaml): cpu's protocol at four times the steps, on cpu's own
datasets (the same specs and folders, so nothing is regenerated), under fingerprints of its own."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid import cells
from dandelion.benchmarks.leaderboard.compute import budget_steps
from dandelion.benchmarks.paths import resolve_scale_dirs

#: What the 4x scale must train (issue 71, item 3): the datasets whose finer grid adds resolved content at both
#: grids, and transport at 32x64 (its 64x128 key dropped by the compute rule).
KEYS = [
    f"{d}_{g}"
    for d in ("cahn_hilliard", "chained_turbulence", "held_suarez", "shock_caps")
    for g in ("32x64", "64x128")
]
KEYS += ["transport_32x64"]
MODELS = {"dandelion", "flower2d", "sfno"}


@pytest.fixture(scope="module")
def scales():
    out = []
    for name in ("cpu", "cpu_4x"):
        cfg = B.compose("benchmark", [f"scale={name}"])
        resolve_scale_dirs(cfg)  # both folders read against the checkout, as the jobs do
        out.append(cfg)
    return out


def _trainer(cfg) -> dict:
    return OmegaConf.to_container(cfg.scale.trainer, resolve=True)


def test_four_times_the_steps_with_the_same_warmup_fraction_and_everything_else_equal(scales):
    one, four = scales
    t1, t4 = _trainer(one), _trainer(four)
    mb = t1["max_batches_per_epoch"]
    assert t4["max_batches_per_epoch"] == mb
    assert t4["epochs"] * mb == 4 * t1["epochs"] * mb  # pretraining steps
    assert t4["finetune"]["epochs"] * mb == 4 * t1["finetune"]["epochs"] * mb  # fine-tune steps: the same share
    assert budget_steps(t4) == 4 * budget_steps(t1)
    assert t4["warmup_fraction"] == t1["warmup_fraction"] is not None
    strip = ("epochs", "finetune")
    assert {k: v for k, v in t4.items() if k not in strip} == {k: v for k, v in t1.items() if k not in strip}
    assert {k: v for k, v in t4["finetune"].items() if k != "epochs"} == {
        k: v for k, v in t1["finetune"].items() if k != "epochs"
    }
    # the resolved trainer (configs/trainer/default.yaml under each scale) differs in the budgets alone
    r1, r4 = cells.resolved_trainer(one), cells.resolved_trainer(four)
    assert {k: v for k, v in r4.items() if k not in strip} == {k: v for k, v in r1.items() if k not in strip}
    for k in ("lr_sweep", "lr_ladder", "sweep_seed", "preset", "evaluation", "device", "work_dir"):
        assert OmegaConf.to_container(four.scale)[k] == OmegaConf.to_container(one.scale)[k], k


def test_budget_steps_count_pretraining_and_fine_tune(scales):
    """1,200 optimiser steps per run at cpu and 4,800 at cpu_4x (issue 71, item 3), counted here from each scale's
    epochs and batches per epoch, pretraining and fine-tune alike."""
    steps = []
    for cfg in scales:
        t = _trainer(cfg)
        per_epoch = t["max_batches_per_epoch"]
        steps.append(t["epochs"] * per_epoch + t["finetune"]["epochs"] * per_epoch)
        assert budget_steps(t) == steps[-1]
    assert steps == [1200, 4800]


def test_a_4x_key_is_changed_through_datasets_4x_not_datasets(tmp_path):
    """``datasets`` is an interpolation of ``_datasets_4x``: a key's settings are overridden there (with ``+`` for one
    its block does not set); ``+scale.datasets.<key>...`` would replace the whole mapping with that block, and the
    grid refuses it with the way out."""
    where = [f"scale.results_dir={tmp_path / 'results'}", f"scale.work_dir={tmp_path / 'work'}"]
    cfg = B.compose("benchmark", ["scale=cpu_4x", "+scale._datasets_4x.transport_32x64.seeds=[0]", *where])
    grid = cells.cells(cfg)
    assert {c["seed"] for c in grid if c["dataset"] == "transport_32x64"} == {0}
    assert {c["seed"] for c in grid if c["dataset"] != "transport_32x64"} == {0, 1, 2}
    assert {c["dataset"] for c in grid} == set(KEYS)
    bad = B.compose("benchmark", ["scale=cpu_4x", "+scale.datasets.transport_32x64.seeds=[0]", *where])
    with pytest.raises(ValueError, match=r"names no `dataset`.*scale\._datasets_4x\.<key>"):
        cells.cells(bad)


def test_the_datasets_are_cpus_own_so_nothing_is_regenerated(scales):
    one, four = scales
    assert list(four.scale.datasets) == KEYS
    for key in KEYS:
        s1, s4 = cells.dataset_spec(one, key), cells.dataset_spec(four, key)
        for field in ("dataset", "overrides", "generate_batch_size", "path"):
            assert s4[field] == s1[field], (key, field)
        assert Path(s4["path"]) == Path(four.scale.work_dir) / key


def test_models_seeds_and_the_lr_rule_of_each_key(scales):
    one, four = scales
    grid = cells.cells(four)
    assert {(c["dataset"], c["model"], c["seed"]) for c in grid} == {
        (k, m, s) for k in KEYS for m in MODELS for s in (0, 1, 2)
    }
    assert {c["path"].parent.parent.parent for c in grid} == {Path(four.scale.results_dir)}
    assert Path(four.scale.results_dir) != Path(one.scale.results_dir)
    for key in KEYS:
        spec = cells.dataset_spec(four, key)
        if key.endswith("64x128"):  # the rate chosen at its 32x64 key of this scale, not swept (the compute rule)
            assert spec["lr_from"] == key.replace("64x128", "32x64") and spec["lr_from"] in four.scale.datasets
            assert sorted(spec["lr_fixed_models"]) == sorted(MODELS)
        else:  # swept and widened, as cpu's 32x64 keys
            assert spec["lr_from"] is None and cells.dataset_spec(one, key)["lr_from"] is None


def test_its_cells_and_runs_have_fingerprints_of_their_own(scales):
    one, four = scales
    for key in KEYS:
        assert cells.protocol_hash(four, key) != cells.protocol_hash(one, key), key
        assert cells.training_hash(four, key) != cells.training_hash(one, key), key


def test_the_dry_run_lists_every_cell_as_todo_and_generates_nothing(tmp_path, capsys):
    results, work = tmp_path / "results", tmp_path / "work"
    cfg = B.compose(
        "benchmark", ["scale=cpu_4x", "dry_run=true", f"scale.results_dir={results}", f"scale.work_dir={work}"]
    )
    out = B.benchmark(cfg)
    states = [c["state"] for c in out["cells"]]
    assert len(states) == len(KEYS) * len(MODELS) * 3 and set(states) == {"todo"}
    assert out["ran"] == 0 and not results.exists() and not work.exists()
    assert f"scale=cpu_4x: {len(states)} cells, 0 finished" in capsys.readouterr().out
