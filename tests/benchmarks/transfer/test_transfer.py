"""Zero-shot resolution transfer (dandelion-transfer): fine test sets, transferred models, resumable results.

Physics: a test set at the coarse band limit on a finer grid holds the coarse fields sampled finer (spectral
interpolation of the coarse data agrees to float32 storage precision); the initial state does not depend on
the band limit; Galewsky's hyperviscosity is held fixed in physical units. Models: every built-in model's
weights run at a finer grid (finite forecasts) with the checkpoint's normalisation; a resolution-dependent
model without a transfer rule is reported with the reason. Pipeline: one JSON per cell and fine dataset,
skipped when finished; the leaderboard section.
"""

import json
import math
from pathlib import Path

import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
import torch
from omegaconf import OmegaConf
from torch_harmonics import InverseRealSHT, InverseRealVectorSHT, RealSHT, RealVectorSHT

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid.cells import _digest, load_cells
from dandelion.benchmarks.grid.references import persistence_reference
from dandelion.benchmarks.leaderboard import render as LB
from dandelion.benchmarks.transfer import zero_shot as T
from dandelion.benchmarks.transfer.report import HEADING
from dandelion.checkpoint import save_checkpoint
from dandelion.datasets.folder import load_metadata
from dandelion.datasets.galewsky import GalewskyScenario
from dandelion.datasets.generate import generate
from dandelion.datasets.storage import open_trajectory
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.evaluation.rollout import evaluate
from dandelion.registry import build_model


def _generate(path, dataset: dict, splits=None):
    generate(
        OmegaConf.create(
            {
                "dataset": {**dataset, "path": str(path)},
                "device": "cpu",
                "batch_size": 4,
                "progress": False,
                "splits": splits,
            }
        )
    )
    return path


def _frames(path, tid, field):
    split = next(s for s in ("train", "valid", "test") if (path / s / f"traj_{tid:06d}.h5").exists())
    with open_trajectory(path / split / f"traj_{tid:06d}.h5") as f:
        group = "t0_fields" if field in f["t0_fields"] else "t1_fields"
        return torch.tensor(f[group][field][0], dtype=torch.float64)


def test_coarse_band_is_the_coarse_data_sampled_finer_and_the_initial_state_is_band_limit_free(tmp_path):
    coarse_cfg = {
        "name": "cahn_hilliard",
        "nlat": 16,
        "nlon": 32,
        "lmax": 12,
        "n_trajectories": 10,
        "n_frames": 3,
        "dt_frame": 1.0,
    }
    coarse = _generate(tmp_path / "coarse", coarse_cfg, splits=["test"])
    meta = load_metadata(coarse)
    tid = json.loads((coarse / "splits.json").read_text())["test"][0]
    a = T.fine_dataset_config(meta, 32, 64, "coarse_band")
    b = T.fine_dataset_config(meta, 32, 64, "fine_band")
    assert (a["lmax"], a["output_lmax"], b["lmax"]) == (12, 8, 24)  # solver lmax kept / stored band of 16x32 / scaled
    fa, fb = _generate(tmp_path / "a", a, ["test"]), _generate(tmp_path / "b", b, ["test"])
    assert (
        json.loads((fa / "splits.json").read_text())["test"] == json.loads((coarse / "splits.json").read_text())["test"]
    )
    assert load_metadata(fa)["output_lmax"] == 8 and load_metadata(fa)["lmax"] == 8 and load_metadata(fb)["lmax"] == 16
    L = load_metadata(coarse)["lmax"]
    analysis = RealSHT(16, 32, lmax=L, mmax=L, grid="equiangular").double()
    up = InverseRealSHT(32, 64, lmax=L, mmax=L, grid="equiangular").double()
    c = _frames(coarse, tid, "phi")
    interp = up(analysis(c))
    err = (interp - _frames(fa, tid, "phi")).abs().max() / c.abs().max()
    assert err < 1e-5, f"coarse-band test set differs from the spectrally interpolated coarse data by {err:.2e}"
    # frame 0 is the initial state: its degrees below the coarse band limit do not depend on the band limit
    fine0 = RealSHT(32, 64, lmax=L, mmax=L, grid="equiangular").double()(_frames(fb, tid, "phi")[0])
    assert torch.allclose(fine0, analysis(c[0]), atol=1e-6 * float(c[0].abs().max()))
    assert (_frames(fb, tid, "phi")[1:] - _frames(fa, tid, "phi")[1:]).abs().max() > 1e-4  # new small scales do act


