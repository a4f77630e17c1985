"""The GPU check (tools/gpu/gpu_check.py) in its dry-run mode: every step runs on the CPU at tiny sizes.

The dry run executes the same steps as the check on a GPU machine (only sizes and the device differ),
so a broken command line, a renamed option or a missing result is found here and not in the lent
minutes of a GPU.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEPS = ["environment", "tests", "bench_dandelion", "bench_sfno", "bench_flower2d", "bench_disco", "generate", "train"]


def test_gpu_check_dry_run(tmp_path):
    p = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu" / "gpu_check.py"), "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    rec = json.loads((tmp_path / "gpu_check.json").read_text())
    failed = {k: v.get("tail") for k, v in rec["steps"].items() if v.get("rc") != 0}
    assert p.returncode == 0 and rec["ok"], failed
    assert rec["dry_run"] and set(STEPS) <= set(rec["steps"])
    assert (tmp_path / "gpu_check.log").stat().st_size > 0

    bench = rec["results"]["bench_models"]
    rows = {(r["model"], r["dtype"]): r for r in bench["rows"]}
    assert set(rows) == {(m, d) for m in ("dandelion", "sfno", "disco", "flower2d") for d in ("fp32", "bf16")}
    for (_model, dtype), r in rows.items():
        if dtype == "fp32":
            assert "error" not in r, r.get("error")
            assert r["train_step_peak_bytes"] > 0 and r["saved_activation_bytes"] > 0
    assert (
        rows[("disco", "fp32")]["disco_optimized_kernel"] is False and "pure-torch" in rows[("disco", "fp32")]["note"]
    )
    assert any("optimized_kernel=False" in n for n in rec["notes"])

    gen = rec["results"]["generate"]
    assert (
        gen["rc"] == 0
        and gen["seconds_per_simulated_day_end_to_end"] > 0
        and gen["batch_size"] == gen["n_trajectories"]
    )
    train = rec["results"]["train"]
    assert train["rc"] == 0 and train["metrics_tail"] and "last.pt" in train["checkpoints"]
    largest = [r for r in rec["results"]["largest_batch"] if r["dtype"] == "fp32"]
    assert len(largest) == 4 and all(r["largest_batch"]["largest_batch"] >= 1 for r in largest)
