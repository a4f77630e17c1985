"""Cahn-Hilliard on the sphere (docs/datasets/cahn_hilliard.md): mass, free-energy decrease at the generation steps,
linear growth rates, stability outside the spinodal, grid-independent noise, coarsening (slow)."""

import math

import numpy as np
import pytest
import torch

from dandelion.solvers.cahn_hilliard import (
    CahnHilliardSimulation,
    growth_rate,
    initial_phi,
    noise_band_limit,
    step_times,
)
from dandelion.solvers.chained_turbulence import degree_power
from dandelion.sphere import SphereGrid


def make(eps, radius, mean, variance, lmax, seed=0, **kw):
    eps, radius, mean, variance = (np.atleast_1d(np.asarray(x, dtype=float)) for x in (eps, radius, mean, variance))
    B = max(len(eps), len(radius), len(mean), len(variance))
    eps, radius, mean, variance = (np.broadcast_to(x, (B,)) for x in (eps, radius, mean, variance))
    phi0 = torch.stack(
        [
            initial_phi(
                np.random.default_rng(seed + b), mean=mean[b], variance=variance[b], radius=radius[b], lmax=lmax
            )
            for b in range(B)
        ]
    )
    return CahnHilliardSimulation(
        {"epsilon": torch.tensor(eps.copy()), "radius": torch.tensor(radius.copy())}, phi0, lmax=lmax, **kw
    )


def test_schedule_matches_the_reference_and_lands_on_frames():
    """The reference's dt_n = exp(-5 + 0.01 n) takes 685 steps to t = 630; ours, clipped to the 10-unit
    frames, takes a few more and hits every frame time exactly."""
    t, n = 0.0, 0
    while t < 630:
        t += math.exp(-5 + 0.01 * n)
        n += 1
    ends = [step_times(10.0 * k, 10.0 * (k + 1)) for k in range(63)]
    total = sum(len(e) for e in ends)
    assert n == 685 and n <= total <= n + 63
    for k, e in enumerate(ends):
        assert e[-1] == 10.0 * (k + 1)
        dt = np.diff(np.concatenate([[10.0 * k], e]))
        assert (dt > 0).all() and (dt <= 0.01006 * (e + 0.6705)).all()


@pytest.mark.parametrize(
    "eps,radius,m0,degrees",
    [(1.0, 10.0, 0.5, range(1, 9)), (0.5, 5.0, 0.35, range(1, 7)), (1.5, 7.5, 0.65, range(1, 6))],
)
def test_growth_rates_match_linear_theory(eps, radius, m0, degrees):
    """From a uniform state plus 1e-10 noise, dt = 5e-4 << 1/sigma: the measured growth rate of each degree
    matches sigma(l) = -k^2 (f''(m0) + eps^2 k^2) within 1% (card: l = 4-5 grow at 0.060 for eps = 1, R = 10)."""
    lmax = 16
    sim = make(eps, radius, m0, 1e-20 * radius**2 / 0.039, lmax, dt=5e-4)  # noise std 1e-10 per coefficient
    p0 = sim.spectrum()[0]
    T = 0.25
    sim.advance_to(T)
    p1 = sim.spectrum()[0]
    sig = growth_rate(torch.arange(lmax), epsilon=eps, mean=m0, radius=radius)
    for l in degrees:
        rate = math.log(p1[l] / p0[l]) / (2 * T)
        assert abs(rate - sig[l].item()) <= 0.01 * abs(sig[l].item()), (l, rate, sig[l].item())
    if (eps, radius, m0) == (1.0, 10.0, 0.5):
        assert abs(sig[4].item() - 0.060) < 5e-4 and abs(sig[5].item() - 0.060) < 5e-4


@pytest.mark.parametrize("scheme", ["ars222", "imex_euler"])
def test_mass_constant_and_free_energy_non_increasing_at_generation_steps(scheme):
    """Reference schedule (the generation steps) to t = 630, two trajectories in the spinodal region:
    the mean (from the spectrum and from an output grid's quadrature) is constant to 1e-12 relative, the
    free energy never rises between steps by more than 1e-10 relative, and the stabilisation premise
    S >= max|f''|/2 holds throughout."""
    lmax = 24
    sim = make([1.0, 0.5], [5.0, 5.0], [0.5, 0.35], [0.05, 0.01], lmax, record_energy=True, scheme=scheme)
    grid = SphereGrid(25, 48)
    m0 = sim.mean().clone()
    g0 = grid.mean(sim.fields(grid)["phi"])
    F = [sim.free_energy()]
    margin = sim.stabilisation_margin()
    for k in range(1, 64):
        sim.advance_to(10.0 * k)
        margin = torch.minimum(margin, sim.stabilisation_margin())
        assert ((sim.mean() - m0).abs() <= 1e-12 * m0.abs()).all()
        assert ((grid.mean(sim.fields(grid)["phi"]) - g0).abs() <= 1e-12 * g0.abs()).all()
    F = torch.stack(F + [e for _, e in sim.energy_log])
    rise = ((F[1:] - F[:-1]) / F[:-1].abs()).max().item()
    assert rise <= 1e-10, rise
    assert (F[-1] < 0.9 * F[0]).all()  # it did phase-separate
    assert (margin >= 0).all()
    assert sim.n_steps >= 685


