"""SphereGrid: quadrature exactness, harmonic orthonormality and local frames, on both grids."""

import math

import numpy as np
import pytest
import torch
from scipy.special import sph_harm_y

from dandelion.sphere import SphereGrid, analysis_lmax

GRIDS = [("equiangular", 33, 64), ("equiangular", 16, 32), ("legendre-gauss", 16, 32), ("legendre-gauss", 31, 62)]


def real_sh(l, m, colat, lon):
    """Real orthonormal spherical harmonic from scipy's complex one (independent of torch-harmonics)."""
    y = sph_harm_y(l, abs(m), colat, lon)
    if m > 0:
        return math.sqrt(2) * (-1) ** m * y.real
    if m < 0:
        return math.sqrt(2) * (-1) ** m * y.imag
    return y.real


@pytest.mark.parametrize("grid,nlat,nlon", GRIDS)
def test_integrals(grid, nlat, nlon):
    g = SphereGrid(nlat, nlon, grid)
    assert g.weights.shape == (nlat, 1)
    one = torch.ones(nlat, nlon, dtype=torch.float64)
    assert abs(g.integrate(one).item() - 4 * math.pi) < 1e-12 * 4 * math.pi
    z2 = g.xyz[2] ** 2
    assert abs(g.integrate(z2).item() - 4 * math.pi / 3) < 1e-12 * 4 * math.pi / 3
    x2 = g.xyz[0] ** 2
    assert abs(g.integrate(x2).item() - 4 * math.pi / 3) < 1e-12 * 4 * math.pi / 3
    assert torch.all(g.weights >= 0)
    # north-south symmetric weights
    torch.testing.assert_close(g.weights, g.weights.flip(0), atol=1e-15, rtol=1e-13)


@pytest.mark.parametrize("grid,nlat,nlon", GRIDS)
def test_harmonics_orthonormal(grid, nlat, nlon):
    g = SphereGrid(nlat, nlon, grid)
    colat, lon = np.meshgrid(g.colat.numpy(), g.lon.numpy(), indexing="ij")
    ys = [real_sh(l, m, colat, lon) for l in range(5) for m in range(-l, l + 1)]
    Y = torch.tensor(np.stack(ys))  # (25, nlat, nlon)
    gram = (Y[:, None] * Y[None, :] * g.weights).sum((-2, -1))
    torch.testing.assert_close(gram, torch.eye(len(ys), dtype=torch.float64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("grid,nlat,nlon", GRIDS)
def test_frames_orthonormal(grid, nlat, nlon):
    g = SphereGrid(nlat, nlon, grid)
    vecs = {"xyz": g.xyz, "east": g.east, "north": g.north}
    for a in vecs:
        for b in vecs:
            dot = (vecs[a] * vecs[b]).sum(0)
            expect = 1.0 if a == b else 0.0
            assert torch.allclose(dot, torch.full_like(dot, expect), atol=1e-14), (a, b)
    # right-handed: east x north = outward normal
    torch.testing.assert_close(torch.linalg.cross(g.east, g.north, dim=0), g.xyz, atol=1e-14, rtol=0)
    # rows ordered north to south, longitudes 2*pi*j/nlon
    assert torch.all(torch.diff(g.colat) > 0)
    assert g.lat[0] > 0 > g.lat[-1]
    torch.testing.assert_close(g.lon[1] - g.lon[0], torch.tensor(2 * math.pi / nlon, dtype=torch.float64))


def test_equiangular_has_poles_gauss_does_not():
    e = SphereGrid(17, 32, "equiangular")
    assert e.colat[0].item() == 0.0 and abs(e.colat[-1].item() - math.pi) < 1e-15
    lg = SphereGrid(16, 32, "legendre-gauss")
    assert lg.colat[0].item() > 0 and lg.colat[-1].item() < math.pi
    assert analysis_lmax(33, "equiangular") == 17 and analysis_lmax(32, "legendre-gauss") == 32


@pytest.mark.parametrize(
    "args,match",
    [((16, 32, "gaussian"), "unknown grid"), ((2, 32, "equiangular"), "too small"), ((16, 0, "equiangular"), "nlon")],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        SphereGrid(*args)


def test_check_shape_error():
    g = SphereGrid(16, 32, "legendre-gauss")
    with pytest.raises(ValueError, match="nlat, nlon"):
        g.integrate(torch.ones(16, 31))
