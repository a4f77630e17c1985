"""The layered ocean (dandelion.solvers.ocean): invariants on small global grids with land (CPU, seconds).

Volume per layer (diapycnal flux off) and in total (on), the conservative minimum-thickness limiter,
zero flux through land faces, a resting ocean staying at rest, exact e-folding of SST restoring,
the stability-limit and non-finite checks, and the conservative remap onto a SphereGrid."""

import math

import pytest
import torch

from dandelion.solvers.ocean import OceanModel, OceanParams, forced_stable_dt
from dandelion.solvers.ocean_grid import OceanGrid, conservative_remap_matrices, idealised_land, remap_wet
from dandelion.sphere import SphereGrid

DAY = 86400.0


def global_grid(nlat=16, nlon=32):
    return OceanGrid(nlat, nlon, wet=idealised_land(nlat, nlon))


def run(model, state, n, t=0.0):
    for _ in range(n):
        state = model.step(state, t)
        t += model.dt
    return state, t


def safe_dt(grid, params):
    return math.floor(forced_stable_dt(grid, params)[0])


def layer_volumes(grid, s):
    return grid.wet_integral(s.h)  # (B, L)


def perturbed(model, amp=20.0):
    """The rest state with a smooth thickness bump (mass moves from the start)."""
    s = model.rest_state()
    g = model.grid
    bump = amp * torch.exp(-((g.lat[:, None] - 0.5) ** 2 + (g.lon[None, :] - 3.0) ** 2) / 0.1) * g.wet
    s.h = s.h + bump
    s.hT = s.h[:, 0] * (s.hT / model.H[0, 0])
    s.hS = s.h[:, 0] * (s.hS / model.H[0, 0])
    return s


def test_each_layer_volume_conserved_without_diapycnal_flux():
    g = global_grid()
    p = OceanParams(visc=torch.tensor([1.5e5, 5e5]), kappa_gm=torch.tensor([250.0, 2500.0]), kappa_d=0.0)
    m = OceanModel(g, p, 2, safe_dt(g, p))
    s0 = perturbed(m)
    s, _ = run(m, s0, 60)
    rel = (layer_volumes(g, s) - layer_volumes(g, s0)) / layer_volumes(g, s0)
    assert s.u.abs().max() > 1e-3  # the ocean moves
    assert rel.abs().max() < 1e-13, rel


def test_each_layer_volume_conserved_with_diapycnal_flux_and_entrainment():
    """The entrained water is returned to the lower layer by a basin-uniform detrainment (McCreary & Lu 1994),
    so the diapycnal flux moves water across the interface locally but conserves each layer's volume."""
    g = global_grid()
    p = OceanParams(kappa_d=0.05, h_entrain=120.0)  # strong, and entrainment where h_1 < 120 m
    m = OceanModel(g, p, 1, safe_dt(g, p))
    adiabatic = m.with_params(kappa_d=0.0, h_entrain=0.0)
    s0 = perturbed(m, amp=-60.0)  # thin upper layer: upwelling into it
    s, _ = run(m, s0, 60)
    s_ad, _ = run(adiabatic, s0, 60)
    v0, v1 = layer_volumes(g, s0), layer_volumes(g, s)
    assert (s.h[:, 0] - s_ad.h[:, 0]).abs().max() > 1.0  # mass crossed the interface (metres of it)
    assert ((v1 - v0) / v0).abs().max() < 1e-13, (v1 - v0) / v0


def test_minimum_thickness_kept_by_conservative_limiter():
    g = global_grid()
    p = OceanParams(h_min=140.0, tau0=0.5, kappa_d=0.0)  # 10 m above h_min: the limiter must act
    m = OceanModel(g, p, 1, safe_dt(g, p))
    s0 = m.rest_state()
    s, _ = run(m, s0, 120)
    wet = g.wet.bool()
    assert s.h[:, 0][:, wet].min() >= p.h_min - 1e-9
    assert s.h[:, 0][:, wet].min() < p.h_min + 0.5  # it was reached somewhere
    rel = (layer_volumes(g, s) - layer_volumes(g, s0)) / layer_volumes(g, s0)
    assert rel.abs().max() < 1e-13


