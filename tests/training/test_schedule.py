"""Resuming with a schedule other than the checkpoint's: the remaining steps are re-planned, or the run is
refused with the fix named; never extra steps at learning rate 0 reported as success."""

import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
import torch
from train_config import train_cfg

from dandelion.checkpoint import load_checkpoint
from dandelion.cli.train import build_trainer, train

# 3 train trajectories x 5 windows (9 frames, 4 in 1 out) = 15 windows: 4 batches of 4 per epoch, no fine-tune
COMMON = [
    "trainer.finetune.epochs=0",
    "trainer.max_batches_per_epoch=null",
    "trainer.warmup_steps=2",
    "trainer.lr=1e-2",
]


@pytest.fixture
def data(make_tiny_dataset, tmp_path):
    return make_tiny_dataset(tmp_path / "data", n_frames=9)


def _fit_recording_lr(cfg):
    """Train; returns (result, learning rate of every optimiser step taken)."""
    trainer = build_trainer(cfg)
    lrs, step = [], trainer.optimizer.step

    def recording_step(*args, **kwargs):
        lrs.append(trainer.optimizer.param_groups[0]["lr"])
        return step(*args, **kwargs)

    trainer.optimizer.step = recording_step
    try:
        return trainer.fit(), lrs
    finally:
        trainer.close()


def _weights(path):
    return load_checkpoint(path)["model"]


def test_interrupted_run_resumed_with_a_longer_schedule_replans_the_rest(data, tmp_path):
    first = train(train_cfg(data, tmp_path / "a", *COMMON, "trainer.epochs=2", "trainer.stop_at_step=3"))
    assert first["step"] == 3
    lr_at_stop = load_checkpoint(first["last"])["optimizer"]["param_groups"][0]["lr"]
    assert 0 < lr_at_stop < 1e-2
    result, lrs = _fit_recording_lr(
        train_cfg(data, tmp_path / "b", *COMMON, "trainer.epochs=4", f"resume={first['last']}")
    )
    assert result["step"] == 16 and result["stopped"] == "done" and len(lrs) == 13
    # continuous where the checkpoint stopped, then a cosine decay over the NEW plan: decreasing, positive to the end
    assert lrs[0] == pytest.approx(lr_at_stop)
    assert all(b < a for a, b in zip(lrs, lrs[1:]))
    assert all(lr > 0 for lr in lrs)
    assert lrs[-1] < 0.05 * lr_at_stop  # ends near the floor (min_lr_ratio = 0) at the new last step
    ckpt = load_checkpoint(result["last"])
    assert ckpt["extra"]["total_steps"] == 16 and ckpt["optimizer"]["param_groups"][0]["lr"] == pytest.approx(
        0.0, abs=1e-12
    )


def test_finished_run_is_refused_with_the_fix_then_restarts_on_request(data, tmp_path):
    done = train(train_cfg(data, tmp_path / "a", *COMMON, "trainer.epochs=1"))
    assert done["step"] == 4
    assert load_checkpoint(done["last"])["optimizer"]["param_groups"][0]["lr"] == 0.0  # the schedule ended at the floor
    with pytest.raises(ValueError, match="resume_schedule=restart"):
        build_trainer(train_cfg(data, tmp_path / "b", *COMMON, "trainer.epochs=3", f"resume={done['last']}"))
    result, lrs = _fit_recording_lr(
        train_cfg(
            data,
            tmp_path / "c",
            *COMMON,
            "trainer.epochs=3",
            f"resume={done['last']}",
            "trainer.resume_schedule=restart",
        )
    )
    assert result["step"] == 12 and len(lrs) == 8
    assert all(lr > 0 for lr in lrs) and max(lrs) == pytest.approx(1e-2)  # a new warm-up to trainer.lr, then cosine
    before, after = _weights(done["last"]), _weights(result["last"])
    assert not all(torch.equal(before[k], after[k]) for k in before)  # the extra steps did train


def test_checkpoint_schedule_kept_on_request_and_same_schedule_unchanged(data, tmp_path):
    first = train(train_cfg(data, tmp_path / "a", *COMMON, "trainer.epochs=2", "trainer.stop_at_step=3"))
    ckpt_lr = load_checkpoint(first["last"])["optimizer"]["param_groups"][0]["lr"]
    # resume_schedule=checkpoint: the checkpoint's plan (8 steps) bounds the run, which stops when it ends
    result, lrs = _fit_recording_lr(
        train_cfg(
            data,
            tmp_path / "b",
            *COMMON,
            "trainer.epochs=4",
            f"resume={first['last']}",
            "trainer.resume_schedule=checkpoint",
        )
    )
    assert result["step"] == 8 and result["stopped"] == "schedule_end" and len(lrs) == 5
    assert lrs[0] == pytest.approx(ckpt_lr) and all(lr > 0 for lr in lrs)
    # same plan: the default resume follows the one schedule
    same, lrs_same = _fit_recording_lr(
        train_cfg(data, tmp_path / "c", *COMMON, "trainer.epochs=2", f"resume={first['last']}")
    )
    assert same["step"] == 8 and lrs_same == pytest.approx(lrs)
    with pytest.raises(ValueError, match="resume_schedule"):
        build_trainer(
            train_cfg(data, tmp_path / "d", *COMMON, f"resume={first['last']}", "trainer.resume_schedule=sometimes")
        )


def test_finished_run_resumed_unchanged_reports_its_last_train_loss(data, tmp_path):
    done = train(train_cfg(data, tmp_path / "a", *COMMON, "trainer.epochs=1"))
    again = train(train_cfg(data, tmp_path / "b", *COMMON, "trainer.epochs=1", f"resume={done['last']}"))
    assert again["step"] == done["step"] == 4  # nothing trained in the second call
    last = load_checkpoint(done["last"])["extra"]["history"][-1]["train_loss"]
    assert again["train_loss"] == last == done["train_loss"]


@pytest.mark.parametrize("epochs", [4, 8])
def test_warmup_fraction_scales_the_warmup_with_the_planned_steps(data, tmp_path, epochs):
    # 4 optimiser steps per epoch; a quarter of the planned steps warms up linearly, whatever warmup_steps says
    cfg = train_cfg(
        data, tmp_path / f"w{epochs}", *COMMON, f"trainer.epochs={epochs}", "++trainer.warmup_fraction=0.25"
    )
    result, lrs = _fit_recording_lr(cfg)
    total = 4 * epochs
    warm = total // 4
    assert result["step"] == total and len(lrs) == total
    assert lrs[:warm] == pytest.approx([1e-2 * (s + 1) / warm for s in range(warm)])
    assert all(b < a for a, b in zip(lrs[warm:], lrs[warm + 1 :]))  # then the cosine decay


def test_warmup_fraction_is_checked():
    from dandelion.training.options import OptionError, TrainOptions

    assert TrainOptions(warmup_fraction=0.1).warmup_for(1200) == 120
    assert TrainOptions(warmup_steps=7).warmup_for(1200) == 7
    for bad in (-0.1, 1.5, float("nan"), "10%"):
        with pytest.raises(OptionError, match="warmup_fraction"):
            TrainOptions(warmup_fraction=bad)
