"""Tests of the Dandelion network, its presets and the area-weighted norm."""

import math

import pytest
import torch

import dandelion
from dandelion import build_model
from dandelion.model import PRESETS, Dandelion
from dandelion.norm import AreaNormS2
from dandelion.sphere import SphereGrid
from dandelion.step import next_frame


def smooth_input(grid, channels, batch=2, seed=0):
    """Degree <= 2 polynomials in (x, y, z) at the grid's nodes, one random combination per channel."""
    g = torch.Generator().manual_seed(seed)
    x, y, z = grid.xyz
    basis = torch.stack([torch.ones_like(x), x, y, z, x * y, y * z, x * z, x * x - y * y, 3 * z * z - 1])
    c = torch.randn(batch, channels, basis.shape[0], generator=g, dtype=torch.float64)
    return torch.einsum("bck,kij->bcij", c, basis).float()


def test_registered_and_lazy_attribute():
    assert "dandelion" in dandelion.available_models()
    m = build_model("dandelion", "tiny", 16, 4, 32, 64, "equiangular")
    assert isinstance(m, Dandelion) and isinstance(m, dandelion.Dandelion)
    assert m.resolution_dependent is False


@pytest.mark.parametrize("preset,low,high", [("paper", 17e6, 21e6)])
def test_paper_parameter_count(preset, low, high):
    m = build_model("dandelion", preset, 16, 4, 32, 64, "equiangular")
    n = sum(p.numel() for p in m.parameters())
    assert low <= n <= high, n


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_no_spatial_convolution(preset):
    m = build_model("dandelion", preset, 16, 4, 16, 64, "legendre-gauss")
    for name, mod in m.named_modules():
        ks = getattr(mod, "kernel_size", None)
        if ks is not None:
            ks = (ks,) if isinstance(ks, int) else tuple(ks)
            assert math.prod(ks) == 1, f"{name} has kernel {ks}"
        assert "Disco" not in type(mod).__name__


def test_same_weights_on_three_grids():
    """tiny weights built at 32x64 load into the 64x128 and odd-row 33x64 models and run."""
    ref = build_model("dandelion", "tiny", 16, 4, 32, 64, "equiangular")
    state = ref.state_dict()
    for nlat, nlon in [(32, 64), (64, 128), (33, 64)]:
        m = build_model("dandelion", "tiny", 16, 4, nlat, nlon, "equiangular")
        m.load_state_dict(state, strict=True)
        x = smooth_input(SphereGrid(nlat, nlon), 16)
        y = next_frame(m, x, 4, torch.ones(4))  # the tiny preset's step moves the newest frame (advect_state)
        assert y.shape == (2, 4, nlat, nlon) and torch.isfinite(y).all()


def test_state_dict_refuses_another_grid_type():
    """Weights trained on one grid type are not silently reinterpreted on another (docs/ARCHITECTURE.md §3)."""
    from dandelion.grid_guard import allow_grid_change

    state = build_model("dandelion", "tiny", 16, 4, 32, 64, "equiangular").state_dict()
    gauss = build_model("dandelion", "tiny", 16, 4, 32, 64, "legendre-gauss")
    with pytest.raises(ValueError, match="legendre-gauss"):
        gauss.load_state_dict(state)
    with allow_grid_change(gauss):
        gauss.load_state_dict(state)


def test_outputs_agree_across_resolutions():
    """A smooth input gives nearly the same output at the shared nodes of 33x64 and 65x128 grids."""
    torch.manual_seed(0)
    ref = build_model("dandelion", "tiny", 16, 4, 33, 64, "equiangular")
    fine = build_model("dandelion", "tiny", 16, 4, 65, 128, "equiangular")
    fine.load_state_dict(ref.state_dict())
    with torch.no_grad():
        yc = ref(smooth_input(SphereGrid(33, 64), 16))
        yf = fine(smooth_input(SphereGrid(65, 128), 16))[..., ::2, ::2]
    assert float((yf - yc).norm() / yc.norm()) < 0.05


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trained_pool_lmax_agrees_better_across_resolutions(seed):
    """Keeping the trained grid's pooling band limits on the finer grid (``pool_lmax``) brings the 65x128 output
    at the shared nodes closer to the 33x64 one than the finer grid's own (doubled) band limits do."""
    torch.manual_seed(seed)
    ref = build_model("dandelion", "small", 16, 4, 33, 64, "equiangular")
    x33, x65 = smooth_input(SphereGrid(33, 64), 16), smooth_input(SphereGrid(65, 128), 16)
    errors = {}
    for name, pool_lmax in (("grid", None), ("trained", ref.pool_lmax)):
        fine = build_model("dandelion", "small", 16, 4, 65, 128, "equiangular", pool_lmax=pool_lmax)
        fine.load_state_dict(ref.state_dict())
        with torch.no_grad():
            yc, yf = ref(x33), fine(x65)[..., ::2, ::2]
        errors[name] = float((yf - yc).norm() / yc.norm())
    assert fine.pool_lmax == ref.pool_lmax == [16, 8]
    assert errors["trained"] < 0.8 * errors["grid"], errors


