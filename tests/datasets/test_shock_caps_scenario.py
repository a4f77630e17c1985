"""The ``shock_caps`` scenario: seeds fix geometry across K and delta, split by seed, command-line narrowing,
non-band-limited metadata, remapped mass equal to the solver mass at every frame, and a verified dataset."""

import json
import math

import numpy as np
import pytest
import torch

from dandelion.datasets import folder, storage
from dandelion.datasets.chained_turbulence import ic_generator
from dandelion.datasets.generate import build_scenario, generate
from dandelion.datasets.shock_caps import cap_draws, initial_state
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.datasets.verify import verify
from dandelion.solvers.fv_geometry import CalhounHelzelGrid
from dandelion.sphere import SphereGrid

SMALL = {"name": "shock_caps", "nlat": 16, "nlon": 32, "ny": 8, "K": [1, 4], "delta": [0, 1], "seeds": [0, 1, 2, 3, 4]}


def test_sweep_order_and_narrowing():
    s = build_scenario({**SMALL, "path": "x"})
    assert s.n_trajectories == 2 * 2 * 5
    assert s.sweep_index(0) == {"K": 1.0, "delta": 0.0, "seed": 0}
    assert s.sweep_index(7) == {"K": 1.0, "delta": 1.0, "seed": 2}
    assert s.sweep_index(19) == {"K": 4.0, "delta": 1.0, "seed": 4}
    full = build_scenario({"name": "shock_caps", "path": "x", "nlat": 256, "nlon": 512})
    assert full.n_trajectories == 500 and full.cfg["ny"] == 256 and not full.reduced
    assert full.sweep_index(100 + 20 * 2 + 7) == {
        "K": 2.0,
        "delta": 0.5,
        "seed": 7,
    }  # card's run_id = 100 iK + 20 idelta + seed
    with pytest.raises(ValueError, match="lmax"):
        build_scenario({**SMALL, "lmax": 21})
    with pytest.raises(ValueError, match="ny"):
        build_scenario({**SMALL, "ny": 7})


def test_hydra_overrides_narrow_the_sweep(tmp_path):
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module(config_module="dandelion.configs", version_base="1.3"):
        c = compose(
            config_name="generate",
            overrides=[
                "dataset=shock_caps",
                f"dataset.path={tmp_path}",
                "dataset.K=[1,4]",
                "dataset.delta=[0,1]",
                "dataset.seeds=[0,1,2,3,4]",
            ],
        )
    s = build_scenario(OmegaConf.to_container(c.dataset, resolve=True))
    assert (s.cfg["K"], s.cfg["delta"], s.cfg["seeds"], s.n_trajectories) == ([1, 4], [0.0, 1.0], [0, 1, 2, 3, 4], 20)
    assert s.n_frames == 101 and s.stored_times()[-1] == pytest.approx(1.5, abs=1e-12)


def test_seed_fixes_background_and_caps_for_every_K_and_delta():
    g = CalhounHelzelGrid(8)
    draws = cap_draws(ic_generator(0, 3))
    assert np.array_equal(draws["radii"], cap_draws(ic_generator(0, 3))["radii"])
    assert not np.array_equal(draws["radii"], cap_draws(ic_generator(0, 4))["radii"])
    h = {(K, d): initial_state(g, draws, K, d)[0] for K in (1, 4) for d in (0.0, 1.0)}
    assert torch.equal(h[(4, 0.0)], h[(4, 1.0)]) and torch.equal(
        h[(1, 0.0)], h[(1, 1.0)]
    )  # depths independent of delta
    q0 = initial_state(g, draws, 4, 0.0)
    assert float(q0[1:].abs().max()) == 0.0  # delta = 0: at rest
    far = torch.ones(g.shape, dtype=torch.bool)  # away from caps 1..3, K = 4 keeps K = 1's depths
    for k in range(1, 4):
        far &= g.centre @ torch.tensor(draws["centres"][k]) < math.cos(draws["radii"][k]) - 0.3
    assert far.any() and torch.equal(h[(4, 0.0)][far], h[(1, 0.0)][far])


