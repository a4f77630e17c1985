"""The benchmark's learning-rate sweep: widened along the ladder until the best rate is inside, swept once on
the sweep seed and reused by the other seeds; and the linear autoregression reference.

The sweep tests replace the training by a known loss landscape (``_train_one`` monkeypatched), so that the
selection logic is checked against a loss whose optimum is known.
"""

import json
import math

import pytest
import torch
from omegaconf import OmegaConf

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid.references import fit_linear_ar
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.forecast import next_frame

KEY = "galewsky_32x64"  # a dataset key of the scale (no lr_from: the default rule)
LADDER = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1]


def _cfg(start, ladder=LADDER, sweep_seed=0):
    cfg = B.compose("benchmark", ["scale=cpu"])
    OmegaConf.set_struct(cfg, False)
    cfg.scale.lr_sweep = list(start)
    cfg.scale.lr_ladder = list(ladder)
    cfg.scale.sweep_seed = sweep_seed
    return cfg


@pytest.fixture
def landscape(monkeypatch):
    """Training replaced by a loss ``(log10 lr - log10 optimum)**2 + 1`` (inf above ``diverge``); records calls."""
    calls = []
    state = {"optimum": 3e-3, "diverge": math.inf}

    def fake(cfg, key, model, seed, lr, data_path):
        calls.append((seed, lr))
        loss = math.nan if lr > state["diverge"] else (math.log10(lr) - math.log10(state["optimum"])) ** 2 + 1.0
        return {
            "lr": lr,
            "val_loss": loss,
            "val_vrmse": loss,
            "train_loss": loss,
            "step": 1,
            "run_dir": f"r{seed}_{lr}",
            "last": f"r{seed}_{lr}/last.pt",
            "command": f"train seed={seed} lr={lr}",
        }

    monkeypatch.setattr(B, "_train_one", fake)
    return state, calls


@pytest.mark.parametrize(
    "optimum, start, tried, inside",
    [
        (3e-3, [1e-3, 3e-3, 1e-2], [1e-3, 3e-3, 1e-2], True),  # inside from the start: nothing added
        (3e-2, [1e-3, 3e-3, 1e-2], [1e-3, 3e-3, 1e-2, 3e-2, 1e-1], True),  # optimum above: widened upwards twice
        (1e-4 * 1.5, [1e-3, 3e-3], [1e-4, 3e-4, 1e-3, 3e-3], False),  # optimum below the ladder's end: flagged
    ],
)
def test_sweep_widens_until_best_is_inside(landscape, optimum, start, tried, inside):
    state, calls = landscape
    state["optimum"] = optimum
    runs, best, info = B.sweep_lr(_cfg(start), KEY, "m", 0, None)
    assert info["tried"] == pytest.approx(tried)
    assert [r["lr"] for r in runs] == pytest.approx(tried)
    nearest = min(LADDER, key=lambda x: abs(math.log10(x) - math.log10(optimum)))
    assert best["lr"] == pytest.approx(nearest)  # the ladder rate nearest the known optimum
    assert info["inside"] is inside
    assert len(calls) == len(tried)  # each rate trained once


def test_sweep_at_ladder_edge_is_flagged(landscape):
    state, _ = landscape
    state["optimum"] = 1.0  # far above the ladder
    _, best, info = B.sweep_lr(_cfg([1e-2, 3e-2]), KEY, "m", 0, None)
    assert best["lr"] == pytest.approx(1e-1) and info["inside"] is False


def test_diverged_rate_counts_as_worst(landscape):
    state, _ = landscape
    state["optimum"], state["diverge"] = 1.0, 2e-2  # loss falls with the rate until the runs diverge
    _, best, info = B.sweep_lr(_cfg([3e-3, 1e-2]), KEY, "m", 0, None)
    assert best["lr"] == pytest.approx(1e-2) and info["inside"] and info["tried"] == pytest.approx([3e-3, 1e-2, 3e-2])
    state["diverge"] = 0.0
    with pytest.raises(FloatingPointError, match="diverged"):
        B.sweep_lr(_cfg([3e-3, 1e-2]), KEY, "m", 0, None)


def test_start_rate_off_the_ladder_is_refused(landscape):
    with pytest.raises(ValueError, match="lr_ladder"):
        B.sweep_lr(_cfg([2e-3]), KEY, "m", 0, None)