def test_pool_lmax_default_and_refusals():
    """The default band limits are the largest both level grids resolve; giving them explicitly changes nothing;
    a wrong count or a band above a grid's is refused."""
    from dandelion.spectral_pooling import coarse_grid, pooling_band_limit

    torch.manual_seed(0)
    m = build_model("dandelion", "small", 16, 4, 64, 128, "equiangular")
    grids = [coarse_grid(SphereGrid(64, 128), k) for k in range(3)]
    assert m.pool_lmax == [pooling_band_limit(grids[k], grids[k + 1]) for k in range(2)]
    assert m.pool_lmax == [
        32,
        16,
    ]  # a 32x64 (then 16x32) Legendre-Gauss level resolves degrees and orders below 32 (16)
    same = build_model("dandelion", "small", 16, 4, 64, 128, "equiangular", pool_lmax=m.pool_lmax)
    same.load_state_dict(m.state_dict())
    x = smooth_input(SphereGrid(64, 128), 16)
    with torch.no_grad():
        assert torch.equal(m(x), same(x))
    for bad in ([16], 16, "98", [16.5, 8], [True, True], [16, 0]):
        with pytest.raises(ValueError, match="one band limit per pooling"):
            build_model("dandelion", "small", 16, 4, 64, 128, "equiangular", pool_lmax=bad)
    with pytest.raises(ValueError, match=r"pool_lmax\[0\] = 64 exceeds the band limit 32 .* at most \[32, 16\]"):
        build_model("dandelion", "small", 16, 4, 64, 128, "equiangular", pool_lmax=[64, 8])


def test_nlon_must_divide():
    with pytest.raises(ValueError, match="nlon=60"):
        build_model("dandelion", "paper", 16, 4, 32, 60, "equiangular")  # 60 does not divide by 8


def test_bad_preset_and_override():
    with pytest.raises(ValueError, match="preset"):
        build_model("dandelion", "huge", 16, 4, 32, 64, "equiangular")
    with pytest.raises(ValueError, match="widht"):
        build_model("dandelion", "tiny", 16, 4, 32, 64, "equiangular", widht=3)


def test_input_shape_checked():
    m = build_model("dandelion", "tiny", 16, 4, 32, 64, "equiangular")
    with pytest.raises(ValueError, match="load_state_dict"):
        m(torch.zeros(1, 16, 64, 128))


def test_film_conditioning():
    m = build_model("dandelion", "tiny", 16, 4, 32, 64, "legendre-gauss", cond_dim=3)
    x = smooth_input(SphereGrid(32, 64, "legendre-gauss"), 16)
    c = torch.randn(2, 3)
    y0 = m(x, c)
    # FiLM starts at zero: the same as no conditioning; it then trains
    y0.square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters() if p.grad is not None)
    with pytest.raises(ValueError, match="cond"):
        m(x)


@pytest.mark.parametrize("cond_dim", [0, 2])
def test_checkpoint_blocks_recomputes_the_same_numbers(cond_dim):
    """Activation checkpointing changes what is stored, not what is computed: same parameters, the same
    output and the same gradients (input and every parameter), FiLM conditioning included."""
    grid = SphereGrid(16, 32, "equiangular")
    x = smooth_input(grid, 16)
    cond = torch.randn(2, cond_dim) if cond_dim else None
    results = []
    for checkpoint in (False, True):
        torch.manual_seed(0)
        m = build_model(
            "dandelion", "tiny", 16, 4, 16, 32, "equiangular", cond_dim=cond_dim, checkpoint_blocks=checkpoint
        )
        if cond_dim:  # FiLM starts at zero; give it weights so that the conditioning path is exercised
            for blk in m.modules():
                if getattr(blk, "film", None) is not None:
                    torch.nn.init.normal_(blk.film.weight, std=0.1)
        xi = x.clone().requires_grad_()
        saved = []

        def pack(t, saved=saved):
            saved.append(t.untyped_storage().nbytes())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = m(xi, cond) if cond_dim else m(xi)
        m.saved_bytes = sum(saved)
        (y * torch.linspace(-1, 1, y.numel()).reshape(y.shape)).sum().backward()
        results.append((m, y.detach(), xi.grad, {n: p.grad for n, p in m.named_parameters()}))
    (m0, y0, gx0, g0), (m1, y1, gx1, g1) = results
    assert m1.checkpoint_blocks and not m0.checkpoint_blocks
    assert m1.saved_bytes < 0.6 * m0.saved_bytes  # the blocks' activations are not kept (counted with repeats)
    assert sum(p.numel() for p in m0.parameters()) == sum(p.numel() for p in m1.parameters())
    assert m0.state_dict().keys() == m1.state_dict().keys()
    torch.testing.assert_close(y1, y0, rtol=0, atol=0)
    torch.testing.assert_close(gx1, gx0, rtol=1e-6, atol=1e-9)
    for name, g in g0.items():
        torch.testing.assert_close(g1[name], g, rtol=1e-5, atol=1e-8, msg=lambda m, name=name: f"{name}: {m}")
    with torch.no_grad():  # no recomputation without gradients
        torch.testing.assert_close(m1(x, cond) if cond_dim else m1(x), y0, rtol=0, atol=0)


