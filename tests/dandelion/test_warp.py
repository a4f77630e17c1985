"""Tests of dandelion.warp: the tangent warp layer, its fused sampling node and its compiled kernels.

Checks are exact identities (zero displacement), gradchecks, finiteness across the poles, agreement
of the fused autograd node with the plain autograd graph, and the compile fallbacks.
"""

import math

import pytest
import torch

from dandelion import compiled
from dandelion.sphere import SphereGrid
from dandelion.warp import GhostPad, SphereSampler, TangentWarpS2, WarpSample, exp_map, sample_sphere
from dandelion.warp import index as warp_index_module

F64 = torch.float64


# ----------------------------------------------------------------------------- identity at zero displacement
@pytest.mark.parametrize(
    "nlat,nlon,grid",
    [
        (17, 32, "equiangular"),
        (16, 32, "equiangular"),
        (33, 64, "equiangular"),
        (16, 32, "legendre-gauss"),
        (15, 30, "legendre-gauss"),
        (9, 18, "equiangular"),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zero_displacement_is_identity(nlat, nlon, grid, dtype):
    grid_ = SphereGrid(nlat, nlon, grid)
    layer = TangentWarpS2(grid_, channels=6, heads=3, hidden=4, init_radius=0.1).to(dtype)
    values = torch.randn(2, 6, nlat, nlon, dtype=dtype)
    zero = torch.zeros(2 * 3, nlat, nlon, dtype=dtype)
    out = layer.warp(values, zero, zero)
    assert torch.equal(out, values)  # bit for bit, pole rows included
    # the functional sampler at the node coordinates too
    colat = grid_.colat.to(dtype)[None, :, None].expand(2, nlat, nlon)
    lon = grid_.lon.to(dtype)[None, None, :].expand(2, nlat, nlon)
    assert torch.equal(sample_sphere(values, colat, lon, grid_), values)


# ----------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
@pytest.mark.parametrize("fast_mode", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_warp_gradcheck(grid, fast_mode):
    g = SphereGrid(16, 32, grid)
    layer = TangentWarpS2(g, channels=2, heads=2, hidden=4, init_radius=0.1).double()
    gen = torch.Generator().manual_seed(11)
    values = torch.randn(1, 2, 16, 32, generator=gen, dtype=F64, requires_grad=True)
    # random displacements whose sample points stay away from grid lines (bilinear kinks)
    for _attempt in range(50):
        d = (torch.rand(2, 2, 16, 32, generator=gen, dtype=F64) - 0.5) * 0.6
        rows, cols = layer.sampler.displaced_index(d[:, 0], d[:, 1])
        frac = torch.stack([rows - rows.round(), torch.remainder(cols, 32) - torch.remainder(cols, 32).round()]).abs()
        if frac.min() > 1e-4:
            break
    else:
        pytest.fail("could not draw displacements away from grid lines")
    d_e = d[:, 0].clone().requires_grad_(True)
    d_n = d[:, 1].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(layer.warp, (values, d_e, d_n), eps=1e-6, atol=1e-6, rtol=1e-4, fast_mode=fast_mode)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_no_nan_gradients_across_poles(dtype):
    """Displacements onto, across and around the poles; inputs on the pole rows; zero displacements."""
    g = SphereGrid(17, 32, "equiangular")
    layer = TangentWarpS2(g, channels=4, heads=4, hidden=4, init_radius=0.1).to(dtype)
    colat = g.colat.to(dtype)[:, None].expand(17, 32)
    d_n = torch.stack(
        [colat, colat + 0.2, colat * 0, -(math.pi - colat) - 0.1]
    )  # to the pole, across it, none, across the south pole
    d_e = torch.stack([colat * 0, 0.05 + colat * 0, colat * 0, colat * 0 + 1e-9])
    d_e = d_e.clone().requires_grad_(True)
    d_n = d_n.clone().requires_grad_(True)
    values = torch.randn(1, 4, 17, 32, dtype=dtype)
    values[:, :, 0] = values[:, :, 0, :1]  # pole rows: one value per pole
    values[:, :, -1] = values[:, :, -1, :1]
    values.requires_grad_(True)
    out = layer.warp(values, d_e, d_n)
    assert torch.isfinite(out).all()
    (out * torch.randn_like(out)).sum().backward()
    for t in (values.grad, d_e.grad, d_n.grad):
        assert torch.isfinite(t).all()
    # the full layer (displacement MLP included) too, with pole-row inputs
    x = torch.randn(1, 4, 17, 32, dtype=dtype, requires_grad=True)
    layer(x).square().sum().backward()
    assert torch.isfinite(x.grad).all() and all(torch.isfinite(p.grad).all() for p in layer.parameters())


@pytest.mark.parametrize("nlat,nlon,grid", [(7, 8, "equiangular"), (6, 9, "equiangular"), (6, 8, "legendre-gauss")])
def test_fused_warp_sample_gradcheck(nlat, nlon, grid):
    """WarpSample (one autograd node, analytic index Jacobian) passes float64 gradcheck."""
    s = SphereSampler(SphereGrid(nlat, nlon, grid), dtype=F64)
    g = torch.Generator().manual_seed(0)
    v = torch.randn(3, 2, nlat, nlon, generator=g, dtype=F64, requires_grad=True)
    de = (0.3 * torch.randn(3, nlat, nlon, generator=g, dtype=F64)).requires_grad_()
    dn = (0.3 * torch.randn(3, nlat, nlon, generator=g, dtype=F64)).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda v, a, b: WarpSample.apply(v, torch.stack([a, b], dim=1), s), (v, de, dn), atol=1e-6
    )


@pytest.mark.parametrize("scale", [1e-4, 0.3, 2.0])
@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
def test_fused_warp_sample_matches_exp_map_and_point_sampling(scale, grid):
    """Values and gradients of the fused node equal autograd through an independent path (float64).

    The reference walks the nodes' unit vectors with :func:`exp_map` (Cartesian), takes the colatitude
    and longitude of the targets with ``atan2`` and samples them with :func:`sample_sphere`: none of the
    warp index's increments or its analytic Jacobian. 2 rad walks cross the poles.
    """
    sg = SphereGrid(8, 16, grid)
    s = SphereSampler(sg, dtype=F64)
    g = torch.Generator().manual_seed(1)
    v = torch.randn(2, 3, 8, 16, generator=g, dtype=F64, requires_grad=True)
    a = (scale * torch.randn(2, 8, 16, generator=g, dtype=F64)).requires_grad_()
    b = (scale * torch.randn(2, 8, 16, generator=g, dtype=F64)).requires_grad_()
    w = torch.randn(2, 3, 8, 16, generator=g, dtype=F64)
    out = WarpSample.apply(v, torch.stack([a, b], dim=1), s)
    xyz, east, north = (t.to(F64)[:, None] for t in (sg.xyz, sg.east, sg.north))
    y = exp_map(xyz, a, b, east, north)
    colat = torch.atan2(torch.sqrt(y[0] ** 2 + y[1] ** 2), y[2])
    ref = sample_sphere(v, colat, torch.atan2(y[1], y[0]), sg)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for got, want in zip(torch.autograd.grad(out, (v, a, b), w), torch.autograd.grad(ref, (v, a, b), w)):
        torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
def test_differentiable_displaced_index_matches_finite_differences(grid):
    """``displaced_index`` (the one warp index, through :class:`WarpIndex`) passes float64 gradcheck, poles included."""
    s = SphereSampler(SphereGrid(6, 8, grid), dtype=F64)
    g = torch.Generator().manual_seed(2)
    a = (0.7 * torch.randn(1, 6, 8, generator=g, dtype=F64)).requires_grad_()
    b = (0.7 * torch.randn(1, 6, 8, generator=g, dtype=F64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: s.displaced_index(a, b), (a, b))


def test_unread_part_of_padded_image_has_no_influence(monkeypatch):
    """Filling the uninitialised part of the padded image with NaN changes no output or gradient."""
    torch.manual_seed(0)
    layer = TangentWarpS2(SphereGrid(9, 16, "equiangular"), 8, 2, 4, init_radius=0.3)
    x = torch.randn(2, 8, 9, 16)

    def run():
        layer.zero_grad()
        y = layer(x)
        y.square().sum().backward()
        return [y.detach()] + [p.grad.clone() for p in layer.parameters()]

    ref = run()
    plain = GhostPad.pad

    def nan_pad(field, gn, gs, hp, wp):
        out = plain(field, gn, gs, hp, wp)
        nlat, nlon = field.shape[-2:]
        out[..., nlat + 3 :, :] = float("nan")
        out[..., :, nlon + 2 :] = float("nan")
        return out

    monkeypatch.setattr(GhostPad, "pad", staticmethod(nan_pad))
    for a, b in zip(run(), ref):
        assert torch.equal(a, b)


# ----------------------------------------------------------------------------- compiled kernels
def _compiled_or_skip():
    if compiled.compile_failures():
        pytest.skip(f"torch.compile unavailable here: {compiled.compile_failures()[0][:200]}")


def test_compiled_kernels_match_eager(monkeypatch):
    """compile_kernels=True: the same outputs and gradients as the eager model up to float32 rounding.

    The tiny Dandelion covers both sampler paths (equiangular data grid, Legendre-Gauss level 1) and
    the norms; a compiled warp of zero displacement returns its input to rounding.
    """
    from dandelion import norm
    from dandelion.model import Dandelion

    monkeypatch.setattr(compiled, "_COMPILED", {})
    monkeypatch.setattr(compiled, "_COMPILE_FAILED", [])
    kw = dict(width=8, multipliers=(1, 2), heads=2, encoder_blocks=(1, 1), decoder_blocks=(1,))
    torch.manual_seed(0)
    eager = Dandelion(3, 2, 8, 16, **kw)
    fast = Dandelion(3, 2, 8, 16, compile_kernels=True, **kw)
    fast.load_state_dict(eager.state_dict())
    x = torch.randn(2, 3, 8, 16)
    w = torch.randn(2, 2, 8, 16)
    outs = []
    for model in (eager, fast):
        xx = x.clone().requires_grad_()
        y = model(xx)
        grads = torch.autograd.grad((y * w).sum(), [xx] + list(model.parameters()))
        _compiled_or_skip()
        outs.append([y.detach(), *grads])
    # the compiled path really ran: every kernel was built (the eager model builds none)
    assert set(compiled._COMPILED) == {warp_index_module._index_and_jacobian, norm._norm_forward, norm._norm_backward}
    for a, b in zip(*outs):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    warp = fast.encoder[0][0].warp
    zero = torch.zeros(4, 8, 16)
    v = torch.randn(2, 8, 8, 16)
    torch.testing.assert_close(warp.warp(v, zero, zero), v, rtol=0, atol=1e-5)


def _fails_when_run(fn, **kw):
    def run(*a, **k):
        raise RuntimeError("no C++ compiler (simulated)")

    return run


def _refuses_up_front(fn, **kw):  # torch.compile itself raising (unsupported Python builds do)
    raise RuntimeError("torch.compile is not supported on this Python (simulated)")


@pytest.mark.parametrize(
    "compile_stub,message",
    [
        (_fails_when_run, r"no C\+\+ compiler \(simulated\).*eager kernels"),
        (_refuses_up_front, r"not supported on this Python \(simulated\).*eager kernels"),
    ],
)
def test_compile_failure_falls_back_to_eager_with_a_warning(monkeypatch, compile_stub, message):
    """A torch.compile that fails, when run or when called: one RuntimeWarning naming it.

    Then the exact eager result follows (warp and norm).
    """
    from dandelion.model import WarpBlockS2

    monkeypatch.setattr(compiled, "_COMPILED", {})
    monkeypatch.setattr(compiled, "_COMPILE_FAILED", [])
    monkeypatch.setattr(torch, "compile", compile_stub)
    torch.manual_seed(0)
    g = SphereGrid(8, 16, "equiangular")
    eager = WarpBlockS2(g, 4, 2, 4, init_radius=0.3, warp_kernel="eager")  # the eager path, bit for bit
    fast = WarpBlockS2(g, 4, 2, 4, init_radius=0.3, compile_kernels=True)
    fast.load_state_dict(eager.state_dict())
    x = torch.randn(2, 4, 8, 16)
    with pytest.warns(RuntimeWarning, match=message):
        y = fast(x)
    assert torch.equal(y, eager(x))
    assert compiled.compile_failures()


def test_out_of_memory_in_a_compiled_kernel_is_raised(monkeypatch):
    """Out of memory is not a compiler failure: it propagates and leaves compilation on."""

    def oom(fn, **kw):
        def run(*a):
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

        return run

    monkeypatch.setattr(compiled, "_COMPILED", {})
    monkeypatch.setattr(compiled, "_COMPILE_FAILED", [])
    monkeypatch.setattr(torch, "compile", oom)
    with pytest.raises(torch.OutOfMemoryError):
        compiled.call_compiled(lambda t: t + 1, torch.zeros(2))
    assert not compiled.compile_failures()