def test_split_by_seed_and_detected_violations():
    s = build_scenario({**SMALL, "path": "x"})
    splits = s.make_splits(seed=42)
    assert sorted(splits["train"] + splits["valid"] + splits["test"]) == list(range(20))
    seeds = {k: {s.sweep_index(i)["seed"] for i in splits[k]} for k in ("train", "valid", "test")}
    assert all(seeds[a].isdisjoint(seeds[b]) for a, b in (("train", "valid"), ("train", "test"), ("valid", "test")))
    assert all(seeds[k] for k in seeds) and s.split_problems(splits) == []
    bad = dict(splits, train=splits["train"] + [splits["test"][0]], test=splits["test"][1:])
    assert s.split_problems(bad)
    full = build_scenario({"name": "shock_caps", "path": "x"}).make_splits(seed=42)
    assert full["counts"] == {"train": 400, "valid": 50, "test": 50}


def test_remapped_mass_equals_solver_mass_every_frame():
    s = build_scenario({**SMALL, "path": "x", "n_frames": 6})
    ids = [5, 14, 19]  # K = 1 and 4, delta = 0 and 1
    params = [s.parameters(i) for i in ids]
    sim = s.build_simulation(
        {k: torch.tensor([p[k] for p in params], dtype=torch.float64) for k in params[0]}, lmax=None, device="cpu"
    )
    for t in s.solver_times():
        sim.advance_to(float(t))
        out = sim.fields(s.grid)
        mass = sim.invariants()["mass"]
        remap = sim.remap(s.grid)
        assert float(((remap.integral(out["h"]) - mass) / mass).abs().max()) < 1e-10
        assert float((((out["h"] * s.grid.weights).sum((-2, -1)) - mass) / mass).abs().max()) < 2e-3
        assert float(out["h"].min()) > 0


def test_generated_dataset_is_sound_and_not_band_limited(tmp_path):
    cfg = {
        "dataset": {**SMALL, "seeds": [0, 1, 2], "path": str(tmp_path / "d"), "n_frames": 3},
        "progress": False,
        "batch_size": 4,
    }
    root = generate(cfg)
    assert verify(root) == []
    meta = folder.load_metadata(root)
    assert meta["lmax"] is None and meta["band_limited"] is False and meta["reduced"] is True
    assert "solver_lmax" not in meta and meta["solver"]["ny"] == 8
    splits = json.loads((root / "splits.json").read_text())
    assert splits["group_by"] == "seed"
    owner = {}
    for split in folder.SPLITS:
        for path in folder.list_split(root, split):
            with storage.open_trajectory(path) as f:
                assert "lmax" not in f.attrs and not bool(f.attrs["band_limited"])
                seed = float(f["scalars/seed"][()])
                assert owner.setdefault(seed, split) == split  # no seed in two splits
                assert {k for k in f["scalars"]} == {"K", "delta", "seed"}
                h = f["t0_fields/h"][0]
                assert h.min() > 0
                w = SphereGrid(16, 32, "equiangular").weights.numpy()
                mass = (h.astype(np.float64) * w).sum((-2, -1))
                assert np.abs(mass / mass[0] - 1).max() < 2e-3
                assert f["t1_fields/momentum"].shape[-1] == 2
    stats = folder.load_stats(root)
    assert np.isfinite(stats["h"]["mean"]) and np.isfinite(stats["momentum"]["rms"])
    item = WindowDataset(root, "train", n_in=1, n_out=1)[0]  # the models' loader reads it (h and Cartesian momentum)
    assert item["x"].shape == (4, 16, 32) and bool(torch.isfinite(item["x"]).all())


