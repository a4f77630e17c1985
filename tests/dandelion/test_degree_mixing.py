"""Tests of the spectral path (a per-degree linear map in the SH domain) and of the cost-matched presets."""

import math

import pytest
import torch
from torch_harmonics import InverseRealSHT, RealSHT

from dandelion import build_model
from dandelion.degree_mixing import DegreeMixS2
from dandelion.model import FAST_PRESETS
from dandelion.registry import count_parameters
from dandelion.sphere import SphereGrid


def band_limited(grid: SphereGrid, channels: int, degrees: list[int], seed: int = 0) -> torch.Tensor:
    """A random field of the given degrees only (all orders), by torch-harmonics, shape (1, C, nlat, nlon)."""
    lmax = max(degrees) + 1
    g = torch.Generator().manual_seed(seed)
    coeffs = torch.zeros(1, channels, lmax, lmax, dtype=torch.complex128)
    for l in degrees:
        c = torch.randn(1, channels, l + 1, 2, generator=g, dtype=torch.float64)
        coeffs[:, :, l, : l + 1] = torch.view_as_complex(c)
    coeffs[..., 0] = coeffs[..., 0].real  # order 0 of a real field is real
    isht = InverseRealSHT(grid.nlat, grid.nlon, lmax=lmax, mmax=lmax, grid=grid.grid).double()
    return isht(coeffs).float()


def degree_power(grid: SphereGrid, f: torch.Tensor) -> torch.Tensor:
    """Power per degree (summed over orders and channels) of ``f`` (1, C, nlat, nlon)."""
    sht = RealSHT(grid.nlat, grid.nlon, grid=grid.grid).double()
    c = sht(f.double())
    w = torch.ones(c.shape[-1], dtype=torch.float64)
    w[1:] = 2.0  # orders m > 0 stand for +-m
    return (c.abs() ** 2 * w).sum(dim=(0, 1, 3))


def test_identity_weights_reproduce_a_band_limited_field():
    grid = SphereGrid(32, 64, "equiangular")
    path = DegreeMixS2(grid, 3, 3, lmax=16)
    with torch.no_grad():
        path.weight.copy_(torch.eye(3).expand(16, 3, 3))
    f = band_limited(grid, 3, [0, 3, 9, 15])
    assert torch.allclose(path(f), f, atol=1e-4 * float(f.abs().max()))


def test_each_degree_is_scaled_by_its_own_weight():
    # an isotropic operator keeps every degree in its degree: degree l comes out times W_l, nothing leaks
    grid = SphereGrid(33, 64, "equiangular")
    path = DegreeMixS2(grid, 1, 1, lmax=17)
    gains = torch.linspace(-2.0, 3.0, 17)
    with torch.no_grad():
        path.weight.copy_(gains[:, None, None])
    f = band_limited(grid, 1, [2, 5, 11])
    with torch.no_grad():
        p_in, p_out = degree_power(grid, f), degree_power(grid, path(f))
    for l in (2, 5, 11):
        assert math.isclose(float(p_out[l] / p_in[l]), float(gains[l] ** 2), rel_tol=1e-3)
    others = [l for l in range(len(p_out)) if l not in (2, 5, 11)]
    assert float(p_out[others].sum()) < 1e-8 * float(p_in.sum())


def test_commutes_with_a_rotation_about_the_axis_and_with_the_pole_flip():
    grid = SphereGrid(32, 64, "equiangular")
    torch.manual_seed(0)
    path = DegreeMixS2(grid, 2, 3, lmax=16, init_scale=0.5)
    f = band_limited(grid, 2, list(range(16)), seed=1)
    shift = lambda x: torch.roll(x, 7, dims=-1)  # noqa: E731 (rotation by 7 cells of longitude)
    flip = lambda x: torch.flip(x, dims=[-2])  # noqa: E731 (reflection through the equator)
    with torch.no_grad():
        y = path(f)
    assert torch.allclose(path(shift(f)), shift(y), atol=1e-4 * float(y.abs().max()))
    assert torch.allclose(path(flip(f)), flip(y), atol=1e-4 * float(y.abs().max()))


def test_weights_are_resolution_free():
    coarse, fine = SphereGrid(32, 64, "equiangular"), SphereGrid(64, 128, "equiangular")
    torch.manual_seed(0)
    a = DegreeMixS2(coarse, 2, 2, lmax=32, init_scale=0.3)
    b = DegreeMixS2(fine, 2, 2, lmax=32)
    b.load_state_dict(a.state_dict())
    assert a.band == 16 and b.band == 32
    f_c, f_f = band_limited(coarse, 2, [4, 10], seed=2), band_limited(fine, 2, [4, 10], seed=2)
    # the same band-limited field on both grids gives the same output field: compare its SH coefficients
    sht_c = RealSHT(32, 64, lmax=11, mmax=11, grid="equiangular")
    sht_f = RealSHT(64, 128, lmax=11, mmax=11, grid="equiangular")
    assert torch.allclose(sht_c(a(f_c)), sht_f(b(f_f)), atol=1e-4)


@pytest.mark.parametrize("bad", [0, -3])
def test_refuses_a_bad_lmax(bad):
    with pytest.raises(ValueError, match="lmax"):
        DegreeMixS2(SphereGrid(16, 32, "equiangular"), 1, 1, lmax=bad)


