"""The galewsky scenario: sweep, seeded parameters (distinct simulations), cadence; a tiny generation run."""

import itertools
import math

import numpy as np
import pytest

from dandelion.datasets import folder, storage
from dandelion.datasets.generate import generate
from dandelion.datasets.scenario import SanityBoundError, get_scenario
from dandelion.datasets.verify import verify
from dandelion.solvers import galewsky as galewsky_solver
from dandelion.sphere import SphereGrid

Galewsky = get_scenario("galewsky")


def _tiny_galewsky(path, **overrides) -> dict:
    """The dataset config of a tiny Galewsky folder at ``path``: 16x32, lmax 10, 2 trajectories of 2 frames, no
    spin-up, with ``overrides``."""
    return {
        "name": "galewsky",
        "path": str(path),
        "nlat": 16,
        "nlon": 32,
        "lmax": 10,
        "n_trajectories": 2,
        "n_frames": 2,
        "spinup_days": 0.0,
        **overrides,
    }


def test_sweep_size_order_and_axes():
    s = Galewsky({})
    assert s.n_sweep == 960 and s.n_trajectories == 960
    axes = s.axes()
    assert axes["u_max"] == [60.0, 70.0, 80.0, 90.0, 100.0]
    np.testing.assert_allclose(np.degrees(axes["phi_c"]), [30, 40, 50, 60])
    assert axes["h_hat"] == [60.0, 240.0] and axes["H"] == [8000.0, 10000.0, 12000.0, 14000.0]
    # row-major in the order u_max, phi_c, h_hat, H, seed (the seed fastest)
    expected = itertools.product(axes["u_max"], axes["phi_c"], axes["h_hat"], axes["H"], range(6))
    for tid, want in zip(range(960), expected):
        got = s.sweep_index(tid)
        assert tuple(got.values()) == want


def test_every_trajectory_is_a_distinct_simulation():
    """No two trajectories share all parameters that a rotation cannot change: the physics tuple plus
    the bump's latitude offset inside the jet (bump_lon and the tilt are rotations)."""
    s = Galewsky({})
    params = [s.parameters(i) for i in range(960)]
    keys = {(p["u_max"], p["phi_c"], p["h_hat"], p["H"], p["bump_dlat"]) for p in params}
    assert len(keys) == 960
    d = math.radians(5.0)
    for start in range(0, 960, 6):  # one physics tuple: its seeds sit in disjoint strata of (-d, d)
        dl = [params[start + k]["bump_dlat"] for k in range(6)]
        assert all(-d <= x < d for x in dl)
        for k, x in enumerate(dl):
            assert -d + 2 * d * k / 6 <= x < -d + 2 * d * (k + 1) / 6
    for p in params:
        axis = np.array([p["rot_axis_x"], p["rot_axis_y"], p["rot_axis_z"]])
        assert abs(np.linalg.norm(axis) - 1) < 1e-12
        assert 0 <= p["rot_angle"] < 2 * math.pi and 0 <= p["bump_lon"] < 2 * math.pi


def test_parameters_regenerate_alone_and_depend_on_the_dataset_seed():
    full = Galewsky({})
    small = Galewsky({"n_trajectories": 10})
    for tid in (0, 3, 9):
        assert small.parameters(tid) == full.parameters(tid)
    other = Galewsky({"seed": 1})
    assert other.parameters(3)["bump_lon"] != full.parameters(3)["bump_lon"]
    assert list(full.parameters(0)) == [
        "u_max",
        "phi_c",
        "h_hat",
        "H",
        "seed",
        "rot_axis_x",
        "rot_axis_y",
        "rot_axis_z",
        "rot_angle",
        "bump_lon",
        "bump_dlat",
    ]


def test_frames_drop_the_spinup_and_land_on_4_hours():
    s = Galewsky({})
    t = s.solver_times()
    assert len(t) == 168 and t[0] == 4 * 86400.0 and np.all(np.diff(t) == 14400.0)
    assert t[-1] <= 32 * 86400.0
    np.testing.assert_array_equal(s.stored_times(), 14400.0 * np.arange(168))


