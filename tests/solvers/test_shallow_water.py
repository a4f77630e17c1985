"""Shallow-water solver and Galewsky scenario: analytic cases and invariants (docs/datasets/galewsky.md).

Settings are chosen to keep the suite fast on one CPU thread: lmax 42, the IMEX scheme ARS(3,4,3)
with the steps given in each test. The self-convergence of the canonical case is a slow test.
"""

import math

import pytest
import torch

from dandelion.solvers.galewsky import (
    BUMP_ALPHA,
    BUMP_BETA,
    GALEWSKY_MIN_LMAX,
    GalewskySimulation,
    bump_height,
    canonical_galewsky,
    galewsky_default_dt,
    galewsky_fields,
    galewsky_reference_params,
    rotation_matrices,
    williamson2_simulation,
    wrap_longitude,
)
from dandelion.solvers.shallow_water import EARTH_RADIUS, check_cfl
from dandelion.sphere import SphereGrid

DAY = 86400.0


def rel_l2(a, b, grid):
    """Area-weighted relative L2 difference per trajectory."""
    w = grid.weights
    return (((a - b) ** 2 * w).sum((-2, -1)) / ((b**2) * w).sum((-2, -1))).sqrt()


def test_williamson2_steady_at_two_tilts():
    # Williamson et al. (1992) case 2, alpha = 0 and pi/4, inviscid, 5 days on a 64 x 128 Gauss grid
    sim, exact = williamson2_simulation(42, [0.0, math.pi / 4], dt=7200.0, scheme="ars343", nlat=64)
    assert sim.core.nlat == 64
    sim.advance_to(5 * DAY)
    h = sim.core.to_grid(sim.state.h)
    err = rel_l2(h + exact["H"], exact["h"] + exact["H"], sim.core.grid_spec)  # relative to the fluid depth
    err_dep = rel_l2(h, exact["h"], sim.core.grid_spec)  # relative to the departure h itself
    print("williamson2 rel L2 error of depth", err.tolist(), "of departure", err_dep.tolist())
    assert bool((err < 1e-8).all()) and bool((err_dep < 1e-8).all())


@pytest.fixture(scope="module")
def inviscid_jets():
    """Inviscid lmax-42 run, trajectory 0 the balanced jets without bump, trajectory 1 with the bump:
    ARS(3,4,3) with dt = 600 s over day 1 (energy check), then dt = 1800 s to day 5."""
    params = galewsky_reference_params(2, h_hat=[0.0, 120.0])
    sim = GalewskySimulation(params, lmax=42, dt=600.0, nu=0.0, scheme="ars343")
    grid = SphereGrid(64, 128, "legendre-gauss")
    out = {"f0": sim.fields(grid), "inv0": sim.invariants()}
    sim.advance_to(1 * DAY)
    out["inv1"] = sim.invariants()
    sim.dt = 1800.0
    sim.advance_to(5 * DAY)
    out["f5"] = sim.fields(grid)
    out["grid"] = grid
    return out


def test_balanced_jets_stay_put(inviscid_jets):
    r = inviscid_jets
    change = rel_l2(r["f5"]["h"][0], r["f0"]["h"][0], r["grid"])
    print("balanced jets, relative change of h - H over 5 days:", float(change))
    assert float(change) < 1e-3
    # the initial h has area mean 0 (the card removes it)
    assert abs(float(r["grid"].mean(r["f0"]["h"][0]))) < 1e-6 * float(r["f0"]["h"][0].abs().max())


def test_energy_conserved_over_one_day_inviscid(inviscid_jets):
    e0, e1 = inviscid_jets["inv0"]["energy"], inviscid_jets["inv1"]["energy"]
    rel = ((e1 - e0) / e0).abs()
    print("inviscid energy change over 1 day (ars343, dt 600 s, lmax 42):", rel.tolist())
    assert bool((rel < 1e-5).all())


def test_mass_and_energy_with_diffusion():
    sim = GalewskySimulation(galewsky_reference_params(1), lmax=42, dt=3600.0, nu=1e5, scheme="ars343")
    inv0 = sim.invariants()
    sim.advance_to(10 * DAY)
    inv = sim.invariants()
    dm = float(((inv["mass"] - inv0["mass"]) / inv0["mass"]).abs())
    print("10 days, hyperviscous: relative mass change", dm, "energy E10/E0", float(inv["energy"] / inv0["energy"]))
    assert dm < 1e-12
    assert float(inv["energy"]) <= float(inv0["energy"])


