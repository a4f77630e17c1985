"""Metrics against hand-worked cases."""

import math

import pytest
import torch

from dandelion import metrics as M
from dandelion.sphere import SphereGrid

GRIDS = [(9, 16, "equiangular"), (8, 16, "legendre-gauss"), (17, 32, "equiangular")]


def _field(grid, seed=0, batch=(3,)):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*batch, grid.nlat, grid.nlon, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("nlat,nlon,grid", GRIDS)
@pytest.mark.parametrize("c", [0.5, -3.0, 1e3])
def test_constant_error_gives_rmse_c(nlat, nlon, grid, c):
    sg = SphereGrid(nlat, nlon, grid)
    t = _field(sg)
    r = M.area_weighted_rmse(t + c, t, sg.weights)
    torch.testing.assert_close(r, torch.full_like(r, abs(c)), rtol=1e-12, atol=0)


@pytest.mark.parametrize("nlat,nlon,grid", GRIDS)
def test_own_weighted_mean_gives_weighted_vrmse_one(nlat, nlon, grid):
    sg = SphereGrid(nlat, nlon, grid)
    t = 10.0 * _field(sg, batch=(2, 3))
    p = sg.mean(t)[..., None, None].expand_as(t)
    v = M.vrmse(p, t, sg.weights, eps=0.0)
    torch.testing.assert_close(v, torch.ones_like(v), rtol=1e-12, atol=0)
    # the default eps (1e-7) changes it only by the relative size of eps to the variance
    v_eps = M.vrmse(p, t, sg.weights)
    assert torch.all((v_eps < 1) & (v_eps > 1 - 1e-7))


@pytest.mark.parametrize("nlat,nlon,grid", GRIDS)
def test_plain_mean_gives_well_vrmse_bessel(nlat, nlon, grid):
    """The Well divides by the unbiased variance (torch.std ** 2): predicting the plain mean gives sqrt((N-1)/N)."""
    sg = SphereGrid(nlat, nlon, grid)
    t = 10.0 * _field(sg, batch=(4,))
    p = t.mean((-2, -1), keepdim=True).expand_as(t)
    n = nlat * nlon
    v = M.vrmse(p, t, None, eps=0.0)
    torch.testing.assert_close(v, torch.full_like(v, math.sqrt((n - 1) / n)), rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    "nlat,grid",
    [(3, "equiangular"), (9, "equiangular"), (33, "equiangular"), (8, "legendre-gauss"), (32, "legendre-gauss")],
)
def test_area_weights_finite_nonnegative_symmetric(nlat, grid):
    sg = SphereGrid(nlat, 2 * nlat, grid)
    w = M.area_weights(sg)
    assert w.shape == (nlat, 1)
    assert torch.isfinite(w).all() and (w >= 0).all()
    torch.testing.assert_close(w, w.flip(0), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(w.sum() * sg.nlon, torch.tensor(1.0, dtype=torch.float64))


@pytest.mark.parametrize("nlat,nlon,grid", GRIDS)
def test_acc_hand_cases(nlat, nlon, grid):
    sg = SphereGrid(nlat, nlon, grid)
    t = _field(sg)
    clim = 0.3
    # perfect forecast -> 1; anomaly of opposite sign -> -1; scaled anomaly -> 1
    for p, expected in [(t, 1.0), (2 * clim - t, -1.0), (clim + 3.0 * (t - clim), 1.0)]:
        a = M.acc(p, t, clim, sg)
        torch.testing.assert_close(a, torch.full_like(a, expected), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nlat,nlon,grid", [(16, 32, "equiangular"), (16, 32, "legendre-gauss")])
@pytest.mark.parametrize("l,m", [(0, 0), (1, 0), (3, 2), (5, 5)])
def test_power_spectrum_single_harmonic_and_parseval(nlat, nlon, grid, l, m):
    """A real harmonic of degree l puts all its power in P(l); sum P = area mean of f^2."""
    from scipy.special import lpmv

    sg = SphereGrid(nlat, nlon, grid)
    x = torch.cos(sg.colat).numpy()
    plm = torch.as_tensor(lpmv(m, l, x))[:, None]
    f = plm * torch.cos(m * sg.lon)[None, :]
    p = M.power_spectrum(f, sg)
    assert p.shape == (sg.lmax,)
    total = sg.mean(f**2)
    torch.testing.assert_close(p.sum(), total, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(p[l], total, rtol=1e-10, atol=1e-14)


def test_power_spectrum_explicit_band_limit():
    sg = SphereGrid(16, 32, "equiangular")
    assert M.power_spectrum(_field(sg), sg, lmax=5, mmax=5).shape == (3, 5)
    with pytest.raises(ValueError, match="lmax"):
        M.power_spectrum(_field(sg), sg, lmax=sg.lmax + 1)


@pytest.mark.parametrize("nlat,nlon,grid", GRIDS)
def test_vector_error_is_frame_independent(nlat, nlon, grid):
    """Rotating the (u, v) frame at every point leaves the vector metrics unchanged."""
    sg = SphereGrid(nlat, nlon, grid)
    t = torch.stack([_field(sg, 1), _field(sg, 2)], -1)
    p = torch.stack([_field(sg, 3), _field(sg, 4)], -1)
    ang = _field(sg, 5, batch=())
    c, s = torch.cos(ang)[..., None], torch.sin(ang)[..., None]

    def rot(q):
        return torch.cat([c * q[..., :1] - s * q[..., 1:], s * q[..., :1] + c * q[..., 1:]], -1)

    torch.testing.assert_close(M.vector_rmse(rot(p), rot(t), sg), M.vector_rmse(p, t, sg), rtol=1e-12, atol=0)
    # constant error vector (a, b) -> sqrt(a^2 + b^2)
    e = torch.tensor([3.0, 4.0], dtype=torch.float64)
    torch.testing.assert_close(
        M.vector_rmse(t + e, t, sg), torch.full((3,), 5.0, dtype=torch.float64), rtol=1e-12, atol=0
    )
    # own mean vector -> vector VRMSE 1
    mean = M.weighted_mean(t.movedim(-1, -3), sg)[..., None, None, :]
    v = M.vector_vrmse(mean.expand_as(t), t, sg, eps=0.0)
    torch.testing.assert_close(v, torch.ones_like(v), rtol=1e-12, atol=0)


def test_field_metrics_names_and_perfect_forecast():
    sg = SphereGrid(9, 16)
    t = {"h": _field(sg, 1), "velocity": torch.stack([_field(sg, 2), _field(sg, 3)], -1)}
    out = M.field_metrics(t, t, sg, climatology={"h": 0.1}, spectra=True)
    assert set(out["rmse"]) == {"h", "u", "v", "velocity"}
    assert set(out["vrmse_well"]) == {"h", "u", "v"}
    for var, r in out["rmse"].items():
        assert torch.all(r == 0), var
    torch.testing.assert_close(out["acc"]["h"], torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(out["spectrum_pred"]["u"], out["spectrum_true"]["u"])


@pytest.mark.parametrize("bad", ["shape", "weights"])
def test_bad_input_raises(bad):
    sg = SphereGrid(9, 16)
    t = _field(sg)
    with pytest.raises(ValueError):
        if bad == "shape":
            M.area_weighted_rmse(t[..., :-1], t[..., 1:, :-1], sg)
        else:
            M.area_weighted_rmse(t, t, torch.ones(5, 1))
