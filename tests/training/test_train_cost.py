"""The training-cost clock (dandelion.training.cost): process CPU-seconds of ``fit``, summed over resumes, carried
in every checkpoint; unknown (None) after resuming a checkpoint that predates it, never a partial number."""

import time

import tiny_model  # noqa: F401  (registers "_pointwise_test")
import torch
from train_config import train_cfg

from dandelion.checkpoint import load_checkpoint
from dandelion.cli.train import train
from dandelion.training.cost import TrainCost


def _burn(seconds: float) -> None:
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        pass


def test_clock_counts_only_while_running_and_adds_parts():
    c = TrainCost()
    c.start()
    _burn(0.05)
    c.stop()
    first = c.seconds()
    assert first >= 0.05
    _burn(0.05)  # outside fit: not counted
    assert c.seconds() == first
    c.start()
    _burn(0.05)
    assert c.seconds() >= first + 0.05  # a running part counts
    c.stop()
    assert c.summary()["train_threads"] == torch.get_num_threads()


def test_restore_carries_the_total_on_rank_zero_only_and_unknown_stays_unknown():
    c = TrainCost()
    c.restore({"train_cpu_seconds": 12.5, "train_threads": [2]}, rank=0)
    assert c.seconds() == 12.5
    other = TrainCost()
    other.restore({"train_cpu_seconds": 12.5, "train_threads": [2]}, rank=1)
    assert other.seconds() == 0.0  # the stored total is a sum over ranks: counted once
    old = TrainCost()
    old.restore({}, rank=0)  # a checkpoint from before the clock
    old.start()
    _burn(0.01)
    old.stop()
    assert old.seconds() is None and old.state()["train_cpu_seconds"] is None


def test_resumed_run_reports_the_sum_of_its_parts(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data", n_frames=8)
    common = ["trainer.batch_size=4", "trainer.max_batches_per_epoch=null", "trainer.max_steps=4"]
    first = train(train_cfg(data, tmp_path / "b", *common, "trainer.stop_at_step=2"))
    part1 = load_checkpoint(first["last"])["extra"]["train_cpu_seconds"]
    assert first["train_cpu_seconds"] > 0 and part1 > 0
    assert first["train_threads"] == torch.get_num_threads()
    resumed = train(train_cfg(data, tmp_path / "c", *common, f"resume={first['last']}"))
    assert resumed["step"] == 4
    assert resumed["train_cpu_seconds"] > part1  # the first part's seconds plus the second's
    assert load_checkpoint(resumed["last"])["extra"]["train_cpu_seconds"] > part1