def test_galewsky_fine_band_keeps_the_hyperviscosity_in_physical_units():
    coarse = GalewskyScenario({"nlat": 32, "nlon": 64, "lmax": 32, "n_trajectories": 20})
    meta = {**coarse.describe(), "config": {"dataset": dict(coarse.cfg)}}
    nu4 = coarse.solver_settings()["hyperviscosity_m4_per_s"]
    for nlat in (64, 128):
        fine = GalewskyScenario(T.fine_dataset_config(meta, nlat, 2 * nlat, "fine_band"))
        assert fine.solver_lmax == nlat
        assert fine.solver_settings()["hyperviscosity_m4_per_s"] == pytest.approx(nu4, rel=1e-12)
        band = GalewskyScenario(T.fine_dataset_config(meta, nlat, 2 * nlat, "coarse_band"))
        assert band.solver_settings() == coarse.solver_settings() and band.stored_lmax == coarse.stored_lmax


@pytest.fixture(scope="module")
def solid_pair(tmp_path_factory):
    """A 16x32 solid-body dataset and its 32x64 fine-band test set (analytic, fractions of a second)."""
    root = tmp_path_factory.mktemp("solid")
    coarse = _generate(root / "coarse", {"name": "solid_body", "nlat": 16, "nlon": 32, "n_frames": 8})
    fine = _generate(root / "fine", T.fine_dataset_config(load_metadata(coarse), 32, 64, "fine_band"), ["test"])
    return coarse, fine


def _checkpoint(path, name, coarse, **overrides):
    data = WindowDataset(coarse, "train", n_in=4, n_out=1)
    C = data.layout.n_channels
    model = build_model(name, "tiny", 4 * C, C, 16, 32, "equiangular", **overrides)
    spec = {"name": name, "preset": "tiny", "in_channels": 4 * C, "out_channels": C, "overrides": overrides}
    layout = data.layout.to_dict()
    return save_checkpoint(
        path,
        model=model,
        config={"trainer": {"n_in": 4}},
        stats=layout["stats"],
        grid=data.grid.to_dict(),
        step=0,
        epoch=0,
        extra={"model_spec": spec, "layout": layout, "target": "increment", "inputs": "differences"},
    )


@pytest.mark.parametrize("name", ["dandelion", "sfno", "disco", "flower2d"])
def test_every_model_runs_at_the_finer_grid_with_the_checkpoint_statistics(solid_pair, tmp_path, name):
    coarse, fine = solid_pair
    ckpt = _checkpoint(tmp_path / "last.pt", name, coarse)
    data = WindowDataset(fine, "test", n_in=4, n_out=1)
    fc, rule = T.transfer_forecaster(ckpt, data)
    assert rule["transferable"] and fc.grid.shape == (32, 64)
    assert (
        fc.layout.stats == WindowDataset(coarse, "train").layout.stats != data.layout.stats
    )  # the training set's, not the test set's
    if name == "sfno":
        assert (
            fc.model.lmax == build_model("sfno", "tiny", 12, 3, 16, 32).lmax
        )  # the trained modes, not the finer grid's
        assert fc.model.lmax < build_model("sfno", "tiny", 12, 3, 32, 64).lmax
    if name == "dandelion":  # the trained pooling band limits, not the finer level grids' (which double)
        trained = build_model("dandelion", "tiny", 12, 3, 16, 32).pool_lmax
        assert list(fc.model.pool_lmax) == list(trained) and rule["overrides"] == {"pool_lmax": list(trained)}
        assert all(a < b for a, b in zip(trained, build_model("dandelion", "tiny", 12, 3, 32, 64).pool_lmax))
        # band limits the checkpoint was trained with (an override) are the ones kept
        ckpt4 = _checkpoint(tmp_path / "pool4.pt", name, coarse, pool_lmax=[4])
        fc4, rule4 = T.transfer_forecaster(ckpt4, data)
        assert fc4.model.pool_lmax == [4] and rule4["overrides"] == {"pool_lmax": [4]}
    if name == "disco":
        assert fc.model.theta_cutoff == build_model("disco", "tiny", 12, 3, 16, 32).theta_cutoff  # radians kept
    res = evaluate(fc, data, n_steps=2, batch_size=4, spectra_leads=[], sample=False)["results"]
    assert all(math.isfinite(v) for v in res["summary"]["mean_1_2"]["vrmse"].values())


