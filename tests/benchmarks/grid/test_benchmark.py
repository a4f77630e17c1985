"""dandelion-benchmark and the leaderboard: one cell re-run at a reduced budget on a tiny dataset.

Checks the pipeline (cell JSON schema, skipping finished cells, atomic files, leaderboard rendering
with the best of each column in bold, plots), not the numbers.
"""

import json
import math
from pathlib import Path

import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
from omegaconf import OmegaConf
from tiny_scale import tiny_scale_overrides

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid import cells as cells_mod
from dandelion.benchmarks.leaderboard import render as LB

N_FRAMES = 10


@pytest.fixture
def tiny_scale(make_tiny_dataset, tmp_path):
    """The cpu protocol, shrunk: a 16x32 tiny dataset (not generated), 2 models, 1 seed, a few steps."""
    data = make_tiny_dataset(
        tmp_path / "data", nlat=16, nlon=32, n_frames=N_FRAMES, splits={"train": [0, 1], "valid": [2], "test": [3]}
    )
    cfg = B.compose(
        "benchmark",
        tiny_scale_overrides(tmp_path, "_pointwise_test,sfno", "1e-3,1e-2"),
    )
    OmegaConf.set_struct(cfg, False)
    cfg.scale.datasets = {"tiny_16x32": {"dataset": "solid_body", "path": str(data), "overrides": {}}}
    return cfg


def _check_cell_schema(rec, model):
    assert rec["schema"] == B.CELL_SCHEMA
    assert rec["model"] == model and rec["seed"] == 0 and rec["dataset_key"] == "tiny_16x32"
    assert (rec["nlat"], rec["nlon"]) == (16, 32)
    assert rec["lr"] in (1e-3, 1e-2)
    assert [r["lr"] for r in rec["sweep"]] == [1e-3, 1e-2]
    chosen = min(rec["sweep"], key=lambda r: r["val_loss"])
    assert rec["lr"] == chosen["lr"]  # the learning rate with the lowest final valid loss is the one evaluated
    assert all(r["steps"] == 4 for r in rec["sweep"])  # 1 pretrain + 1 fine-tune epoch of 2 batches
    # the training time of the cell covers its training runs, not the dataset step before them
    assert rec["minutes"]["dataset_wall"] >= 0
    assert rec["minutes"]["train_wall"] >= sum(r["minutes"] for r in rec["sweep"] if not r["reused"]) * 0.99
    for part in ("next_step", "rollout_mean"):
        for metric in ("vrmse", "vrmse_well"):
            vals = rec[part][metric]
            assert {"h", "u", "v", "mean"} <= set(vals)  # scalar field and vector components (metrics.variable_names)
            assert all(math.isfinite(v) and v >= 0 for v in vals.values())
            assert vals["mean"] == pytest.approx(sum(vals[v] for v in ("h", "u", "v")) / 3)
    assert len(rec["curves"]["vrmse"]["mean"]) == 3
    assert rec["next_step"]["vrmse"]["mean"] == pytest.approx(rec["curves"]["vrmse"]["mean"][0])
    assert rec["rollout_mean"]["vrmse"]["mean"] == pytest.approx(sum(rec["curves"]["vrmse"]["mean"]) / 3)
    assert rec["commands"]["selected_train"].startswith("dandelion-train ")
    assert f"trainer.lr={rec['lr']}" in rec["commands"]["selected_train"]
    assert rec["commands"]["rollout"].startswith("dandelion-rollout ")
    assert {"torch", "torch_harmonics", "dandelion"} <= set(rec["versions"])
    assert rec["machine"]["cores"] >= 1
    # the sweep ran on this seed (the sweep seed): its cost is recorded here, once; the rollout's blow-ups by lead
    assert "sweep_cpu_seconds_on_seed" not in rec  # the sweep seed is lr_selection's, named once
    assert rec["lr_selection"]["sweep_seed"] == 0 and rec["sweep_cpu_seconds"] == pytest.approx(
        B._sum_known([r["train_cpu_seconds"] for r in rec["sweep"]])
    )
    assert len(rec["stability"]["unstable_by_lead"]) == 3 and rec["stability"]["n_forecasts"] > 0