def test_zero_flux_through_every_land_face():
    g = global_grid()
    p = OceanParams()
    m = OceanModel(g, p, 1, safe_dt(g, p))
    s0 = perturbed(m)
    s, _ = run(m, s0, 40)
    closed_u, closed_v = g.mask_u == 0, g.mask_v == 0
    assert closed_u.any() and closed_v.any()
    assert (s.u[..., closed_u] == 0).all() and (s.v[..., closed_v] == 0).all()
    fx, fy = m._volume_fluxes(s)  # advective + interface-diffusion fluxes
    assert (fx[..., closed_u] == 0).all() and (fy[..., closed_v] == 0).all()
    land = g.wet == 0
    assert torch.equal(s.h[..., land], s0.h[..., land])  # land thickness never changes


def test_resting_ocean_without_forcing_stays_at_rest():
    g = global_grid()
    const = lambda lat, t: torch.full_like(lat, 12.0)  # noqa: E731
    p = OceanParams(tau0=0.0, t_star=const, s_star=lambda lat, t: torch.full_like(lat, 35.0))
    m = OceanModel(g, p, 2, safe_dt(g, p))
    s0 = m.rest_state()
    s, _ = run(m, s0, 50)
    assert s.u.abs().max() == 0 and s.v.abs().max() == 0
    assert (s.h - s0.h).abs().max() == 0


def test_sst_anomaly_relaxes_with_the_restoring_e_folding_time():
    g = global_grid()
    tau = 10.0 * DAY
    p = OceanParams(
        tau0=0.0,
        alpha=0.0,
        beta_S=0.0,
        kappa_T=0.0,
        kappa_d=0.0,
        advect_tracers=False,
        tau_T=tau,
        t_star=lambda lat, t: torch.full_like(lat, 15.0),
        s_star=lambda lat, t: torch.full_like(lat, 35.0),
    )
    m = OceanModel(g, p, 1, 7200.0)
    anomaly = 3.0 * torch.cos(g.lat)[:, None] * torch.sin(2 * g.lon)[None, :]
    s = m.rest_state(T=15.0 + anomaly)
    s, t = run(m, s, int(tau / 7200.0))
    T, _ = m.tracers(s)
    wet = g.wet.bool()
    ratio = (T - 15.0)[0][wet] / anomaly[wet]
    big = anomaly[wet].abs() > 0.3
    assert t == tau
    assert torch.allclose(ratio[big], torch.full_like(ratio[big], math.exp(-1.0)), rtol=0.01)


def test_unsafe_dt_refused_with_largest_safe_dt():
    g = global_grid()
    p = OceanParams(visc=5e5)
    with pytest.raises(ValueError, match=r"largest safe step is (\d+) s") as e:
        OceanModel(g, p, 1, 1.0e6)
    safe = float(e.value.args[0].split("largest safe step is ")[1].split(" s")[0])
    OceanModel(g, p, 1, math.floor(safe))  # accepted


def test_non_finite_trajectory_is_named():
    g = global_grid()
    p = OceanParams()
    m = OceanModel(g, p, 3, safe_dt(g, p))
    s = m.rest_state()
    s.u[2, 0, 8, 5] = float("nan")
    with pytest.raises(FloatingPointError, match="trajectory 2"):
        m.check_finite(s, 0.0)


def test_sector_grid_needs_a_closing_land_column():
    with pytest.raises(ValueError, match="last column land"):
        OceanGrid(8, 8, lat_bounds=(10, 40), lon_bounds=(0, 30))


@pytest.mark.parametrize("grid_type", ["equiangular", "legendre-gauss"])
def test_remap_conserves_the_wet_integral(grid_type):
    src = global_grid(24, 48)
    dst = SphereGrid(12, 24, grid_type)
    r_lat, r_lon = conservative_remap_matrices(src, dst)
    assert torch.allclose(r_lat.sum(0), torch.sin(src.lat_edges[1:]) - torch.sin(src.lat_edges[:-1]))
    field = torch.cos(3 * src.lat)[:, None] * torch.sin(src.lon)[None, :] + 2.0
    vals, frac, wet = remap_wet(field, src.wet, r_lat, r_lon)
    src_integral = (field * src.wet * src.area).sum() / src.radius**2
    dst_integral = (vals * frac * dst.weights).sum()
    assert torch.allclose(dst_integral, src_integral, rtol=1e-12)
    assert frac.min() >= 0 and frac.max() <= 1 and wet.any() and not wet.all()
    const, _, _ = remap_wet(torch.full_like(field, 7.0), src.wet, r_lat, r_lon)
    assert torch.allclose(const[frac > 0], torch.tensor(7.0, dtype=torch.float64))