@pytest.mark.parametrize("m0", [0.1, 0.9, 0.2])
def test_state_outside_the_spinodal_stays_uniform(m0):
    """f''(m0) > 0: every degree decays; noise of variance 0.01 dies out monotonically."""
    sim = make(1.0, 5.0, m0, 0.01, 16)
    grid = SphereGrid(17, 32)
    dev = [(sim.fields(grid)["phi"] - m0).abs().max().item()]
    for t in (10, 20, 50, 100, 200):
        sim.advance_to(t)
        dev.append((sim.fields(grid)["phi"] - m0).abs().max().item())
    assert all(b < a for a, b in zip(dev, dev[1:]))
    assert dev[-1] < 0.02 * dev[0]


def test_noise_is_grid_independent_and_power_matched():
    """Same seed -> same coefficients at every band limit; pointwise variance ~ (l_c+1)^2 - 1)/(4 pi) *
    variance * A_c / R^2 (0.34 variance at R = 10)."""
    lo = initial_phi(np.random.default_rng(5), mean=0.5, variance=0.05, radius=5.0, lmax=16)
    hi = initial_phi(np.random.default_rng(5), mean=0.5, variance=0.05, radius=5.0, lmax=64)
    assert torch.equal(lo, hi[:16, :16])
    assert noise_band_limit(5) == 52 and noise_band_limit(7.5) == 79 and noise_band_limit(10) == 105
    for radius in (5.0, 10.0):
        lc = noise_band_limit(radius)
        vals = []
        for seed in range(3):
            c = initial_phi(np.random.default_rng(seed), mean=0.5, variance=0.05, radius=radius, lmax=128)
            # area mean of (phi - mean)^2 = sum_{l >= 1} sum_m |c_lm|^2 / (4 pi) (Parseval, orthonormal harmonics)
            vals.append(degree_power(c)[1:].sum().item() / (4 * math.pi))
            assert abs(c[0, 0].real.item() / math.sqrt(4 * math.pi) - 0.5) < 1e-15
        want = ((lc + 1) ** 2 - 1) / (4 * math.pi) * 0.05 * 0.039 / radius**2
        assert abs(np.mean(vals) / want - 1) < 0.05
        assert abs(want / 0.05 - 0.34) < 0.02


def test_non_finite_state_names_the_trajectory():
    sim = make([1.0, 1.0], 5.0, 0.5, 0.01, 8)
    sim.phi_hat[1, 2, 1] = float("inf")
    with pytest.raises(FloatingPointError, match=r"\[1\]"):
        sim.fields(SphereGrid(9, 16))


@pytest.mark.slow
def test_late_time_coarsening_exponent():
    """R = 10, eps = 0.5 (the sweep's largest radius and thinnest interface), m0 = 0.5, variance 0.01,
    at the documented minimum band limit, reference schedule to t = 630: L = 2 pi/<k> ~ t^alpha with
    alpha in [0.25, 0.40] over the late stage (t >= 100), averaged over 2 seeds."""
    sim = make([0.5, 0.5], [10.0, 10.0], [0.5, 0.5], [0.01, 0.01], 128)
    ts, Ls = [], []
    for k in range(1, 64):
        sim.advance_to(10.0 * k)
        ts.append(10.0 * k)
        Ls.append(sim.length_scale().mean().item())
    ts, Ls = np.array(ts), np.array(Ls)
    late = ts >= 100
    alpha = np.polyfit(np.log(ts[late]), np.log(Ls[late]), 1)[0]
    print(
        f"coarsening exponent {alpha:.3f}; L(100) = {Ls[ts == 100][0]:.2f}, L(630) = {Ls[-1]:.2f}; steps {sim.n_steps}"
    )
    assert 0.25 <= alpha <= 0.40
