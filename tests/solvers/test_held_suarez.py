"""Held-Suarez forcing, tracer source/sink and the batched simulation (docs/datasets/held_suarez.md)."""

import math

import pytest
import torch

from dandelion.solvers.held_suarez import (
    DAY,
    HS_CONSTANTS,
    HeldSuarezForcing,
    HeldSuarezSimulation,
    TracerForcing,
    equilibrium_temperature,
    rayleigh_drag_rate,
    thermal_relaxation_rate,
)
from dandelion.sphere import SphereGrid

t = lambda x: torch.as_tensor(x, dtype=torch.float64)  # noqa: E731


@pytest.mark.parametrize("dty,dtz", [(60.0, 10.0), (40.0, 5.0), (80.0, 20.0)])
def test_equilibrium_temperature_315_at_equatorial_surface(dty, dtz):
    # at lat = 0, p = p0: ln(p/p0) = 0, sin = 0 -> T0 = 315 K whatever the sweep values
    assert float(equilibrium_temperature(t(0.0), t(1e5), dty, dtz)) == pytest.approx(315.0, abs=1e-12)


@pytest.mark.parametrize("lat_deg", [0.0, 30.0, 60.0, 89.0])
@pytest.mark.parametrize("p_hpa", [1.0, 10.0, 50.0, 100.0])
def test_equilibrium_temperature_floor_aloft(lat_deg, p_hpa):
    # high up the dry-adiabatic profile (p/p0)^kappa * T is far below 200 K: the floor applies
    teq = equilibrium_temperature(t(math.radians(lat_deg)), t(p_hpa * 100.0))
    raw = (
        315
        - 60 * math.sin(math.radians(lat_deg)) ** 2
        - 10 * math.log(p_hpa / 1000) * math.cos(math.radians(lat_deg)) ** 2
    ) * (p_hpa / 1000) ** HS_CONSTANTS["kappa"]
    assert raw < 200.0
    assert float(teq) == 200.0


def test_equilibrium_temperature_formula_below_floor_region():
    # a point where the floor is inactive: the analytic formula of HS94 eq. (3)
    lat, p = math.radians(45.0), 7e4
    k = HS_CONSTANTS["kappa"]
    expect = (315 - 60 * 0.5 - 10 * math.log(0.7) * 0.5) * 0.7**k
    assert float(equilibrium_temperature(t(lat), t(p))) == pytest.approx(expect, rel=1e-14)


def test_equilibrium_temperature_rejects_nonpositive_pressure():
    with pytest.raises(ValueError, match="p > 0"):
        equilibrium_temperature(t(0.0), t(0.0))


@pytest.mark.parametrize(
    "lat_deg,sigma,expect",
    [
        (0.0, 1.0, 1 / (4 * DAY)),  # k_T = k_s at the equatorial surface
        (90.0, 1.0, 1 / (40 * DAY)),  # cos^4 = 0 at the pole
        (0.0, 0.7, 1 / (40 * DAY)),  # boundary-layer top
        (0.0, 0.3, 1 / (40 * DAY)),
        (0.0, 0.85, 1 / (40 * DAY) + (1 / (4 * DAY) - 1 / (40 * DAY)) * 0.5),
    ],
)
def test_thermal_relaxation_rate(lat_deg, sigma, expect):
    assert float(thermal_relaxation_rate(t(math.radians(lat_deg)), t(sigma))) == pytest.approx(
        expect, rel=1e-12, abs=1e-22
    )


@pytest.mark.parametrize("sigma,expect", [(0.1, 0.0), (0.5, 0.0), (0.7, 0.0), (0.85, 0.5 / DAY), (1.0, 1.0 / DAY)])
def test_rayleigh_drag_zero_above_sigma_b(sigma, expect):
    assert float(rayleigh_drag_rate(t(sigma))) == pytest.approx(expect, rel=1e-12, abs=0.0)


