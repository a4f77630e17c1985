"""The fused Triton warp kernel against the eager sampler, run on the CPU by Triton's interpreter.

``TRITON_INTERPRET=1`` makes Triton run its kernels as NumPy on the CPU, so these tests check the kernel that
CUDA runs without a GPU: forward and backward (values and displacements) against
:class:`~dandelion.warp.sample.WarpSample` on equiangular grids with pole rows and on Legendre-Gauss grids (odd
``nlon`` too), across the poles, across the 0/360 seam and beyond pi/2; zero displacement is the identity bit for
bit; a float64 gradcheck. Grids are tiny: the interpreter runs a kernel at some 10^4 nodes per second.
"""

import importlib

import pytest
import torch
from warp_cases import assert_matches_eager, warp_displacements

from dandelion.sphere import SphereGrid
from dandelion.warp import SphereSampler, TangentWarpS2, WarpSample

triton = pytest.importorskip("triton", reason="triton is not installed: the fused warp kernel cannot run here")

F64 = torch.float64


@pytest.fixture(scope="module")
def kernel():
    """The kernel module, reloaded under ``TRITON_INTERPRET=1`` (Triton decides when it decorates)."""
    from dandelion.warp import triton_sample

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        yield importlib.reload(triton_sample)
    importlib.reload(triton_sample)


CASES = [(9, 16, "equiangular"), (8, 16, "legendre-gauss"), (7, 15, "legendre-gauss"), (8, 15, "equiangular")]
KINDS = ["small", "beyond_half_pi", "seam", "poles"]


@pytest.mark.parametrize("nlat,nlon,grid", CASES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-4), (F64, 1e-11)])
def test_triton_warp_matches_eager_forward_and_backward(kernel, nlat, nlon, grid, kind, dtype, tol):
    """Values, value gradients and displacement gradients equal the eager node's (float32: to its rounding)."""
    s = SphereSampler(SphereGrid(nlat, nlon, grid), dtype=dtype)
    g = torch.Generator().manual_seed(nlat * nlon)
    v = torch.randn(2, 3, nlat, nlon, generator=g, dtype=dtype, requires_grad=True)
    d = warp_displacements(kind, 2, nlat, nlon, dtype, g).requires_grad_()
    w = torch.randn(2, 3, nlat, nlon, generator=g, dtype=dtype)
    assert_matches_eager(kernel.TritonWarpSample, v, d, s, w, tol)


@pytest.mark.parametrize("nlat,nlon,grid", CASES)
def test_triton_warp_zero_displacement_is_identity(kernel, nlat, nlon, grid):
    """Zero displacement returns the values bit for bit (pole rows included); the value gradient is the identity."""
    s = SphereSampler(SphereGrid(nlat, nlon, grid))
    g = torch.Generator().manual_seed(0)
    v = torch.randn(2, 3, nlat, nlon, generator=g, requires_grad=True)
    d = torch.zeros(2, 2, nlat, nlon, requires_grad=True)
    out = kernel.TritonWarpSample.apply(v, d, s)
    assert torch.equal(out, v.detach())
    w = torch.randn(2, 3, nlat, nlon, generator=g)
    (gv,) = torch.autograd.grad(out, (v,), w)
    assert torch.equal(gv, w)


@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
def test_triton_warp_float64_gradcheck(kernel, grid):
    """float64 gradcheck of values and displacements (walks up to about 2 rad, across the poles)."""
    s = SphereSampler(SphereGrid(5, 8, grid), dtype=F64)
    g = torch.Generator().manual_seed(4)
    v = torch.randn(1, 2, 5, 8, generator=g, dtype=F64, requires_grad=True)
    d = (0.8 * torch.randn(1, 2, 5, 8, generator=g, dtype=F64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda v, d: kernel.TritonWarpSample.apply(v, d, s), (v, d), fast_mode=True)


def test_triton_warp_keeps_bfloat16_values(kernel):
    """bfloat16 values stay bfloat16 (no float32 copy); the index runs in float32: the result is the float32
    warp of the bfloat16 values, rounded once."""
    s = SphereSampler(SphereGrid(8, 16, "legendre-gauss"))
    g = torch.Generator().manual_seed(5)
    v = torch.randn(2, 4, 8, 16, generator=g).to(torch.bfloat16)
    d = (0.7 * torch.randn(2, 2, 8, 16, generator=g)).to(torch.bfloat16)
    out = kernel.TritonWarpSample.apply(v, d, s)
    assert out.dtype == torch.bfloat16
    ref = WarpSample.apply(v.float(), d.float(), s)
    torch.testing.assert_close(out.float(), ref, rtol=2**-7, atol=1e-5)


def test_layer_selects_kernel(kernel):
    """``kernel='triton'`` runs the fused kernel (equal to the eager layer to rounding); 'auto' is eager on the CPU."""
    torch.manual_seed(0)
    grid = SphereGrid(8, 16, "equiangular")
    eager = TangentWarpS2(grid, 8, 2, 4, init_radius=0.4)
    fused = TangentWarpS2(grid, 8, 2, 4, init_radius=0.4, kernel="triton")
    fused.load_state_dict(eager.state_dict())
    assert TangentWarpS2(grid, 8, 2, 4, init_radius=0.4).uses_triton(torch.device("cpu")) is False
    x = torch.randn(2, 8, 8, 16)
    torch.testing.assert_close(fused(x), eager(x), rtol=1e-4, atol=1e-4)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # values stay bfloat16 through the fused kernel
        y_fused, y_eager = fused(x), eager(x)
    assert y_fused.dtype == torch.bfloat16
    torch.testing.assert_close(y_fused.float(), y_eager.float(), rtol=2**-6, atol=2**-6)
    with pytest.raises(ValueError, match="kernel"):
        TangentWarpS2(grid, 8, 2, 4, init_radius=0.4, kernel="cuda")


def test_check_passes_here_and_a_failing_kernel_falls_back_with_one_warning(kernel, monkeypatch):
    """``usable_on``: the interpreted kernels pass the per-device check; a kernel that fails (a compiler error
    on an untested GPU) is reported in one RuntimeWarning and the answer is False, remembered."""
    monkeypatch.setattr(kernel, "_CHECKED", {})
    assert kernel.usable_on(torch.device("cpu"))

    def broken(*args, **kwargs):
        raise RuntimeError("PassManager::run failed (simulated)")

    monkeypatch.setattr(kernel, "_CHECKED", {})
    monkeypatch.setattr(kernel, "_launch", broken)
    with pytest.warns(RuntimeWarning, match=r"PassManager::run failed \(simulated\).*eager path"):
        assert not kernel.usable_on(torch.device("cpu"))
    assert kernel._CHECKED == {"cpu": False}
