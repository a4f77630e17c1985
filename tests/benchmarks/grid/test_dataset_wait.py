"""Two grid processes on one dataset: the second waits for the first's generation instead of failing."""

from dandelion.benchmarks.grid import runs as R
from dandelion.locks import LockHeldError


def test_a_held_dataset_lock_is_waited_for(monkeypatch, tmp_path):
    cfg = R.compose("benchmark", ["scale=cpu", f"scale.work_dir={tmp_path}"])
    state = {"calls": 0, "complete": False}

    def held(job):
        state["calls"] += 1
        if state["calls"] == 2:
            state["complete"] = True  # the other process finished while this one slept
        raise LockHeldError("is being written by another process")

    monkeypatch.setattr(R, "generate", held)
    monkeypatch.setattr(R, "is_complete", lambda p: state["complete"])
    monkeypatch.setattr(R, "LOCK_POLL_S", 0.0)
    assert R.ensure_dataset(cfg, "galewsky_32x64") == tmp_path / "galewsky_32x64"
    assert state["calls"] == 2