def test_non_finite_run_names_the_trajectory_and_writes_no_file(tmp_path, monkeypatch):
    from dandelion.solvers.fv_shallow_water import FVShallowWaterSimulation

    original = FVShallowWaterSimulation.advance_to

    def poisoned(self, t):
        if t > 0:
            self.q[1, 0, 3, 3] = float("nan")
        original(self, t)

    monkeypatch.setattr(FVShallowWaterSimulation, "advance_to", poisoned)
    cfg = {
        "dataset": {**SMALL, "seeds": [0, 1], "path": str(tmp_path / "d"), "n_frames": 2},
        "progress": False,
        "batch_size": 4,
    }
    with pytest.raises(FloatingPointError, match=r"trajectory 1 of the batch \(K=1; delta=0; seed=1\)"):
        generate(cfg)
    assert not list((tmp_path / "d").glob("*/traj_*.h5*"))


def test_a_frame_whose_first_step_exceeds_the_courant_limit_raises():
    """Each run alone with a frame one step long, so its step is the first of its frame. At ``cfl`` equal to the
    limit (the stable bound 0.5) the dam breaks accelerate the flow, and with the wave speeds after it the step of
    some runs has a Courant number above the limit: exactly those runs must refuse it, in one line naming the
    limit and the fix."""
    from dandelion.solvers.fv_shallow_water import FVShallowWaterSimulation, ssp_rk3_step

    s = build_scenario({**SMALL, "path": "x"})
    ps = [s.parameters(i) for i in range(s.n_trajectories)]
    base = s.build_simulation(
        {k: torch.tensor([p[k] for p in ps], dtype=torch.float64) for k in ps[0]}, lmax=None, device="cpu"
    )
    over = under = 0
    for b in range(base.batch_size):
        params = {k: v[b : b + 1] for k, v in base.params.items()}
        sim = FVShallowWaterSimulation(base.grid, base.q[b : b + 1], cfl=0.5, cfl_limit=0.5, params=params)
        k1, rate = sim.op(sim.q)
        frame = float(0.5 / rate[0])
        after = float(frame * sim.op(ssp_rk3_step(sim.op, sim.q, 0.5 / rate, k1))[1][0])  # speeds after the step
        if after > 0.5 * (1 + 1e-6):
            over += 1
            message = r"trajectory 0 of the batch \(K=.*Courant number.*cfl_limit=0\.5.*lower cfl"
            with pytest.raises(ValueError, match=message) as e:
                sim.advance_to(frame)
            assert "\n" not in str(e.value)
        elif after < 0.5 * (1 - 1e-6):
            under += 1
            sim.advance_to(frame)
            assert sim.n_steps == 1
    assert over > 0 and under > 0, (over, under)  # releases accelerate some runs' fastest waves, not all


def test_card_froude_number_follows_from_the_draw_ranges():
    """The card's largest initial Froude number |u| / sqrt(g h): both velocity components at |U - 1/2| -> 1/2
    (times delta) over the shallowest depth 0.5 gives sqrt(2) / 2 / sqrt(0.5 g) delta; the draws approach it."""
    import re
    from pathlib import Path

    from dandelion.solvers.fv_fluxes import GRAVITY_ND

    bound = math.hypot(0.5, 0.5) / math.sqrt(GRAVITY_ND * 0.5)
    fr = []
    for seed in range(200):
        d = cap_draws(ic_generator(0, seed))
        st = np.vstack([d["bg"][None], d["states"]])  # (17, 3): h, u, v at delta = 1
        fr.append(np.hypot(st[:, 1], st[:, 2]) / np.sqrt(GRAVITY_ND * st[:, 0]))
    fr = np.concatenate(fr)
    assert fr.max() <= bound and fr.max() > 0.9 * bound
    card = (Path(__file__).resolve().parents[2] / "docs" / "datasets" / "shock_caps.md").read_text()
    m = re.search(r"Froude number(?: `[^`]*`)? is about `([0-9.]+) delta`", card)
    assert m, "the card states no Froude number"
    assert abs(float(m.group(1)) - bound) < 0.005, (m.group(0), bound)