def test_bump_widths_and_seam_symmetry():
    # centre at longitude 0 on the jet: the bump must be whole across the 0/360 seam
    grid = SphereGrid(181, 720, "equiangular")
    lat, lon = grid.lat.reshape(-1, 1), grid.lon.reshape(1, -1)
    h = bump_height(lat, lon, 1.0, math.pi / 4, 0.0)
    row = int(torch.argmin((grid.lat - math.pi / 4).abs()))
    east, west = h[row, 1:360], torch.flip(h[row, 361:720], [0])  # lon = +d and lon = 360 - d
    assert torch.allclose(east, west, rtol=1e-12, atol=1e-15)
    # widths: e-folding distances of the paper, alpha = 1/3 rad zonal, beta = 1/15 rad meridional
    assert BUMP_ALPHA == pytest.approx(1 / 3) and BUMP_BETA == pytest.approx(1 / 15)
    c = math.cos(math.pi / 4)

    def t(x):
        return torch.tensor(x, dtype=torch.float64)

    assert float(bump_height(t(math.pi / 4), t(-1 / 3), 1.0, math.pi / 4, 0.0)) == pytest.approx(c / math.e, rel=1e-12)
    lat_n = t(math.pi / 4 + 1 / 15)
    assert float(bump_height(lat_n, t(0.0), 1.0, math.pi / 4, 0.0)) == pytest.approx(
        math.cos(float(lat_n)) / math.e, rel=1e-12
    )
    # wrapped longitude difference lies in (-pi, pi]
    d = wrap_longitude(t([math.pi, -math.pi, 3 * math.pi, 0.1 - 2 * math.pi]))
    assert torch.allclose(d, torch.tensor([math.pi, math.pi, math.pi, 0.1], dtype=d.dtype))


def test_bump_only_on_northern_jet():
    # the initial fields themselves (before spectral truncation): jets at +-phi_c, bump in the north only
    grid = SphereGrid(181, 360, "equiangular")
    pts = (grid.xyz, grid.east, grid.north)

    def one(x):
        return torch.tensor([x], dtype=torch.float64)

    jets = [
        (one(80.0), one(math.radians(30)), one(math.radians(70))),
        (one(80.0), one(math.radians(-70)), one(math.radians(-30))),
    ]
    rot = torch.eye(3, dtype=torch.float64)[None]
    u, _, h0 = galewsky_fields(pts, rot, jets, [])
    _, _, h1 = galewsky_fields(pts, rot, jets, [(one(240.0), one(math.radians(50)), one(1.0))])
    d = (h1 - h0)[0]
    assert float(d.max()) == pytest.approx(240.0 * math.cos(math.radians(50)), rel=1e-3)
    assert float(d[grid.lat < 0].abs().max()) < 1e-30
    # symmetric jets, u_max reached at the jet centres
    assert float(u.max()) == pytest.approx(80.0, rel=1e-3)
    assert torch.allclose(u[0], u[0].flip(0), atol=1e-12)


def test_tilted_planet_equals_rotated_canonical_run():
    # trajectory 0: untilted; trajectory 1: planet axis tilted by a rotation R (no interpolation).
    axis = torch.tensor([1.0, 2.0, 0.5])
    axis = axis / axis.norm()
    p = galewsky_reference_params(
        2,
        rot_axis_x=[0, float(axis[0])],
        rot_axis_y=[0, float(axis[1])],
        rot_axis_z=[1, float(axis[2])],
        rot_angle=[0.0, 1.1],
    )
    sim = GalewskySimulation(p, lmax=42, dt=3600.0, nu=1e5, scheme="ars343")
    sim.advance_to(2 * DAY)
    grid = SphereGrid(48, 96, "legendre-gauss")
    R = rotation_matrices(axis[None], torch.tensor([1.1]))[0]
    back = torch.einsum("ji,jn->in", R, grid.xyz.reshape(3, -1))  # R^T x
    colat = torch.acos(back[2].clamp(-1, 1))
    lon = torch.atan2(back[1], back[0])
    for name, spec in (("h", sim.state.h), ("vorticity", sim.state.vrt)):
        canon = sim.core.evaluate_at(spec[0], colat, lon).reshape(grid.shape)
        tilted = sim.core.synthesise(spec[1], grid)
        err = float(rel_l2(tilted, canon, grid))
        print(f"tilted vs rotated canonical at +2 d, {name}: relative L2 {err:.2e}")
        assert err < 1e-3


def test_default_dt_lands_on_frames_and_passes_cfl():
    for lmax in (42, 85, 128, 170, GALEWSKY_MIN_LMAX, 341):
        dt = galewsky_default_dt(lmax)
        assert (14400.0 / dt) == pytest.approx(round(14400.0 / dt), abs=1e-9)
        check_cfl(dt, lmax=lmax, radius=EARTH_RADIUS, max_speed=1.2 * 100.0, scheme="ars343")
    assert galewsky_default_dt(256) == 300.0


