"""The fused C++ warp kernel (dandelion/warp/csrc) against the eager sampler, on the CPU.

Forward and backward (values and displacements) against :class:`~dandelion.warp.sample.WarpSample` on equiangular
grids with pole rows and on Legendre-Gauss grids (odd ``nlon`` too), across the poles, across the 0/360 seam,
beyond pi/2 and beyond the polynomial sine's range; zero displacement is the identity bit for bit; float64
gradchecks; a whole Dandelion model against its eager twin, both against the float64 model. The kernel is built
once per machine (cached by torch.utils.cpp_extension) and at most once per process; the tests skip where it
cannot be built (no C++ compiler or ninja).
"""

import copy
import os

import pytest
import torch
from warp_cases import assert_matches_eager, warp_displacements

from dandelion.model import Dandelion
from dandelion.sphere import SphereGrid
from dandelion.warp import SphereSampler, TangentWarpS2, WarpSample, cpp_sample, set_warp_kernel
from dandelion.warp.cpp_sample import CppWarpSample

F64 = torch.float64


@pytest.fixture(scope="module", autouse=True)
def built():
    """The compiled kernel (built here on the first run on a machine: about a minute; cached afterwards)."""
    if cpp_sample.load() is None:
        pytest.skip("the C++ warp kernel cannot be built here (no C++ compiler or ninja)")


CASES = [(9, 16, "equiangular"), (8, 16, "legendre-gauss"), (7, 15, "legendre-gauss"), (8, 15, "equiangular")]
KINDS = ["small", "beyond_half_pi", "seam", "poles", "huge"]
CHANNELS = [3, 4]  # any channel count, and one of the counts with vectorised channel loops (float32, even nlon)


@pytest.mark.parametrize("nlat,nlon,grid", CASES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("channels", CHANNELS)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-4), (F64, 1e-11)])
def test_cpp_warp_matches_eager_forward_and_backward(nlat, nlon, grid, kind, channels, dtype, tol):
    """Values, value gradients and displacement gradients equal the eager node's (float32: to its rounding)."""
    s = SphereSampler(SphereGrid(nlat, nlon, grid), dtype=dtype)
    g = torch.Generator().manual_seed(nlat * nlon + channels)
    v = torch.randn(2, channels, nlat, nlon, generator=g, dtype=dtype, requires_grad=True)
    d = warp_displacements(kind, 2, nlat, nlon, dtype, g).requires_grad_()
    w = torch.randn(2, channels, nlat, nlon, generator=g, dtype=dtype)
    assert_matches_eager(CppWarpSample, v, d, s, w, tol)


@pytest.mark.parametrize("channels", [8, 16, 32, 5])
@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
def test_cpp_warp_matches_eager_for_every_vectorised_channel_count(channels, grid):
    """The channel counts with their own vectorised loops (8, 16, 32 per head) and one without, against eager."""
    s = SphereSampler(SphereGrid(6, 12, grid))
    g = torch.Generator().manual_seed(channels)
    v = torch.randn(3, channels, 6, 12, generator=g, requires_grad=True)
    d = warp_displacements("beyond_half_pi", 3, 6, 12, torch.float32, g).requires_grad_()
    w = torch.randn(3, channels, 6, 12, generator=g)
    out, ref = CppWarpSample.apply(v, d, s), WarpSample.apply(v, d, s)
    torch.testing.assert_close(out, ref, rtol=0, atol=2e-4 * float(ref.detach().abs().max()))
    for a, b in zip(torch.autograd.grad(out, (v, d), w), torch.autograd.grad(ref, (v, d), w)):
        torch.testing.assert_close(a, b, rtol=0, atol=2e-4 * float(b.abs().max()))


@pytest.mark.parametrize("nlat,nlon,grid", CASES)
@pytest.mark.parametrize("channels", CHANNELS)
def test_cpp_warp_zero_displacement_is_identity(nlat, nlon, grid, channels):
    """Zero displacement returns the values bit for bit (pole rows included); the value gradient is the identity."""
    s = SphereSampler(SphereGrid(nlat, nlon, grid))
    g = torch.Generator().manual_seed(0)
    v = torch.randn(2, channels, nlat, nlon, generator=g, requires_grad=True)
    d = torch.zeros(2, 2, nlat, nlon, requires_grad=True)
    out = CppWarpSample.apply(v, d, s)
    assert torch.equal(out, v.detach())
    w = torch.randn(2, channels, nlat, nlon, generator=g)
    (gv,) = torch.autograd.grad(out, (v,), w)
    assert torch.equal(gv, w)


