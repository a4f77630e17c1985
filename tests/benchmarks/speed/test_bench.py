"""``dandelion-bench``: its measurement primitives measure what they claim, and each target runs at tiny sizes.

No test asserts a time: the checks are that memory of known allocations is measured exactly, that
the saved-activation count follows autograd's rules (views counted once, parameters left out), that
the numbers of a row are consistent with each other (ratios, medians, peak >= saved activations),
that the largest-batch search finds the threshold of a known predicate, and that the CLI writes
into a run folder unless ``output=`` names a file.
"""

import math
import os
from importlib import resources

import pytest
import torch
from omegaconf import OmegaConf

from dandelion.benchmarks.speed import bench as B
from dandelion.benchmarks.speed.measure import median, peak_bytes, saved_activation_bytes, tensor_bytes
from dandelion.benchmarks.speed.models import RATIO_FIELDS, measure_group, search_largest
from dandelion.benchmarks.speed.profile import CATEGORIES, build_dandelion
from dandelion.warp import TangentWarpS2

MODELS = ["dandelion", "sfno", "disco", "flower2d"]
#: The models group's measurement at the tiny preset on a 16 x 32 CPU grid (batch and repeats set per test).
TINY_SPEC = {
    "preset": "tiny",
    "nlat": 16,
    "nlon": 32,
    "grid": "equiangular",
    "dtype": "fp32",
    "device": "cpu",
    "in_channels": 16,
    "out_channels": 4,
}


def _cfg(target: str, **over):
    cfg = OmegaConf.load(str(resources.files("dandelion.configs") / "bench.yaml"))
    cfg.pop("hydra", None)
    cfg.pop("defaults", None)
    cfg.target = target
    for k, v in over.items():
        OmegaConf.update(cfg, k, v, merge=False)
    return cfg