def test_one_cell_then_skip_then_leaderboard(tiny_scale, tmp_path):
    cfg = tiny_scale
    out = B.benchmark(cfg)
    assert (out["ran"], out["skipped"]) == (2, 0)
    paths = {m: B.cell_path(cfg.scale.results_dir, "tiny_16x32", m, 0) for m in ("_pointwise_test", "sfno")}
    for m, p in paths.items():
        _check_cell_schema(json.loads(p.read_text()), m)
    assert not list((tmp_path / "results").rglob(".*.tmp"))  # atomic writes leave no temporary file

    # a second run skips finished cells and trains nothing
    mtime = {m: p.stat().st_mtime_ns for m, p in paths.items()}
    again = B.benchmark(cfg)
    assert (again["ran"], again["skipped"]) == (0, 2)
    assert {m: p.stat().st_mtime_ns for m, p in paths.items()} == mtime

    # a cell removed is re-run from the finished sweep runs (reused, not retrained)
    paths["sfno"].unlink()
    B.benchmark(cfg)
    rec = json.loads(paths["sfno"].read_text())
    assert all(r["reused"] for r in rec["sweep"])

    rec0 = json.loads(paths["_pointwise_test"].read_text())
    assert rec0["target"] == "increment" and rec0["trainer_resolved"]["target"] == "increment"

    res = LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": cfg.scale.results_dir, "plots": True}))
    md = (tmp_path / "results" / "leaderboard.md").read_text()
    assert res["n_cells"] == 2
    cells = LB.load_cells(cfg.scale.results_dir)
    sections = {
        "vrmse": md.split("## VRMSE, area-weighted")[1].split("##")[0],
        "vrmse_well": md.split("## VRMSE, unweighted")[1].split("##")[0],
    }
    for metric, text in sections.items():
        rows = {
            line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| model")
        }
        for col, part in enumerate(("next_step", "rollout_mean")):
            vals = {c["model"]: c[part][metric]["mean"] for c in cells}
            for m, v in vals.items():
                bold = all(v <= w for w in vals.values())  # the best of the column
                text = rows[m][col]
                assert text.startswith("**") == bold and text.strip("*").endswith(" ± n/a"), (metric, part, m)
                shown = text.strip("*").split(" ± ")[0]  # one seed: no spread
                assert len(shown.replace(".", "").lstrip("0")) >= 4, shown  # at least 4 significant figures
                assert float(shown) == pytest.approx(v, rel=1e-3), (metric, part, m)
    assert "dandelion-benchmark" in md and "dandelion-report target=leaderboard" in md
    assert "| *persistence (reference)* |" in md and "| *linear AR (reference)* |" in md
    ref = json.loads((tmp_path / "results" / "tiny_16x32" / "linear_ar.json").read_text())
    assert ref["fit"]["n_windows"] > 0 and math.isfinite(ref["next_step"]["vrmse"]["mean"])
    assert all(r["curve"] and r["curve"][-1]["step"] == r["steps"] for r in rec0["sweep"])  # validation curves are kept
    assert "training_curves_tiny_16x32" in res["plots"]
    assert "dandelion-train " in md and "dandelion-rollout " in md
    for p in res["plots"].values():
        assert p.endswith(".png") and (tmp_path / "results" / p.split("/")[-1]).stat().st_size > 0
    assert not any("error_vs_resolution" in k for k in res["plots"])  # one grid: nothing to plot against

    # every cell and reference records which data it was scored on; a cell scored on other data is flagged
    digest = B.data_digest(cfg.scale.datasets.tiny_16x32.path)
    assert digest is not None and {c["data_files_sha256"] for c in cells} == {digest} == {ref["data_files_sha256"]}
    assert "different versions of its data" not in md
    other = json.loads(paths["sfno"].read_text())
    paths["sfno"].write_text(json.dumps({**other, "data_files_sha256": "0" * 16}))
    LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": cfg.scale.results_dir, "plots": False}))
    assert "different versions of its data" in (tmp_path / "results" / "leaderboard.md").read_text()
    # a recorded equivalence of the two versions (benchmarks/grid/verify_references.py --equivalent-within)
    # turns it into a note
    eq = {
        "versions": [digest, "0" * 16],
        "max_relative_difference": {"persistence": 1e-9, "linear_ar": 3e-8},
        "tolerance": 1e-6,
    }
    # an equivalence of the earlier digest definition does not cover the current one
    B.write_json_atomic(
        cells_mod.equivalence_path(cfg.scale.results_dir, "tiny_16x32"),
        {"equivalences": [{**eq, "definition": "data_sha256"}]},
    )
    LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": cfg.scale.results_dir, "plots": False}))
    assert "different versions of its data" in (tmp_path / "results" / "leaderboard.md").read_text()
    B.write_json_atomic(
        cells_mod.equivalence_path(cfg.scale.results_dir, "tiny_16x32"),
        {"equivalences": [{**eq, "definition": "data_files_sha256"}]},
    )
    LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": cfg.scale.results_dir, "plots": False}))
    md = (tmp_path / "results" / "leaderboard.md").read_text()
    assert (
        "different versions of its data" not in md
        and "differ by at most 3.0e-08 relative (`tiny_16x32/data_equivalence.json`" in md
    )


