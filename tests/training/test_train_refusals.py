"""``dandelion-train`` on bad inputs and interruptions: NaN in the data named by file, trajectory and frame (never
blamed on the learning rate), a NaN from the model said to be the model's, a negative learning rate named by its
key, a batch larger than the split warned, a locked run_dir refused, Ctrl-C in one line saying how to resume."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import tiny_model  # noqa: F401 - registers "_pointwise_test"
from cli_result import one_line_error
from tiny_checkpoint import hold_lock
from train_config import train_cfg

from dandelion.cli import train
from dandelion.datasets import folder
from dandelion.training import trainer as trainer_module

BASE = ["model.name=_pointwise_test", "model.preset=tiny", "trainer=quick", "device=cpu", "trainer.progress=false"]


def _argv(data, run_dir, *more):
    return [f"dataset.path={data}", f"run_dir={run_dir}", *BASE, *more]


def _one_line(argv, capsys, status=2) -> str:
    return one_line_error(train.main, argv, capsys, status)


def test_nan_in_the_training_data_names_the_file_and_leaves_no_checkpoint(make_tiny_dataset, tmp_path, capsys):
    data = make_tiny_dataset(tmp_path / "data")
    bad = data / "train" / "traj_000001.h5"
    with h5py.File(bad, "r+") as f:
        a = f["t0_fields"]["h"][0, 7]
        a[3, 4] = np.nan
        f["t0_fields"]["h"][0, 7] = a
    folder.write_checksums(data, folder.read_checksums(data))  # as if generated so: the sizes' check passes
    run = tmp_path / "run"
    err = _one_line(_argv(data, run), capsys)
    assert str(bad) in err and "trajectory 1" in err and "frame 7" in err and "not finite" in err
    assert "trainer.lr" not in err
    assert not (run / "last.pt").exists() and not (run / "best.pt").exists()


def test_non_finite_model_output_is_said_to_be_the_models(make_tiny_dataset, tmp_path, monkeypatch):
    data = make_tiny_dataset(tmp_path / "data")
    real = trainer_module.rollout
    monkeypatch.setattr(trainer_module, "rollout", lambda *a, **k: real(*a, **k) * float("nan"))
    with pytest.raises(FloatingPointError) as info:
        train.train(train_cfg(data, tmp_path / "run"))
    assert "model's output is not finite" in str(info.value) and "data is not at fault" in str(info.value)


def test_non_finite_model_output_ends_the_job_in_one_line(make_tiny_dataset, tmp_path, monkeypatch, capsys):
    data = make_tiny_dataset(tmp_path / "data")
    real = trainer_module.rollout
    monkeypatch.setattr(trainer_module, "rollout", lambda *a, **k: real(*a, **k) * float("nan"))
    err = _one_line(_argv(data, tmp_path / "run"), capsys, status=1)
    assert "model's output is not finite" in err and "trainer.lr" in err


def test_negative_learning_rate_is_named_by_its_key_before_work(make_tiny_dataset, tmp_path, capsys):
    data = make_tiny_dataset(tmp_path / "data")
    err = _one_line(_argv(data, tmp_path / "run", "trainer.lr=-1"), capsys)
    assert "trainer.lr=-1" in err
    assert not (tmp_path / "run").exists()


def test_batch_larger_than_the_split_is_warned(make_tiny_dataset, tmp_path, capsys):
    data = make_tiny_dataset(tmp_path / "data")
    train.main(_argv(data, tmp_path / "run", "trainer.batch_size=500", "trainer.max_steps=1"))
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines() if "trainer.batch_size=500" in line]
    assert lines and "'train'" in lines[0] and "lower trainer.batch_size" in lines[0]


def test_second_training_into_a_run_dir_being_written_is_refused(make_tiny_dataset, tmp_path, capsys):
    data, run = make_tiny_dataset(tmp_path / "data"), tmp_path / "run"
    holder = hold_lock(run, "dandelion-train")
    try:
        err = _one_line(_argv(data, run), capsys)
    finally:
        holder.kill()
        holder.wait()
    assert f"pid {holder.pid}" in err and "alive on this host" in err and str(run / ".dandelion.lock") in err
    assert not (run / "config.yaml").exists()


def test_ctrl_c_says_where_the_state_is_and_how_to_resume(make_tiny_dataset, tmp_path, monkeypatch, capsys):
    data, run = make_tiny_dataset(tmp_path / "data"), tmp_path / "run"
    real, calls = trainer_module.Trainer.train_step, []

    def interrupted(self, batch):
        calls.append(1)
        if self.epoch >= 1:  # the first epoch ended (last.pt written), then Ctrl-C
            raise KeyboardInterrupt
        return real(self, batch)

    monkeypatch.setattr(trainer_module.Trainer, "train_step", interrupted)
    err = _one_line(_argv(data, run, "trainer.epochs=3"), capsys, status=130)
    assert err.startswith("dandelion-train: error: interrupted: state in") and f"resume={run / 'last.pt'}" in err
    assert (run / "last.pt").is_file() and not (run / ".dandelion.lock").exists()