def test_other_seeds_reuse_the_sweep_seed_rate(landscape, monkeypatch, tmp_path):
    """run_cell on seed 2 runs (or reuses) the seed-0 sweep and trains seed 2 once, at seed 0's rate."""
    state, calls = landscape
    state["optimum"] = 1e-2
    cfg = _cfg([1e-3, 3e-3, 1e-2])
    captured = {}
    monkeypatch.setattr(B, "ensure_dataset", lambda cfg, key: tmp_path)
    monkeypatch.setattr(B, "load_metadata", lambda p: {"nlat": 8, "nlon": 16, "grid": "equiangular"})

    class Stop(Exception):
        pass

    def fake_eval(cfg, key, ckpt, data_path, out_dir):
        captured["ckpt"] = str(ckpt)
        raise Stop

    monkeypatch.setattr(B, "_evaluate", fake_eval)
    with pytest.raises(Stop):
        B.run_cell(cfg, "galewsky_32x64", "m", 2)
    seed0 = [lr for s, lr in calls if s == 0]
    seed2 = [lr for s, lr in calls if s == 2]
    assert seed0 == pytest.approx([1e-3, 3e-3, 1e-2, 3e-2])  # the seed-0 sweep, widened once
    assert seed2 == pytest.approx([1e-2])  # seed 2: one run at the chosen rate
    assert captured["ckpt"] == "r2_0.01/last.pt"  # and that run is the one evaluated


class _LinearData(torch.utils.data.Dataset):
    """Windows of an exactly linear recurrence per grid point, ``f_{k+1} = f_k + 0.5 (f_k - f_{k-1}) + c``,
    with the layout and grid of a real dataset (its normalisation is irrelevant: the recurrence is on the
    normalised values)."""

    def __init__(self, base: WindowDataset, n_windows: int = 12):
        self.layout, self.grid, self.wet, self.n_in = base.layout, base.grid, base.wet, base.n_in
        self.split, self.path = "train", base.path
        g = torch.Generator().manual_seed(0)
        C, (H, W) = base.layout.n_channels, base.grid.shape
        self.c = 0.01 * torch.randn(C, H, W, generator=g, dtype=torch.float64)
        self.items = []
        for _ in range(n_windows):
            f = [torch.randn(C, H, W, generator=g, dtype=torch.float64)]
            f.append(f[0] + 0.1 * torch.randn(C, H, W, generator=g, dtype=torch.float64))
            while len(f) < self.n_in + 1:
                f.append(f[-1] + 0.5 * (f[-1] - f[-2]) + self.c)
            self.items.append({"x": torch.cat(f[: self.n_in]).float(), "y": f[self.n_in][None].float()})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def test_linear_ar_recovers_an_exactly_linear_recurrence(make_tiny_dataset, tmp_path):
    base = WindowDataset(make_tiny_dataset(tmp_path / "d", nlat=8, nlon=16), "train", n_in=4, n_out=1)
    data = _LinearData(base)
    layer, info = fit_linear_ar(data)
    assert info["n_windows"] == len(data) and info["n_features"] == 4 * base.layout.n_channels
    C = base.layout.n_channels
    s = base.layout.increment_scale()
    for item in data.items[:3]:
        x, y = item["x"][None], item["y"]
        pred = next_frame(layer, x, C, s, s)
        persistence = (x[:, -C:] - y).abs().max()
        assert (pred - y).abs().max() < 1e-3 * persistence  # the recurrence is linear: the fit is exact up to float32


def test_linear_ar_ignores_non_finite_land(make_tiny_dataset, tmp_path):
    """Land points (weight 0) holding NaN must not reach the fit: the coefficients equal those of a fit with the land
    values replaced by anything finite."""
    base = WindowDataset(make_tiny_dataset(tmp_path / "d", nlat=8, nlon=16, masked=True), "train", n_in=4, n_out=1)
    assert base.wet is not None and not base.wet.all()
    data = _LinearData(base)
    fits = []
    for fill in (math.nan, 7.0):
        for item in data.items:
            item["x"] = torch.where(base.wet, item["x"], torch.full_like(item["x"], fill))
            item["y"] = torch.where(base.wet, item["y"], torch.full_like(item["y"], fill))
        fits.append(fit_linear_ar(data)[0])
    w_nan, w_fill = (torch.cat([f.weight.flatten(), f.bias]) for f in fits)
    assert torch.isfinite(w_nan).all()
    assert torch.allclose(w_nan, w_fill, rtol=1e-4, atol=1e-6)


