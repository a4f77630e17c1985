"""tools/gpu/build_torch_harmonics_cuda.py: the CUDA sources in torch-harmonics' wheel are found; the build (slow)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gpu" / "build_torch_harmonics_cuda.py"


def test_the_dry_run_finds_every_extension_and_the_cuda_sources(tmp_path):
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--dry-run"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    specs = json.loads((tmp_path / "extensions.json").read_text())
    names = {e["name"] for e in specs}
    assert names == {"disco_helpers", "attention_helpers", "torch_harmonics.disco._C", "torch_harmonics.attention._C"}
    for e in specs:
        assert all(Path(src).is_file() for src in e["sources"])
        if e["name"].endswith("._C"):  # the op interface, the CPU kernels and the CUDA kernels
            assert e["cuda"] and any(src.endswith(".cu") for src in e["sources"])
        else:
            assert "-DBUILD_CUDA=1" in e["args"]["cxx"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc and a CUDA build of torch")
def test_the_kernels_compile_and_the_helpers_report_cuda(tmp_path):
    """Compiles everything (about an hour on two busy cores; minutes on a 16-core GPU machine); no GPU needed."""
    p = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True)
    rec = json.loads((tmp_path / "build.json").read_text())
    assert p.returncode == 0 and rec["ok"], (tmp_path / "build.log").read_text()[-3000:]
    assert rec["helpers_see_cuda_kernels"] == {"disco": True, "attention": True}