def wall_basin(omega=0.0):
    """A closed equatorial sector basin, 1-degree cells, 10 S - 10 N, 20 degrees wide (last column land)."""
    wet = torch.ones(20, 21, dtype=torch.bool)
    wet[:, -1] = False
    return OceanGrid(20, 21, wet=wet, lat_bounds=(-10.0, 10.0), lon_bounds=(0.0, 21.0), omega=omega)


def test_no_slip_wall_linear_tangential_profile_feels_no_viscous_stress():
    """No-slip coast (Adcroft & Marshall 1998, Tellus 50A, 95-108): the tangential velocity vanishes AT the wall.

    ``v = V x`` (x: distance from the western wall, measured to the v points half a cell and more from it)
    vanishes at the wall and has no curvature, so the viscous force ``A d^2 v / dx^2`` is zero also in the first
    wet column. A wall that only zeroes v in the land cell (tangential velocity zero one cell-centre inside the
    land) gives ``A V / (2 dx)`` there instead."""
    g = wall_basin()
    A = 1.0e5
    const = lambda v: lambda lat, t: torch.full_like(lat, v)  # noqa: E731
    p = OceanParams(visc=A, tau0=0.0, t_star=const(15.0), s_star=const(35.0), kappa_d=0.0)
    m = OceanModel(g, p, 1, 600.0)
    s = m.rest_state()
    V = 1.0e-6  # 1/s: 0.1 m/s at 100 km
    dx = float(g.dx_v[10, 0])  # at the equator
    x = (torch.arange(g.nlon, dtype=torch.float64) + 0.5) * dx  # v points' distances from the wall (same each row)
    s.v = (V * x[None, :] * g.mask_v).expand_as(s.v).clone()
    T, S = m.tracers(s)
    _, dv = m._momentum(s, m.buoyancy(T, S), 0.0)
    rows = slice(4, 17)  # away from the southern and northern walls
    half_slip = A * V / (2.0 * dx)
    interior = dv[0, 0, rows, 1:6].abs().max()
    assert interior < 0.05 * half_slip  # the discrete Laplacian of a linear profile is (nearly) zero
    wall = dv[0, 0, rows, 0].abs().max()
    assert wall < 0.1 * half_slip, (float(wall), half_slip)


def test_tracer_diffusivity_is_the_gm_diffusivity():
    """Redi (1982) isopycnal tracer diffusivity equal to the Gent & McWilliams (1990) thickness diffusivity per
    trajectory (Griffies 1998, J. Phys. Oceanogr. 28, 831-841): the diffusive tracer tendency scales with kappa_gm."""
    g = global_grid()
    const = lambda v: lambda lat, t: torch.full_like(lat, v)  # noqa: E731
    p = OceanParams(
        kappa_gm=torch.tensor([250.0, 2500.0]),
        tau0=0.0,
        alpha=0.0,
        beta_S=0.0,
        kappa_d=0.0,
        tau_T=math.inf,
        tau_S=math.inf,
        advect_tracers=False,
        t_star=const(15.0),
        s_star=const(35.0),
    )
    m = OceanModel(g, p, 2, 3600.0)
    anomaly = 3.0 * torch.cos(g.lat)[:, None] * torch.sin(2 * g.lon)[None, :]
    s = m.rest_state(T=15.0 + anomaly)
    dq = (m.euler(s, 0.0, 3600.0).hT - s.hT) / 3600.0  # (2, nlat, nlon) m degC / s
    big = dq[0].abs() > 0.1 * dq[0].abs().max()
    assert big.sum() > 10
    ratio = dq[1][big] / dq[0][big]
    assert torch.allclose(ratio, torch.full_like(ratio, 10.0), rtol=1e-6), ratio