@pytest.mark.parametrize(
    "scheme, dt, speed", [("ars343", 7200.0, 1.2 * 100.0), ("rk4", 1800.0, 1.2 * 100.0 + math.sqrt(9.80616 * 1e4))]
)
def test_cfl_refusal_names_the_limit_and_the_largest_safe_step(scheme, dt, speed):
    """The Courant limit dt * speed * sqrt(L(L+1))/R <= 2.5 (speed: 1.2 u_max, plus sqrt(g H) for the
    explicit rk4), L = lmax - 1 = 84: the message gives the largest safe dt, and that dt is accepted."""
    safe = 2.5 * EARTH_RADIUS / (speed * math.sqrt(84 * 85))
    with pytest.raises(ValueError, match=rf"Courant number of scheme '{scheme}'.*largest safe dt is {safe:.6g} s"):
        GalewskySimulation(galewsky_reference_params(1, u_max=100.0), lmax=85, dt=dt, nu=1e5, scheme=scheme)
    GalewskySimulation(galewsky_reference_params(1, u_max=100.0), lmax=85, dt=0.999 * safe, nu=1e5, scheme=scheme)


def test_ars222_without_diffusion_is_refused():
    with pytest.raises(ValueError, match=r"ARS\(2,2,2\) without diffusion.*no dt is safe"):
        GalewskySimulation(galewsky_reference_params(1), lmax=16, dt=1800.0, nu=0.0, scheme="ars222")
    GalewskySimulation(galewsky_reference_params(1), lmax=16, dt=1800.0, nu=1e5, scheme="ars222")


def test_step_longer_than_the_interval_is_refused_not_shortened():
    sim = GalewskySimulation(galewsky_reference_params(1), lmax=16, dt=1800.0, nu=1e5)
    with pytest.raises(ValueError, match="longer than the interval 900"):
        sim.advance_to(900.0)
    assert sim.n_steps == 0 and sim.time == 0.0


def test_winds_beyond_the_courant_limit_stop_the_run_naming_the_trajectory():
    """Trajectory 1's winds are scaled far past what its expected speed allowed up front: the driver's
    periodic check of the measured winds refuses to go on."""
    sim = GalewskySimulation(galewsky_reference_params(2, u_max=[60.0, 60.0]), lmax=32, dt=900.0, nu=1e5)
    sim.check_every = 2
    s = sim.state
    scale = torch.tensor([1.0, 20.0], dtype=torch.float64).reshape(2, 1, 1)
    sim.state = type(s)(vrt=s.vrt * scale, div=s.div * scale, h=s.h)
    with pytest.raises(FloatingPointError, match=r"Courant number of scheme 'ars343' in trajectory 1"):
        sim.advance_to(3600.0)


def test_non_finite_state_names_the_trajectory():
    sim = GalewskySimulation(galewsky_reference_params(3, u_max=[60.0, 70.0, 80.0]), lmax=16, dt=1800.0, nu=1e5)
    h = sim.state.h.clone()
    h[1, 3, 2] = float("nan")
    sim.state = type(sim.state)(vrt=sim.state.vrt, div=sim.state.div, h=h)
    with pytest.raises(FloatingPointError, match=r"trajectory 1 .*'u_max': 70\.0"):
        sim.advance_to(3600.0)
    with pytest.raises(FloatingPointError, match="trajectory 1"):
        sim.fields(SphereGrid(16, 32, "legendre-gauss"))


def test_bad_params_message():
    p = galewsky_reference_params(1)
    del p["H"]
    with pytest.raises(ValueError, match="lack \\['H'\\]"):
        GalewskySimulation(p, lmax=16, dt=1800.0, nu=0.0)


@pytest.mark.slow
def test_canonical_self_convergence():
    """Galewsky et al. (2004) canonical case, Laplacian nu = 1e5 m^2/s: day-6 relative vorticity at
    lmax 85 against lmax 170 on the 256x512 equiangular grid, relative L2 below 5e-2 (card: 3.0e-2
    upstream; measured 3.86e-2 with these settings, about 25 CPU minutes on a busy machine)."""
    grid = SphereGrid(256, 512, "equiangular")
    out = {}
    for lmax, dt in ((85, 720.0), (170, 900.0)):
        sim = canonical_galewsky(lmax, dt=dt, nu=1e5, scheme="ars343")
        sim.advance_to(6 * DAY)
        out[lmax] = sim.vorticity(grid)[0]
    err = float(rel_l2(out[85], out[170], grid))
    print("canonical day-6 vorticity, lmax 85 vs 170: relative L2", err)
    assert err < 5e-2
