"""Sigma-coordinate primitive equations: vertical discretisation, semi-implicit solve, tracer
conservation and the Jablonowski & Williamson (2006) baroclinic-wave test."""

import math

import numpy as np
import pytest
import torch

from dandelion.solvers.baroclinic_wave import jablonowski_williamson_state
from dandelion.solvers.held_suarez import DAY, HeldSuarezSimulation, TracerForcing
from dandelion.solvers.integrators import ARS222, SemiImplicitLeapfrog, imex_runge_kutta
from dandelion.solvers.primitive_equations import PEState, PrimitiveEquations, hyperdiffusion_filter
from dandelion.solvers.sigma_coordinates import SigmaCoordinates, interpolate_to_pressure
from dandelion.solvers.spectral_core import SpectralCore

R_JW, A_JW, OMEGA_JW = 287.0, 6.371229e6, 7.29212e-5


@pytest.mark.parametrize("boundaries", [tuple(np.linspace(0, 1, 21)), (0.0, 0.1, 0.3, 0.6, 0.85, 1.0), (0.0, 0.5, 1.0)])
def test_hydrostatic_isothermal_exact_at_interfaces(boundaries):
    # for isothermal T the SB81 geopotential at interfaces is exactly R T ln(ps / p_{k+1/2}):
    # Phi_k - alpha_k R T = sum_{j>k} R T ln(sigma_{j+1/2}/sigma_{j-1/2}) = -R T ln sigma_{k+1/2}
    c = SigmaCoordinates(boundaries)
    G = c.geopotential_matrix(287.0)
    T = 250.0
    phi = G @ np.full(c.n_levels, T)
    interface = phi - 287.0 * T * c.alpha
    np.testing.assert_allclose(interface, -287.0 * T * np.log(c.half[1:]), rtol=1e-13, atol=1e-9)
    assert c.alpha[0] == pytest.approx(math.log(2.0))
    # the full level lies inside its layer: 0 < alpha_k < ln(sigma_{k+1/2}/sigma_{k-1/2}) (k > 1)
    assert np.all(c.alpha[1:] > 0) and np.all(c.alpha[1:] < c.log_ratio[1:])
    np.testing.assert_allclose(c.pressure_gradient_coefficient[1:], 1.0, rtol=1e-13)


@pytest.mark.parametrize("bad", [(0.0, 1.0), (0.1, 0.5, 1.0), (0.0, 0.6, 0.5, 1.0), (0.0, 0.5, 0.9)])
def test_sigma_coordinates_validate(bad):
    with pytest.raises(ValueError, match="sigma|levels"):
        SigmaCoordinates(bad)


def _equation(lmax=10, n=5, **kw):
    core = SpectralCore(lmax, radius=6.371e6)
    return PrimitiveEquations(core, SigmaCoordinates.equally_spaced(n), **kw)


