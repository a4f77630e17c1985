"""Tests of dandelion.warp's sampler: the exponential map and pole-aware bilinear sampling on the sphere.

Checks are against geometry (unit norm, geodesic distance, initial direction), analytic fields
(harmonic polynomials of degree 1..3 sampled at rotated nodes) and exact identities.
"""

import math

import pytest
import torch

from dandelion.sphere import SphereGrid
from dandelion.warp import GhostPad, SphereSampler, exp_map, sample_sphere

F64 = torch.float64


# ----------------------------------------------------------------------------- helpers
def harmonic_poly(xyz, coeffs):
    """Sum of the 15 real harmonic polynomials of degree 1..3 (zero mean on the sphere)."""
    x, y, z = xyz
    basis = [
        x,
        y,
        z,
        x * y,
        y * z,
        x * z,
        x * x - y * y,
        3 * z * z - 1,
        x * (x * x - 3 * y * y),
        y * (3 * x * x - y * y),
        z * (x * x - y * y),
        x * y * z,
        x * (5 * z * z - 1),
        y * (5 * z * z - 1),
        z * (5 * z * z - 3),
    ]
    return sum(c * b for c, b in zip(coeffs, basis))


COEFFS = torch.randn(15, dtype=F64, generator=torch.Generator().manual_seed(1))


def rotation(seed):
    g = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=F64))
    q = q * torch.sign(torch.diagonal(r))
    if torch.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def colat_lon(p):
    return torch.atan2(torch.hypot(p[0], p[1]), p[2]), torch.atan2(p[1], p[0])


def frame(colat, lon):
    """Position, east, north (3, ...) at colatitude/longitude (float64); at a pole, the meridian limit."""
    ct, st, cl, sl = torch.cos(colat), torch.sin(colat), torch.cos(lon), torch.sin(lon)
    x = torch.stack([st * cl, st * sl, ct])
    e = torch.stack([-sl, cl, torch.zeros_like(cl)])
    n = torch.stack([-ct * cl, -ct * sl, st])
    return x, e, n


def log_map(x, y, e, n):
    """(d_e, d_n) with exp_x(d) = y, for y not antipodal to x."""
    dot = (x * y).sum(0)
    tang = y - dot * x
    s = torch.atan2(tang.norm(dim=0), dot)
    tn = tang.norm(dim=0).clamp_min(1e-300)
    return s * (tang * e).sum(0) / tn, s * (tang * n).sum(0) / tn


def area_rel_l2(err, ref, w):
    return float(((err**2 * w).sum() / (ref**2 * w).sum()).sqrt())


# ----------------------------------------------------------------------------- exp_map
# colatitudes: on the poles, next to them, and ordinary
COLATS = [0.0, 1e-12, 1e-7, 1e-3, 0.7, 1.9, math.pi - 1e-7, math.pi]


