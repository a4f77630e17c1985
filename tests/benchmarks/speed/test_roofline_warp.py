"""The roofline meter prices Dandelion's fused Triton warp as one op each way (fake tensors; no GPU, no kernel run)."""

import pytest
import torch

from dandelion.benchmarks.speed.roofline import count_step
from dandelion.registry import build_model
from dandelion.warp import set_warp_kernel

pytest.importorskip("triton", reason="triton is not installed: the fused warp's custom ops are not registered")


def _count(kernel):
    torch.manual_seed(0)
    model = build_model("dandelion", "tiny", 4, 2, 16, 32, "equiangular")
    assert set_warp_kernel(model, kernel) > 0
    counter, saved = count_step(model, torch.zeros(2, 4, 16, 32), "bf16")
    return counter, saved


def test_fused_warp_is_one_op_each_way_and_moves_fewer_bytes():
    fused, fused_saved = _count("triton")
    eager, eager_saved = _count("eager")
    names = {name for _, name in fused.ops}
    assert {"dandelion.warp_sample", "dandelion.warp_sample_backward"} <= names
    assert "grid_sampler_2d" not in names and "grid_sampler_2d" in {name for _, name in eager.ops}
    total = sum(r["bytes"] for r in fused.ops.values())
    assert total < sum(r["bytes"] for r in eager.ops.values())
    assert fused_saved < eager_saved