def test_error_vs_resolution_plot_needs_two_grids(tmp_path):
    """The resolution plot exists for a family trained at two grids and is skipped at one."""

    def entry(nlat, v):
        stats = {"vrmse": {"mean": {"mean": v, "std": 0.1 * v, "n": 3}}}
        return {"nlat": nlat, "nlon": 2 * nlat, "dataset": "fam", "next_step": stats, "rollout_mean": stats}

    agg = {
        "fam_16x32": {"dandelion": entry(16, 0.2), "sfno": entry(16, 0.3)},
        "fam_32x64": {"dandelion": entry(32, 0.1), "sfno": entry(32, 0.4)},
    }
    p = LB.plot_error_vs_resolution(agg, "fam", tmp_path / "two.png")
    assert p is not None and p.stat().st_size > 0
    one = {"fam_16x32": agg["fam_16x32"]}
    assert LB.plot_error_vs_resolution(one, "fam", tmp_path / "one.png") is None
    assert not (tmp_path / "one.png").exists()


@pytest.mark.parametrize(
    "values, best",
    [
        ({"a": 1.0, "b": 2.0}, {"a"}),
        ({"a": 1.0, "b": 1.0, "c": 3.0}, {"a", "b"}),
        ({"a": float("nan"), "b": 2.0}, {"b"}),
        ({"a": float("nan")}, set()),
    ],
)
def test_bold_best(values, best):
    assert LB.bold_best(values) == best


def test_aggregate_mean_and_sample_std():
    def cell(seed, v):
        s = {"vrmse": {"h": v, "mean": v}, "vrmse_well": {"h": v, "mean": v}}
        return {
            "dataset_key": "d",
            "model": "m",
            "seed": seed,
            "n_parameters": 1,
            "preset": "tiny",
            "lr": 1e-3,
            "steps": 1,
            "minutes": {"train_wall": 0.0},
            "nlat": 8,
            "nlon": 16,
            "dataset": "d",
            "next_step": s,
            "rollout_mean": s,
            "curves": {"vrmse": {"mean": [v]}},
        }

    agg = LB.aggregate([cell(0, 1.0), cell(1, 3.0)])
    st = agg["d"]["m"]["next_step"]["vrmse"]["mean"]
    assert st["mean"] == pytest.approx(2.0) and st["std"] == pytest.approx(math.sqrt(2.0)) and st["n"] == 2


@pytest.mark.parametrize(
    "only, error",
    [
        ({"datasets": ["nope"]}, "only.datasets"),
        ({"models": ["nope"]}, "only.models"),
    ],
)
def test_only_names_the_fix(only, error):
    cfg = B.compose("benchmark", ["scale=cpu"])
    OmegaConf.set_struct(cfg, False)
    cfg.only = {**OmegaConf.to_container(cfg.only), **only}
    with pytest.raises(ValueError, match=error):
        B.cells(cfg)


