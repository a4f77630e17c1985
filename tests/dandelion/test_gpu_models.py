"""Models on CUDA agree with the CPU (run by tools/gpu/gpu_check.py; skipped where CUDA is absent).

Same weights on both devices, float32: forward outputs agree to a tolerance set by float32 rounding
through a few layers (SHTs / DISCO on GPU use other reduction orders), gradients are finite, and
bf16 autocast gives finite outputs close to float32 in relative L2 norm.
"""

import pytest
import torch

import dandelion

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (tools/gpu/gpu_check.py runs it)")

MODELS = ["dandelion", "sfno", "disco", "flower2d"]


def _pair(name, nlat=32, nlon=64):
    torch.manual_seed(0)
    cpu = dandelion.build_model(name, "tiny", 16, 4, nlat, nlon, "equiangular")
    torch.manual_seed(0)
    gpu = dandelion.build_model(name, "tiny", 16, 4, nlat, nlon, "equiangular")
    gpu.load_state_dict(cpu.state_dict())
    return cpu.eval(), gpu.cuda().eval()


@pytest.mark.parametrize("name", MODELS)
def test_cuda_forward_matches_cpu(name):
    cpu, gpu = _pair(name)
    x = torch.randn(2, 16, 32, 64)
    with torch.no_grad():
        a = cpu(x)
        b = gpu(x.cuda()).cpu()
    rel = (a - b).norm() / a.norm()
    assert rel < 1e-4, f"{name}: relative difference {rel:.2e} between CPU and CUDA"


@pytest.mark.parametrize("name", MODELS)
def test_cuda_backward_finite_and_bf16_close(name):
    _, gpu = _pair(name)
    gpu.train()
    x = torch.randn(2, 16, 32, 64, device="cuda", requires_grad=True)
    y = gpu(x)
    y.square().mean().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in gpu.parameters() if p.grad is not None)
    gpu.eval()
    with torch.no_grad():
        ref = gpu(x.detach())
        with torch.autocast("cuda", dtype=torch.bfloat16):
            low = gpu(x.detach()).float()
    assert torch.isfinite(low).all()
    assert (low - ref).norm() / ref.norm() < 0.1  # bf16 has an 8-bit mantissa: a few per cent through the network