def test_a_resolution_dependent_model_without_a_rule_is_reported_with_the_reason(solid_pair, tmp_path):
    coarse, fine = solid_pair
    ckpt = _checkpoint(tmp_path / "last.pt", "_pointwise_test", coarse, resolution_dependent=True)
    fc, rule = T.transfer_forecaster(ckpt, WindowDataset(fine, "test", n_in=4, n_out=1))
    assert fc is None and not rule["transferable"]
    assert "resolution-dependent" in rule["reason"] and "TRANSFER_RULES" in rule["reason"]


@pytest.fixture
def tiny_transfer(tmp_path):
    """One finished cell (pointwise test model, a few steps) on a generated 16x32 solid-body dataset, and the transfer
    config."""
    cfg = B.compose(
        "transfer",
        [
            "scale=cpu",
            f"scale.results_dir={tmp_path / 'results'}",
            f"scale.work_dir={tmp_path / 'work'}",
            "scale.models=[_pointwise_test]",
            "scale.seeds=[0]",
            "scale.lr_sweep=[1e-2]",
            "scale.lr_ladder=[1e-2]",
            "scale.plugins=[tiny_model]",
            "scale.trainer.epochs=1",
            "scale.trainer.max_batches_per_epoch=2",
            "scale.trainer.batch_size=2",
            "scale.trainer.finetune.epochs=1",
            "scale.trainer.warmup_steps=1",
            "scale.trainer.val_max_batches=1",
            "scale.evaluation.n_steps=3",
            "scale.evaluation.init_stride=2",
            "scale.evaluation.batch_size=4",
        ],
    )
    OmegaConf.set_struct(cfg, False)
    cfg.scale.datasets = {
        "tiny_16x32": {"dataset": "solid_body", "overrides": {"nlat": 16, "nlon": 32, "n_frames": 10}}
    }
    cfg.transfer.datasets = {"tiny_16x32": {"grids": ["32x64"]}}
    B.run_cell(cfg, "tiny_16x32", "_pointwise_test", 0)
    persistence_reference(cfg, "tiny_16x32", B.ensure_dataset(cfg, "tiny_16x32"))
    return cfg