@pytest.mark.parametrize("nlat,nlon,grid", [(5, 8, "equiangular"), (5, 8, "legendre-gauss"), (4, 7, "legendre-gauss")])
def test_cpp_warp_float64_gradcheck(nlat, nlon, grid):
    """float64 gradcheck of values and displacements (walks up to about 2 rad, across the poles)."""
    s = SphereSampler(SphereGrid(nlat, nlon, grid), dtype=F64)
    g = torch.Generator().manual_seed(4)
    v = torch.randn(1, 2, nlat, nlon, generator=g, dtype=F64, requires_grad=True)
    d = (0.8 * torch.randn(1, 2, nlat, nlon, generator=g, dtype=F64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda v, d: CppWarpSample.apply(v, d, s), (v, d))


def test_cpp_warp_gradients_one_at_a_time():
    """Only the value gradient, or only the displacement gradient: each equals its part of the full backward (to
    rounding: the kernels without the Jacobian are compiled apart)."""
    s = SphereSampler(SphereGrid(8, 16, "legendre-gauss"))
    g = torch.Generator().manual_seed(6)
    v = torch.randn(2, 4, 8, 16, generator=g)
    d = 0.4 * torch.randn(2, 2, 8, 16, generator=g)
    w = torch.randn(2, 4, 8, 16, generator=g)
    vv, dd = v.clone().requires_grad_(), d.clone().requires_grad_()
    both = torch.autograd.grad(CppWarpSample.apply(vv, dd, s), (vv, dd), w)
    (only_v,) = torch.autograd.grad(CppWarpSample.apply(vv, d, s), (vv,), w)
    (only_d,) = torch.autograd.grad(CppWarpSample.apply(v, dd, s), (dd,), w)
    for one, full in ((only_v, both[0]), (only_d, both[1])):
        torch.testing.assert_close(one, full, rtol=0, atol=1e-6 * float(full.abs().max()))


def test_cpp_warp_nan_displacement_gives_nan_not_a_crash():
    """A NaN displacement yields NaN samples where it is (the kernel reads no memory out of bounds)."""
    s = SphereSampler(SphereGrid(8, 16, "equiangular"))
    v = torch.randn(1, 3, 8, 16)
    d = torch.zeros(1, 2, 8, 16)
    d[0, 0, 3, 5] = float("nan")
    d[0, 1, 6, 2] = float("inf")
    out = CppWarpSample.apply(v, d, s)
    bad = torch.zeros(8, 16, dtype=torch.bool)
    bad[3, 5] = bad[6, 2] = True
    assert out[0, :, bad].isnan().all() and torch.equal(out[0, :, ~bad], v[0, :, ~bad])


def _run(model, kernel, dtype, x, w):
    set_warp_kernel(model, kernel)
    model = model.to(dtype)
    xx = x.to(dtype).requires_grad_()
    y = model(xx)
    grads = torch.autograd.grad((y * w.to(dtype)).sum(), [xx, *model.parameters()])
    return [t.detach().to(F64) for t in (y, *grads)]


@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
def test_dandelion_with_cpp_warps_equals_the_eager_model_to_float32_rounding(grid):
    """A small Dandelion (both row maps: the data grid and Legendre-Gauss levels): output and every gradient of the
    C++ warps differ from the float64 model's by no more than the eager float32 model's do (a few times its
    largest error, or float32 rounding through the network, 1e-5 of the largest value: the eager error itself varies
    with the thread count's summation order), and in float64 the two kernels agree to 1e-12."""
    torch.manual_seed(0)
    kw = dict(width=8, multipliers=(1, 2), heads=2, encoder_blocks=(1, 1), decoder_blocks=(1,))
    model = Dandelion(3, 2, 16, 32, grid=grid, **kw)
    x, w = torch.randn(2, 3, 16, 32), torch.randn(2, 2, 16, 32)
    truth = _run(copy.deepcopy(model), "eager", F64, x, w)
    eager32 = _run(copy.deepcopy(model), "eager", torch.float32, x, w)
    cpp32 = _run(copy.deepcopy(model), "cpp", torch.float32, x, w)
    cpp64 = _run(copy.deepcopy(model), "cpp", F64, x, w)
    for ref, e32, c32, c64 in zip(truth, eager32, cpp32, cpp64):
        scale = float(ref.abs().max())
        eager_err = float((e32 - ref).abs().max())
        assert float((c32 - ref).abs().max()) <= max(4 * eager_err, 1e-5 * scale)
        assert float((c64 - ref).abs().max()) <= 1e-12 * scale


def test_layer_selects_the_cpp_kernel_on_the_cpu():
    """``auto`` runs the C++ kernel on the CPU (not with compile_kernels, which asks for the eager index); ``eager``
    never does; ``cpp`` refuses values of another dtype than the sampler's with a message naming the fix."""
    grid = SphereGrid(8, 16, "equiangular")
    cpu = torch.device("cpu")
    assert TangentWarpS2(grid, 8, 2, 4, init_radius=0.4).uses_cpp(cpu, torch.float32)
    assert TangentWarpS2(grid, 8, 2, 4, init_radius=0.4).uses_cpp(cpu, torch.bfloat16)  # the warp runs in float32
    assert not TangentWarpS2(grid, 8, 2, 4, init_radius=0.4, kernel="eager").uses_cpp(cpu, torch.float32)
    assert not TangentWarpS2(grid, 8, 2, 4, init_radius=0.4, compile_kernels=True).uses_cpp(cpu, torch.float32)
    assert not TangentWarpS2(grid, 8, 2, 4, init_radius=0.4).uses_cpp(cpu, F64)  # float32 sampler: eager
    with pytest.raises(ValueError, match=r"kernel='cpp'.*model.to\(dtype\)"):
        TangentWarpS2(grid, 8, 2, 4, init_radius=0.4, kernel="cpp").uses_cpp(cpu, F64)
    torch.manual_seed(0)
    eager = TangentWarpS2(grid, 8, 2, 4, init_radius=0.4, kernel="eager")
    fused = TangentWarpS2(grid, 8, 2, 4, init_radius=0.4)
    fused.load_state_dict(eager.state_dict())
    x = torch.randn(2, 8, 8, 16)
    torch.testing.assert_close(fused(x), eager(x), rtol=1e-4, atol=1e-4)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # both run the warp in float32 under autocast
        torch.testing.assert_close(fused(x), eager(x), rtol=1e-4, atol=1e-4)


def test_a_stale_build_lock_is_removed_and_a_fresh_one_kept(tmp_path):
    """A lock older than STALE_LOCK_S (an interrupted build) is removed with a warning; a recent one is another
    process's build in progress and stays."""
    lock = tmp_path / "lock"
    lock.write_text("")
    assert not cpp_sample.clear_stale_lock(tmp_path) and lock.exists()
    old = lock.stat().st_mtime - cpp_sample.STALE_LOCK_S - 60
    os.utime(lock, (old, old))
    with pytest.warns(RuntimeWarning, match="interrupted build"):
        assert cpp_sample.clear_stale_lock(tmp_path)
    assert not lock.exists() and not cpp_sample.clear_stale_lock(tmp_path)


def test_a_failed_build_warns_once_and_auto_runs_eager(monkeypatch):
    """No compiler: one RuntimeWarning naming the error, ``auto`` falls back to the eager path, ``cpp`` raises."""
    calls = []

    def broken():
        calls.append(1)
        raise RuntimeError("Ninja is required to load C++ extensions (simulated)")

    monkeypatch.setattr(cpp_sample, "_STATE", {})
    monkeypatch.setattr(cpp_sample, "_build", broken)
    grid = SphereGrid(8, 16, "equiangular")
    layer = TangentWarpS2(grid, 8, 2, 4, init_radius=0.4)
    with pytest.warns(RuntimeWarning, match=r"Ninja is required.*\(simulated\).*eager path"):
        assert not layer.uses_cpp(torch.device("cpu"), torch.float32)
    assert not layer.uses_cpp(torch.device("cpu"), torch.float32) and len(calls) == 1  # tried once per process
    eager = TangentWarpS2(grid, 8, 2, 4, init_radius=0.4, kernel="eager")
    eager.load_state_dict(layer.state_dict())
    x = torch.randn(2, 8, 8, 16)
    assert torch.equal(layer(x), eager(x))
    with pytest.raises(RuntimeError, match="kernel='cpp'.*could not be built"):
        TangentWarpS2(grid, 8, 2, 4, init_radius=0.4, kernel="cpp")(x)


def test_roofline_meter_sees_one_op_each_way_and_the_bench_records_the_kernel():
    """On fake tensors the C++ warp is one op each way (the ops' fake kernels), moving fewer bytes and saving less
    than the eager warp; ``dandelion-bench target=models`` records the kernel the warps ran."""
    from dandelion.benchmarks.speed.models import warp_kernel_ran
    from dandelion.benchmarks.speed.roofline import count_step
    from dandelion.registry import build_model

    counts = {}
    for kernel in ("cpp", "eager"):
        torch.manual_seed(0)
        model = build_model("dandelion", "tiny", 4, 2, 16, 32, "equiangular")
        set_warp_kernel(model, kernel)
        assert warp_kernel_ran(model, torch.device("cpu")) == kernel
        counts[kernel] = count_step(model, torch.zeros(2, 4, 16, 32), "fp32")
    (cpp, cpp_saved), (eager, eager_saved) = counts["cpp"], counts["eager"]
    names = {name for _, name in cpp.ops}
    assert {"dandelion.warp_sample_cpu", "dandelion.warp_sample_cpu_backward"} <= names
    assert "grid_sampler_2d" not in names and "grid_sampler_2d" in {name for _, name in eager.ops}
    assert sum(r["bytes"] for r in cpp.ops.values()) < sum(r["bytes"] for r in eager.ops.values())
    assert cpp_saved < eager_saved
    assert warp_kernel_ran(build_model("sfno", "tiny", 4, 2, 16, 32, "equiangular"), torch.device("cpu")) is None