@pytest.mark.parametrize("colat", COLATS)
@pytest.mark.parametrize("given_frame", [True, False])
def test_exp_map_geometry(colat, given_frame):
    g = torch.Generator().manual_seed(int(colat * 1000) + 7)
    m = 64
    lon = torch.rand(m, generator=g, dtype=F64) * 2 * math.pi
    x, e, n = frame(torch.full((m,), colat, dtype=F64), lon)
    s = torch.rand(m, generator=g, dtype=F64) * 3.1 + 1e-6  # |d| in (0, pi)
    ang = torch.rand(m, generator=g, dtype=F64) * 2 * math.pi
    d_e, d_n = s * torch.cos(ang), s * torch.sin(ang)
    if given_frame:
        y = exp_map(x, d_e, d_n, e, n)
    else:  # frame computed from x; on a pole, the documented frame of longitude 0
        y = exp_map(x, d_e, d_n)
        if colat in (0.0, math.pi):
            e, n = frame(torch.full((m,), colat, dtype=F64), torch.zeros(m, dtype=F64))[1:]
    torch.testing.assert_close(y.norm(dim=0), torch.ones(m, dtype=F64), atol=1e-6, rtol=0)
    dist = torch.atan2(torch.linalg.cross(x, y, dim=0).norm(dim=0), (x * y).sum(0))
    torch.testing.assert_close(dist, s, atol=1e-6, rtol=0)
    tang = y - (x * y).sum(0) * x
    direction = tang / tang.norm(dim=0)
    expected = (d_e * e + d_n * n) / s
    torch.testing.assert_close(direction, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("colat", COLATS)
def test_exp_map_zero_and_tiny_displacement_finite_gradients(colat):
    m = 16
    lon = torch.linspace(0, 2 * math.pi, m + 1, dtype=F64)[:m]
    x, e, n = frame(torch.full((m,), colat, dtype=F64), lon)
    for scale in (0.0, 1e-12, 1e-5):
        d_e = torch.full((m,), scale, dtype=F64, requires_grad=True)
        d_n = torch.full((m,), -scale, dtype=F64, requires_grad=True)
        xr = x.clone().requires_grad_(True)
        y = exp_map(xr, d_e, d_n)  # frame from x, guarded at the poles
        (y * torch.tensor([0.3, -0.7, 1.1], dtype=F64)[:, None]).sum().backward()
        for t in (d_e.grad, d_n.grad, xr.grad):
            assert torch.isfinite(t).all()
        if scale == 0.0:
            torch.testing.assert_close(y.detach(), x, atol=0, rtol=0)
        # the tangent map at 0 is the frame: dy/dd_e = e
        ye = exp_map(x, d_e.detach() * 0 + 1e-7, d_n.detach() * 0, e, n)
        torch.testing.assert_close((ye - x) / 1e-7, e, atol=1e-6, rtol=0)


def test_exp_map_rejects_bad_layout():
    with pytest.raises(ValueError, match="FIRST"):
        exp_map(torch.zeros(5, 3), torch.zeros(5), torch.zeros(5))


# ----------------------------------------------------------------------------- rotation check
ROT_CASES = [
    (32, 64, "equiangular", 1e-2),
    (32, 64, "legendre-gauss", 1e-2),
    (128, 256, "equiangular", 2e-3),
    (128, 256, "legendre-gauss", 2e-3),
]


@pytest.mark.parametrize("nlat,nlon,grid,tol", ROT_CASES)
@pytest.mark.parametrize("path", ["sample_sphere", "warp"])
def test_rotated_sampling_matches_analytic(nlat, nlon, grid, tol, path):
    """Sample f = sum of degree-1..3 harmonics at R x for every node x; compare with f(R x)."""
    g = SphereGrid(nlat, nlon, grid)
    sampler = SphereSampler(g)
    fg = harmonic_poly(g.xyz, COEFFS).to(torch.float32)[None, None]
    polar = math.radians(10)
    for seed in range(8):
        R = rotation(seed)
        p = torch.einsum("ij,jab->iab", R, g.xyz)
        exact = harmonic_poly(p, COEFFS)
        if path == "sample_sphere":
            colat, lon = colat_lon(p)
            out = sample_sphere(fg, colat[None].float(), lon[None].float(), g)
        else:  # through the exponential map of each node's own frame
            d_e, d_n = log_map(g.xyz, p, g.east, g.north)
            rows, cols = sampler.displaced_index(d_e[None].float(), d_n[None].float())
            out = sampler.sample_index(fg, rows, cols)
        err = out[0, 0].double() - exact
        rel = area_rel_l2(err, exact, g.weights)
        assert rel < tol, f"rotation {seed}: relative L2 error {rel:.2e} >= {tol}"
        colat_p = colat_lon(p)[0]
        cap = (colat_p < polar) | (colat_p > math.pi - polar)
        assert cap.sum() > 0
        rms, cap_rms = err.square().mean().sqrt(), err[cap].square().mean().sqrt()
        assert cap_rms <= 3 * rms, f"rotation {seed}: polar-cap RMS {cap_rms:.2e} > 3 x global RMS {rms:.2e}"


@pytest.mark.parametrize("nlat,nlon", [(16, 32), (32, 64), (31, 64), (32, 63)])
def test_legendre_gauss_ring_inside_first_row(nlat, nlon):
    """Points between the first (last) Gaussian row and the pole are sampled across the pole, not clamped."""
    g = SphereGrid(nlat, nlon, "legendre-gauss")
    fg = harmonic_poly(g.xyz, COEFFS).to(torch.float32)[None, None]
    lon = torch.linspace(0, 2 * math.pi, 721, dtype=F64)[:-1]
    t0 = float(g.colat[0])
    rings = torch.tensor([t0 / 2, t0 / 4, 0.0, math.pi - t0 / 3, math.pi], dtype=F64)
    colat = rings[:, None].expand(-1, lon.numel())
    lon2 = lon[None].expand(rings.numel(), -1)
    x = torch.stack([torch.sin(colat) * torch.cos(lon2), torch.sin(colat) * torch.sin(lon2), torch.cos(colat)])
    out = sample_sphere(fg, colat[None].float(), lon2[None].float(), g)[0, 0].double()
    ring_rms = (out - harmonic_poly(x, COEFFS)).square().mean(-1).sqrt()
    # reference: the error at random points all over the sphere
    gen = torch.Generator().manual_seed(3)
    pts = torch.randn(3, 4000, generator=gen, dtype=F64)
    pts = pts / pts.norm(dim=0)
    c, lo = colat_lon(pts)
    ref = sample_sphere(fg, c[None, None].float(), lo[None, None].float(), g)[0, 0, 0].double() - harmonic_poly(
        pts, COEFFS
    )
    global_rms = ref.square().mean().sqrt()
    assert (ring_rms <= 3 * global_rms).all(), f"ring RMS {ring_rms.tolist()} vs global RMS {float(global_rms):.2e}"


def test_sample_sphere_any_colatitude():
    """Colatitudes outside [0, pi] are reflected through the poles (theta -> -theta, lon + pi)."""
    g = SphereGrid(24, 48, "legendre-gauss")
    fg = harmonic_poly(g.xyz, COEFFS)[None, None]
    gen = torch.Generator().manual_seed(5)
    colat = torch.rand(1, 10, 10, generator=gen, dtype=F64) * math.pi
    lon = torch.rand(1, 10, 10, generator=gen, dtype=F64) * 2 * math.pi
    a = sample_sphere(fg, colat, lon, g)
    torch.testing.assert_close(sample_sphere(fg, -colat, lon + math.pi, g), a, atol=1e-12, rtol=0)
    torch.testing.assert_close(sample_sphere(fg, 2 * math.pi - colat, lon + math.pi, g), a, atol=1e-12, rtol=0)
    torch.testing.assert_close(sample_sphere(fg, colat + 2 * math.pi, lon - 4 * math.pi, g), a, atol=1e-12, rtol=0)


def test_walk_through_pole_lands_on_far_side():
    """From a node, walking north by (colatitude + a) lands at colatitude a on the opposite meridian."""
    g = SphereGrid(33, 64, "equiangular")
    sampler = SphereSampler(g, dtype=F64)
    field = g.xyz[None].clone()  # sample the position vector itself
    a = 0.3
    d_n = (g.colat[:, None] + a).expand(33, 64)[None]
    rows, cols = sampler.displaced_index(torch.zeros_like(d_n), d_n)
    got = sampler.sample_index(field, rows, cols)[0]
    lon = g.lon + math.pi
    expected = torch.stack(
        [math.sin(a) * torch.cos(lon), math.sin(a) * torch.sin(lon), torch.full_like(lon, math.cos(a))]
    )[:, None, :].expand(3, 33, 64)
    # bilinear interpolation of the position vector: error O(h^2)
    torch.testing.assert_close(got, expected, atol=2e-3, rtol=0)


@pytest.mark.parametrize(
    "nlat,nlon,grid", [(9, 16, "equiangular"), (8, 15, "legendre-gauss"), (7, 12, "legendre-gauss")]
)
def test_ghost_pad_layout_and_gradient(nlat, nlon, grid):
    """The padded image holds the data, the wrapped column and the ghost rows at lon + pi.

    Its backward is the adjoint of the padding.
    """
    s = SphereSampler(SphereGrid(nlat, nlon, grid), dtype=F64)
    f = torch.randn(2, nlat, nlon, dtype=F64, requires_grad=True)
    img = GhostPad.apply(f, s.gn, s.gs, s.hp, s.wp)
    assert torch.equal(img[:, 1 : nlat + 1, :nlon], f.detach())
    assert torch.equal(img[:, : nlat + 2, nlon], img[:, : nlat + 2, 0])
    # the row and column that bilinear sampling reads with weight 0 are zero (finite)
    assert torch.equal(
        img[:, nlat + 2 : nlat + 3, : nlon + 2], torch.zeros_like(img[:, nlat + 2 : nlat + 3, : nlon + 2])
    )
    assert torch.equal(
        img[:, : nlat + 2, nlon + 1 : nlon + 2], torch.zeros_like(img[:, : nlat + 2, nlon + 1 : nlon + 2])
    )
    j = torch.arange(nlon)
    if nlon % 2 == 0:
        torch.testing.assert_close(img[:, 0, :nlon], f.detach()[:, s.gn, (j + nlon // 2) % nlon])
    else:  # half-way between the two columns around lon + pi
        mid = 0.5 * (f.detach()[:, s.gs, (j + nlon // 2) % nlon] + f.detach()[:, s.gs, (j + nlon // 2 + 1) % nlon])
        torch.testing.assert_close(img[:, nlat + 1, :nlon], mid)
    # the rest of the power-of-two image is never read (left uninitialised): check the read part
    assert torch.autograd.gradcheck(
        lambda t: GhostPad.apply(t, s.gn, s.gs, s.hp, s.wp)[:, : nlat + 3, : nlon + 2], (f,)
    )


# ----------------------------------------------------------------------------- fast paths
@pytest.mark.parametrize("nlon", [16, 15, 12])
def test_near_column_wrap_equals_remainder(nlon):
    """``sample_grid(near=True)`` (one add of +-nlon) gives exactly torch.remainder's grid on [-nlon, 2 nlon)."""
    s = SphereSampler(SphereGrid(8, nlon, "equiangular"))
    g = torch.Generator().manual_seed(3)
    tiny = torch.finfo(torch.float32).tiny
    edges = torch.tensor([-nlon, -nlon + 0.5, -1e-7, -tiny, 0.0, 1e-7, nlon - 1e-5, nlon, nlon + 1e-5, 2 * nlon - 1e-5])
    cols = torch.cat([edges, (torch.rand(500, generator=g) * 3 - 1) * nlon]).reshape(1, 1, -1)
    rows = torch.rand(cols.shape, generator=g) * (s.nlat + 1)
    assert torch.equal(s.sample_grid(rows, cols.clone(), near=True), s.sample_grid(rows, cols.clone()))