def test_transfer_writes_one_json_per_cell_and_dataset_and_resumes(tiny_transfer, monkeypatch):
    cfg = tiny_transfer
    first = T.transfer(cfg)
    assert (first["ran"], first["skipped"]) == (2, 0)
    paths = [
        T.transfer_path(cfg.scale.results_dir, f"tiny_16x32_to_32x64_{v}", "_pointwise_test", 0) for v in T.VARIANTS
    ]
    recs = [json.loads(p.read_text()) for p in paths]
    for rec in recs:
        assert rec["transferable"] and rec["finite"] and (rec["nlat"], rec["nlon"]) == (32, 64)
        assert rec["checkpoint"].endswith("last.pt") and rec["evaluation"]["n_steps"] == 3
        assert rec["normalisation"].startswith("checkpoint")
        assert rec["data_files_sha256"] is not None and rec["data_files_sha256"] == B.data_digest(rec["dataset_path"])
    stamps = [p.stat().st_mtime_ns for p in paths]
    again = T.transfer(cfg)
    assert (again["ran"], again["skipped"]) == (0, 2)
    assert [p.stat().st_mtime_ns for p in paths] == stamps  # finished results are not rewritten
    paths[0].write_text("{torn")  # a torn file is evaluated again
    assert T.transfer(cfg)["ran"] == 1
    # a model without a rule revision keeps the hash of the first schema
    # (the committed records of such models stay current)
    cell = load_cells(cfg.scale.results_dir)[0]
    fd = T.fine_datasets(cfg, "tiny_16x32")[0]
    meta = load_metadata(fd["path"])
    first = _digest(
        {
            "cell": cell.get("protocol_hash"),
            "cell_finished": cell.get("finished_utc"),
            "checkpoint": str(T.selected_checkpoint(cell)),
            "fine_fingerprint": meta.get("fingerprint"),
            "evaluation": cell.get("evaluation"),
            "schema": T.TRANSFER_SCHEMA,
        }
    )
    assert T._transfer_hash(cell, fd, meta) == first
    assert set(T.RULE_REVISIONS) <= set(T.TRANSFER_RULES)  # a revision names a rule
    # a model's transfer rule revised: its records are stale, and only its records
    monkeypatch.setitem(T.RULE_REVISIONS, "_pointwise_test", "a later rule")
    assert (T.transfer(cfg)["ran"], T.transfer(cfg)["ran"]) == (2, 0)
    monkeypatch.setitem(T.RULE_REVISIONS, "another_model", "its own revision")
    assert T.transfer(cfg)["ran"] == 0
    res = LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": cfg.scale.results_dir, "plots": True}))
    md = open(res["markdown"]).read()
    assert HEADING in md and "16x32 (trained)" in md and "32x64 fine band" in md
    assert md.index(HEADING) < md.index("## Training")
    assert "transfer_tiny_16x32" in res["plots"]
    assert "*persistence (reference)*" in md
    # the coarse-band test set holds the coarse fields sampled finer: persistence scores the same (exact quadrature)
    results = Path(cfg.scale.results_dir)
    coarse = json.loads((results / "tiny_16x32" / "persistence.json").read_text())
    band = json.loads((results / "transfer" / "tiny_16x32_to_32x64_coarse_band" / "persistence.json").read_text())
    for part in ("next_step", "rollout_mean"):
        assert band[part]["vrmse"]["mean"] == pytest.approx(coarse[part]["vrmse"]["mean"], rel=1e-4)


