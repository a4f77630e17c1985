"""The cahn_hilliard and chained_turbulence scenarios through the generic pipeline (tiny, reduced
configurations): sweeps and parameters, hydra overrides, stored physics at exact frame times, seeded
reproducibility, resume after a kill, splits and train-only statistics. The pipeline itself is tested
generically on the analytic scenario in test_generate.py; here only what these scenarios add."""

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from dandelion.cli.common import compose_config as compose
from dandelion.datasets import chained_turbulence as ct_scenario
from dandelion.datasets import folder, statistics, storage
from dandelion.datasets.chained_turbulence import ic_generator
from dandelion.datasets.generate import build_scenario, generate
from dandelion.datasets.scenario import get_scenario
from dandelion.datasets.verify import verify
from dandelion.solvers import cahn_hilliard as ch_solver
from dandelion.solvers import chained_turbulence as ct_solver
from dandelion.solvers.chained_turbulence import initial_vorticity, operator_coefficients
from dandelion.sphere import SphereGrid

TINY = {
    "cahn_hilliard": {"nlat": 17, "nlon": 32, "lmax": 12, "n_trajectories": 5, "n_frames": 3, "dt_frame": 1.0},
    "chained_turbulence": {
        "nlat": 17,
        "nlon": 32,
        "lmax": 16,
        "n_trajectories": 5,
        "n_frames": 3,
        "spinup_tau": 0.4,
        "dt_frame": 0.2,
        "amplitude": 2.0,
    },
}
SIM_CLASS = {
    "cahn_hilliard": ch_solver.CahnHilliardSimulation,
    "chained_turbulence": ct_solver.ChainedTurbulenceSimulation,
}
NAMES = list(TINY)


def cfg(name, path, **over):
    d = {"name": name, "path": str(path), **TINY[name], **over}
    return {"dataset": d, "device": "cpu", "batch_size": over.pop("batch_size", 2), "progress": False}


def hashes(root):
    return {p.relative_to(root).as_posix(): folder.sha256_file(p) for p in sorted(Path(root).glob("*/traj_*.h5"))}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One tiny dataset per scenario, made once."""
    out = {}
    for name in NAMES:
        out[name] = generate(cfg(name, tmp_path_factory.mktemp(name) / "d"))
    return out


# ---------------------------------------------------------------------------------------------- sweeps
def test_cahn_hilliard_sweep():
    s = get_scenario("cahn_hilliard")({})
    assert s.n_sweep == 576 and s.n_trajectories == 576 and s.n_frames == 64
    assert s.solver_lmax == ch_solver.CH_DEFAULT_LMAX and not s.reduced
    np.testing.assert_array_equal(s.solver_times(), 10.0 * np.arange(64))
    p = s.parameters(575)
    assert p == {"epsilon": 2.0, "mean_init": 0.65, "variance": 0.05, "radius": 10.0, "seed": 3.0, "D": 1.0, "a": 1.0}
    assert s.parameters(1)["seed"] == 1.0 and s.parameters(4)["radius"] == 7.5  # row-major, seed fastest
    assert get_scenario("cahn_hilliard")({"lmax": 64}).reduced


def test_chained_turbulence_sweep_drops_single_degree_cells():
    s = get_scenario("chained_turbulence")({})
    assert s.n_sweep == 680 and s.n_frames == 200 and s.solver_lmax == 128 and not s.reduced
    cells = {(s.parameters(i)["r_over_lambda"], s.parameters(i)["kappa_lambda"]) for i in range(0, 680, 40)}
    assert len(cells) == 17 and not cells & {(2.0, 0.4), (2.0, 0.7), (4.0, 0.4)}
    p = s.parameters(0)
    assert (p["r_over_lambda"], p["kappa_lambda"], p["seed"]) == (2.0, 1.0, 0.0)
    assert (p["R"], p["tau"], p["Lambda"], p["kappa"]) == (1.0, 1.0, 0.5, 2.0)
    assert s.parameters(679)["r_over_lambda"] == 10.0 and s.parameters(679)["seed"] == 39.0
    assert get_scenario("chained_turbulence")({"min_unstable_degrees": 1}).n_sweep == 800
    # frames: spin-up of 15 tau dropped, then every 0.2 tau; stored times rebased, true units
    np.testing.assert_allclose(s.solver_times()[:3], [15.0, 15.2, 15.4], rtol=0, atol=1e-12)
    assert s.stored_times()[1] == 0.2 and s.time_units == "nondimensional"
    assert get_scenario("chained_turbulence")({"lmax": 64}).reduced
    with pytest.raises(ValueError, match="outside 1..680"):
        get_scenario("chained_turbulence")({"n_trajectories": 681})


def test_chained_turbulence_narrowed_axis_keeps_the_same_trajectories():
    """A narrowed r_over_lambda axis is the sweep's own corner: the same (cell, seed) per id as the first ids of
    the whole sweep (its leading axis), a describe() that names only the kept values, and a fingerprint of the
    whole sweep that is unchanged by the new (null) keys."""
    whole = get_scenario("chained_turbulence")({"n_seeds": 3})
    narrow = get_scenario("chained_turbulence")({"n_seeds": 3, "r_over_lambda": [2, 4]})
    assert narrow.n_sweep == narrow.n_trajectories == 7 * 3  # (2, 0.4), (2, 0.7), (4, 0.4) dropped
    assert [narrow.parameters(i) for i in range(21)] == [whole.parameters(i) for i in range(21)]
    assert narrow.describe()["sweep"]["r_over_lambda"] == [2.0, 4.0]
    assert "r_over_lambda" not in whole.cfg and "kappa_lambda" not in whole.cfg
    only = get_scenario("chained_turbulence")({"n_seeds": 2, "r_over_lambda": 10, "kappa_lambda": [1.8]})
    assert only.cells() == [(10.0, 1.8)] and only.n_trajectories == 2
    for bad in ([], [2, 2], [2, -1]):
        with pytest.raises(ValueError, match="r_over_lambda"):
            get_scenario("chained_turbulence")({"r_over_lambda": bad})
    with pytest.raises(ValueError, match="keeps no cell"):  # (2, 0.4): a single unstable degree
        get_scenario("chained_turbulence")({"r_over_lambda": [2], "kappa_lambda": [0.4]})


def test_every_kept_chained_turbulence_cell_has_two_unstable_degrees():
    """Counted directly from the linear growth rate sigma(l) = f(4K - k^2)(2K - k^2) of each cell's
    operator (integer degrees 1..200, far past the damped tail), independently of the scenario's filter."""
    s = get_scenario("chained_turbulence")({})
    l = torch.arange(1, 201, dtype=torch.float64)
    kept = s.cells()
    for r, kl in itertools.product(ct_scenario.R_OVER_LAMBDA, ct_scenario.KAPPA_LAMBDA):
        n_unstable = int((ct_solver.growth_rate(l, operator_coefficients(r, kl)) > 0).sum())
        assert n_unstable >= 1
        assert ((r, kl) in kept) == (n_unstable >= 2), (r, kl, n_unstable)


