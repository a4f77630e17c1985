"""dandelion-generate and dandelion-verify on the analytic ``solid_body`` scenario (fast, CPU, no solver):
determinism, resume after a kill, damaged files, configuration mismatch, train-only statistics, the
hydra app (compose API) and one subprocess smoke test of both console scripts."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from dandelion.cli.common import compose_config as compose
from dandelion.cli.verify import main as verify_main
from dandelion.datasets import folder, solid_body, statistics, storage
from dandelion.datasets.generate import build_scenario, generate
from dandelion.datasets.scenario import get_scenario, trajectory_rng
from dandelion.datasets.solid_body import rotate
from dandelion.datasets.verify import verify
from dandelion.datasets.well_format import well_stats
from dandelion.sphere import SphereGrid


def cfg(path, **dataset):
    d = {"name": "solid_body", "path": str(path), "nlat": 16, "nlon": 32, "n_trajectories": 8, "n_frames": 6}
    d.update(dataset)
    return {"dataset": d, "device": "cpu", "batch_size": dataset.pop("batch_size", 3), "progress": False}


def traj_files(root):
    return sorted(p.relative_to(root).as_posix() for p in Path(root).glob("*/traj_*.h5"))


def file_hashes(root):
    return {r: folder.sha256_file(Path(root) / r) for r in traj_files(root)}


def _overwrite(root, p, frame):
    """Rewrite the 16x32 solid-body trajectory file ``p`` of ``root`` (same id, frame count and layout) with the
    fields ``frame(grid_shape, k)`` at frame ``k``."""
    with storage.open_trajectory(p) as f:
        T, tid = f["dimensions/time"].shape[0], int(f.attrs["trajectory_id"])
    grid = SphereGrid(16, 32)
    with storage.TrajectoryWriter(
        p,
        dataset_name="solid_body",
        grid=grid,
        lmax=3,
        trajectory_id=tid,
        times=np.arange(T) * 0.125,
        time_units="nondimensional",
        scalars={},
        fields=folder.load_metadata(root)["fields"],
    ) as w:
        for k in range(T):
            w.write_frame(k, frame(grid.shape, k))


def test_folder_layout_and_metadata(tmp_path):
    root = generate(cfg(tmp_path / "d"))
    meta = folder.load_metadata(root)
    splits = folder.load_splits(root)
    assert meta["complete"] is True and meta["reduced"] is False
    assert (meta["nlat"], meta["nlon"], meta["grid"], meta["lmax"], meta["n_frames"]) == (16, 32, "equiangular", 3, 6)
    assert meta["fields"]["velocity"] == {
        "kind": "vector",
        "units": "1",
        "long_name": "solid-body rotation velocity",
        "components": ["u", "v"],
    }
    assert set(meta["versions"]) >= {"dandelion", "torch", "torch_harmonics", "numpy", "h5py"} and meta["command"]
    omegas = [0.5 if i < 4 else 1.0 for i in folder.load_splits(root)["train"]]  # ids 0-3: omega 0.5, 4-7: 1.0
    np.testing.assert_allclose(
        [meta["parameter_stats"]["omega"][k] for k in ("mean", "std")], [np.mean(omegas), np.std(omegas)]
    )
    assert sorted(splits["train"] + splits["valid"] + splits["test"]) == list(range(8))
    assert meta["sweep_covered"]["omega"] == [0.5, 1.0]  # the ids 0-7 hold both omega values of the sweep
    assert "own simulation" in splits["note"]
    listed = sorted(f"{s}/traj_{i:06d}.h5" for s in folder.SPLITS for i in splits[s])
    assert traj_files(root) == listed
    assert set(folder.read_checksums(root)) == set(listed) | {"dataset.yaml", "splits.json", "stats.yaml"}
    assert verify(root) == []
    # frame times exact and rebased, spin-up dropped
    with storage.open_trajectory(folder.list_split(root, "train")[0]) as f:
        np.testing.assert_array_equal(f["dimensions/time"][()], 0.125 * np.arange(6))
        assert f.attrs["time_units"] == "nondimensional"


def test_stored_fields_follow_the_exact_solution(tmp_path):
    """Stored h at frame k is h0 at the back-rotated point R(-omega (spinup + k dt)) x and the wind is
    omega k x x, both evaluated here independently (rotation matrix from scipy, not Rodrigues)."""
    from scipy.spatial.transform import Rotation

    root = generate(cfg(tmp_path / "d", n_trajectories=4))
    grid = SphereGrid(16, 32)
    x = grid.xyz.numpy().reshape(3, -1)
    for path in folder.list_split(root, "train"):
        with storage.open_trajectory(path) as f:
            p = {k: float(f["scalars"][k][()]) for k in f["scalars"]}
            h = f["t0_fields/h"][0]
            vel = f["t1_fields/velocity"][0]
        axis = np.array([p["axis_x"], p["axis_y"], p["axis_z"]])
        a = np.array([p["a_x"], p["a_y"], p["a_z"]])
        b = np.array([p["b_x"], p["b_y"], p["b_z"]])
        for k in range(h.shape[0]):
            t = 0.5 + 0.125 * k
            y = Rotation.from_rotvec(-p["omega"] * t * axis).as_matrix() @ x
            want = (a @ y + (b @ y) ** 2).reshape(grid.shape)
            np.testing.assert_allclose(h[k], want, atol=2e-6 * np.abs(want).max())
        w = p["omega"] * np.cross(axis, x.T).T.reshape(3, *grid.shape)
        np.testing.assert_allclose(vel[0, ..., 0], (w * grid.east.numpy()).sum(0), atol=1e-6)
        np.testing.assert_allclose(vel[0, ..., 1], (w * grid.north.numpy()).sum(0), atol=1e-6)


def test_same_seed_bit_identical_other_seed_differs(tmp_path):
    a = generate(cfg(tmp_path / "a"))
    b = generate(cfg(tmp_path / "b"))
    c = generate(cfg(tmp_path / "c", seed=1))
    ha, hb, hc = file_hashes(a), file_hashes(b), file_hashes(c)
    assert ha == hb and len(ha) == 8
    assert all(ha[k] != hc[k] for k in ha)
    assert folder.load_stats(a) == folder.load_stats(b)


def test_trajectory_generator_depends_only_on_seed_and_id():
    s = get_scenario("solid_body")({"n_trajectories": 8})
    forward = [s.parameters(i) for i in range(8)]
    backward = [s.parameters(i) for i in reversed(range(8))][::-1]
    assert forward == backward
    assert trajectory_rng(3, 5).random() == trajectory_rng(3, 5).random() != trajectory_rng(5, 3).random()
    with pytest.raises(ValueError, match="non-negative"):
        trajectory_rng(-1, 0)


def test_sweep_is_row_major_seed_fastest():
    s = get_scenario("solid_body")({"n_seeds": 3})
    assert s.n_sweep == 6
    assert [(s.sweep_index(i)["omega"], s.sweep_index(i)["seed"]) for i in range(6)] == [
        (0.5, 0),
        (0.5, 1),
        (0.5, 2),
        (1.0, 0),
        (1.0, 1),
        (1.0, 2),
    ]
    with pytest.raises(ValueError, match="n_trajectories=7 is outside 1..6"):
        get_scenario("solid_body")({"n_seeds": 3, "n_trajectories": 7})


class Killed(BaseException):
    """Stands for SIGKILL: raised from inside the solver, with the writers' cleanup disabled."""