@pytest.mark.parametrize(
    "cfg, msg",
    [
        ({"bump_dlat_max_deg": 25}, "bump_dlat_max_deg"),
        ({"frame_hours": 0}, "frame_hours"),
        ({"n_trajectories": 961}, "n_trajectories=961"),
        ({"grid": "healpix"}, "unknown grid"),
    ],
)
def test_bad_configuration_refused(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        Galewsky(cfg)


def test_tiny_generation_run(tmp_path):
    """4 trajectories at 16x32, a reduced band limit and 3 frames after a 6-hour spin-up: the files are
    complete and verified, the dataset is marked reduced, mass is conserved in the stored data (the
    area mean of h, which has no l = 0 tendency, stays put to float32 precision) and the winds stay
    below the jets' initial maximum."""
    root = generate(
        {
            "dataset": _tiny_galewsky(tmp_path / "g", n_trajectories=4, n_frames=3, spinup_days=0.25, frame_hours=4.0),
            "batch_size": 4,
            "progress": False,
        }
    )
    meta = folder.load_metadata(root)
    assert meta["reduced"] is True and meta["lmax"] == 8 and meta["solver_lmax"] == 10
    assert meta["fields"]["h"]["units"] == "m" and meta["fields"]["velocity"]["units"] == "m/s"
    assert verify(root) == []
    w = SphereGrid(16, 32).weights.numpy() / (4 * math.pi)
    files = sorted(root.glob("*/traj_*.h5"))
    assert len(files) == 4
    for path in files:
        with storage.open_trajectory(path) as f:
            u_max = float(f["scalars/u_max"][()])
            h = f["t0_fields/h"][0].astype(np.float64)
            vel = f["t1_fields/velocity"][0]
            assert f["dimensions/time"][()].tolist() == [0.0, 14400.0, 28800.0]
        mass = (h * w).sum((-2, -1))
        np.testing.assert_allclose(mass, mass[0], atol=1e-6 * np.abs(h).max())
        assert np.sqrt((vel**2).sum(-1)).max() < u_max


def test_galewsky_files_bit_identical_across_runs_and_batch_sizes(tmp_path):
    """The same seed gives the same bytes; on CPU a trajectory computed alone (batch 1) or in a batch of
    3 gives the same bytes too, so any trajectory can be regenerated by itself."""

    def run(name, batch_size, seed=0):
        root = generate(
            {
                "dataset": _tiny_galewsky(tmp_path / name, n_trajectories=3, seed=seed),
                "batch_size": batch_size,
                "progress": False,
            }
        )
        return {p.name: folder.sha256_file(p) for p in root.glob("*/traj_*.h5")}

    a, b, c = run("a", 3), run("b", 3), run("c", 1)
    assert len(a) == 3 and a == b == c
    d = run("d", 3, seed=1)
    assert all(d[k] != a[k] for k in a)


@pytest.mark.parametrize("lmax, ref, factor", [(42, None, 1.0), (42, 256, (42 / 256) ** 4), (128, 256, 0.5**4)])
def test_nu_reference_lmax_gives_the_reference_hyperviscosity(lmax, ref, factor):
    s = Galewsky({"lmax": lmax, "nu_reference_lmax": ref})
    assert s.solver_nu() == pytest.approx(1e5 * factor)
    if ref is not None:  # the solver's nu4 at lmax equals the rule's value at the reference band limit
        assert galewsky_solver.hyperviscosity(s.solver_nu(), lmax) == pytest.approx(
            galewsky_solver.hyperviscosity(1e5, ref)
        )


def test_violated_sanity_bound_leaves_no_completed_file(tmp_path, monkeypatch):
    """A declared bound on the winds below what the jets reach: generation stops naming the trajectory,
    no trajectory file exists (the batch's writers are aborted) and the dataset is not marked complete."""
    monkeypatch.setattr(Galewsky, "sanity_bounds", lambda self: {"velocity": (None, 30.0)})
    cfg = {
        "dataset": _tiny_galewsky(tmp_path / "g"),
        "batch_size": 2,
        "progress": False,
    }
    with pytest.raises(
        SanityBoundError, match=r"trajectory 0 max magnitude of velocity = .* m/s > declared maximum 30 m/s"
    ):
        generate(cfg)
    assert list((tmp_path / "g").glob("*/*.h5")) == [] and list((tmp_path / "g").glob("*/.*")) == []
    assert folder.load_metadata(tmp_path / "g")["complete"] is False


@pytest.mark.parametrize(
    "cfg, msg",
    [
        ({"dt": 28800.0}, "longer than the frame interval 14400"),
        ({"dt": 7200.0, "lmax": 64}, r"Courant number of scheme 'ars343' in trajectory 0 .*largest safe dt is"),
    ],
)
def test_unsafe_time_step_refused_before_anything_is_written(tmp_path, cfg, msg):
    with pytest.raises(ValueError, match=msg):
        generate(
            {
                "dataset": _tiny_galewsky(tmp_path / "g", **cfg),
                "progress": False,
            }
        )
    assert not (tmp_path / "g").exists()