@pytest.mark.parametrize("name", NAMES)
def test_hydra_overrides_reach_the_scenario(name, tmp_path):
    c = compose(
        "generate",
        [
            f"dataset={name}",
            f"dataset.path={tmp_path}",
            "dataset.nlat=33",
            "dataset.nlon=64",
            "dataset.lmax=20",
            "dataset.n_frames=5",
            "dataset.seed=3",
            "dataset.grid=legendre-gauss",
        ],
    )
    s = build_scenario(OmegaConf.to_container(c.dataset, resolve=True))
    assert (s.name, s.grid.nlat, s.grid.nlon, s.grid.grid, s.solver_lmax, s.n_frames, s.cfg["seed"]) == (
        name,
        33,
        64,
        "legendre-gauss",
        20,
        5,
        3,
    )
    assert s.reduced and s.stored_lmax == 20


# ---------------------------------------------------------------------------------------------- stored data
@pytest.mark.parametrize("name", NAMES)
def test_folder_verifies_and_describes_itself(made, name):
    root = made[name]
    assert verify(root) == []
    meta = folder.load_metadata(root)
    assert meta["complete"] and meta["reduced"] and meta["name"] == name and meta["time_units"] == "nondimensional"
    field = {"cahn_hilliard": "phi", "chained_turbulence": "vorticity"}[name]
    assert list(meta["fields"]) == [field]
    scal = {
        "cahn_hilliard": {"epsilon", "mean_init", "variance", "radius", "seed", "D", "a"},
        "chained_turbulence": {"r_over_lambda", "kappa_lambda", "seed", "R", "tau", "Lambda", "kappa"},
    }[name]
    dt = TINY[name]["dt_frame"]
    for p in folder.list_split(root, "train") + folder.list_split(root, "valid") + folder.list_split(root, "test"):
        with storage.open_trajectory(p) as f:
            assert set(f["scalars"]) == scal
            assert f["t0_fields"][field].shape == (1, 3, 17, 32)
            np.testing.assert_array_equal(f["dimensions/time"][()], dt * np.arange(3))


def test_cahn_hilliard_frames_keep_the_mean_and_start_from_the_noise(made):
    """Frame 0 is the seeded noise synthesised on the grid; the area mean of every frame is mean_init
    (to float32 rounding) and the free energy of the stored frames falls (spinodal trajectories)."""
    root = made["cahn_hilliard"]
    grid = SphereGrid(17, 32)
    s = get_scenario("cahn_hilliard")(TINY["cahn_hilliard"])
    for p in folder.list_split(root, "train"):
        with storage.open_trajectory(p) as f:
            phi = torch.from_numpy(f["t0_fields/phi"][0].astype(np.float64))
            tid = int(f.attrs["trajectory_id"])
        par = s.parameters(tid)
        np.testing.assert_allclose(grid.mean(phi).numpy(), par["mean_init"], atol=1e-6)
        sim = s.build_simulation(
            {k: torch.tensor([v], dtype=torch.float64) for k, v in par.items()}, lmax=12, device="cpu"
        )
        np.testing.assert_allclose(phi[0].numpy(), sim.fields(grid)["phi"][0].numpy(), atol=1e-6)


