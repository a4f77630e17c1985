"""Tests of dandelion.spectral_pooling: spectral down/up sampling between U-Net levels."""

import math

import pytest
import torch
from torch_harmonics import InverseRealSHT, RealSHT

from dandelion.spectral_pooling import SpectralDownsample, SpectralUpsample, coarse_grid, pooling_band_limit
from dandelion.sphere import SphereGrid

FINE = [
    (32, 64, "equiangular"),
    (33, 64, "equiangular"),
    (32, 64, "legendre-gauss"),
    (31, 64, "legendre-gauss"),
    (65, 128, "equiangular"),
]


def band_limited(grid, band, batch=3, seed=0):
    """Random real field with degrees < band (orders < band), synthesised in float64 on grid."""
    g = torch.Generator().manual_seed(seed)
    coeffs = torch.randn(batch, band, band, 2, generator=g, dtype=torch.float64)
    coeffs = torch.view_as_complex(coeffs)
    l = torch.arange(band)[:, None]
    m = torch.arange(band)[None, :]
    coeffs = coeffs * (m <= l)
    coeffs[..., 0] = coeffs[..., 0].real  # m = 0 real
    isht = InverseRealSHT(grid.nlat, grid.nlon, lmax=band, mmax=band, grid=grid.grid)
    return isht(coeffs), coeffs


def public_sht_then_isht(m, dtype=torch.float32):
    """torch-harmonics' public ``InverseRealSHT(RealSHT(x))`` between the grids of pooling module ``m``."""
    gi, go = m.grid_in, m.grid_out
    sht = RealSHT(gi.nlat, gi.nlon, lmax=m.lmax, mmax=m.mmax, grid=gi.grid).to(dtype)
    isht = InverseRealSHT(go.nlat, go.nlon, lmax=m.lmax, mmax=m.mmax, grid=go.grid).to(dtype)
    return lambda x: isht(sht(x))


def rel(a, b):
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("nlat,nlon,grid", FINE)
def test_down_then_up_reproduces_band_limited_field(nlat, nlon, grid):
    fine = SphereGrid(nlat, nlon, grid)
    coarse = coarse_grid(fine, 1)
    assert coarse.grid == "legendre-gauss" and coarse.nlat == math.ceil(nlat / 2) and coarse.nlon == nlon // 2
    down, up = SpectralDownsample(fine, coarse), SpectralUpsample(coarse, fine)
    band = pooling_band_limit(fine, coarse)
    f64, coeffs = band_limited(fine, band)
    f = f64.float()
    coarse_f = down(f)
    assert coarse_f.dtype == torch.float32 and coarse_f.shape == (3, coarse.nlat, coarse.nlon)
    # the coarse field is the same band-limited function at the coarse nodes
    expected_coarse = InverseRealSHT(coarse.nlat, coarse.nlon, lmax=band, mmax=band, grid="legendre-gauss")(coeffs)
    assert rel(coarse_f.double(), expected_coarse) < 1e-5
    assert rel(up(coarse_f).double(), f64) < 1e-5


@pytest.mark.parametrize("nlat,nlon,grid", FINE)
@pytest.mark.parametrize("k", [1, 3])
def test_shift_equivariance(nlat, nlon, grid, k):
    """Rolling the fine input by 2k columns rolls the pooled output by k columns."""
    fine = SphereGrid(nlat, nlon, grid)
    coarse = coarse_grid(fine, 1)
    down = SpectralDownsample(fine, coarse)
    x = torch.randn(2, 4, nlat, nlon, generator=torch.Generator().manual_seed(k))
    a = down(torch.roll(x, 2 * k, dims=-1))
    b = torch.roll(down(x), k, dims=-1)
    assert rel(a, b) < 1e-5


def test_tables_are_float32_and_outside_the_state_dict():
    fine = SphereGrid(32, 64)
    down = SpectralDownsample(fine, coarse_grid(fine, 1))
    assert down.resample.dtype == torch.float32
    assert down.state_dict() == {}


def test_coarse_grid_rejects_indivisible_nlon():
    with pytest.raises(ValueError, match="nlon=30"):
        coarse_grid(SphereGrid(16, 30), 2)


@pytest.mark.parametrize("nlat,nlon,grid", [(32, 64, "equiangular"), (31, 64, "legendre-gauss")])
def test_fused_resample_equals_sht_then_isht(nlat, nlon, grid):
    """The fused Legendre stages give torch-harmonics' isht(sht(x)) up to float32 rounding, both ways."""
    fine = SphereGrid(nlat, nlon, grid)
    coarse = coarse_grid(fine, 1)
    g = torch.Generator().manual_seed(0)
    for m in (SpectralDownsample(fine, coarse), SpectralUpsample(coarse, fine)):
        x = torch.randn(2, 3, m.grid_in.nlat, m.grid_in.nlon, generator=g)
        ref = public_sht_then_isht(m)(x)
        torch.testing.assert_close(m(x), ref, rtol=0, atol=2e-6 * float(ref.abs().max()))


@pytest.mark.parametrize("nlat,nlon,grid", [(8, 16, "equiangular"), (7, 18, "legendre-gauss")])
def test_resample_backward_is_the_adjoint_of_sht_then_isht(nlat, nlon, grid):
    """The hand-written backward passes float64 gradcheck and gives the gradient of torch-harmonics'
    isht(sht(x)) up to the float32 rounding of the tables (the fused matrix is rounded once, the two
    stages each), both ways. (7, 18) puts 9 longitudes, an odd count, on the coarse level.
    """
    fine = SphereGrid(nlat, nlon, grid)
    coarse = coarse_grid(fine, 1)
    g = torch.Generator().manual_seed(0)
    for m in (SpectralDownsample(fine, coarse).double(), SpectralUpsample(coarse, fine).double()):
        x = torch.randn(2, 3, m.grid_in.nlat, m.grid_in.nlon, generator=g, dtype=torch.float64, requires_grad=True)
        w = torch.randn(2, 3, m.grid_out.nlat, m.grid_out.nlon, generator=g, dtype=torch.float64)
        (got,) = torch.autograd.grad(m(x), x, w)
        (want,) = torch.autograd.grad(public_sht_then_isht(m, torch.float64)(x), x, w)
        torch.testing.assert_close(got, want, rtol=0, atol=2e-6 * float(want.abs().max()))
        assert torch.autograd.gradcheck(m, (x,))


@pytest.mark.parametrize(
    "nlat,nlon,grid", [(64, 128, "equiangular"), (33, 64, "equiangular"), (48, 96, "legendre-gauss")]
)
def test_resample_table_has_no_float32_subnormals(nlat, nlon, grid):
    """High orders next to the poles give Legendre products far below float32's normal range; the
    table holds them as exact zeros (subnormal operands slow the CPU matrix product several times)."""
    fine = SphereGrid(nlat, nlon, grid)
    for m in (SpectralDownsample(fine, coarse_grid(fine, 1)), SpectralUpsample(coarse_grid(fine, 1), fine)):
        r = m.resample
        assert r.dtype == torch.float32
        assert not bool(((r != 0) & (r.abs() < torch.finfo(torch.float32).tiny)).any())