def test_forcing_tendency_relaxes_toward_teq():
    f = HeldSuarezForcing(t([60.0, 40.0]), t([10.0, 20.0]))
    sigma = t([0.2, 0.9])
    lat = torch.deg2rad(t([60.0, 0.0, -30.0]))
    ps = torch.full((2, 3, 4), 1e5, dtype=torch.float64)
    teq = torch.stack(
        [
            equilibrium_temperature(lat.reshape(1, -1, 1), sigma.reshape(-1, 1, 1) * 1e5, a, b)
            for a, b in ((60.0, 10.0), (40.0, 20.0))
        ]
    ).expand(2, 2, 3, 4)
    zero = f.temperature_tendency(teq.clone(), sigma, ps, lat)
    assert zero.abs().max() < 1e-12
    warm = f.temperature_tendency(teq + 1.0, sigma, ps, lat)
    kt = thermal_relaxation_rate(lat.reshape(1, 1, -1, 1), sigma.reshape(1, -1, 1, 1))
    torch.testing.assert_close(warm, -kt.expand_as(warm), rtol=1e-12, atol=0)


def test_tracer_source_and_sink():
    tf = TracerForcing()
    sigma = t([0.25, 0.75, 0.95])
    lat = torch.deg2rad(t([70.0, 45.0, 10.0, -45.0]))
    q = torch.full((1, 3, 4, 2), 0.5, dtype=torch.float64)
    d = tf.tendency(q, sigma, lat)
    sink = -0.5 / (20 * DAY)
    # upper levels: sink only
    torch.testing.assert_close(d[0, :2], torch.full_like(d[0, :2], sink), rtol=1e-12, atol=0)
    # source layer: toward 1 inside 30-60N, toward 0 outside, 1-day time scale
    expect = torch.tensor([-0.5, 0.5, -0.5, -0.5], dtype=torch.float64) / DAY + sink
    torch.testing.assert_close(d[0, 2, :, 0], expect, rtol=1e-12, atol=0)
    off = TracerForcing(source_time=math.inf, sink_time=math.inf).tendency(q, sigma, lat)
    assert off.abs().max() == 0


def _params(B=1):
    return dict(
        omega_factor=torch.ones(B, dtype=torch.float64),
        delta_T_y=torch.full((B,), 60.0, dtype=torch.float64),
        delta_theta_z=torch.full((B,), 10.0, dtype=torch.float64),
    )


@pytest.mark.parametrize("scheme", ["leapfrog", "ars222"])
def test_resting_isothermal_atmosphere_stays_at_rest(scheme):
    sim = HeldSuarezSimulation(
        _params(2),
        lmax=12,
        n_levels=5,
        dt=3600.0,
        scheme=scheme,
        forcing=False,
        tracer=False,
        mass_fixer=False,
        initial_temperature=250.0,
        noise_amplitude=0.0,
    )
    sim.advance_to(DAY)
    g = sim.model_level_fields()
    assert float(torch.sqrt(g["u"] ** 2 + g["v"] ** 2).max()) < 1e-10
    assert float((g["T"] - 250.0).abs().max()) < 1e-9
    assert float((g["ps"] - 1e5).abs().max()) < 1e-6


def test_mass_drift_without_fixer_below_5pa_per_day():
    days = 10
    sim = HeldSuarezSimulation(_params(1), lmax=12, n_levels=10, dt=2400.0, mass_fixer=False)
    m0 = float(sim.eq.mean_surface_pressure(sim.x))
    sim.advance_to(days * DAY)
    m1 = float(sim.eq.mean_surface_pressure(sim.x))
    drift = abs(m1 - m0) / days
    print(f"global-mean ps drift over {days} forced days (T11 L10, no fixer): {drift:.3e} Pa/day")
    assert drift < 5.0
    # the forcing has done something: winds developed
    assert float(sim.model_level_fields()["u"].abs().max()) > 1.0


def test_fields_on_pressure_levels_and_exact_landing():
    sim = HeldSuarezSimulation(_params(2), lmax=12, n_levels=6, dt=3600.0)
    sim.advance_to(6 * 3600.0 + 1000.0)  # not a multiple of dt: a partial step lands exactly
    assert sim.time == 6 * 3600.0 + 1000.0
    grid = SphereGrid(16, 32)
    f = sim.fields(grid)
    assert f["T"].shape == (2, 8, 16, 32) and f["u"].shape == (2, 8, 16, 32) and f["ps"].shape == (2, 16, 32)
    assert f["tracer"].shape == (2, 8, 16, 32)
    assert 180 < float(f["T"].min()) and float(f["T"].max()) < 330
    sim.x[1, 0, 0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="trajectory 1"):
        sim.fields(grid)


def test_simulation_rejects_missing_parameters():
    with pytest.raises(ValueError, match="delta_theta_z"):
        HeldSuarezSimulation(dict(omega_factor=t([1.0]), delta_T_y=t([60.0])), lmax=8, n_levels=4)
