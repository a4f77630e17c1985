"""A benchmark training run under torchrun (benchmarks/grid/torchrun.py): 2 CPU ranks (gloo), the global batch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dandelion.benchmarks.grid.torchrun import train_under_torchrun

HELPERS = Path(__file__).resolve().parents[2] / "helpers"


def _overrides(data, run_dir, batch):
    return [
        f"dataset.path={data}",
        "model.name=_pointwise_test",
        "plugins=[tiny_model]",
        "trainer=quick",
        "trainer.max_steps=2",
        f"trainer.batch_size={batch}",
        "trainer.progress=false",
        "device=cpu",
        f"run_dir={run_dir}",
    ]


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def test_a_run_under_two_ranks_trains_the_planned_steps(make_tiny_dataset, tmp_path, env):
    data = make_tiny_dataset(tmp_path / "data", n_frames=8)
    res = train_under_torchrun(_overrides(data, tmp_path / "run", 4), tmp_path / "run", 2)
    assert res["step"] == 2 and (tmp_path / "run" / "last.pt").is_file()


def test_a_global_batch_that_the_ranks_do_not_divide_fails_in_one_line(make_tiny_dataset, tmp_path, env):
    data = make_tiny_dataset(tmp_path / "data", n_frames=8)
    with pytest.raises(RuntimeError, match="global batch and must divide by the 2 ranks"):
        train_under_torchrun(_overrides(data, tmp_path / "run", 3), tmp_path / "run", 2)
