"""Two processes on one sweep: ``train_rates`` trains only the named sweep runs (and writes no cell), and a run
whose folder another process holds is waited for and then reused, not trained twice or failed."""

import json

import pytest
from omegaconf import OmegaConf

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid import runs as R
from dandelion.locks import LockHeldError


def _cfg(tmp_path, *extra):
    cfg = B.compose(
        "benchmark",
        ["scale=cpu", f"scale.results_dir={tmp_path / 'results'}", f"scale.work_dir={tmp_path / 'work'}", *extra],
    )
    OmegaConf.set_struct(cfg, False)
    return cfg


def test_a_held_run_is_waited_for_and_then_reused(monkeypatch, tmp_path):
    run_dir = tmp_path / "run"
    calls = []

    def other_process_holds_it(tcfg):
        calls.append(str(tcfg.run_dir))
        run_dir.mkdir(parents=True, exist_ok=True)  # the other process finishes while this one waits
        (run_dir / "result.json").write_text(json.dumps({"val_loss": 0.25, "run_dir": str(run_dir), "step": 7}))
        raise LockHeldError(f"{run_dir} is being written by another process")

    monkeypatch.setattr(R, "train", other_process_holds_it)
    monkeypatch.setattr(R, "LOCK_POLL_S", 0.0)
    res = R._train_one(_cfg(tmp_path), "galewsky_32x64", "sfno", 0, 1e-3, tmp_path / "data", run_dir=run_dir)
    assert len(calls) == 1  # tried once, then waited and found the other process's result
    assert res["reused"] is True and res["val_loss"] == 0.25 and res["lr"] == pytest.approx(1e-3)


def test_train_rates_trains_only_those_runs_on_the_sweep_seed(monkeypatch, tmp_path):
    calls = []

    def fake(cfg, key, model, seed, lr, data_path):
        calls.append((key, model, seed, lr))
        return {"val_loss": lr, "run_dir": f"{model}/{lr}", "reused": False}

    monkeypatch.setattr(B, "_train_one", fake)
    monkeypatch.setattr(B, "ensure_dataset", lambda cfg, key: tmp_path / key)
    cfg = _cfg(tmp_path, "only.datasets=[galewsky_32x64]", "only.models=[sfno,flower2d]", "train_rates=[1e-2,3e-2]")
    out = B.benchmark(cfg)
    sweep_seed = int(cfg.scale.sweep_seed)
    expected = [("galewsky_32x64", m, sweep_seed, lr) for m in ("sfno", "flower2d") for lr in (1e-2, 3e-2)]
    assert sorted(calls) == sorted(expected)  # each (model, rate) once, on the sweep seed only, whatever the seeds
    assert len(out["trained"]) == 4 and out["ran"] == 0
    assert not list((tmp_path / "results").rglob("*.json"))  # no cell, no reference written


def test_train_rates_off_the_ladder_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(B, "ensure_dataset", lambda cfg, key: tmp_path / key)
    cfg = _cfg(tmp_path, "only.datasets=[galewsky_32x64]", "only.models=[sfno]", "train_rates=[2e-3]")
    with pytest.raises(ValueError, match="lr_ladder"):
        B.benchmark(cfg)