def test_missing_results_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="dandelion-benchmark scale="):
        LB.load_cells(tmp_path)


@pytest.mark.parametrize("scale", ["cpu", "full"])
def test_protocols_compose(scale):
    cfg = B.compose("benchmark", [f"scale={scale}"])
    s = cfg.scale
    assert s.name == scale and s.trainer.n_in == 4 and s.evaluation.n_steps == 20
    from dandelion.baselines.table import BENCHMARK_MODELS

    assert set(s.models) == set(BENCHMARK_MODELS) and len(s.lr_sweep) >= 2  # every model the benchmark compares
    assert s.trainer.finetune.epochs >= 1  # the autoregressive fine-tune is part of the protocol
    grid = B.cells(cfg)
    specs = [B.dataset_spec(cfg, k) for k in s.datasets]  # a key may narrow the models and seeds (64x128 keys)
    assert len(grid) == sum(len(sp["models"] or s.models) * len(sp["seeds"] or s.seeds) for sp in specs)
    for sp in specs:
        assert set(sp["models"] or []) <= set(s.models)
    # every dataset of the suite is on the scale, and each key's overrides are keys of its dataset config
    assert {str(s.datasets[k].dataset) for k in s.datasets} >= {
        "galewsky",
        "cahn_hilliard",
        "chained_turbulence",
        "held_suarez",
        "shock_caps",
        "global_ocean",
    }
    for key in s.datasets:
        spec = B.dataset_spec(cfg, key)
        over = [f"dataset={spec['dataset']}", *B.flatten_overrides(spec["overrides"], "dataset.")]
        dcfg = B.compose("generate", over).dataset
        assert key.endswith(f"_{dcfg.nlat}x{dcfg.nlon}"), (
            f"{key}: the key names another grid than {dcfg.nlat}x{dcfg.nlon}"
        )


def test_changed_protocol_makes_cells_stale_and_reuses_only_matching_runs(tiny_scale):
    """A cell made under other settings is not counted as finished; the trained runs are reused only when
    the training setup itself is unchanged."""
    cfg = tiny_scale
    cfg.scale.models = ["_pointwise_test"]
    B.benchmark(cfg)
    path = B.cell_path(cfg.scale.results_dir, "tiny_16x32", "_pointwise_test", 0)
    assert [c["state"] for c in B.cells(cfg)] == ["finished"]
    # the scale's own leaderboard shows only cells of the current protocol and lists the others
    other = path.with_name("seed1.json")
    other.write_text(json.dumps({**json.loads(path.read_text()), "seed": 1, "protocol_hash": "0" * 12}))
    assert LB.leaderboard(OmegaConf.create({"scale": cfg.scale, "plots": False}))["n_cells"] == 1
    md = (Path(cfg.scale.results_dir) / "leaderboard.md").read_text()
    assert "`tiny_16x32: 1 stale cell (_pointwise_test)`: made under another protocol" in md
    other.unlink()

    # evaluation changed: the cell is stale, its sweep runs are reused (same training setup)
    cfg.scale.evaluation.n_steps = 2
    assert [c["state"] for c in B.cells(cfg)] == ["stale"]
    with pytest.raises(FileNotFoundError, match="another protocol"):
        LB.leaderboard(OmegaConf.create({"scale": cfg.scale, "plots": False}))
    out = B.benchmark(cfg)
    assert out["ran"] == 1
    rec = json.loads(path.read_text())
    assert all(r["reused"] for r in rec["sweep"]) and len(rec["curves"]["vrmse"]["mean"]) == 2
    ref = json.loads((path.parents[1] / "persistence.json").read_text())
    assert ref["protocol_hash"] == rec["protocol_hash"]  # the reference was remade with the new evaluation

    # a cell made when configs/trainer/default.yaml had another default (the scale's settings alike): stale
    made_before = dict(rec, trainer_resolved={**rec["trainer_resolved"], "betas": [0.8, 0.99]})
    path.write_text(json.dumps(made_before))
    assert [c["state"] for c in B.cells(cfg)] == ["stale"]

    # a trainer setting changed: stale, and the runs are trained again
    cfg.scale.trainer.target = "frame"
    assert [c["state"] for c in B.cells(cfg)] == ["stale"]
    B.benchmark(cfg)
    rec = json.loads(path.read_text())
    assert not any(r["reused"] for r in rec["sweep"]) and rec["target"] == "frame"


