"""Coarse-grid spin-up of Held-Suarez (datasets/spinup.py): the handover keeps the fields, the mass and the
tendencies; the scenario refuses plans that cannot be stepped; a generated dataset records the plan."""

import pytest
import torch

from dandelion.datasets.scenario import get_scenario
from dandelion.datasets.spinup import start_simulation
from dandelion.solvers.primitive_equations import PEState
from dandelion.sphere import SphereGrid

TINY = dict(nlat=16, nlon=32, lmax=12, n_levels=4, n_frames=2, spinup_days=1.0, frame_hours=6.0)
COARSE = dict(spinup_lmax=6, spinup_fine_days=0.5)


def _params(s, ids=(0, 13)):
    ps = [s.parameters(i) for i in ids]
    return {k: torch.tensor([p[k] for p in ps], dtype=torch.float64) for k in ps[0]}


def _global_mean_T(sim):
    t = PEState(sim.state, sim.n).temperature[..., 0, 0].real  # l = m = 0 coefficient of each level
    return t.mean(-1) / (4 * torch.pi) ** 0.5  # orthonormal Y_00 = 1 / sqrt(4 pi)


def test_handover_keeps_fields_mass_and_tendency():
    s = get_scenario("held_suarez")({**TINY, **COARSE})
    lc, t_hand = s.coarse_spinup()
    assert lc == 6 and t_hand == 0.5 * 86400.0
    params = _params(s)
    coarse = s.build_simulation(params, lmax=lc, device="cpu")
    coarse.advance_to(t_hand - coarse.dt)
    before = _global_mean_T(coarse)
    coarse.advance_to(t_hand)
    rate_coarse = (_global_mean_T(coarse) - before) / coarse.dt
    fine = s.build_simulation(params, lmax=s.solver_lmax, device="cpu")
    fine.continue_from(coarse)
    assert fine.time == coarse.time and fine.state.shape[-2:] == (12, 12)

    # the same band-limited fields: every component synthesised on one grid agrees to round-off
    grid = SphereGrid(24, 48, grid="equiangular")
    for part in ("vorticity", "divergence", "temperature", "tracer"):
        a = coarse.core.synthesise(getattr(PEState(coarse.state, coarse.n), part), grid)
        b = fine.core.synthesise(getattr(PEState(fine.state, fine.n), part), grid)
        assert torch.allclose(a, b, rtol=0, atol=1e-9 * max(1.0, float(a.abs().max()))), part
    ps_c, ps_f = coarse.eq.mean_surface_pressure(coarse.state), fine.eq.mean_surface_pressure(fine.state)
    assert torch.allclose(ps_c, ps_f, rtol=1e-12)

    # no jolt at the handover: the global-mean temperature keeps its (radiative) tendency
    start = _global_mean_T(fine)
    fine.advance_to(t_hand + 2 * fine.dt)
    rate_fine = (_global_mean_T(fine) - start) / (2 * fine.dt)
    assert torch.allclose(rate_fine, rate_coarse, rtol=0.1), (rate_fine, rate_coarse)
    assert torch.allclose(fine.eq.mean_surface_pressure(fine.state), ps_c, rtol=1e-10)  # mass fixer target kept


def test_start_simulation_lands_at_the_handover_and_runs_on_at_lmax():
    s = get_scenario("held_suarez")({**TINY, **COARSE})
    sim = start_simulation(s, _params(s), device="cpu")
    assert sim.time == s.coarse_spinup()[1] and sim.core.lmax == 12
    for t in s.solver_times():
        sim.advance_to(float(t))
    out = s.stored_fields(sim.fields(s.grid))
    assert 150 < out["T"].min() and out["T"].max() < 340 and abs(out["ps"].mean() - 1e5) < 2e3
    plain = get_scenario("held_suarez")(TINY)
    assert start_simulation(plain, _params(plain), device="cpu").time == 0.0  # no plan: built at lmax, t = 0


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(spinup_lmax=12), "spinup_lmax"),  # not below lmax
        (dict(spinup_lmax=6, spinup_fine_days=2.0), "spinup_fine_days"),  # longer than the spin-up
        (dict(spinup_lmax=6, spinup_fine_days=0.01), "whole number"),  # 864 s: not a multiple of 1800 s
    ],
)
def test_plans_that_cannot_be_stepped_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        get_scenario("held_suarez")({**TINY, **bad})


def test_continue_from_refuses_other_trajectories_or_a_finer_source():
    s = get_scenario("held_suarez")({**TINY, **COARSE})
    a = s.build_simulation(_params(s, (0, 13)), lmax=6, device="cpu")
    with pytest.raises(ValueError, match="parameter"):
        s.build_simulation(_params(s, (1, 13)), lmax=12, device="cpu").continue_from(a)
    with pytest.raises(ValueError, match="LOWER"):
        a.continue_from(s.build_simulation(_params(s, (0, 13)), lmax=12, device="cpu"))
    assert s.describe()["coarse_spinup"] == {"lmax": 6, "handover_s": 43200.0, "dt_s": 1800.0}


def test_unset_spinup_options_leave_the_dataset_fingerprint_alone():
    """Folders made before the spin-up options existed keep their fingerprint; a set option changes it."""
    from dandelion.datasets.generate import config_fingerprint

    old = dict(name="held_suarez", nlat=32, nlon=64, lmax=22, spinup_days=60.0)
    unset = {**old, "spinup_lmax": None, "spinup_fine_days": None}
    assert config_fingerprint(unset) == config_fingerprint(old)
    assert config_fingerprint({**unset, "spinup_lmax": 12}) != config_fingerprint(old)
    assert config_fingerprint({**old, "lmax": None}) != config_fingerprint(old)  # other null options still count
