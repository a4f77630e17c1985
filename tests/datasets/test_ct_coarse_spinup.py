"""Coarse-grid spin-up of chained turbulence (datasets/spinup.py): the handover keeps the vorticity field and the
enstrophy tendency; the scenario refuses plans whose band limit cuts the initial noise or the unstable band."""

import pytest
import torch

from dandelion.datasets.scenario import get_scenario
from dandelion.datasets.spinup import start_simulation
from dandelion.sphere import SphereGrid

TINY = dict(nlat=32, nlon=64, lmax=24, n_trajectories=2, n_frames=2, spinup_tau=1.0)
COARSE = dict(spinup_lmax=14, spinup_fine_tau=0.5)


def _params(s, ids=(0, 1)):
    ps = [s.parameters(i) for i in ids]
    return {k: torch.tensor([p[k] for p in ps], dtype=torch.float64) for k in ps[0]}


def _enstrophy_rate(sim, dt=1e-4):
    """Finite-difference d/dt of the enstrophy over one short step (the ETDRK4 step of ``dt`` tau)."""
    z0 = sim.enstrophy()
    sim.step(dt)
    return (sim.enstrophy() - z0) / dt


def test_handover_keeps_field_and_enstrophy_tendency():
    s = get_scenario("chained_turbulence")({**TINY, **COARSE})
    s.validate_time_step()
    lc, t_hand = s.coarse_spinup()
    assert lc == 14 and t_hand == 0.5
    params = _params(s)
    coarse = s.build_simulation(params, lmax=lc, device="cpu")
    coarse.advance_to(t_hand)
    fine = s.build_simulation(params, lmax=s.solver_lmax, device="cpu")
    fine.continue_from(coarse)
    assert fine.time == coarse.time and fine.omega.shape[-2:] == (24, 24)
    grid = SphereGrid(32, 64, "equiangular")
    a, b = coarse.fields(grid)["vorticity"], fine.fields(grid)["vorticity"]
    assert torch.allclose(a, b, atol=1e-12 * a.abs().max()), (a - b).abs().max()
    assert torch.allclose(coarse.enstrophy(), fine.enstrophy(), rtol=1e-12)
    # Advection conserves enstrophy in both truncations, and the degrees the fine run adds start at zero, so the
    # enstrophy tendency (2 sum_l sigma_l P_l) is the same on both sides of the handover.
    assert torch.allclose(_enstrophy_rate(fine), _enstrophy_rate(coarse), rtol=1e-2)


def test_start_simulation_runs_the_plan():
    s = get_scenario("chained_turbulence")({**TINY, **COARSE})
    sim = start_simulation(s, _params(s), device="cpu")
    assert sim.time == pytest.approx(0.5) and sim.lmax == 24
    assert torch.isfinite(sim.omega).all() and sim.omega[:, 14:].abs().max() == 0  # nothing above the coarse band yet


@pytest.mark.parametrize(
    "extra, match",
    [
        (dict(spinup_lmax=24, spinup_fine_tau=0.5), "spinup_lmax"),  # not below lmax
        (
            dict(spinup_lmax=10, spinup_fine_tau=0.5),
            "cuts the physics",
        ),  # the initial noise of cell (2, 1.0) reaches degree 12
        (dict(spinup_lmax=14, spinup_fine_tau=2.0), "spinup_fine_tau"),  # longer than the spin-up
    ],
)
def test_refused_plans(extra, match):
    with pytest.raises(ValueError, match=match):
        get_scenario("chained_turbulence")({**TINY, **extra}).validate_time_step()


def test_continue_from_refuses_a_finer_or_other_run():
    s = get_scenario("chained_turbulence")(TINY)
    params = _params(s)
    fine = s.build_simulation(params, lmax=24, device="cpu")
    finer = s.build_simulation(params, lmax=28, device="cpu")
    with pytest.raises(ValueError, match="LOWER"):
        fine.continue_from(finer)
    other = s.build_simulation(_params(s, ids=(0, 40)), lmax=14, device="cpu")  # id 40: the next sweep cell
    with pytest.raises(ValueError, match="differs"):
        fine.continue_from(other)


def test_describe_records_the_plan():
    s = get_scenario("chained_turbulence")({**TINY, **COARSE})
    assert s.describe()["coarse_spinup"] == {"lmax": 14, "handover_tau": 0.5}
    assert "coarse_spinup" not in get_scenario("chained_turbulence")(TINY).describe()
