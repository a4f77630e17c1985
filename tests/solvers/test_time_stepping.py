"""The one time-stepping driver.

The landing rule reproduces the step counts of independent restatements of each solver's stepping
rule (fixed steps, the geometric schedule, the adaptive CFL loop), fixed steps that divide an interval
are taken exactly, stability limits are refused with the largest safe step, and the state-dependent
limits are checked during the run.
"""

import math

import numpy as np
import pytest
import torch

from dandelion.solvers.cahn_hilliard import CahnHilliardSimulation, initial_phi
from dandelion.solvers.chained_turbulence import MAX_CFL, ChainedTurbulenceSimulation, initial_vorticity
from dandelion.solvers.galewsky import (
    GalewskySimulation,
    galewsky_default_dt,
    galewsky_reference_params,
    williamson2_simulation,
)
from dandelion.solvers.held_suarez import HeldSuarezSimulation
from dandelion.solvers.integrators import ARS222, IMEX_EULER, imex_amplification
from dandelion.solvers.time_stepping import StabilityLimit, enforce_limits


# ------------------------------------------------------------------ reference rules, written as explicit loops
def fixed_step_count(span, dt):
    """The fixed-step rule of ShallowWaterSimulation / HeldSuarezSimulation, restated.

    ``floor(span/dt + 1e-9)`` steps of ``dt`` plus one shorter step if more than ``1e-9 dt`` remains.
    """
    n = math.floor(span / dt + 1e-9)
    return n + (1 if span - n * dt > 1e-9 * dt else 0)


def schedule_step_count(t0, t1, dt=None):
    """CahnHilliardSimulation's step schedule, restated.

    The geometric schedule (ratio growth 0.01 in t + c, no step above 100) or uniform steps no longer
    than ``dt``.
    """
    if dt is not None:
        return max(1, math.ceil((t1 - t0) / dt - 1e-9))
    c = math.exp(-5.0) / math.expm1(0.01)
    return max(1, math.ceil(math.log((t1 + c) / (t0 + c)) / 0.01 - 1e-9), math.ceil((t1 - t0) / 100.0 - 1e-9))


def counts(sim, targets):
    out, old = [], sim.n_steps
    for t in targets:
        sim.advance_to(t)
        out.append(sim.n_steps - old)
        old = sim.n_steps
    return out


# ------------------------------------------------------------------ landing rule
@pytest.mark.parametrize("lmax", [16, 32])
def test_shallow_water_step_counts_match_the_fixed_step_rule(lmax):
    dt = galewsky_default_dt(lmax)
    targets = [14400.0, 28800.0, 30000.0, 31000.0, 86400.0]
    sim = GalewskySimulation(galewsky_reference_params(2), lmax=lmax, dt=dt, nu=1e5)
    expected = [fixed_step_count(b - a, dt) for a, b in zip([0.0] + targets, targets)]
    assert counts(sim, targets) == expected
    sim, _ = williamson2_simulation(16, [0.0, 0.7], dt=1800.0, scheme="rk4")
    assert counts(sim, [3600.0, 6800.0, 9000.0]) == [
        fixed_step_count(3600.0, 1800.0),
        fixed_step_count(3200.0, 1800.0),
        fixed_step_count(2200.0, 1800.0),
    ]


def test_dividing_step_is_taken_exactly():
    """With dt dividing the interval the driver steps by exactly dt: bit-equal to stepping dt by hand."""
    a = GalewskySimulation(galewsky_reference_params(1), lmax=16, dt=1800.0, nu=1e5)
    b = GalewskySimulation(galewsky_reference_params(1), lmax=16, dt=1800.0, nu=1e5)
    a.advance_to(4 * 3600.0)
    for _ in range(8):
        b.step(1800.0)
    assert a.n_steps == 8 and torch.equal(a.state.h, b.state.h) and torch.equal(a.state.vrt, b.state.vrt)


