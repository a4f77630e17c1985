"""A capped validation estimates the loss over the whole valid split: its windows are spread over the split
(``trainer.val_subset=spread``), not the first ones, which on a split stored trajectory by trajectory are its first
trajectories only (``val_subset=first``, kept to reproduce the runs made with it)."""

import numpy as np
import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
from train_config import train_cfg

from dandelion.cli.train import build_trainer
from dandelion.training.options import TrainOptions
from dandelion.training.schedule import validation_indices

N_TRAJ, PER_TRAJ = 29, 36  # a valid split of 29 trajectories of 36 windows each (the cpu Cahn-Hilliard keys)
N = N_TRAJ * PER_TRAJ


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_spread_subset_has_every_trajectory_and_a_loss_trend_averages_out(world_size):
    def picked(epoch, subset="spread"):
        shards = [_indices(N, 8, 8, r, world_size, subset, epoch) for r in range(world_size)]
        assert all(len(s) == 64 for s in shards)
        return sorted(i for s in shards for i in s)

    epochs = [picked(e) for e in range(45, 50)]  # the last 5 pretraining epochs of the cpu scale
    for p in epochs:
        assert len(set(p)) == len(p) == 64 * world_size
        assert set(i // PER_TRAJ for i in p) == set(range(N_TRAJ))  # every trajectory of the split is validated
    read = len(set(i for p in epochs for i in p))
    assert read >= 0.8 * 5 * 64 * world_size  # consecutive epochs read mostly other windows
    # the rule itself, pinned (a cell records only val_subset=spread): floor((i + u) n / m), u = frac(1/2 + epoch g)
    assert _indices(18, 1, 4) == [2, 6, 11, 15] and _indices(18, 1, 4, epoch=1) == [0, 5, 9, 14]
    assert _indices(18, 1, 2, rank=1, world_size=2) == [6, 15]
    # a loss that grows along the split (later trajectories harder) and is dominated by each trajectory's first
    # windows, as Cahn-Hilliard's (first window about 170 times the last)
    loss = np.array(
        [(1 + j / N_TRAJ) * (0.005 + 1.2 * np.exp(-t / 1.4)) for j in range(N_TRAJ) for t in range(PER_TRAJ)]
    )
    whole = loss.mean()
    five = np.mean([loss[p].mean() for p in epochs])
    assert abs(five - whole) < 0.1 * whole  # -8 %, -3.5 %, -1.2 % for 1, 2, 3 ranks: a fixed error of these epochs
    first = picked(49, "first")
    assert abs(loss[first].mean() - whole) > 0.15 * whole  # the old rule: the first trajectories, biased


def _indices(n, max_batches, batch_size, rank=0, world_size=1, subset="spread", epoch=0):
    return validation_indices(
        n, max_batches=max_batches, batch_size=batch_size, rank=rank, world_size=world_size, subset=subset, epoch=epoch
    )


@pytest.mark.parametrize("subset", ["spread", "first"])
def test_an_uncapped_or_covering_cap_validates_every_window_once(subset):
    for cap in (None, 200):
        shards = [_indices(N, cap, 8, r, 2, subset) for r in range(2)]
        assert sorted(shards[0] + shards[1]) == list(range(N))


def test_first_subset_is_the_first_windows_of_each_rank_shard():
    assert _indices(N, 2, 4, 0, 1, "first") == list(range(8))
    assert _indices(N, 2, 4, 1, 2, "first") == list(range(1, 17, 2))


def test_unknown_subset_is_refused_naming_the_choices(tmp_path):
    with pytest.raises(ValueError, match="val_subset='middle'.*spread"):
        _indices(N, 2, 4, 0, 1, "middle")
    with pytest.raises(ValueError, match="val_subset"):
        TrainOptions(val_subset="middle")


def test_trainer_validates_the_spread_windows(make_tiny_dataset, tmp_path, monkeypatch):
    """With the cap below the valid split, the trainer's capped validation reads windows of its last trajectory
    too (spread), and only the first trajectory's with val_subset=first."""
    data = make_tiny_dataset(tmp_path / "data", splits={"train": [0, 1], "valid": [2, 3, 4], "test": [5]})
    seen = {}
    for subset in ("spread", "first"):
        trainer = build_trainer(
            train_cfg(data, tmp_path / subset, "trainer.val_max_batches=1", f"trainer.val_subset={subset}")
        )
        loader = trainer._loader

        def recording_loader(ds, sampler, subset=subset, loader=loader):
            seen[subset] = list(sampler)
            return loader(ds, sampler)

        monkeypatch.setattr(trainer, "_loader", recording_loader)
        val = trainer.validate()
        trainer.close()
        assert np.isfinite(val["val_loss"])
    n_valid = 3 * 6  # 3 trajectories of 10 frames: 6 windows of 4 in, 1 out each
    assert len(seen["spread"]) == len(seen["first"]) == 4  # one batch of the quick trainer's 4
    assert max(seen["spread"]) >= n_valid - 6 and max(seen["first"]) < 6