def test_cli_refuses_a_dataset_without_transfer_settings_in_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        T.main(["only.datasets=[galewsky_3x64]"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert "only.datasets" in err and "galewsky_32x64" in err


def test_generate_refuses_an_unknown_split(tmp_path):
    with pytest.raises(ValueError, match="splits"):
        _generate(tmp_path / "x", {"name": "solid_body"}, splits=["tset"])
    assert not (tmp_path / "x").exists()


def test_galewsky_coarse_band_velocity_is_the_coarse_velocity_sampled_finer(tmp_path):
    """The vector field too: the coarse velocity's vector-harmonic synthesis at the finer grid is the coarse-band
    velocity."""
    coarse = _generate(
        tmp_path / "coarse",
        {
            "name": "galewsky",
            "nlat": 16,
            "nlon": 32,
            "lmax": 16,
            "n_trajectories": 10,
            "n_frames": 3,
            "spinup_days": 0.25,
        },
        splits=["test"],
    )
    fine = _generate(tmp_path / "a", T.fine_dataset_config(load_metadata(coarse), 32, 64, "coarse_band"), ["test"])
    tid = json.loads((coarse / "splits.json").read_text())["test"][0]
    L = load_metadata(coarse)["lmax"]

    def colat_lon(uv):  # (T, nlat, nlon, 2) eastward/northward -> (T, 2, nlat, nlon) colatitude/longitude components
        return torch.stack([-uv[..., 1], uv[..., 0]], 1)

    c, f = colat_lon(_frames(coarse, tid, "velocity")), colat_lon(_frames(fine, tid, "velocity"))
    up = InverseRealVectorSHT(32, 64, lmax=L, mmax=L, grid="equiangular").double()(
        RealVectorSHT(16, 32, lmax=L, mmax=L, grid="equiangular").double()(c)
    )
    assert (up - f).abs().max() / f.abs().max() < 1e-5


def test_finite_volume_coarse_cells_are_the_same_solver_run_and_fine_cells_refine_it(tmp_path):
    """Shock caps (finite volume, no band limit): the coarse-cells test set on a finer grid is the coarse solver run
    remapped there (the depth's integral over the remap's cells, i.e. the mass, equals the coarse set's frame by frame
    to float32 storage precision); the fine-cells set runs the solver on cells refined with the grid (ny doubled), which
    conserves the same mass up to the initial cell averages but resolves other fields."""
    from dandelion.solvers.fv_geometry import CalhounHelzelGrid
    from dandelion.solvers.fv_remap import ConservativeRemap
    from dandelion.sphere import SphereGrid

    coarse_cfg = {
        "name": "shock_caps",
        "nlat": 8,
        "nlon": 16,
        "K": [4],
        "delta": [1.0],
        "seeds": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        "n_frames": 4,
    }
    coarse = _generate(tmp_path / "coarse", coarse_cfg, splits=["test"])
    meta = load_metadata(coarse)
    a, b = T.fine_dataset_config(meta, 16, 32, "coarse_band"), T.fine_dataset_config(meta, 16, 32, "fine_band")
    assert (a["ny"], b["ny"]) == (8, 16) and a.get("lmax") is None and "output_lmax" not in a
    fa, fb = _generate(tmp_path / "a", a, ["test"]), _generate(tmp_path / "b", b, ["test"])
    assert (
        T.solver_resolution(load_metadata(fa)) == "8x16 cells"
        and T.solver_resolution(load_metadata(fb)) == "16x32 cells"
    )
    tid = json.loads((coarse / "splits.json").read_text())["test"][0]

    def mass(path, nlat, ny):
        return ConservativeRemap(CalhounHelzelGrid(ny), SphereGrid(nlat, 2 * nlat, "equiangular")).integral(
            _frames(path, tid, "h")
        )

    m0, ma, mb = mass(coarse, 8, 8), mass(fa, 16, 8), mass(fb, 16, 16)
    assert float(((ma - m0) / m0).abs().max()) < 1e-6  # the same run, stored finer
    assert float(((mb - m0) / m0).abs().max()) < 1e-2 and float(((mb - mb[0]) / mb[0]).abs().max()) < 1e-6  # conserved
    ha, hb = _frames(fa, tid, "h"), _frames(fb, tid, "h")
    assert float((hb[1:] - ha[1:]).abs().max()) > 1e-3 * float(ha.abs().max())  # refined cells resolve other fields


def test_a_masked_model_gets_the_finer_grids_own_mask(make_tiny_dataset, tmp_path):
    coarse = make_tiny_dataset(tmp_path / "c", nlat=9, nlon=16, masked=True)
    fine = make_tiny_dataset(tmp_path / "f", nlat=17, nlon=32, masked=True)
    data = WindowDataset(coarse, "train", n_in=4, n_out=1)
    C = data.layout.n_channels
    model = build_model("dandelion", "tiny", 4 * C + 1, C, 9, 16, "equiangular")
    spec = {"name": "dandelion", "preset": "tiny", "in_channels": 4 * C + 1, "out_channels": C, "overrides": {}}
    layout = data.layout.to_dict()
    ckpt = save_checkpoint(
        tmp_path / "last.pt",
        model=model,
        config={"trainer": {"n_in": 4}},
        stats=layout["stats"],
        grid=data.grid.to_dict(),
        step=0,
        epoch=0,
        extra={"model_spec": spec, "layout": layout, "target": "increment", "inputs": "differences", "wet": data.wet},
    )
    fdata = WindowDataset(fine, "test", n_in=4, n_out=1)
    fc, rule = T.transfer_forecaster(ckpt, fdata)
    assert rule["transferable"] and torch.equal(fc.wet, fdata.wet) and fc.wet.shape == (17, 32)
    res = evaluate(fc, fdata, n_steps=2, batch_size=4, spectra_leads=[], sample=False)["results"]
    assert all(math.isfinite(v) for v in res["summary"]["mean_1_2"]["vrmse"].values())
    with pytest.raises(ValueError, match="wet mask"):
        T.transfer_forecaster(
            ckpt, WindowDataset(make_tiny_dataset(tmp_path / "u", nlat=17, nlon=32), "test", n_in=4, n_out=1)
        )


def test_a_missing_checkpoint_is_pending_until_retrained_and_the_retrained_model_is_the_cells(tiny_transfer):
    """A machine without the runs: the transfer says which checkpoint is missing and how to get it; retrain_missing=true
    retrains the cell (same seed, rate, protocol: on one machine the retrained model scores exactly the cell's numbers
    at the trained grid) and records both scores; the report names the retrained seeds and counts the results
    they made."""
    import shutil

    cfg = tiny_transfer
    cell = load_cells(cfg.scale.results_dir)[0]
    shutil.rmtree(T.selected_checkpoint(cell).parent)
    out = T.transfer(cfg)
    assert out["ran"] == 0 and len(out["pending"]) == 1 and "retrain_missing=true" in out["pending"][0]
    cfg.retrain_missing = True
    out = T.transfer(cfg)
    assert (out["ran"], out["retrained"]) == (2, 1) and not out["pending"] and T.checkpoint_ready(cell)
    rec = json.loads(T.retrained_path(cfg.scale.results_dir, cell).read_text())
    for part in ("next_step", "rollout_mean"):
        assert rec["retrained"][part] == pytest.approx(rec["cell"][part], rel=1e-5)
    fine = [
        json.loads(T.transfer_path(cfg.scale.results_dir, f"tiny_16x32_to_32x64_{v}", "_pointwise_test", 0).read_text())
        for v in T.VARIANTS
    ]
    assert all(
        r["checkpoint_sha256"] == rec["checkpoint_sha256"] for r in fine
    )  # every fine set from the retrained file
    res = LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": cfg.scale.results_dir, "plots": False}))
    assert (
        "Retrained checkpoints" in open(res["markdown"]).read()
        and "2 of these seeds' 2 transfer results" in open(res["markdown"]).read()
    )
    # retrained on another machine, the model scores otherwise: the transfer table's trained column is that model's own
    rec["retrained"]["next_step"] = 0.98765
    T.retrained_path(cfg.scale.results_dir, cell).write_text(json.dumps(rec))
    md = open(
        LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": cfg.scale.results_dir, "plots": False}))[
            "markdown"
        ]
    ).read()
    section = md[md.index(HEADING) :]
    assert "| _pointwise_test | next step | 0.9877 ± n/a |" in section and "0.9877" not in md[: md.index(HEADING)]
    # a record of another checkpoint (another machine retrained later): the results here are not its model's
    rec["checkpoint_sha256"] = "f" * 64
    T.retrained_path(cfg.scale.results_dir, cell).write_text(json.dumps(rec))
    md = open(
        LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": cfg.scale.results_dir, "plots": False}))[
            "markdown"
        ]
    ).read()
    section = md[md.index(HEADING) :]
    assert (
        "0.9877" not in section
        and "0 of these seeds' 2 transfer results" in section
        and "not for _pointwise_test seed 0" in section
    )
    # a result made from another file than the checkpoint here is stale: evaluated again
    p = T.transfer_path(cfg.scale.results_dir, "tiny_16x32_to_32x64_fine_band", "_pointwise_test", 0)
    p.write_text(json.dumps({**json.loads(p.read_text()), "checkpoint_sha256": "0" * 64}))
    assert T.transfer(cfg)["ran"] == 1


