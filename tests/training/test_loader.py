"""The trainer's kept loaders (dandelion/training/loader.py) and ``dandelion-bench target=loader``."""

from __future__ import annotations

import pytest
import torch

from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.training.loader import EpochLoaders
from dandelion.training.schedule import EpochSampler


@pytest.fixture
def windows(make_tiny_dataset, tmp_path):
    ds = WindowDataset(make_tiny_dataset(tmp_path / "data", n_frames=8), "train", n_in=4, n_out=1)
    yield ds
    ds.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_a_kept_loader_yields_each_epochs_batches_as_a_new_loader_would(windows, workers):
    loaders = EpochLoaders(batch_size=3, num_workers=workers, device=torch.device("cpu"), seed=0)
    try:
        kept = []
        for epoch in range(3):
            sampler = EpochSampler(len(windows), seed=5, epoch=epoch)
            loader = loaders(windows, sampler)
            got = [b["x"] for b in loader]
            fresh = torch.utils.data.DataLoader(windows, batch_size=3, sampler=list(sampler))
            want = [b["x"] for b in fresh]
            assert len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want))
            kept.append(loader)
        assert all(k is kept[0] for k in kept)  # one loader for the run
        assert kept[0].persistent_workers is (workers > 0)
        # an epoch left early (a stop reason) does not disturb the next one
        it = iter(loaders(windows, EpochSampler(len(windows), seed=5, epoch=3)))
        next(it)
        again = [b["x"] for b in loaders(windows, list(range(len(windows))))]
        assert torch.equal(torch.cat(again), torch.stack([windows[i]["x"] for i in range(len(windows))]))
    finally:
        loaders.close()


def test_bench_loader_reports_samples_per_second(windows, tmp_path):
    from omegaconf import OmegaConf

    from dandelion.benchmarks.speed.loader import bench_loader

    cfg = OmegaConf.create(
        {
            "path": str(windows.path),
            "split": "train",
            "n_in": 4,
            "n_out": 1,
            "batch_size": 2,
            "num_workers": [0, 1],
            "n_batches": 3,
            "epochs": 2,
        }
    )
    out = bench_loader(cfg, "cpu")
    rows = out["rows"]
    assert [(r["num_workers"], r["epoch"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for r in rows:
        assert r["samples"] == min(6, len(windows)) and r["samples_per_s"] > 0
        assert r["persistent_workers"] is (r["num_workers"] > 0)
