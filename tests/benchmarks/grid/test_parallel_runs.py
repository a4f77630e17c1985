"""Two processes on one sweep: ``train_rates`` trains only the named sweep runs (and writes no cell), and a run
whose folder another process holds is waited for and then reused, not trained twice or failed."""

import json

import pytest
from omegaconf import OmegaConf

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid import parallel as P
from dandelion.benchmarks.grid import runs as R
from dandelion.cli.checks import UsageError
from dandelion.locks import LockHeldError, OutputLock


def _cfg(tmp_path, *extra):
    cfg = B.compose(
        "benchmark",
        ["scale=cpu", f"scale.results_dir={tmp_path / 'results'}", f"scale.work_dir={tmp_path / 'work'}", *extra],
    )
    OmegaConf.set_struct(cfg, False)
    return cfg


def _write_result(run_dir, val_loss):
    (run_dir / "result.json").write_text(json.dumps({"val_loss": val_loss, "run_dir": str(run_dir), "step": 7}))


def test_a_held_run_is_waited_for_and_then_reused(monkeypatch, tmp_path):
    """A live holder (a real lock on the run folder) is waited for; its result is reused, nothing is trained."""
    run_dir = tmp_path / "run"
    holder = OutputLock.folder(run_dir, "other-process").acquire()
    trained, polls = [], []

    def sleep(seconds):  # the other process finishes during the first poll
        polls.append(seconds)
        if len(polls) == 1:
            _write_result(run_dir, 0.25)
            holder.release()
        assert len(polls) < 5, "still waiting after the holder released its lock"

    monkeypatch.setattr(R, "train", lambda tcfg: trained.append(tcfg) or {"val_loss": 9.0})
    monkeypatch.setattr(R.time, "sleep", sleep)
    res = R._train_one(_cfg(tmp_path), "galewsky_32x64", "sfno", 0, 1e-3, tmp_path / "data", run_dir=run_dir)
    assert trained == [] and polls == [R.LOCK_POLL_S]
    assert res["reused"] is True and res["val_loss"] == 0.25 and res["lr"] == pytest.approx(1e-3)


def test_a_run_taken_in_the_instant_before_training_is_not_trained_twice(monkeypatch, tmp_path):
    """The lock is free at the check but taken before ``train`` locks it: the result of the other process is used."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    calls = []

    def train(tcfg):
        calls.append(tcfg)
        if len(calls) > 1:
            pytest.fail("trained a run that the other process finished")
        _write_result(run_dir, 0.5)
        raise LockHeldError(f"{run_dir} is being written by another process")

    monkeypatch.setattr(R, "train", train)
    res = R._train_one(_cfg(tmp_path), "galewsky_32x64", "sfno", 0, 1e-3, tmp_path / "data", run_dir=run_dir)
    assert len(calls) == 1 and res["reused"] is True and res["val_loss"] == 0.5


def test_a_run_left_by_an_ended_process_is_resumed(monkeypatch, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "last.pt").write_bytes(b"")  # an interrupted run whose process ended: its lock file stays, unheld
    (run_dir / OutputLock.NAME).write_text(json.dumps({"pid": 999999999, "host": "gone", "command": "killed"}))
    monkeypatch.setattr(R.time, "sleep", lambda s: pytest.fail("waited for a process that has ended"))
    seen = []
    monkeypatch.setattr(R, "train", lambda tcfg: seen.append(tcfg.get("resume")) or {"val_loss": 0.1})
    res = R._train_one(_cfg(tmp_path), "galewsky_32x64", "sfno", 0, 1e-3, tmp_path / "data", run_dir=run_dir)
    assert seen == [str(run_dir / "last.pt")] and res["reused"] is False


def test_train_rates_trains_only_those_runs_on_the_sweep_seed(monkeypatch, tmp_path):
    calls = []

    def fake(cfg, key, model, seed, lr, data_path):
        calls.append((key, model, seed, lr))
        return {"val_loss": lr, "run_dir": f"{model}/{lr}", "reused": False}

    monkeypatch.setattr(P, "_train_one", fake)
    monkeypatch.setattr(P, "ensure_dataset", lambda cfg, key: tmp_path / key)
    cfg = _cfg(tmp_path, "only.datasets=[galewsky_32x64]", "only.models=[sfno,flower2d]", "train_rates=[1e-2,3e-2]")
    out = B.benchmark(cfg)
    sweep_seed = int(cfg.scale.sweep_seed)
    expected = [("galewsky_32x64", m, sweep_seed, lr) for m in ("sfno", "flower2d") for lr in (1e-2, 3e-2)]
    assert sorted(calls) == sorted(expected)  # each (model, rate) once, on the sweep seed only, whatever the seeds
    assert len(out["trained"]) == 4 and out["ran"] == 0
    assert not list((tmp_path / "results").rglob("*.json"))  # no cell, no reference written


def test_train_rates_keeps_to_a_fixed_bracket(monkeypatch, tmp_path):
    """A key whose sweep is a fixed bracket (lr_from, not widened) trains only the given rates inside it."""
    calls = []
    monkeypatch.setattr(P, "_train_one", lambda cfg, key, model, seed, lr, path: calls.append(lr) or {"val_loss": 1})
    monkeypatch.setattr(P, "ensure_dataset", lambda cfg, key: tmp_path / key)
    monkeypatch.setattr(P, "sweep_plan", lambda *a: {"start": [3e-3, 1e-2, 3e-2], "widen": False})
    cfg = _cfg(tmp_path, "only.datasets=[galewsky_32x64]", "only.models=[sfno]", "train_rates=[1e-3,1e-2,3e-2]")
    B.benchmark(cfg)
    assert calls == pytest.approx([1e-2, 3e-2])


def test_train_rates_skips_a_sweep_its_finished_cell_holds(monkeypatch, tmp_path):
    monkeypatch.setattr(P, "_train_one", lambda *a: pytest.fail("trained a run the grid would never read"))
    monkeypatch.setattr(P, "cell_finished", lambda *a: True)
    cfg = _cfg(tmp_path, "only.datasets=[galewsky_32x64]", "only.models=[sfno]", "train_rates=[1e-2]")
    assert B.benchmark(cfg)["trained"] == []


@pytest.mark.parametrize("rates", ["[2e-3]", "[]"])
def test_train_rates_off_the_ladder_or_empty_is_refused(tmp_path, rates):
    cfg = _cfg(tmp_path, "only.datasets=[galewsky_32x64]", "only.models=[sfno]", f"train_rates={rates}")
    with pytest.raises(UsageError, match="lr_ladder"):
        B.check(cfg)
    with pytest.raises(UsageError, match="lr_ladder"):
        B.benchmark(cfg)