def test_autocast_bfloat16_runs_close_to_float32():
    """Under CPU bfloat16 autocast the warps' index arithmetic, norms and SHTs stay float32."""
    torch.manual_seed(0)
    m = build_model("dandelion", "tiny", 16, 4, 32, 64, "legendre-gauss").eval()
    x = smooth_input(SphereGrid(32, 64, "legendre-gauss"), 16)
    with torch.no_grad():
        y32 = m(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y16 = m(x)
    assert torch.isfinite(y16).all()
    assert float((y16.float() - y32).norm() / y32.norm()) < 5e-2


def test_tiny_trains():
    """A few AdamW steps reduce the loss of fitting a smooth target (the model can learn)."""
    torch.manual_seed(0)
    m = build_model("dandelion", "tiny", 4, 1, 16, 32, "equiangular")
    g = SphereGrid(16, 32)
    x = smooth_input(g, 4, batch=4)
    target = (x[:, :1] * x[:, 1:2]).detach()
    opt = torch.optim.AdamW(m.parameters(), lr=5e-3)
    losses = []
    for _ in range(15):
        loss = (next_frame(m, x, 1, torch.ones(1)) - target).square().mean()  # the step as trained (increment)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


# ----------------------------------------------------------------------------- area norm
@pytest.mark.parametrize("nlat,nlon,grid", [(32, 64, "equiangular"), (24, 48, "legendre-gauss")])
def test_area_norm_statistics(nlat, nlon, grid):
    g = SphereGrid(nlat, nlon, grid)
    norm = AreaNormS2(g, 6, groups=2).double()
    x = smooth_input(g, 6).double() * 5 + 3
    y = norm(x)
    w = g.weights / (4 * math.pi)
    yg = y.reshape(2, 2, 3, nlat, nlon)
    mean = (yg * w).sum((-1, -2)).mean(-1)
    var = ((yg - mean[..., None, None, None]) ** 2 * w).sum((-1, -2)).mean(-1)
    torch.testing.assert_close(mean, torch.zeros_like(mean), atol=1e-6, rtol=0)  # weights stored float32
    torch.testing.assert_close(var, torch.ones_like(var), atol=1e-4, rtol=0)


def test_area_norm_resolution_independent():
    """The same smooth field on two grids gets the same statistics (area weights, not node counts)."""
    outs = []
    for nlat, nlon, grid in [(17, 32, "equiangular"), (64, 128, "legendre-gauss")]:
        g = SphereGrid(nlat, nlon, grid)
        norm = AreaNormS2(g, 3).double()
        x = smooth_input(g, 3).double()
        y = norm(x)
        # recover the scale: y = (x - m)/s  ->  s = (x - m)/y at a node; compare via the pole value
        outs.append((y[..., 0, 0] - y[..., -1, 0]) / (x[..., 0, 0] - x[..., -1, 0]))
    torch.testing.assert_close(outs[0], outs[1], atol=1e-6, rtol=1e-6)


def test_pointwise_is_a_1x1_convolution():
    """Pointwise keeps Conv2d's parameters and state_dict and computes the same map."""
    from dandelion.pointwise import Pointwise

    torch.manual_seed(0)
    p = Pointwise(5, 7).double()
    conv = torch.nn.Conv2d(5, 7, 1).double()
    conv.load_state_dict(p.state_dict())
    x = torch.randn(2, 5, 4, 6, dtype=torch.float64)
    torch.testing.assert_close(p(x), conv(x), rtol=1e-13, atol=1e-13)
    assert {k: v.shape for k, v in p.state_dict().items()} == {k: v.shape for k, v in conv.state_dict().items()}


@pytest.mark.parametrize("groups", [1, 2])
def test_area_norm_gradcheck(groups):
    """The area norm's analytic backward passes float64 gradcheck (input, weight, bias)."""
    grid = SphereGrid(6, 8, "legendre-gauss")
    norm = AreaNormS2(grid, 4, groups=groups).double()
    with torch.no_grad():
        norm.weight.add_(0.1 * torch.randn(4, dtype=torch.float64))
        norm.bias.add_(0.1 * torch.randn(4, dtype=torch.float64))
    x = torch.randn(2, 4, 6, 8, dtype=torch.float64, requires_grad=True)
    w = norm.weight.detach().clone().requires_grad_()
    b = norm.bias.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w, b: _norm_with(norm, x, w, b), (x, w, b))
    torch.testing.assert_close(_norm_with(norm, x, w, b), norm(x))


def _norm_with(norm, x, w, b):
    from dandelion.norm import _AreaNormFunction

    return _AreaNormFunction.apply(x, w, b, norm.row_weights.to(x.dtype), norm.groups, norm.eps)