def test_chained_turbulence_frames_follow_the_solver(made):
    """Each stored frame is the solver's vorticity at spin-up + k dt_frame (same initial condition,
    computed alone: agreement to round-off amplified over the short window), with zero area mean."""
    root = made["chained_turbulence"]
    grid = SphereGrid(17, 32)
    s = get_scenario("chained_turbulence")(TINY["chained_turbulence"])
    path = folder.list_split(root, "train")[0]
    with storage.open_trajectory(path) as f:
        w = f["t0_fields/vorticity"][0].astype(np.float64)
        tid = int(f.attrs["trajectory_id"])
    par = s.parameters(tid)
    sim = s.build_simulation({k: torch.tensor([v], dtype=torch.float64) for k, v in par.items()}, lmax=16, device="cpu")
    for k, t in enumerate(s.solver_times()):
        sim.advance_to(t)
        want = sim.fields(grid)["vorticity"][0].numpy()
        np.testing.assert_allclose(w[k], want, atol=1e-5 * np.abs(want).max())
        assert abs(grid.mean(torch.from_numpy(w[k])).item()) < 1e-6 * np.abs(want).max()


def test_chained_turbulence_noise_uses_the_reference_generator():
    """Dataset seed 0: a_lm from PCG64(seed), l ascending, m = -l..l (the card's bit-equal ICs); the same seed
    gives the same low degrees in every cell."""
    a = initial_vorticity(ic_generator(0, 7), 4, 0.7, 24)
    b = initial_vorticity(np.random.Generator(np.random.PCG64(7)), 4, 0.7, 24)
    c = initial_vorticity(ic_generator(0, 7), 10, 1.8, 24)
    assert torch.equal(a, b) and torch.equal(a[:19, :19], c[:19, :19])
    assert not torch.equal(initial_vorticity(ic_generator(1, 7), 4, 0.7, 24), a)
    # the IC's l = 2 m = 0 coefficient is the first standard normal, times 1e-3 (m = -2, -1 come first)
    z = np.random.Generator(np.random.PCG64(7)).standard_normal(5)
    assert a[2, 0].real.item() == pytest.approx(1e-3 * z[2], rel=1e-15)


# ---------------------------------------------------------------------------------------------- reproducibility
@pytest.mark.parametrize("name", NAMES)
def test_seeded_reproducibility(made, name, tmp_path):
    again = generate(cfg(name, tmp_path / "again"))
    assert hashes(again) == hashes(made[name])
    other = generate(cfg(name, tmp_path / "other", seed=1, n_trajectories=2))
    h0 = {Path(k).name: v for k, v in hashes(made[name]).items()}
    h1 = {Path(k).name: v for k, v in hashes(other).items()}
    assert len(h1) == 2 and all(h0[k] != h1[k] for k in h1)


class Killed(BaseException):
    """Stands for SIGKILL raised from inside the solver (writers' cleanup disabled)."""


@pytest.mark.parametrize("name", NAMES)
def test_resume_after_kill_gives_identical_files(made, name, tmp_path, monkeypatch):
    cls = SIM_CLASS[name]
    real = cls.advance_to
    calls = {"n": 0}

    def dying(self, t):
        calls["n"] += 1
        if calls["n"] == 3 + 2:  # second batch, second frame
            raise Killed()
        real(self, t)

    with monkeypatch.context() as m:
        m.setattr(cls, "advance_to", dying)
        m.setattr(storage.TrajectoryWriter, "abort", lambda self: None)
        with pytest.raises(Killed):
            generate(cfg(name, tmp_path / "run"))
    root = tmp_path / "run"
    assert len(list(root.glob("*/.traj_*.h5.*.tmp"))) == 2 and len(hashes(root)) == 2
    generate(cfg(name, tmp_path / "run"))
    assert not list(root.glob("*/.*.tmp"))
    assert hashes(root) == hashes(made[name]) and verify(root) == []


@pytest.mark.parametrize("name", NAMES)
def test_splits_disjoint_and_stats_from_train_only(made, name):
    root = made[name]
    sp = folder.load_splits(root)
    ids = sp["train"] + sp["valid"] + sp["test"]
    assert sorted(ids) == list(range(5)) and len(set(ids)) == 5
    meta = folder.load_metadata(root)
    stats = folder.load_stats(root)
    ours = {
        k: v for k, v in stats.items() if k in meta["fields"]
    }  # the Well's keys beside ours are tested in test_well_compat
    assert statistics.compute_stats(folder.list_split(root, "train"), meta["fields"]) == ours
    field = next(iter(meta["fields"]))
    everything = statistics.compute_stats(
        [p for s in folder.SPLITS for p in folder.list_split(root, s)], meta["fields"]
    )
    assert everything[field]["std"] != stats[field]["std"]