def test_dandelion_with_the_path_starts_as_without_it_and_learns_it():
    torch.manual_seed(0)
    plain = build_model("dandelion", "tiny", 16, 4, 32, 64)
    torch.manual_seed(0)
    with_path = build_model("dandelion", "tiny", 16, 4, 32, 64, spectral_lmax=32)
    torch.manual_seed(0)
    to_output = build_model("dandelion", "tiny", 16, 4, 32, 64, spectral_lmax=32, spectral_into="output")
    x = torch.randn(2, 16, 32, 64)
    assert torch.equal(plain(x), with_path(x)) and torch.equal(plain(x), to_output(x))
    assert count_parameters(with_path) - count_parameters(plain) == 32 * 16 * 16  # into the head: width 16
    assert count_parameters(to_output) - count_parameters(plain) == 32 * 16 * 4
    with_path(x).square().mean().backward()
    assert with_path.spectral.weight.grad[:16].abs().sum() > 0  # the degrees 32x64 resolves get gradients
    assert with_path.spectral.weight.grad[16:].abs().sum() == 0  # those it does not, none
    with pytest.raises(ValueError, match="spectral_into"):
        build_model("dandelion", "tiny", 16, 4, 32, 64, spectral_lmax=32, spectral_into="bottleneck")
    with pytest.raises(ValueError, match="spectral_lmax"):
        build_model("dandelion", "tiny", 16, 4, 32, 64, spectral_lmax=-1)


# ------------------------------------------------------------------------------------- cost-matched presets


@pytest.mark.parametrize("size", sorted(FAST_PRESETS))
def test_fast_presets_keep_no_warp_on_the_data_grid(size):
    m = build_model("dandelion_fast", size, 16, 4, 64, 128)
    assert len(m.encoder[0]) == 0 and len(m.decoder[0]) == 0
    for blocks in (*m.encoder, *m.decoder):
        for blk in blocks:
            assert blk.warp.sampler.grid.nlat <= 32  # every warp runs on a grid of half the data grid's rows or fewer


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_fast_preset_is_parameter_matched_and_loads_across_grids(size):
    ref = count_parameters(build_model("dandelion", size, 16, 4, 32, 64))
    a = build_model("dandelion_fast", size, 16, 4, 32, 64)
    assert 0.9 <= count_parameters(a) / ref <= 1.1
    b = build_model("dandelion_fast", size, 16, 4, 64, 128)
    b.load_state_dict(a.state_dict())
    x = torch.randn(1, 16, 64, 128)
    assert b(x).shape == (1, 4, 64, 128)


@pytest.mark.parametrize("size", sorted(FAST_PRESETS))
def test_the_fast_entry_builds_the_fast_presets_of_dandelion(size):
    a = build_model("dandelion_fast", size, 16, 4, 32, 64)
    b = build_model("dandelion", f"{size}_fast", 16, 4, 32, 64)
    shapes = lambda m: {k: tuple(v.shape) for k, v in m.state_dict().items() if torch.is_tensor(v)}  # noqa: E731
    assert shapes(a) == shapes(b) and shapes(a) != shapes(build_model("dandelion", size, 16, 4, 32, 64))


def test_anchored_degree_weights_interpolate_linearly_between_anchors():
    """With anchors, W_l is the linear interpolation of the anchor matrices: exact at the anchors' degrees and a
    straight line between them, so a smooth (here linear) degree profile is represented exactly."""
    g = SphereGrid(32, 64)
    mix = DegreeMixS2(g, 3, 2, lmax=31, anchors=4)  # anchors at the degrees 0, 10, 20, 30; the grid resolves 0..15
    assert mix.weight.shape == (4, 2, 3)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    with torch.no_grad():
        mix.weight.copy_(torch.stack([a + b * k * 10 for k in range(4)]))  # W at degree 10k is a + b * 10k
    w = mix.degree_weights()
    assert w.shape == (mix.band, 2, 3)
    for ell in range(mix.band):
        torch.testing.assert_close(w[ell], a + b * ell, rtol=1e-5, atol=1e-5)  # a linear profile is kept exactly
    x = torch.randn(1, 3, 32, 64)
    coeffs = mix.sht(x)
    expect = mix.isht(torch.einsum("bilm,loi->bolm", coeffs, w.to(coeffs.dtype)))
    torch.testing.assert_close(mix(x), expect, rtol=1e-4, atol=1e-5)
    for bad in (1, -1, 32):
        with pytest.raises(ValueError, match="anchors"):
            DegreeMixS2(g, 3, 2, lmax=31, anchors=bad)
    m = build_model("dandelion", "tiny", 16, 4, 32, 64, spectral_lmax=32, spectral_anchors=8)
    assert m.spectral.weight.shape[0] == 8


def test_a_path_from_the_lifted_features_does_not_grow_with_the_input_channels():
    """spectral_from="lift" maps the level-0 width to itself: its size is the same for 16 and 164 input channels,
    while the path from the input grows with them; at initialisation both leave the network's output unchanged."""
    sizes = {}
    for cin in (16, 164):
        torch.manual_seed(0)
        stock = build_model("dandelion", "tiny", cin, 4, 32, 64)
        for source in ("input", "lift"):
            torch.manual_seed(0)
            m = build_model("dandelion", "tiny", cin, 4, 32, 64, spectral_lmax=32, spectral_from=source)
            sizes[cin, source] = m.spectral.weight.numel()
            x = torch.randn(2, cin, 32, 64)
            missing = m.load_state_dict(stock.state_dict(), strict=False).missing_keys
            assert missing == ["spectral.weight"]
            torch.testing.assert_close(m(x), stock(x))  # zero-initialised path: the stock network's output
    assert sizes[16, "lift"] == sizes[164, "lift"] and sizes[164, "input"] > sizes[16, "input"]
    with pytest.raises(ValueError, match="spectral_from"):
        build_model("dandelion", "tiny", 16, 4, 32, 64, spectral_lmax=32, spectral_from="bottleneck")