def test_a_diverging_rate_is_recorded_and_the_sweep_goes_on(make_tiny_dataset, tmp_path):
    """The real trainer raises on a non-finite loss; the sweep records that rate as diverged (reused on a rerun,
    never retrained) and keeps the stable one."""
    data = make_tiny_dataset(
        tmp_path / "data", nlat=8, nlon=16, n_frames=8, splits={"train": [0, 1], "valid": [2], "test": [3]}
    )
    cfg = B.compose(
        "benchmark",
        [
            "scale=cpu",
            f"scale.results_dir={tmp_path / 'results'}",
            f"scale.work_dir={tmp_path / 'work'}",
            "scale.preset=tiny",
            "scale.lr_sweep=[1e-3]",
            "scale.lr_ladder=[1e-3,1e4]",
            "scale.trainer.grad_clip=0",
            "scale.trainer.epochs=1",
            "scale.trainer.max_batches_per_epoch=2",
            "scale.trainer.batch_size=2",
            "scale.trainer.finetune.epochs=0",
            "scale.trainer.warmup_fraction=0.25",
            "scale.trainer.val_max_batches=1",
        ],
    )
    OmegaConf.set_struct(cfg, False)
    cfg.scale.datasets = {"tiny": {"dataset": "solid_body", "path": str(data), "overrides": {}}}
    runs, best, info = B.sweep_lr(cfg, "tiny", "sfno", 0, data)
    assert info["tried"] == pytest.approx([1e-3, 1e4]) and best["lr"] == pytest.approx(1e-3) and info["inside"] is False
    diverged = next(r for r in runs if r["lr"] > 1)
    assert diverged["stopped"] == "diverged" and math.isnan(diverged["val_loss"])
    again, _, _ = B.sweep_lr(cfg, "tiny", "sfno", 0, data)
    assert all(r["reused"] for r in again)


def test_other_seeds_take_the_rate_from_the_finished_sweep_cell(landscape, monkeypatch, tmp_path):
    """With the sweep seed's cell finished under the current protocol, another seed trains nothing of seed 0."""
    state, calls = landscape
    cfg = _cfg([1e-3, 3e-3, 1e-2])
    cfg.scale.results_dir = str(tmp_path / "results")
    key = "galewsky_32x64"
    sweep = [
        {
            "lr": lr,
            "val_loss": v,
            "val_vrmse": v,
            "train_loss": v,
            "steps": 1,
            "stopped": "done",
            "minutes": 0.0,
            "run_dir": f"r0_{lr}",
            "reused": False,
            "curve": [],
        }
        for lr, v in ((1e-3, 3.0), (3e-3, 1.0), (1e-2, 2.0))
    ]
    path = B.cell_path(cfg.scale.results_dir, key, "m", 0)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "protocol_hash": B.protocol_hash(cfg, key),
                "trainer_resolved": B.resolved_trainer(cfg),
                "lr": 3e-3,
                "sweep": sweep,
                "lr_selection": {"sweep_seed": 0, "tried": [1e-3, 3e-3, 1e-2], "inside": True},
            }
        )
    )
    runs, chosen, info = B._sweep_of_cell(cfg, key, "m", 0, None)
    assert calls == [] and chosen["lr"] == 3e-3 and info["from_cell"] == str(path) and len(runs) == 3


def test_a_cell_of_another_model_architecture_is_stale(tmp_path):
    import torch

    from dandelion.benchmarks.grid.cells import _cell_state, model_architecture

    state = torch.random.get_rng_state()
    small, tiny = model_architecture("dandelion", "small"), model_architecture("dandelion", "tiny")
    assert torch.equal(torch.random.get_rng_state(), state)  # building the models left the caller's RNG alone
    assert small and tiny and small != tiny and small == model_architecture("dandelion", "small")
    assert model_architecture("no_such_model", "small") is None
    path = tmp_path / "seed0.json"
    for stored, expected in ((small, "finished"), (tiny, "stale"), (None, "stale")):
        rec = {"protocol_hash": "h", "trainer_resolved": {"lr_free": 1}}
        if stored:
            rec["architecture"] = stored
        path.write_text(json.dumps(rec))
        assert _cell_state(path, "h", {"lr_free": 1}, small) == expected
        assert _cell_state(path, "h", {"lr_free": 1}, None) == "finished"  # a model not buildable here: not judged