@pytest.mark.parametrize("dt", [1800.0, 2400.0])
def test_held_suarez_step_counts_match_the_fixed_step_rule(dt):
    p = dict(
        omega_factor=torch.tensor([1.0, 2.0]),
        delta_T_y=torch.tensor([60.0, 40.0]),
        delta_theta_z=torch.tensor([10.0, 5.0]),
    )
    sim = HeldSuarezSimulation(p, lmax=8, n_levels=3, dt=dt)
    targets = [21600.0, 43200.0, 47200.0, 64800.0]
    assert counts(sim, targets) == [fixed_step_count(b - a, dt) for a, b in zip([0.0] + targets, targets)]


@pytest.mark.parametrize("dt", [None, 0.3])
def test_cahn_hilliard_step_counts_match_the_geometric_schedule(dt):
    phi0 = torch.stack(
        [initial_phi(np.random.default_rng(b), mean=0.5, variance=0.01, radius=5.0, lmax=12) for b in range(2)]
    )
    sim = CahnHilliardSimulation(
        {"epsilon": torch.tensor([0.5, 1.0]), "radius": torch.tensor([5.0, 5.0])}, phi0, lmax=12, dt=dt
    )
    targets = [10.0, 20.0, 25.0, 100.0]
    assert counts(sim, targets) == [schedule_step_count(a, b, dt) for a, b in zip([0.0] + targets, targets)]


def test_chained_turbulence_adaptive_steps_match_an_explicit_loop():
    """The adaptive CFL loop, restated: per trajectory, split the rest into ceil(rest / cfl_step) equal steps,
    re-split when the CFL step drops below the plan; all trajectories step together."""
    r, kl = torch.tensor([4.0, 7.0]), torch.tensor([1.0, 1.4])
    om = torch.stack(
        [initial_vorticity(np.random.default_rng(b), float(r[b]), float(kl[b]), 16, amplitude=2.0) for b in range(2)]
    )
    a = ChainedTurbulenceSimulation({"r_over_lambda": r, "kappa_lambda": kl}, om, lmax=16)
    b = ChainedTurbulenceSimulation({"r_over_lambda": r, "kappa_lambda": kl}, om, lmax=16)
    for t in (0.2, 0.4):
        a.advance_to(t)
        now, left, plan = (
            torch.full((2,), b.time, dtype=torch.float64),
            torch.zeros(2, dtype=torch.long),
            torch.full((2,), math.inf),
        )
        first = True
        while first or bool((left > 0).any()):
            first = False
            allowed = b.cfl_dt(b.max_speed())
            replan = ((left > 0) & (plan > allowed * (1 + 1e-12))) | (plan == math.inf)
            n = torch.clamp(torch.ceil((t - now) / allowed - 1e-9), min=1).long()
            left, plan = torch.where(replan, n, left), torch.where(replan, (t - now) / n, plan)
            active = left > 0
            b.step(torch.where(active, plan, torch.ones_like(plan)), None if bool(active.all()) else active)
            now, left = torch.where(active, now + plan, now), left - active.long()
        b.time = t
        assert a.n_steps == b.n_steps
        assert torch.equal(a.omega, b.omega)
    assert a.n_steps > 2 * 0.4 / 0.05  # the CFL step, not dt_max, set the steps


# ------------------------------------------------------------------ stability limits
def test_enforce_limits_names_the_limit_and_the_largest_safe_step():
    lims = [
        StabilityLimit("inertial f*dt", torch.tensor([100.0, 50.0]), "f dt <= 1"),
        StabilityLimit("advective Courant number", 80.0, "u k dt <= 1"),
    ]
    enforce_limits(50.0, lims)
    with pytest.raises(
        ValueError, match=r"inertial f\*dt in trajectory 1 of the batch \(dt <= 50 s there\).*largest safe dt is 50 s"
    ):
        enforce_limits(60.0, lims)
    with pytest.raises(ValueError, match="in trajectory 7 "):
        enforce_limits(60.0, lims, ids=[6, 7])


