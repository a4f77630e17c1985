"""The held_suarez scenario: sweep, seeding, validation and stored shapes (tiny grid)."""

import pytest
import torch
from omegaconf import OmegaConf

from dandelion.datasets.scenario import get_scenario
from dandelion.solvers.held_suarez import PRESSURE_LEVELS_HPA

TINY = dict(nlat=16, nlon=32, lmax=10, n_levels=4, n_frames=2, spinup_days=0.25, frame_hours=6.0)


def test_config_file_matches_scenario_defaults():
    import importlib.resources as ir

    cfg = OmegaConf.to_container(OmegaConf.load(ir.files("dandelion.configs") / "dataset" / "held_suarez.yaml"))
    cfg["path"] = "/tmp/unused"
    s = get_scenario("held_suarez")(cfg)
    assert s.n_sweep == 162 and s.solver_lmax == 43 and not s.reduced
    assert s.spinup() == 200 * 86400.0 and s.dt_frame() == 6 * 3600.0 and s.n_frames == 1460
    assert s.describe()["levels"]["values"] == list(PRESSURE_LEVELS_HPA)


def test_sweep_order_and_seeded_noise_is_per_trajectory():
    s = get_scenario("held_suarez")(TINY)
    p0, p1, plast = s.parameters(0), s.parameters(1), s.parameters(161)
    assert (p0["omega_factor"], p0["delta_T_y"], p0["delta_theta_z"], p0["seed"]) == (0.5, 40.0, 5.0, 0)
    assert p1["seed"] == 1 and p1["noise_seed"] != p0["noise_seed"]
    assert (plast["omega_factor"], plast["delta_T_y"], plast["delta_theta_z"]) == (2.0, 80.0, 20.0)
    assert s.parameters(7) == get_scenario("held_suarez")(TINY).parameters(7)  # regenerates alone


@pytest.mark.parametrize(
    "bad,match", [(dict(dt=1000.0), "divide"), (dict(dt=-5.0), "positive"), (dict(n_levels=1), "n_levels")]
)
def test_invalid_settings_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        get_scenario("held_suarez")({**TINY, **bad})


def test_stored_fields_shapes_and_values():
    s = get_scenario("held_suarez")(TINY)
    ids = [0, 13]
    ps = [s.parameters(i) for i in ids]
    params = {k: torch.tensor([p[k] for p in ps], dtype=torch.float64) for k in ps[0]}
    sim = s.build_simulation(params, lmax=s.solver_lmax, device="cpu")
    for t in s.solver_times():
        sim.advance_to(float(t))
    out = s.stored_fields(sim.fields(s.grid))
    P = len(PRESSURE_LEVELS_HPA)
    assert out["T"].shape == (2, P, 16, 32) and out["tracer"].shape == (2, P, 16, 32)
    assert out["velocity"].shape == (2, P, 16, 32, 2) and out["ps"].shape == (2, 16, 32)
    assert 150 < out["T"].min() and out["T"].max() < 340
    assert abs(out["ps"].mean() - 1e5) < 2e3


def test_unstable_step_of_the_cli_fails_up_front(tmp_path):
    """``dandelion-generate dataset=held_suarez ... dataset.dt=21600``: the leapfrog's inertial limit
    2 Omega omega_factor dt <= 1 (omega_factor 0.5 for trajectories 0 and 1) refuses it before any file
    is written, with the largest safe step 1 / (2 Omega 0.5) = 13713.7 s in the message."""
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-c",
        "from dandelion.cli.generate import main; main()",
        "dataset=held_suarez",
        f"dataset.path={tmp_path / 'hs'}",
        "dataset.nlat=16",
        "dataset.nlon=32",
        "dataset.lmax=16",
        "dataset.n_trajectories=2",
        "dataset.n_frames=12",
        "dataset.spinup_days=0",
        "dataset.dt=21600",
        "progress=false",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "inertial f*dt in trajectory 0" in r.stderr + r.stdout
    assert f"largest safe dt is {1 / (2 * 7.292e-5 * 0.5):.6g} s" in r.stderr + r.stdout
    assert not (tmp_path / "hs").exists()


def test_step_longer_than_the_frame_interval_is_refused():
    with pytest.raises(ValueError, match="longer than the frame interval 3600"):
        get_scenario("held_suarez")({**TINY, "frame_hours": 1.0, "spinup_days": 0.0, "dt": 7200.0})
