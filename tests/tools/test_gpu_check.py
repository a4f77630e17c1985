"""The GPU check (tools/gpu/gpu_check.py) in its dry-run mode: every step runs on the CPU at tiny sizes.

The dry run executes the same steps as the check on a GPU machine (only sizes and the device differ),
so a broken command line, a renamed option or a missing result is found here and not in the lent
minutes of a GPU.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEPS = [
    "environment",
    "bench_dandelion",
    "bench_dandelion_fast",
    "bench_sfno",
    "bench_flower2d",
    "finetune_step",
    "build_kernels",
    "bench_disco",
    "bench_s2transformer",
    "tests",
    "generate",
    "train",
]


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_real_plan_fits_its_budget_and_measures_the_training_rows_first():
    mod = _module()
    limits = mod.SIZES["real"]["limits"]
    assert sum(limits.values()) < mod.BUDGET_S < 600  # one 10-minute call, start-up and transfers aside
    order = list(limits)
    assert order.index("bench_dandelion") < order.index("finetune_step") < order.index("build_kernels")
    assert order.index("build_kernels") < order.index("bench_disco") < order.index("tests")
    assert set(mod.SIZES["dry"]["limits"]) == set(limits)


def test_gpu_check_dry_run(tmp_path):
    p = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu" / "gpu_check.py"), "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    rec = json.loads((tmp_path / "gpu_check.json").read_text())
    failed = {k: v.get("tail") for k, v in rec["steps"].items() if v.get("rc") != 0}
    assert p.returncode == 0 and rec["ok"], failed
    assert rec["dry_run"] and list(rec["steps"]) == STEPS
    assert (tmp_path / "gpu_check.log").stat().st_size > 0

    rows = {r["model"]: r for r in rec["results"]["bench_models"]["rows"]}
    assert set(rows) == {"dandelion", "dandelion_fast", "sfno", "flower2d", "disco", "s2transformer"}
    for name, r in rows.items():
        assert r["dtype"] == "bf16" and "error" not in r, (name, r.get("error"))
        assert r["train_step_s"] > 0 and r["train_step_peak_bytes"] > 0

    step = rec["results"]["finetune_step"]
    assert step["ok"] and step["plan"]["n_micro"] == 2 and step["step_s"] > 0 and step["peak_bytes"] > 0
    assert rec["results"]["build_kernels"]["ok"] and rec["results"]["build_kernels"]["sources"] > 0

    gen = rec["results"]["generate"]
    assert (
        gen["rc"] == 0
        and gen["seconds_per_simulated_day_end_to_end"] > 0
        and gen["batch_size"] == gen["n_trajectories"]
    )
    train = rec["results"]["train"]
    assert train["rc"] == 0 and train["metrics_tail"] and "last.pt" in train["checkpoints"]