def test_pending_lists_missing_datasets_and_missing_model_seeds(tmp_path):
    """Every '–' of the leaderboard has a line saying why: a dataset without cells, and a model short of seeds."""
    scale_cfg = OmegaConf.create(
        {
            "results_dir": str(tmp_path),
            "models": ["x", "y"],
            "seeds": [0, 1, 2],
            "datasets": {"a": {"pending_reason": "slow"}, "b": {}},
        }
    )
    agg = {"a": {"x": {"seeds": [0, 1, 2]}, "y": {"seeds": [0]}}}
    assert LB._pending(scale_cfg, tmp_path, agg) == {"a: y (seeds 1, 2)": "slow", "b": "not run yet"}
    assert LB._pending(scale_cfg, tmp_path / "elsewhere", agg) == {}
    # a key that narrows the models and seeds is short of those only
    scale_cfg.datasets.b = {"models": ["y"], "seeds": [0, 1]}
    agg["b"] = {"y": {"seeds": [0]}}
    assert LB._pending(scale_cfg, tmp_path, agg) == {"a: y (seeds 1, 2)": "slow", "b: y (seed 1)": "not run yet"}
    # a gap that committed results of an earlier protocol fill says a rerun is pending; a partial fill does not
    stale = [{"dataset_key": "a", "model": "y", "seed": k} for k in (1, 2)] + [
        {"dataset_key": "b", "model": "x", "seed": 1}
    ]
    out = LB._pending(scale_cfg, tmp_path, agg, stale)
    assert out["a: y (seeds 1, 2)"].startswith("rerun pending") and out["b: y (seed 1)"] == "not run yet"
    assert LB._pending(scale_cfg, tmp_path, agg, stale[:1])["a: y (seeds 1, 2)"] == "slow"


