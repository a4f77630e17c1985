"""Torch CPU threads of the jobs (issue #70): the cores the process may use less the loader workers, unless
``threads=`` or ``OMP_NUM_THREADS`` says otherwise; every ``dandelion-*`` job sets them before its work."""

from __future__ import annotations

import json

import pytest
import tiny_model  # noqa: F401 - registers "_pointwise_test"
import torch

from dandelion import threads
from dandelion.cli import train


@pytest.fixture(autouse=True)
def keep_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    "cores, omp, explicit, workers, want",
    [
        ({0, 1, 2, 3}, None, None, 0, 4),
        ({0, 1, 2, 3}, None, None, 2, 2),  # two DataLoader workers take two cores
        ({0, 1}, None, None, 3, 1),  # never below one
        ({5}, None, None, 0, 1),  # the affinity mask, not the machine's cores
        ({0, 1, 2, 3}, "2", None, 0, 2),  # OMP_NUM_THREADS wins over the cores
        ({0, 1, 2, 3}, "2", 3, 0, 3),  # threads= wins over everything
    ],
)
def test_threads_follow_the_usable_cores_unless_told(monkeypatch, cores, omp, explicit, workers, want):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: cores)
    monkeypatch.setattr(threads, "Path", lambda p: type("NoQuota", (), {"read_text": lambda self: "max 100000"})())
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert threads.set_cpu_threads(explicit, workers) == want == torch.get_num_threads()


def test_a_cgroup_quota_caps_the_cores(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(threads, "Path", lambda p: type("Quota", (), {"read_text": lambda self: "150000 100000"})())
    assert threads.usable_cores() == 2


def test_train_sets_its_threads_from_the_cores_it_may_use(make_tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0})
    torch.set_num_threads(2)
    data = make_tiny_dataset(tmp_path / "data")
    run = tmp_path / "run"
    argv = [f"dataset.path={data}", f"run_dir={run}", "model.name=_pointwise_test", "model.preset=tiny"]
    train.main([*argv, "trainer=quick", "device=cpu", "trainer.progress=false"])
    assert json.loads((run / "result.json").read_text())["train_threads"] == 1
    with pytest.raises(SystemExit):
        train.main([*argv, "trainer=quick", "device=cpu", "threads=0", f"run_dir={tmp_path / 'r2'}"])