def test_finished_results_need_no_checkpoint_and_an_interrupted_retrain_finishes(tiny_transfer):
    """Committed transfer JSONs stay valid on a machine without the runs (skipped, nothing pending); a retrain killed
    after training but before its record (the marker left in the run folder) is scored and recorded on the next call."""
    import shutil

    from dandelion.benchmarks.transfer import retrain as R

    cfg = tiny_transfer
    cell = load_cells(cfg.scale.results_dir)[0]
    T.transfer(cfg)
    shutil.rmtree(T.selected_checkpoint(cell).parent)
    out = T.transfer(cfg)
    assert (out["ran"], out["skipped"], out["pending"]) == (0, 2, [])
    for v in T.VARIANTS:  # new results are needed: the checkpoint is retrained, then killed before it was recorded
        T.transfer_path(cfg.scale.results_dir, f"tiny_16x32_to_32x64_{v}", "_pointwise_test", 0).unlink()
    cfg.retrain_missing = True
    T.transfer(cfg)
    marker = T.selected_checkpoint(cell).parent / R.MARKER
    assert not marker.exists() and T.checkpoint_ready(cell)
    # killed after training, before its record: the marker is still there, beside an older record (another machine's)
    marker.write_text("{}")
    rec = json.loads(T.retrained_path(cfg.scale.results_dir, cell).read_text())
    T.retrained_path(cfg.scale.results_dir, cell).write_text(json.dumps({**rec, "checkpoint_sha256": "0" * 64}))
    assert not T.checkpoint_ready(cell)
    cfg.retrain_missing = False
    for v in T.VARIANTS:
        T.transfer_path(cfg.scale.results_dir, f"tiny_16x32_to_32x64_{v}", "_pointwise_test", 0).unlink()
    out = T.transfer(cfg)
    assert out["ran"] == 0 and "did not finish" in out["pending"][0]
    cfg.retrain_missing = True
    out = T.transfer(cfg)
    assert (out["ran"], out["retrained"]) == (2, 1) and not marker.exists()
    assert (
        json.loads(T.retrained_path(cfg.scale.results_dir, cell).read_text())["checkpoint_sha256"]
        == rec["checkpoint_sha256"]
    )