def test_kill_mid_run_then_resume_gives_identical_files(tmp_path, monkeypatch):
    ref = file_hashes(generate(cfg(tmp_path / "ref")))
    calls = {"n": 0}
    real_advance = solid_body.SolidBodySimulation.advance_to

    def dying_advance(self, t):
        calls["n"] += 1
        if calls["n"] == 6 + 3:  # second batch, fourth frame
            raise Killed()
        real_advance(self, t)

    with monkeypatch.context() as m:
        m.setattr(solid_body.SolidBodySimulation, "advance_to", dying_advance)
        m.setattr(storage.TrajectoryWriter, "abort", lambda self: None)  # a killed process cleans nothing up
        with pytest.raises(Killed):
            generate(cfg(tmp_path / "run"))
    root = tmp_path / "run"
    leftovers = list(root.glob("*/.traj_*.h5.*.tmp"))  # hidden, with the writer's process id
    assert len(leftovers) == 3  # the second batch's files, half written
    assert len(traj_files(root)) == 3  # the first batch
    assert not (root / "stats.yaml").exists()
    assert any("not complete" in p for p in verify(root))
    assert len(list((root / ".generation_cost").glob("ids_*.json"))) == 1  # only the finished first batch
    generate(cfg(tmp_path / "run"))
    assert not list(root.glob("*/.*.tmp"))
    assert file_hashes(root) == ref
    assert verify(root) == []
    # the cost sums every finished batch of both pieces once: 3 batches (3 + 3 + 2 trajectories), as uninterrupted
    cost, whole = (
        folder.load_metadata(root)["generation_cost"],
        folder.load_metadata(tmp_path / "ref")["generation_cost"],
    )
    assert cost["batches"] == whole["batches"] == 3 and cost["trajectories"] == whole["trajectories"] == 8
    parts = [json.loads(f.read_text()) for f in (root / ".generation_cost").glob("ids_*.json")]
    assert sorted(i for r in parts for i in r["ids"]) == list(range(8))
    assert cost["cpu_seconds"] == pytest.approx(sum(r["cpu_seconds"] for r in parts)) and cost["cpu_seconds"] > 0