def test_held_suarez_refuses_the_inertially_unstable_step():
    """Leapfrog with explicit Coriolis: 2 Omega omega_factor dt <= 1 (the case of dt = 6 h at omega_factor 0.5)."""
    p = dict(
        omega_factor=torch.tensor([0.5, 2.0]),
        delta_T_y=torch.tensor([60.0, 60.0]),
        delta_theta_z=torch.tensor([10.0, 10.0]),
    )
    safe = 1.0 / (2 * 7.292e-5 * 2.0)
    with pytest.raises(
        ValueError, match=rf"inertial f\*dt in trajectory 1 of the batch.*largest safe dt is {safe:.6g} s"
    ):
        HeldSuarezSimulation(p, lmax=8, n_levels=3, dt=3600.0)
    HeldSuarezSimulation(p, lmax=8, n_levels=3, dt=3400.0)
    with pytest.raises(ValueError, match=r"ARS\(2,2,2\) without hyperdiffusion"):
        HeldSuarezSimulation(p, lmax=8, n_levels=3, dt=600.0, scheme="ars222", hyperdiffusion_time=math.inf)


def test_held_suarez_stops_when_the_winds_break_the_courant_limit():
    p = dict(
        omega_factor=torch.tensor([1.0, 1.0]),
        delta_T_y=torch.tensor([60.0, 60.0]),
        delta_theta_z=torch.tensor([10.0, 10.0]),
    )
    sim = HeldSuarezSimulation(p, lmax=8, n_levels=3, dt=3600.0)
    sim.check_every = 1
    sim.state[1, 0:3, 1, 0] += 2e-3  # a strong vortex in trajectory 1: winds of ~1e4 m/s
    with pytest.raises(FloatingPointError, match="advective Courant number in trajectory 1"):
        sim.advance_to(7200.0)


def test_cahn_hilliard_scheme_limit_from_the_amplification_factor():
    """While max f'' <= S the linearised ARS(2,2,2) and IMEX Euler amplify no decaying mode at any step
    (checked on a grid of steps up to 1e4); beyond S the derived largest step is where |R| first exceeds 1."""
    phi0 = initial_phi(np.random.default_rng(0), mean=0.5, variance=0.01, radius=5.0, lmax=16)[None]
    sim = CahnHilliardSimulation({"epsilon": torch.tensor([0.5]), "radius": torch.tensor([5.0])}, phi0, lmax=16)
    eq = sim.equation
    k2 = eq.k2[0, 1:, 0]
    for tab in (ARS222, IMEX_EULER):
        for fpp in (-0.5, 0.0, 1.0, 2.0):
            lam_ex, lam_im = k2 * (2.0 - fpp), -k2 * (2.0 + 0.25 * k2)
            decaying = lam_ex + lam_im <= 0
            for h in np.logspace(-3, 4, 50):
                assert float(imex_amplification(tab, h * lam_ex, h * lam_im).abs()[decaying].max()) <= 1 + 1e-12
        assert math.isinf(float(eq.largest_stable_step(tab, torch.tensor([2.0]))))
    limit = float(eq.largest_stable_step(ARS222, torch.tensor([4.0])))
    lam_ex, lam_im = k2 * (2.0 - 4.0), -k2 * (2.0 + 0.25 * k2)
    decaying = lam_ex + lam_im <= 0
    worst = lambda h: float(imex_amplification(ARS222, h * lam_ex, h * lam_im).abs()[decaying].max())  # noqa: E731
    assert 0 < limit < 1e3 and worst(0.99 * limit) <= 1 + 1e-9 and worst(1.05 * limit) > 1


def test_chained_turbulence_refuses_an_unstable_cfl_number():
    om = initial_vorticity(np.random.default_rng(0), 4.0, 1.0, 16)[None]
    p = {"r_over_lambda": torch.tensor([4.0]), "kappa_lambda": torch.tensor([1.0])}
    with pytest.raises(ValueError, match=f"largest safe cfl is {MAX_CFL:.4f}"):
        ChainedTurbulenceSimulation(p, om, lmax=16, cfl=1.0)
    ChainedTurbulenceSimulation(p, om, lmax=16, cfl=MAX_CFL)
