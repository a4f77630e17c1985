"""``dandelion-benchmark dry_run=true``'s price (benchmarks/grid/price.py): channels, runs, run time, totals."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid.price import dataset_channels, run_seconds, runs_of_cell
from dandelion.benchmarks.speed.roofline import DEVICES, roofline_model


@pytest.mark.parametrize(
    ("name", "channels", "masked"),
    [
        ("galewsky", 4, False),  # h and the Cartesian velocity (docs: 4 frames x (h, vx, vy, vz))
        ("held_suarez", 8 + 1 + 8 + 3 * 8, False),  # T x 8, ps, tracer x 8, velocity x/y/z x 8 (dandelion/channels.py)
        ("global_ocean", None, True),
    ],
)
def test_dataset_channels_follow_the_channel_layout(name, channels, masked):
    c, m = dataset_channels(name)
    assert m is masked
    if channels is not None:
        assert c == channels


def test_a_run_is_its_steps_times_the_step_plus_validation():
    trainer = {"epochs": 3, "max_batches_per_epoch": 10, "finetune": {"epochs": 2, "n_out": 4}, "val_max_batches": 5}
    # 30 one-step batches, 20 four-step batches (80 one-step passes), 5 validation batches in each of 5 epochs
    assert run_seconds(trainer, 2.0, 0.5) == pytest.approx(30 * 2.0 + 80 * 2.0 + 25 * 0.5)
    assert run_seconds({**trainer, "max_batches_per_epoch": None}, 2.0, 0.5) is None


def _tiny_gpu_scale(tmp_path):
    cfg = B.compose(
        "benchmark",
        [
            "scale=full",
            f"scale.results_dir={tmp_path / 'results'}",
            f"scale.work_dir={tmp_path / 'work'}",
            "scale.models=[sfno,dandelion]",
            "scale.preset=tiny",
            "scale.seeds=[0,1]",
            "scale.lr_sweep=[1e-3,3e-3]",
            "scale.trainer.epochs=2",
            "scale.trainer.max_batches_per_epoch=7",
            "scale.trainer.batch_size=2",
            "dry_run=true",
        ],
    )
    OmegaConf.set_struct(cfg, False)
    cfg.scale.datasets = {"galewsky_16x32": {"dataset": "galewsky", "overrides": {"nlat": 16, "nlon": 32}}}
    return cfg


def test_the_dry_run_prices_every_cell_from_the_roofline(tmp_path, capsys):
    cfg = _tiny_gpu_scale(tmp_path)
    out = B.benchmark(cfg)
    price = out["price"]
    assert [(c["model"], c["seed"]) for c in price["cells"]] == [
        ("sfno", 0),
        ("sfno", 1),
        ("dandelion", 0),
        ("dandelion", 1),
    ]
    trainer = OmegaConf.to_container(cfg.scale.trainer, resolve=True)
    for c in price["cells"]:
        assert c["runs"] == (2 if c["seed"] == 0 else 1) == runs_of_cell(cfg, c)
        spec = {
            "preset": "tiny",
            "nlat": 16,
            "nlon": 32,
            "grid": "equiangular",
            "batch": 2,
            "dtype": "bf16",  # the full scale trains with amp
            "in_channels": 4 * 4,
            "out_channels": 4,
            "top": 0,
            "warp_kernel": "triton",  # Dandelion's warps as CUDA runs them
        }
        row = roofline_model(c["model"], spec, {"h200": DEVICES["h200"]})
        assert c["source"] == "roofline"
        assert c["step_s"] == pytest.approx(row["estimated_step_s"]["h200"])
        secs = run_seconds(trainer, row["estimated_step_s"]["h200"], row["estimated_forward_s"]["h200"])
        assert c["hours"] == pytest.approx(c["runs"] * secs / 3600)
    assert price["total_hours"] == pytest.approx(sum(c["hours"] for c in price["cells"]))
    text = capsys.readouterr().out
    assert "H200-hours (source: roofline)" in text and "[price] total:" in text


def test_a_dry_run_of_a_gpu_scale_needs_no_gpu(tmp_path):
    cfg = _tiny_gpu_scale(tmp_path)
    B.check(cfg)  # device=cuda in the scale: no refusal for a dry run


def test_the_one_day_scale_asks_the_headline_question_at_256x512():
    cfg = B.compose("benchmark", ["scale=gpu_day"])
    s = cfg.scale
    assert {"dandelion", "flower2d", "sfno"} <= set(s.models) and len(s.seeds) >= 2
    grids = {}
    for key in s.datasets:
        spec = B.dataset_spec(cfg, key)
        dcfg = B.compose(
            "generate", [f"dataset={spec['dataset']}", *B.flatten_overrides(spec["overrides"], "dataset.")]
        )
        assert key.endswith(f"_{dcfg.dataset.nlat}x{dcfg.dataset.nlon}")
        grids.setdefault(spec["dataset"], set()).add((dcfg.dataset.nlat, dcfg.dataset.nlon))
    assert sum((256, 512) in g for g in grids.values()) >= 3
    assert any({(64, 128), (128, 256), (256, 512)} <= g for g in grids.values())  # a ladder on one dataset


@pytest.mark.slow
def test_the_one_day_scale_costs_at_most_a_day():
    """Counts the paper models at 256x512 on fake tensors (a few minutes on one core)."""
    out = B.benchmark(B.compose("benchmark", ["scale=gpu_day", "dry_run=true"]))
    assert out["price"]["total_hours"] <= 24
    assert {c["source"] for c in out["price"]["cells"]} == {"roofline"}
