"""Spectral core: round trips and analytic derivatives (band-limited test functions)."""

import math

import pytest
import torch

from dandelion.solvers.spectral_core import SpectralCore, smooth_fft_size
from dandelion.sphere import SphereGrid


def _fields(lat, lon):
    C, S = torch.cos(lat), torch.sin(lat)
    psi = C**2 * S * torch.sin(2 * lon) + S  # degrees 3 and 1
    chi = C * S**2 * torch.cos(lon)  # degree 3
    dpsi_dlat = (-2 * C * S * S + C**3) * torch.sin(2 * lon) + C
    dpsi_dlon = 2 * C**2 * S * torch.cos(2 * lon)
    dchi_dlat = (-(S**3) + 2 * C * C * S) * torch.cos(lon)
    dchi_dlon = -C * S**2 * torch.sin(lon)
    return psi, chi, dpsi_dlat, dpsi_dlon, dchi_dlat, dchi_dlon


@pytest.mark.parametrize("lmax, dealias, radius", [(16, 1.5, 1.0), (24, 2.0, 6.37122e6), (12, 1.0, 2.0)])
def test_helmholtz_and_gradient(lmax, dealias, radius):
    core = SpectralCore(lmax, dealias=dealias, radius=radius)
    assert core.nlat >= math.ceil(dealias * lmax) and core.nlon >= 2 * core.nlat
    psi, chi, dpsi_dlat, dpsi_dlon, dchi_dlat, dchi_dlon = _fields(core.lat, core.lon)
    R, C = radius, torch.cos(core.lat)
    ps, cs = core.to_spec(psi), core.to_spec(chi)
    assert torch.allclose(core.to_grid(ps), psi, atol=1e-11, rtol=0)
    vrt, div = core.laplacian(ps), core.laplacian(cs)
    # analytic Laplacian eigenvalues: psi = Y3 part + Y1 part
    assert torch.allclose(core.inverse_laplacian(vrt)[..., 1:, :], ps[..., 1:, :], atol=1e-13 * R**2, rtol=1e-12)
    u, v = core.vrtdiv_to_uv(vrt, div)
    ua = dchi_dlon / (R * C) - dpsi_dlat / R
    va = dchi_dlat / R + dpsi_dlon / (R * C)
    scale = ua.abs().max()
    assert (u - ua).abs().max() < 1e-10 * scale and (v - va).abs().max() < 1e-10 * scale
    vr2, dv2 = core.uv_to_vrtdiv(u, v)
    vs = vrt.abs().max()
    assert (vr2 - vrt).abs().max() < 1e-11 * vs and (dv2 - div).abs().max() < 1e-11 * vs
    gx, gy = core.gradient(ps)
    assert torch.allclose(gx, dpsi_dlon / (R * C), atol=1e-11 / R, rtol=0)
    assert torch.allclose(gy, dpsi_dlat / R, atol=1e-11 / R, rtol=0)


def test_solid_body_vorticity():
    # u = U cos(lat), v = 0 has vorticity 2 U sin(lat) / R and no divergence
    core = SpectralCore(8, radius=3.0)
    u = 5.0 * torch.cos(core.lat).expand(core.nlat, core.nlon)
    vrt, div = core.uv_to_vrtdiv(u, torch.zeros_like(u))
    assert torch.allclose(core.to_grid(vrt), (2 * 5.0 / 3.0 * torch.sin(core.lat)).expand_as(u), atol=1e-12)
    assert div.abs().max() < 1e-12


@pytest.mark.parametrize(
    "grid, nlat, nlon", [("equiangular", 33, 64), ("legendre-gauss", 20, 40), ("equiangular", 9, 16)]
)
def test_synthesis_on_output_grid_is_exact(grid, nlat, nlon):
    core = SpectralCore(16, radius=2.0)
    psi, chi, dpsi_dlat, dpsi_dlon, dchi_dlat, dchi_dlon = _fields(core.lat, core.lon)
    ps, cs = core.to_spec(psi), core.to_spec(chi)
    g = SphereGrid(nlat, nlon, grid)
    lat, lon = g.lat.reshape(-1, 1), g.lon.reshape(1, -1)
    want = _fields(lat, lon)
    out = core.synthesise(torch.stack([ps, cs]), g)
    assert out.shape == (2, nlat, nlon)
    if g.lmax >= 4:  # the test functions are band-limited to degree 3
        assert torch.allclose(out[0], want[0], atol=1e-12) and torch.allclose(out[1], want[1], atol=1e-12)
        u, v = core.synthesise_uv(core.laplacian(ps), core.laplacian(cs), g)
        C = torch.cos(lat)
        assert torch.allclose(u, (want[5] / C - want[2]) / 2.0, atol=1e-11)
        assert torch.allclose(v, (want[4] + want[3] / C) / 2.0, atol=1e-11)
    else:  # truncated to the grid's band limit: equals the truncated spectrum's synthesis
        ref = core.to_grid(torch.where(core.l < g.lmax, ps, 0))
        analysed = core.analyse(out[0], g)
        assert torch.allclose(core.to_grid(analysed), ref, atol=1e-12)


def test_bad_input_messages():
    with pytest.raises(ValueError, match="lmax"):
        SpectralCore(1)
    with pytest.raises(ValueError, match="dealias"):
        SpectralCore(8, dealias=0.5)
    with pytest.raises(ValueError, match="does not fit"):
        SpectralCore(8, nlat=4, nlon=8)
    assert smooth_fft_size(97) == 100