def test_a_fresh_clone_regenerates_the_coarse_data_when_asked_to_retrain(tiny_transfer):
    import shutil

    cfg = tiny_transfer
    shutil.rmtree(cfg.scale.work_dir)  # the cell JSONs are all a clone has
    out = T.transfer(cfg)
    assert out["ran"] == 0 and "retrain_missing=true generates it" in out["pending"][0]
    cfg.retrain_missing = True
    out = T.transfer(cfg)
    assert (out["ran"], out["retrained"], out["pending"]) == (2, 1, [])


def test_held_suarez_fine_band_keeps_the_hyperdiffusion_rate_per_degree():
    """Held-Suarez's del^8 e-folding time is set at the truncation degree: the fine band (twice the band limit) must
    damp every degree the coarse solver has at the coarse rate (the solver's own rates compared), and the coarse band
    keeps the coarse solver settings, also when the coarse config leaves lmax to its default."""
    from dandelion.datasets.held_suarez import HeldSuarezScenario

    def rates(cfg):
        s = HeldSuarezScenario({**cfg, "n_trajectories": 1, "n_levels": 3})
        return s.build_simulation(
            {k: torch.tensor([v]) for k, v in s.parameters(0).items()}, lmax=s.solver_lmax, device="cpu"
        )._hd_rate[:, 0]

    for base in ({"nlat": 32, "nlon": 64, "lmax": 22}, {"nlat": 64, "nlon": 128}):
        coarse = HeldSuarezScenario({**base, "n_trajectories": 1, "n_levels": 3})
        meta = {**coarse.describe(), "config": {"dataset": dict(coarse.cfg, lmax=base.get("lmax"))}}
        fine_cfg = T.fine_dataset_config(meta, 2 * base["nlat"], 2 * base["nlon"], "fine_band")
        L = coarse.solver_lmax
        assert fine_cfg["lmax"] == 2 * L
        r0, r1 = rates({**meta["config"]["dataset"], "lmax": L}), rates(fine_cfg)
        assert torch.allclose(r1[:L], r0, rtol=1e-10) and float(r1[L:].min()) > float(r0.max())
        band = T.fine_dataset_config(meta, 2 * base["nlat"], 2 * base["nlon"], "coarse_band")
        assert band["lmax"] == L and band.get("hyperdiffusion_days", 0.1) == meta["config"]["dataset"].get(
            "hyperdiffusion_days", 0.1
        )


def test_a_column_scored_on_fewer_seeds_says_how_many():
    """A transfer mean over some of a model's seeds (a set still being scored) names the count, so it is not read as
    the mean over all of them."""
    from dandelion.benchmarks.transfer.report import _fmt

    assert "(1 of 3 seeds)" in _fmt([0.1], seeds=3)
    assert "seeds" not in _fmt([0.1, 0.2, 0.3], seeds=3)
    assert "(1 non-finite)" in _fmt([0.1, float("nan"), 0.3], seeds=3)