def test_cpu_peak_of_known_allocations_is_exact():
    n = 2**18  # float32: 1 MiB

    def alloc():
        a = torch.ones(n)  # 1 MiB
        b = torch.ones(n // 2)  # +0.5 MiB while a lives: the peak
        del a
        c = torch.ones(n // 4)  # after a is freed: below the peak
        return float(b[0] + c[0])

    assert peak_bytes(alloc, "cpu") == 4 * n + 4 * n // 2
    assert peak_bytes(lambda: None, "cpu") == 0
    keep = torch.ones(n)  # allocated before the call: not part of its peak
    assert peak_bytes(keep.zero_, "cpu") == 0


def test_cpu_peak_keeps_stderr_free_of_profiler_log_lines_but_passes_the_rest(capfd):
    def alloc_and_complain():
        torch.ones(1000)
        os.write(2, b"a real problem\n")  # below Python, like the profiler's own lines

    assert peak_bytes(alloc_and_complain, "cpu") > 0
    err = capfd.readouterr().err
    assert "a real problem" in err
    assert not any(line.startswith(("USDT:", "STAGE:")) for line in err.splitlines()), err


def test_saved_activations_count_unique_storages_without_parameters():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.full((1,), 2.0))

        def forward(self, x):
            h = self.w * x  # saves x (for the gradient of w); w itself is a parameter
            return h.sin() + h.view(-1).cos().view_as(h)  # both save h: one storage

    x = torch.randn(4, 8, 16)
    assert saved_activation_bytes(M(), x) == 2 * x.nbytes
    sparse = torch.eye(5).to_sparse()
    assert sum(tensor_bytes(sparse).values()) == sparse._values().nbytes + sparse._indices().nbytes


def test_median():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    with pytest.raises(ValueError, match="n_repeat"):
        median([])


@pytest.mark.parametrize("threshold", [1, 7, 100, 999])
@pytest.mark.parametrize("guess", [1, 50, 5000])
def test_largest_batch_search_finds_the_threshold(threshold, guess):
    calls = []

    def fits(b):
        calls.append(b)
        return b <= threshold

    res = search_largest(fits, guess, max_batch=4096, max_tries=30)
    assert res["converged"]
    assert res["largest_batch"] <= threshold < res["smallest_failing_batch"]
    assert res["smallest_failing_batch"] - res["largest_batch"] <= max(1, int(0.05 * res["largest_batch"]))
    assert [b for b, _ in res["tries"]] == calls
    assert search_largest(lambda b: False, 10, 100)["largest_batch"] is None
    capped = search_largest(lambda b: True, 3, max_batch=40, max_tries=30)
    assert capped["largest_batch"] == 40 and capped["smallest_failing_batch"] is None


def test_models_group_rows_are_consistent():
    spec = {**TINY_SPEC, "batch": 2, "n_warmup": 1, "n_repeat": 3}
    rows = measure_group(MODELS, spec)
    assert [r["model"] for r in rows] == MODELS
    ref = rows[0]
    x_bytes = 2 * 16 * 16 * 32 * 4  # the input batch may be saved by the first layer but is allocated before the step
    for r in rows:
        assert "error" not in r, r.get("error")
        assert len(r["forward_cpu_repeats_s"]) == len(r["train_step_wall_repeats_s"]) == 3
        assert r["forward_s"] == r["forward_cpu_s"] == median(r["forward_cpu_repeats_s"])  # CPU: the CPU-time clock
        assert r["clock"] == "process_cpu_time"
        assert r["train_step_peak_bytes"] >= r["saved_activation_bytes"] - x_bytes > 0
        assert r["forward_peak_bytes"] > 0
        assert r["train_step_peak_bytes_per_sample"] * 2 == r["train_step_peak_bytes"]
        for key, field in RATIO_FIELDS.items():
            assert math.isclose(r["ratio_to_dandelion"][key], r[field] / ref[field])
    assert all(v == 1.0 for v in ref["ratio_to_dandelion"].values())


def test_saved_activations_scale_with_the_batch():
    spec = {**TINY_SPEC, "n_warmup": 0, "n_repeat": 1}
    one, four = (measure_group(["dandelion", "sfno"], {**spec, "batch": b}) for b in (1, 4))
    for a, b in zip(one, four):
        assert 3.5 < b["saved_activation_bytes"] / a["saved_activation_bytes"] <= 4.0, a["model"]


def test_largest_batch_on_a_simulated_cpu_capacity():
    spec = {**TINY_SPEC, "batch": 2, "n_warmup": 1, "n_repeat": 1, "largest_batch": True, "cpu_capacity_mib": 8}
    (row,) = measure_group(["sfno"], spec)
    lb = row["largest_batch"]
    assert lb["simulated_capacity"] and lb["largest_batch"] is not None
    per = row["train_step_peak_bytes_per_sample"]
    assert lb["largest_batch"] * per <= 1.2 * 8 * 2**20  # what fits is about capacity / per-sample peak
    assert lb["smallest_failing_batch"] is None or lb["smallest_failing_batch"] * per > 0.8 * 8 * 2**20


def test_bench_models_writes_into_a_run_folder_unless_asked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _cfg(
        "models",
        **{
            "models.names": ["dandelion", "sfno"],
            "models.presets": ["tiny"],
            "models.resolutions": [[16, 32]],
            "models.batch_sizes": [1],
            "models.n_repeat": 1,
            "models.parameter_table": False,
        },
    )
    out = B.bench(cfg)
    written = list(tmp_path.rglob("*.json"))
    assert len(written) == 1 and written[0].relative_to(tmp_path).parts[:2] == ("outputs", "bench")
    assert out["machine"]["threads"] == 1 and out["machine"]["cpu"] and out["versions"]["torch"]
    assert not out["partial"] and all(r["train_step_peak_bytes"] > 0 for r in out["rows"])
    target = tmp_path / "asked" / "b.json"
    B.bench(OmegaConf.merge(cfg, {"output": str(target)}))
    assert target.exists() and len(list(tmp_path.rglob("*.json"))) == 2
    with pytest.raises(ValueError, match="target=models"):
        B.bench(OmegaConf.merge(cfg, {"target": "model"}))


def test_bench_solvers_rows_and_reference(tmp_path):
    cfg = _cfg(
        "solvers",
        **{
            "solvers.scenarios": ["galewsky"],
            "solvers.nlat": 16,
            "solvers.nlon": 32,
            "solvers.batch_sizes": [1, 2],
            "solvers.lmax_by_scenario": {"galewsky": 10},
            "solvers.galewsky_reference.lmax": [10],
            "solvers.galewsky_reference.batches": [1, 2],
            "solvers.galewsky_reference.days": 0.1,
            "output": str(tmp_path / "s.json"),
        },
    )
    out = B.bench(cfg)
    for r in out["rows"]:
        assert "error" not in r, r["error"]
        assert r["solver_lmax"] == 10 and r["simulated"] == pytest.approx(r["dt_frame"])
        assert r["seconds_per_frame_per_trajectory"] * r["batch"] == pytest.approx(r["wall_s"])
    th, ours1, ours2 = out["galewsky_vs_torch_harmonics"]
    assert th["finite"] and th["batch"] == 1
    assert ours1["batch_gain"] == 1.0 and ours2["batch"] == 2
    assert ours1["steps"] == max(1, round(0.1 * 86400 / ours1["dt"]))


def test_bench_profile_split_and_roofline(tmp_path):
    cfg = _cfg(
        "profile",
        **{
            "profile.presets": ["tiny"],
            "profile.nlat": 16,
            "profile.nlon": 32,
            "profile.n_repeat": 1,
            "profile.bandwidth_mib": 4,
            "output": str(tmp_path / "p.json"),
        },
    )
    (row,) = B.bench(cfg)["rows"]
    model = build_dandelion(
        {"preset": "tiny", "in_channels": 16, "out_channels": 4, "nlat": 16, "nlon": 32, "grid": "equiangular"}, "cpu"
    )
    warps = [m for m in model.modules() if isinstance(m, TangentWarpS2)]
    assert set(row["split"]) == set(CATEGORIES)
    assert row["split"]["displacement_mlp"]["calls"] == len(warps)
    assert row["split"]["warp_sampling"]["calls"] == len(warps)
    assert len(row["warp_roofline"]) == len(warps)
    for layer in row["warp_roofline"]:
        assert layer["gather_bytes"] == 4 * layer["value_bytes"] == 4 * layer["output_bytes"]
        assert layer["total_bytes"] - layer["compulsory_bytes"] == 3 * layer["value_bytes"]
        assert layer["measured_forward_s"] > 0


def test_one_band_limit_for_the_solvers_skips_the_finite_volume_ones():
    """``solvers.lmax=N`` sets every spectral solver's band limit; the finite-volume scenarios (which refuse a
    band limit) keep none instead of failing their rows."""
    from dandelion.benchmarks.speed.solvers import band_limit
    from dandelion.datasets.generate import build_scenario

    s = _cfg("solvers", **{"solvers.lmax": 21}).solvers
    assert band_limit(s, "galewsky") == 21
    for name in ("shock_caps", "global_ocean"):
        assert band_limit(s, name) is None
        with pytest.raises(ValueError, match="does not apply"):  # what the row would have recorded
            build_scenario({"name": name, "path": "unused", "lmax": 21})
    s = _cfg("solvers").solvers
    assert band_limit(s, "galewsky") == s.lmax_by_scenario["galewsky"]
    assert band_limit(s, "shock_caps") is None