def test_damaged_file_is_reported_then_regenerated(tmp_path, capsys):
    root = generate(cfg(tmp_path / "d"))
    ref = file_hashes(root)
    victim = folder.list_split(root, "train")[1]
    victim.write_bytes(victim.read_bytes()[:3000])
    problems = verify(root)
    assert any(victim.name in p and "SHA-256" in p for p in problems)
    assert any(victim.name in p and "truncated" in p for p in problems)
    assert verify_main([str(root)]) == 1
    assert victim.name in capsys.readouterr().out
    with pytest.raises(storage.CorruptFileError, match=victim.name):
        storage.open_trajectory(victim)
    generate(cfg(tmp_path / "d"))  # resume regenerates the damaged file
    assert file_hashes(root) == ref and verify(root) == []


@pytest.mark.parametrize("change", [{"seed": 1}, {"nlat": 18, "nlon": 36}, {"n_frames": 7}, {"grid": "legendre-gauss"}])
def test_other_configuration_refused(tmp_path, change):
    generate(cfg(tmp_path / "d"))
    with pytest.raises(ValueError, match="different configuration") as e:
        generate(cfg(tmp_path / "d", **change))
    assert next(iter(change)) in str(e.value) and "dataset.path" in str(e.value)


def test_foreign_folder_refused_and_path_required(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    with pytest.raises(ValueError, match="not empty"):
        generate(cfg(tmp_path / "mine"))
    with pytest.raises(ValueError, match="dataset.path"):
        generate({"dataset": {"name": "solid_body", "path": "???"}})
    with pytest.raises(ValueError, match="unknown dataset scenario 'nonesuch'"):
        generate({"dataset": {"name": "nonesuch", "path": str(tmp_path / "x")}})


def test_statistics_read_each_train_file_once(tmp_path, monkeypatch):
    """Our entries and the Well's keys of stats.yaml come from one pass over the train split: a train file is
    opened for reading exactly once more than a valid or test file."""
    opened = []

    class CountingFile(h5py.File):
        def __init__(self, name, mode="r", *args, **kwargs):
            if mode == "r":
                opened.append(Path(name).resolve())
            super().__init__(name, mode, *args, **kwargs)

    monkeypatch.setattr(h5py, "File", CountingFile)
    root = generate(cfg(tmp_path / "d", n_trajectories=8))
    counts = {s: {opened.count(p.resolve()) for p in folder.list_split(root, s)} for s in folder.SPLITS}
    (others,) = counts["valid"] | counts["test"]  # one count for every file outside the train split
    assert counts["train"] == {others + 1}


def test_stats_come_from_the_train_split_only(tmp_path):
    root = generate(cfg(tmp_path / "d", n_trajectories=8))
    stats = folder.load_stats(root)
    train = folder.list_split(root, "train")
    fields = folder.load_metadata(root)["fields"]
    np.testing.assert_equal(
        statistics.compute_stats(train, fields), {k: stats[k] for k in fields}
    )  # our per-field entries
    np.testing.assert_equal(
        well_stats(train, fields), {k: v for k, v in stats.items() if k not in fields}
    )  # the Well's
    # overwrite every valid/test file with wildly different values of the same layout
    for split in ("valid", "test"):
        for p in folder.list_split(root, split):
            _overwrite(
                root,
                p,
                lambda shape, k: {"h": np.full(shape, 1e3 * (k + 1)), "velocity": np.full(shape + (2,), 1e3)},
            )
    generate(cfg(tmp_path / "d", n_trajectories=8))  # re-finalise
    assert folder.load_stats(root) == stats
    # while a changed train file does change them
    _overwrite(root, train[0], lambda shape, k: {"h": np.full(shape, 1e3), "velocity": np.zeros(shape + (2,))})
    assert statistics.compute_stats(train, folder.load_metadata(root)["fields"])["h"]["mean"] != stats["h"]["mean"]


def test_stats_match_the_exact_rotation_invariants(tmp_path):
    """Solid-body rotation preserves area means: for h0 = a.x + (b.x)^2 the area mean is |b|^2/3 at every
    time; the wind's mean square is omega^2 * 2/3 (sin^2 of the angle to the axis averages 2/3)."""
    root = generate(cfg(tmp_path / "d", n_trajectories=8))
    s = get_scenario("solid_body")({"n_trajectories": 8})
    train = folder.load_splits(root)["train"]
    params = [s.parameters(i) for i in train]
    mean_h = np.mean([(p["b_x"] ** 2 + p["b_y"] ** 2 + p["b_z"] ** 2) / 3 for p in params])
    rms = math.sqrt(np.mean([p["omega"] ** 2 * 2 / 3 for p in params]))
    stats = folder.load_stats(root)
    np.testing.assert_allclose(stats["h"]["mean"], mean_h, rtol=1e-6)
    np.testing.assert_allclose(stats["velocity"]["rms"], rms, rtol=1e-6)
    assert abs(stats["velocity"]["delta_rms"]) < 1e-6  # steady wind


def test_non_finite_state_names_trajectory_and_parameters(tmp_path, monkeypatch):
    real_fields = solid_body.SolidBodySimulation.fields

    def bad_fields(self, grid):
        out = real_fields(self, grid)
        if self.time > 0.7:
            out["h"][1, 3, 4] = float("nan")
        return out

    monkeypatch.setattr(solid_body.SolidBodySimulation, "fields", bad_fields)
    with pytest.raises(FloatingPointError, match=r"ids \[0, 1, 2\].*id 1: \{'omega': 0.5"):
        generate(cfg(tmp_path / "d"))
    assert traj_files(tmp_path / "d") == [] and not list((tmp_path / "d").glob("*/.*.tmp"))


def test_rotate_is_a_rotation():
    x = torch.randn(2, 3, 5, dtype=torch.float64)
    axis = torch.nn.functional.normalize(torch.randn(2, 3, dtype=torch.float64), dim=1)
    ang = torch.tensor([0.3, -2.0], dtype=torch.float64)
    y = rotate(x, axis, ang)
    torch.testing.assert_close(y.norm(dim=1), x.norm(dim=1))
    torch.testing.assert_close(rotate(y, axis, -ang), x)


# ---------------------------------------------------------------------------------------------- hydra
def test_hydra_compose_runs_generation(tmp_path):
    c = compose(
        "generate",
        [
            "dataset=solid_body",
            f"dataset.path={tmp_path / 'h'}",
            "dataset.n_trajectories=3",
            "dataset.n_frames=2",
            "dataset.seed=4",
            "batch_size=2",
            "progress=false",
            "device=cpu",
        ],
    )
    root = generate(c)
    meta = folder.load_metadata(root)
    assert meta["n_trajectories"] == 3 and meta["config"]["dataset"]["seed"] == 4 and meta["config"]["batch_size"] == 2
    assert verify(root) == []


def test_hydra_galewsky_overrides_reach_the_scenario(tmp_path):
    c = compose(
        "generate",
        [
            "dataset=galewsky",
            f"dataset.path={tmp_path}",
            "dataset.nlat=32",
            "dataset.nlon=64",
            "dataset.grid=legendre-gauss",
            "dataset.lmax=21",
            "dataset.n_trajectories=4",
            "dataset.n_frames=3",
            "dataset.seed=7",
            "device=cpu",
        ],
    )
    assert c.device == "cpu"
    s = build_scenario(OmegaConf.to_container(c.dataset, resolve=True))
    assert (s.grid.nlat, s.grid.nlon, s.grid.grid, s.solver_lmax, s.n_trajectories, s.n_frames, s.cfg["seed"]) == (
        32,
        64,
        "legendre-gauss",
        21,
        4,
        3,
        7,
    )
    assert s.stored_lmax == 21


def _script(name):
    exe = Path(sys.executable).with_name(name)
    return [str(exe)] if exe.exists() else [sys.executable, "-m", f"dandelion.datasets.{name.split('-')[1]}"]


def test_console_scripts_smoke(tmp_path):
    root = tmp_path / "cli"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        _script("dandelion-generate")
        + [
            "dataset=solid_body",
            f"dataset.path={root}",
            "dataset.n_trajectories=3",
            "dataset.n_frames=2",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert (
        "dandelion-generate" in folder.load_metadata(root)["command"]
        or "generate" in folder.load_metadata(root)["command"]
    )
    victim = folder.list_split(root, "train")[0]
    victim.write_bytes(victim.read_bytes()[:-500])
    r = subprocess.run(_script("dandelion-verify") + [str(root)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1 and victim.name in r.stdout


def test_verify_catches_swapped_files(tmp_path):
    root = generate(cfg(tmp_path / "d"))
    a, b = folder.list_split(root, "train")[:2]
    tmp = a.with_name("swap")
    a.rename(tmp), b.rename(a), tmp.rename(b)
    problems = verify(root, check_data=False)
    assert any(a.name in p and "trajectory_id" in p for p in problems)
    assert any(b.name in p and "SHA-256" in p for p in problems)


def test_sharded_ranks_make_the_same_dataset(tmp_path, monkeypatch):
    """Ranks of a torchrun job each write their own trajectory ids (r, r + W, ...); rank 0 finalises.
    Run here rank by rank with the barriers stubbed out: the folder equals a single-process run."""
    from dandelion.datasets import generate as gen

    ref = tmp_path / "ref"
    generate(cfg(ref))

    class FakeDist:
        def __init__(self, rank):
            self.rank, self.world_size, self.local_rank = rank, 3, rank

        def barrier(self):
            pass

        def broadcast(self, obj):
            return obj

        def close(self):
            pass

    for rank in (2, 1, 0):  # rank 0 last: it checks every file is there before writing stats and checksums
        monkeypatch.setattr(gen, "ProcessGroup", lambda rank=rank, **kw: FakeDist(rank))
        generate(cfg(tmp_path / "sharded"))
        if rank:
            assert not (tmp_path / "sharded" / "stats.yaml").exists()
            assert len(traj_files(tmp_path / "sharded")) == len(range(rank, 8, 3)) + sum(
                len(range(r, 8, 3)) for r in range(rank + 1, 3)
            )
    root = tmp_path / "sharded"
    assert file_hashes(root) == file_hashes(ref)
    assert folder.load_stats(root) == folder.load_stats(ref) and verify(root) == []