def test_budget_study_multiplies_both_phases_and_resumes(tiny_scale, tmp_path):
    """dandelion-budget: the x2 run trains twice the cell's steps in each phase at the cell's rate, a second call
    retrains nothing, a record made under other settings is retrained, and a model without a finished cell is
    refused (naming the command) before anything trains."""
    from dandelion.benchmarks.budget import study as BU
    from dandelion.cli.common import UsageError

    cfg = tiny_scale
    cfg.update(
        {
            "datasets": ["tiny_16x32"],
            "models": ["_pointwise_test"],
            "seed": 0,
            "multipliers": [2],
            "flat_tolerance": 0.05,
            "only": {"datasets": None, "models": None},
        }
    )
    cfg.scale.models = ["_pointwise_test"]
    B.benchmark(cfg)
    cell = json.loads(B.cell_path(cfg.scale.results_dir, "tiny_16x32", "_pointwise_test", 0).read_text())
    x1, x2 = sorted(BU.budget(cfg)["records"], key=lambda r: r["multiplier"])
    assert (x1["multiplier"], x2["multiplier"]) == (1, 2)
    assert x2["lr"] == cell["lr"] and x2["steps"] == 2 * cell["steps"]
    phases = [c["phase"] for c in x2["curve"]]
    assert phases.count("finetune") == 2 * [c["phase"] for c in cell["run"]["curve"]].count("finetune") >= 2
    words = x2["commands"]["train"].split()
    assert (
        "trainer.epochs=2" in words and "trainer.finetune.epochs=2" in words and "trainer.warmup_fraction=0.25" in words
    )
    assert x2["run_dir"] != cell["run"]["run_dir"]  # its own run folder: the cell's run is not overwritten
    assert all(math.isfinite(x2[k]) and x2[k] >= 0 for k in ("val_loss", "next_step", "rollout_mean"))
    stored = tmp_path / "results" / "budget" / "tiny_16x32" / "_pointwise_test" / "seed0_x2.json"
    mtime = stored.stat().st_mtime_ns
    BU.budget(cfg)
    assert stored.stat().st_mtime_ns == mtime  # finished: reused, not retrained
    # a record scored before the stability record existed gets it from its checkpoint, without retraining
    first = json.loads(stored.read_text())
    assert first["stability"]["n_forecasts"] > 0
    stored.write_text(json.dumps({k: v for k, v in first.items() if k != "stability"}))
    BU.budget(cfg)
    again = json.loads(stored.read_text())
    assert again["stability"] == first["stability"] and "stability_added_utc" in again
    assert again["curve"] == first["curve"] and again["next_step"] == pytest.approx(first["next_step"], rel=1e-6)
    md = (tmp_path / "results" / "budget" / "budget.md").read_text()
    assert "| _pointwise_test | 0 |" in md and "| x1 |" in md and "| x2 |" in md
    assert (tmp_path / "results" / "budget_tiny_16x32.png").exists()
    board = LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": cfg.scale.results_dir, "plots": False}))
    assert (
        "](budget/budget.md)" in Path(board["markdown"]).read_text()
    )  # the leaderboard says where the budget study is

    # a record from another cell protocol is not reused: it is made again (its unchanged training run is reused
    # from the run folder, whose name fingerprints the training setup, and scored again)
    stale = json.loads(stored.read_text())
    stored.write_text(json.dumps({**stale, "cell_protocol_hash": "0" * 12}))
    BU.budget(cfg)
    assert json.loads(stored.read_text())["cell_protocol_hash"] == cell["protocol_hash"]

    # another peak rate: its own record and run, x1 not copied from the cell
    cfg.lr = cell["lr"] / 10
    (other,) = BU.budget(cfg)["records"]
    assert other["lr"] == pytest.approx(cell["lr"] / 10) and other["multiplier"] == 2 and other["cell_lr"] == cell["lr"]
    assert f"trainer.lr={other['lr']}" in other["commands"]["train"].split()
    assert stored.with_name(f"seed0_x2_{cells_mod.lr_tag(other['lr'])}.json").exists()
    cfg.lr = None

    # a missing cell stops the command before any training (no x3 run of the finished model either)
    cfg.scale.models = ["_pointwise_test", "sfno"]
    cfg.models, cfg.multipliers = ["_pointwise_test", "sfno"], [3]
    with pytest.raises(UsageError, match="dandelion-benchmark"):
        BU.budget(cfg)
    assert not stored.with_name("seed0_x3.json").exists()


def test_budget_table_marks_divergence_and_compares_with_the_last_finite_budget(tmp_path):
    from dandelion.benchmarks.budget import study as BU

    def rec(m, loss):
        return {
            "dataset_key": "k",
            "model": "m",
            "seed": 0,
            "multiplier": m,
            "lr": 1e-3,
            "steps": 10 * m if loss == loss else -1,
            "val_loss": loss,
            "next_step": loss,
            "rollout_mean": loss,
            "curve": [],
        }

    md = BU.render(tmp_path, [rec(1, 1.0), rec(2, math.nan), rec(4, 0.5), rec(8, 0.49), rec(16, 0.6)], 0.05).read_text()
    rows = [line for line in md.splitlines() if line.startswith("| m |")]
    assert "diverged" in rows[1]
    assert "-50.0 %" in rows[2] and rows[2].endswith("| no |")  # against x1, the last finite budget
    assert rows[3].endswith("| yes |") and rows[4].endswith("| rose |")  # -2 %: flat; +22 %: worse, not a plateau


