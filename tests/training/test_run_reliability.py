"""Reliability of a training run's folder and data (issue #70): a folder edited after generation, a resume on other
data, metrics.jsonl after a kill, dead writers' temporary files, the default run_dir, a plan cut below the warm-up,
and a damaged file found mid-run."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys

import pytest
import tiny_model  # noqa: F401 - registers "_pointwise_test"
from cli_result import one_line_error
from train_config import train_argv, train_cfg

from dandelion.cli import train
from dandelion.cli.common import compose_config
from dandelion.cli.train import build_trainer
from dandelion.datasets import folder
from dandelion.datasets.integrity import integrity_problems
from dandelion.training import Trainer

_argv = train_argv


def _flip(path, offset_fraction=0.5, n=64):
    data = bytearray(path.read_bytes())
    at = int(len(data) * offset_fraction)
    data[at : at + n] = bytes(b ^ 0xFF for b in data[at : at + n])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("edit", ["other_trajectory", "test_file", "id_in_two_splits", "size"])
def test_a_folder_edited_after_generation_is_refused_in_one_line(make_tiny_dataset, tmp_path, capsys, edit):
    data = make_tiny_dataset(tmp_path / "data")
    bad = data / "train" / "traj_000001.h5"
    if edit == "other_trajectory":
        shutil.copyfile(data / "train" / "traj_000002.h5", bad)
        want = "holds trajectory 2"
    elif edit == "test_file":
        shutil.copyfile(data / "test" / "traj_000004.h5", bad)
        want = "holds trajectory 4 (a file of the test split)"
    elif edit == "id_in_two_splits":
        splits = json.loads((data / "splits.json").read_text())
        splits["train"].append(3)
        (data / "splits.json").write_text(json.dumps(splits))
        shutil.copyfile(data / "valid" / "traj_000003.h5", data / "train" / "traj_000003.h5")
        want, bad = "trajectory 3 is listed in both the train and the valid split", data
    else:
        with open(bad, "ab") as fh:
            fh.write(b"\0" * 10)
        want = "is changed"
    err = one_line_error(train.main, _argv(data, tmp_path / "run"), capsys)
    assert want in err and str(bad) in err and f"dandelion-verify {data}" in err, err
    assert not (tmp_path / "run" / "last.pt").exists()


def test_a_folder_without_sizes_is_checked_for_ids_and_says_so_once(make_tiny_dataset, tmp_path, caplog):
    data = make_tiny_dataset(tmp_path / "data")
    lines = [ln for ln in (data / "checksums.sha256").read_text().splitlines() if not ln.startswith("#")]
    (data / "checksums.sha256").write_text("\n".join(lines) + "\n")  # as folders written before sizes were kept
    with caplog.at_level(logging.WARNING):
        assert integrity_problems(data) == [] and integrity_problems(data) == []
    assert sum("lists no file sizes" in r.getMessage() for r in caplog.records) == 1
    shutil.copyfile(data / "train" / "traj_000002.h5", data / "train" / "traj_000001.h5")
    assert any("holds trajectory 2" in p for p in integrity_problems(data))


def test_resume_on_other_data_is_refused_unless_allowed(make_tiny_dataset, tmp_path, capsys):
    data = make_tiny_dataset(tmp_path / "data")
    other = make_tiny_dataset(tmp_path / "other", n_frames=11)  # same grid and fields, other frames
    run = tmp_path / "run"
    assert train.main(_argv(data, run)) is None
    config = (run / "config.yaml").read_text()
    err = one_line_error(train.main, _argv(other, run, f"resume={run / 'last.pt'}"), capsys)
    assert "trained on other data" in err and str(other) in err and "allow_other_data=true" in err, err
    assert (run / "config.yaml").read_text() == config  # nothing rewritten
    again = tmp_path / "tuned"
    tune = [f"resume={run / 'last.pt'}", "allow_other_data=true", "trainer.epochs=2", "trainer.resume_schedule=restart"]
    train.main(_argv(other, again, *tune))
    assert (again / "last.pt").is_file()


def test_metrics_jsonl_holds_each_epoch_once_after_a_kill_between_record_and_checkpoint(make_tiny_dataset, tmp_path):
    """A run killed after it appended an epoch's record but before that epoch's last.pt: the rerun resumes the
    earlier last.pt, and metrics.jsonl is rewritten to its history, so no epoch appears twice."""
    data = make_tiny_dataset(tmp_path / "data")
    run = tmp_path / "run"
    kw = dict(run_dir=run, device="cpu", epochs=2, progress=False, **_quick())
    Trainer("_pointwise_test", data, stop_at_step=2, **kw).fit()  # epoch 0 (2 batches), then stopped
    saved = (run / "last.pt").read_bytes()
    Trainer("_pointwise_test", data, resume=run / "last.pt", **kw).fit()  # epochs 1 and 2 (the fine-tune)
    (run / "last.pt").write_bytes(saved)  # as if killed while writing the epoch-1 checkpoint
    Trainer("_pointwise_test", data, resume=run / "last.pt", **kw).fit()
    epochs = [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert epochs == sorted(set(epochs)) == [0, 1, 2]


def _quick():
    return dict(
        batch_size=4, finetune={"epochs": 1, "n_out": 2}, warmup_steps=1, num_workers=0, max_batches_per_epoch=2
    )


def test_dead_writers_temporary_files_are_removed_and_live_ones_kept(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data")
    run = tmp_path / "run"
    run.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = run / f".last.pt.{int(dead.stdout)}.tmp"
    stale.write_bytes(b"x" * 1000)
    live = run / f".best.pt.{os.getppid()}.tmp"  # a live process (pytest's parent)
    live.write_bytes(b"y")
    Trainer("_pointwise_test", data, run_dir=run, device="cpu", epochs=1, progress=False, **_quick())
    assert not stale.exists() and live.exists()


def test_default_run_dir_is_unique_per_process(make_tiny_dataset, tmp_path, monkeypatch):
    cfg = compose_config("train", ["dataset.path=/x"])
    assert str(cfg.run_dir).endswith(f"_{os.getpid()}")
    data = make_tiny_dataset(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    t = Trainer("_pointwise_test", data, device="cpu", epochs=1, progress=False, **_quick())
    assert t.run_dir.parent == tmp_path.joinpath("outputs", "train").relative_to(tmp_path)
    assert t.run_dir.name.endswith(f"_{os.getpid()}")


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("trainer.max_steps", 3, ["trainer.max_steps=3", "warmup_steps=5", "fine-tune's first step (4)"]),
        ("trainer.stop_at_step", 2, ["trainer.stop_at_step=2", "warmup_steps=5", "fine-tune's first step (4)"]),
    ],
)
def test_a_stop_below_the_warmup_or_the_finetune_is_warned_in_one_line(
    make_tiny_dataset, tmp_path, caplog, key, value, words
):
    data = make_tiny_dataset(tmp_path / "data")
    with caplog.at_level(logging.WARNING):
        build_trainer(train_cfg(data, tmp_path / "run", f"{key}={value}", "trainer.warmup_steps=5"))
    lines = [r.getMessage() for r in caplog.records if key in r.getMessage()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), lines


def test_a_file_damaged_mid_run_stops_it_in_one_line_and_keeps_the_checkpoint(tmp_path, capsys):
    """Train one epoch, damage a train file's frames (its size is unchanged, so the folder check passes), continue:
    one line naming the file and dandelion-verify, status 2, and last.pt as the first epoch left it."""
    from small_generation import generate_folder

    data = generate_folder(tmp_path / "data", {"name": "solid_body", "n_frames": 8})
    run = tmp_path / "run"
    argv = _argv(data, run, "dataset=solid_body", "trainer.finetune.epochs=0", "trainer.epochs=3")
    train.main([*argv, "trainer.stop_at_step=4"])  # the first epoch (4 batches)
    saved = (run / "last.pt").read_bytes()
    bad = sorted((data / "train").glob("*.h5"))[0]
    _flip(bad)
    err = one_line_error(train.main, [*argv, f"resume={run / 'last.pt'}"], capsys)
    assert str(bad) in err and "dandelion-verify" in err and "regenerate" in err, err
    assert (run / "last.pt").read_bytes() == saved
    assert folder.read_sizes(data)  # the folder lists sizes


@pytest.mark.parametrize(
    "epochs, refused",
    [
        ([(0, 4, True), (1, 8, True)], False),
        ([(0, 4, True), (1, 6, False), (1, 8, True)], False),  # a max_minutes stop mid-epoch, then its resume
        ([(0, 4, True), (1, 8, True), (1, 8, True)], True),  # appended again by a rerun of a killed run
        ([(0, 4, True), (1, 8, True), (0, 4, True), (1, 8, True)], True),
    ],
)
def test_the_benchmark_curve_reader_refuses_an_epoch_recorded_twice(tmp_path, epochs, refused):
    from dandelion.benchmarks.grid.runs import _read_curve

    lines = [json.dumps({"epoch": e, "step": s, "epoch_complete": c, "val_loss": 1.0 / s}) for e, s, c in epochs]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    if refused:
        with pytest.raises(ValueError, match="twice"):
            _read_curve(tmp_path)
    else:
        assert [r["step"] for r in _read_curve(tmp_path)] == [s for _, s, _ in epochs]
