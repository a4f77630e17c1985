"""``dandelion-bench target=memory``: each phase's plan fits the budget and covers the batch."""

from __future__ import annotations

from omegaconf import OmegaConf

from dandelion.benchmarks.speed.memory import bench_memory


def test_every_phase_plan_fits_its_budget_and_covers_the_batch():
    m = OmegaConf.create(
        {
            "names": ["dandelion", "sfno"],
            "preset": "tiny",
            "nlat": 16,
            "nlon": 32,
            "grid": "equiangular",
            "in_channels": 16,
            "out_channels": 4,
            "batch": 16,
            "phases": [1, 4],
            "dtype": "bf16",
            "device_gib": 0.02,  # small enough that the fine-tune must split
            "fraction": 0.6,
        }
    )
    out = bench_memory(m, "cpu")
    rows = out["rows"]
    assert [(r["model"], r["n_out"]) for r in rows] == [("dandelion", 1), ("dandelion", 4), ("sfno", 1), ("sfno", 4)]
    for r in rows:
        p = r["plan"]
        assert r["fits"] and p["micro_batch"] * p["n_micro"] >= 16 > (p["n_micro"] - 1) * p["micro_batch"]
        assert r["peak_saved_bytes"] == p["micro_batch"] * p["per_sample_bytes"] <= r["budget_bytes"]
    four = {r["model"]: r for r in rows if r["n_out"] == 4}
    one = {r["model"]: r for r in rows if r["n_out"] == 1}
    for name in four:  # four rollout steps save about four times one step
        assert 3.5 < four[name]["saved_bytes_per_sample"] / one[name]["saved_bytes_per_sample"] < 4.5
    assert any(r["plan"]["n_micro"] > 1 for r in rows)
    assert "| dandelion | fine-tune (4) |" in out["table"]