def test_valid_over_train_reads_the_last_pretraining_epochs_only(tmp_path):
    from dandelion.benchmarks.budget import study as BU

    def ep(phase, train, val):
        return {"step": 0, "phase": phase, "train_loss": train, "val_loss": val}

    # early epochs (ratio 1), five late ones (ratio 4, one with a NaN validation left out),
    # then the fine-tune (ratio 100)
    curve = (
        [ep("pretrain", 1.0, 1.0)] * 10
        + [ep("pretrain", 0.5, 2.0)] * 5
        + [ep("pretrain", 0.5, math.nan)]
        + [ep("finetune", 0.01, 1.0)] * 3
    )
    assert BU.valid_over_train({"curve": curve}) == pytest.approx(4.0)
    # over 15 epochs: the ratio of the mean losses, (10 x 1 + 5 x 2) / (10 x 1 + 5 x 0.5),
    # not the mean of the ratios (2)
    assert BU.valid_over_train({"curve": curve}, n_epochs=15) == pytest.approx(20 / 12.5)
    assert BU.valid_over_train({"curve": [ep("finetune", 1.0, 1.0)]}) is None
    rec = {
        "dataset_key": "k",
        "model": "m",
        "seed": 0,
        "multiplier": 1,
        "lr": 1e-3,
        "steps": 10,
        "val_loss": 2.0,
        "next_step": 0.1,
        "rollout_mean": 0.2,
        "curve": curve,
    }
    row = next(line for line in BU.render(tmp_path, [rec], 0.05).read_text().splitlines() if line.startswith("| m |"))
    assert "| 4 |" in row


@pytest.mark.parametrize(
    "versions, pairs, ok",
    [
        ({"a"}, [], True),
        ({"a", "b"}, [], False),
        ({"a", "b"}, [("a", "b")], True),
        ({"a", "c"}, [("a", "b"), ("b", "c")], True),  # linked through b
        ({"a", "b", "c"}, [("a", "b")], False),
    ],
)
def test_data_versions_are_equivalent_only_when_linked(versions, pairs, ok):
    assert cells_mod.equivalent(versions, [{"versions": list(p)} for p in pairs]) is ok


def test_max_relative_difference_of_two_records():
    old = {"next_step": {"vrmse": {"h": 2.0, "mean": 1.0}}, "rollout_mean": {"vrmse": {"h": 4.0, "mean": 3.0}}}
    new = {"next_step": {"vrmse": {"h": 2.0, "mean": 1.0}}, "rollout_mean": {"vrmse": {"h": 4.0, "mean": 3.3}}}
    assert cells_mod.max_relative_difference(old, old) == 0
    assert cells_mod.max_relative_difference(old, new) == pytest.approx(0.1)


def test_data_digest_covers_the_data_files_not_the_provenance(make_tiny_dataset, tmp_path):
    """A regeneration by another command (dataset.yaml differs) keeps the digest; a changed trajectory file
    changes it."""
    data = make_tiny_dataset(
        tmp_path / "data", nlat=8, nlon=16, n_frames=4, splits={"train": [0], "valid": [1], "test": [2]}
    )
    ck = data / "checksums.sha256"
    before = B.data_digest(data)
    lines = ck.read_text().splitlines()
    assert before is not None and any(line.endswith(".h5") for line in lines)
    splits = f"{'3' * 64}  splits.json"
    ck.write_text("\n".join(lines + [splits]) + "\n")
    with_splits = B.data_digest(data)
    assert with_splits != before  # the splits are data
    extra = [f"{'1' * 64}  dataset.yaml", f"{'2' * 64}  stats.yaml"]
    ck.write_text("\n".join(extra + lines + [splits]) + "\n")
    assert B.data_digest(data) == with_splits  # the provenance and derived statistics are not
    sizes = [f"# size {100 + i}  {line.split(None, 1)[1]}" for i, line in enumerate(lines) if not line.startswith("#")]
    ck.write_text("\n".join([x for x in lines if not x.startswith("#")] + [splits] + sizes) + "\n")
    assert B.data_digest(data) == with_splits  # nor are the file sizes (the same bytes, listed with or without them)
    ck.write_text("\n".join(lines) + "\n")
    h5 = next(i for i, line in enumerate(lines) if line.endswith(".h5"))
    lines[h5] = "0" * 64 + lines[h5][64:]
    ck.write_text("\n".join(lines) + "\n")
    assert B.data_digest(data) != before