def _random_state(eq, B=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    n, L = eq.n, eq.core.lmax
    x = torch.randn(B, 4 * n + 1, L, L, dtype=torch.complex128, generator=g) * eq.core.mask
    x[..., 0] = x[..., 0].real + 0j
    return x


@pytest.mark.parametrize("tref", [300.0, np.linspace(220, 290, 5)])
@pytest.mark.parametrize("eta", [100.0, 1200.0])
def test_implicit_inverse_inverts_linear_operator(tref, eta):
    eq = _equation(reference_temperature=tref)
    x = _random_state(eq)
    y = eq.implicit_inverse(x - eta * eq.implicit_terms(x), eta)
    torch.testing.assert_close(y, x, rtol=1e-9, atol=1e-9)  # condition number of the l-systems ~1e4


def test_linear_operator_matches_explicit_difference():
    # full tendency = explicit + implicit: a small divergence about rest at T_ref must have
    # (nearly) zero explicit temperature / ln ps tendency (the linear part is exactly removed)
    eq = _equation()
    x = torch.zeros(1, 4 * eq.n + 1, eq.core.lmax, eq.core.lmax, dtype=torch.complex128)
    s = PEState(x, eq.n)
    s.log_surface_pressure[..., 0, 0] = math.log(1e5) * math.sqrt(4 * math.pi)
    s.divergence[..., 3, 1] = 1e-10
    e = PEState(eq.explicit_terms(x), eq.n)
    i = PEState(eq.implicit_terms(x), eq.n)
    assert float(e.temperature.abs().max()) < 1e-6 * float(i.temperature.abs().max())
    assert float(e.log_surface_pressure.abs().max()) < 1e-6 * float(i.log_surface_pressure.abs().max())


def _jw_equation(lmax, n_levels):
    core = SpectralCore(lmax, radius=A_JW)
    return PrimitiveEquations(
        core,
        SigmaCoordinates.equally_spaced(n_levels),
        reference_temperature=300.0,
        omega=OMEGA_JW,
        R=R_JW,
        kappa=2.0 / 7.0,
    )


def _run(eq, x, dt, days, scheme="leapfrog", tau=0.1 * DAY):
    rate = -torch.log(hyperdiffusion_filter(eq.core, 1.0, tau))
    mask = torch.ones(x.shape[1], 1, 1, dtype=torch.float64)
    mask[-1] = 0

    def post(y, h):
        return y * torch.exp(-h * rate * mask)

    if scheme == "leapfrog":
        st = SemiImplicitLeapfrog(eq, dt, post=post)
        step = st.step
    else:
        base = imex_runge_kutta(ARS222, eq, dt)
        step = lambda y: post(base(y), dt)  # noqa: E731
    for _ in range(int(round(days * DAY / dt))):
        x = step(x)
    return x


@pytest.mark.parametrize("scheme", ["leapfrog", "ars222"])
def test_tracer_mass_conserved_without_source_and_sink(scheme):
    eq = _jw_equation(16, 8)
    x, phis = jablonowski_williamson_state(eq, perturbation=True, up=5.0)
    eq.phis = phis
    c = eq.core
    lat, lon = c.lat, c.lon
    blob = torch.exp(-((lat - 0.7) ** 2 + (lon - 1.0) ** 2) / 0.1) * torch.ones(eq.n, 1, 1, dtype=torch.float64)
    ps = torch.exp(c.to_grid(PEState(x, eq.n).log_surface_pressure))
    x = x.clone()
    PEState(x, eq.n).tracer[:] = c.to_spec(ps * blob)
    m0 = float(eq.tracer_mass(x))
    q0 = eq.grid_state(x)["q"]
    layer0 = c.mean(PEState(x, eq.n).tracer)
    x = _run(eq, x, 1800.0, 1.0, scheme)
    m1 = float(eq.tracer_mass(x))
    q = eq.grid_state(x)["q"]
    moved = float((q - q0).abs().max())
    vertical = float((c.mean(PEState(x, eq.n).tracer) - layer0).abs().max() / layer0.abs().max())
    print(
        f"{scheme}: tracer mass relative change over 1 day {abs(m1 - m0) / m0:.2e}; max|dq| = {moved:.3f}, "
        f"largest relative change of one layer's mass {vertical:.2e}"
    )
    assert abs(m1 - m0) / m0 < 1e-10
    assert moved > 0.05 and vertical > 1e-8  # the tracer was really transported, horizontally and vertically


def test_held_suarez_tracer_conserved_with_forced_flow():
    # tracer source and sink off inside a forced Held-Suarez run: the mass-weighted integral is constant
    p = dict(omega_factor=torch.ones(1), delta_T_y=torch.full((1,), 60.0), delta_theta_z=torch.full((1,), 10.0))
    sim = HeldSuarezSimulation(
        p, lmax=12, n_levels=6, dt=3600.0, tracer=TracerForcing(math.inf, math.inf), noise_amplitude=1.0
    )
    c = sim.core
    PEState(sim.x, sim.n).tracer[:] = c.to_spec(
        1e5 * (1 + torch.sin(c.lat) ** 3 * torch.cos(c.lon)).expand(sim.n, -1, -1)
    )
    m0 = float(sim.eq.tracer_mass(sim.x))
    sim.advance_to(DAY)
    m1 = float(sim.eq.tracer_mass(sim.x))
    assert abs(m1 - m0) / m0 < 1e-10


def test_jablonowski_williamson_balanced_state_stays_steady():
    eq = _jw_equation(22, 20)
    x0, phis = jablonowski_williamson_state(eq, perturbation=False)
    eq.phis = phis
    x = _run(eq, x0, 1800.0, 1.0)
    g0, g = eq.grid_state(x0), eq.grid_state(x)
    dv = float(g["v"].abs().max())
    du = float((g["u"] - g0["u"]).abs().max())
    dps = float((g["ps"] - 1e5).abs().max())
    print(f"JW06 steady state, T21 L20, 1 day: max|v| = {dv:.3f} m/s, max|du| = {du:.3f} m/s, max|dps| = {dps:.1f} Pa")
    assert dv < 0.5 and du < 1.0 and dps < 100.0


@pytest.mark.slow
def test_jablonowski_williamson_wave_develops():
    # 9 days at T21 L20: the unperturbed state stays zonal; the perturbed one grows a baroclinic wave
    # in the northern mid-latitudes only (Jablonowski & Williamson 2006, Fig. 5)
    eq = _jw_equation(22, 20)
    out = {}
    for pert in (False, True):
        x0, phis = jablonowski_williamson_state(eq, perturbation=pert)
        eq.phis = phis
        out[pert] = eq.grid_state(_run(eq, x0, 1800.0, 9.0))
    lat = eq.core.lat[:, 0]
    vs, vp = out[False]["v"], out[True]["v"]
    nh = (lat > 0.35) & (lat < 1.2)
    sh = lat < -0.35
    v_nh = float(vp[:, :, nh].abs().max())
    v_sh = float(vp[:, :, sh].abs().max())
    dps = float((out[True]["ps"] - out[False]["ps"]).abs().max())
    print(
        f"JW06 day 9, T21 L20: unperturbed max|v| = {float(vs.abs().max()):.3f} m/s; perturbed NH max|v| = "
        f"{v_nh:.2f} m/s, "
        f"SH max|v| = {v_sh:.3f} m/s, max|ps - ps_unperturbed| = {dps / 100:.2f} hPa"
    )
    assert float(vs.abs().max()) < 1.0
    assert v_nh > 5.0 and v_sh < 1.0 and dps > 500.0


@pytest.mark.parametrize("ps_val", [1e5, 9.2e4])
def test_interpolate_to_pressure_log_linear(ps_val):
    sigma = torch.tensor([0.1, 0.3, 0.5, 0.7, 0.9], dtype=torch.float64)
    ps = torch.full((1, 2, 3), ps_val, dtype=torch.float64)
    lnp = torch.log(sigma.reshape(1, -1, 1, 1) * ps.unsqueeze(1))
    f = 3.0 + 2.0 * lnp  # linear in ln p: reproduced exactly between levels
    p_out = torch.tensor([2e4, 5e4, 8e4, 5e3, 9.9e4], dtype=torch.float64)
    out = interpolate_to_pressure(f, sigma, ps, p_out)
    inside = (p_out > 0.1 * ps_val) & (p_out < 0.9 * ps_val)
    exact = 3.0 + 2.0 * torch.log(p_out)
    torch.testing.assert_close(out[0, inside, 0, 0], exact[inside], rtol=1e-13, atol=1e-12)
    assert float(out[0, 3, 0, 0]) == pytest.approx(float(f[0, 0, 0, 0]))  # above the top: constant
    # temperature below the lowest level: constant lapse rate, T (p/p_N)^(R Gamma/g)
    T = torch.full((1, 5, 2, 3), 280.0, dtype=torch.float64)
    Tout = interpolate_to_pressure(T, sigma, ps, p_out, lapse_rate=6.5e-3)
    expect = 280.0 * (9.9e4 / (0.9 * ps_val)) ** (287.04 * 6.5e-3 / 9.80616)
    assert float(Tout[0, 4, 0, 0]) == pytest.approx(expect, rel=1e-13)


@pytest.mark.parametrize("lnps_noise,with_phis", [(0.0, False), (0.0, True), (1e-3, False), (1e-2, True)])
def test_energy_conversion_cancels(lnps_noise, with_phis):
    # Simmons & Burridge (1981): with their vertical differencing the adiabatic, inviscid equations
    # conserve total energy E = int sum_k dsigma_k ps (K_k + c_p T_k) + ps Phi_s. Evaluate dE/dt from
    # the full tendency (explicit + implicit) of a random, non-balanced state: the kinetic and internal
    # energy changes must cancel up to the horizontal truncation of the ps-weighted products.
    eq = _jw_equation(22, 10)
    core, n = eq.core, eq.n
    cp = eq.R / eq.kappa
    x, phis = jablonowski_williamson_state(eq, perturbation=False)
    eq.phis = phis if with_phis else None
    phis = phis if with_phis else torch.zeros_like(phis)
    g = torch.Generator().manual_seed(1)
    noise = torch.randn(x.shape, dtype=torch.complex128, generator=g) * core.mask * torch.exp(-((core.l / 5.0) ** 2))
    noise[..., 0] = noise[..., 0].real + 0j
    noise[:, : 2 * n, 0, :] = 0  # vorticity and divergence have no global mean
    scale = torch.zeros(4 * n + 1, 1, 1, dtype=torch.float64)
    scale[: 2 * n], scale[2 * n : 3 * n], scale[4 * n] = 1e-5, 3.0, lnps_noise
    x = x + noise * scale
    tend = eq.explicit_terms(x) + eq.implicit_terms(x)
    s, ds = PEState(x, n), PEState(tend, n)
    u, v = core.vrtdiv_to_uv(s.vorticity, s.divergence)
    du, dv = core.vrtdiv_to_uv(ds.vorticity, ds.divergence)
    T = core.to_grid(s.temperature) + eq.T_ref.reshape(-1, 1, 1)
    dT = core.to_grid(ds.temperature)
    ps = torch.exp(core.to_grid(s.log_surface_pressure)).unsqueeze(1)
    dps = ps * core.to_grid(ds.log_surface_pressure).unsqueeze(1)
    dsig = eq.dsig.reshape(-1, 1, 1)
    dKE = core.integrate_grid((dsig * (dps * 0.5 * (u * u + v * v) + ps * (u * du + v * dv))).sum(1))
    dIE = core.integrate_grid((dsig * cp * (dps * T + ps * dT)).sum(1))
    dPE = core.integrate_grid(core.to_grid(phis) * dps[:, 0])
    resid = float((dKE + dIE + dPE).abs() / dKE.abs())
    print(f"energy conversion residual / |dKE/dt| = {resid:.2e} (lnps noise {lnps_noise}, Phi_s {with_phis})")
    assert resid < 1e-7
