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
from small_generation import generate_folder
from tiny_scale import tiny_scale_overrides

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid.cells import _digest, load_cells
from dandelion.benchmarks.grid.references import persistence_reference
from dandelion.benchmarks.leaderboard import render as LB
from dandelion.benchmarks.transfer import zero_shot as T
from dandelion.benchmarks.transfer.report import HEADING
from dandelion.checkpoint import save_checkpoint
from dandelion.datasets.folder import load_metadata
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.evaluation.scoring import evaluate
from dandelion.registry import build_model
from dandelion.training.inputs import model_spec


@pytest.fixture(scope="module")
def solid_pair(tmp_path_factory):
    """A 16x32 solid-body dataset and its 32x64 fine-band test set (analytic, fractions of a second)."""
    root = tmp_path_factory.mktemp("solid")
    coarse = generate_folder(root / "coarse", {"name": "solid_body", "nlat": 16, "nlon": 32, "n_frames": 8})
    fine = generate_folder(root / "fine", T.fine_dataset_config(load_metadata(coarse), 32, 64, "fine_band"), ["test"])
    return coarse, fine


def _checkpoint(path, name, coarse, masked=False, **overrides):
    """An untrained checkpoint of model ``name`` (tiny preset) for the train split of ``coarse``, 4 input frames;
    ``masked``: the land mask is one more input channel and the checkpoint records it."""
    data = WindowDataset(coarse, "train", n_in=4, n_out=1)
    C = data.layout.n_channels
    c_in = 4 * C + (1 if masked else 0)
    model = build_model(name, "tiny", c_in, C, data.grid.nlat, data.grid.nlon, "equiangular", **overrides)
    spec = model_spec({"name": name, "preset": "tiny", "overrides": overrides}, c_in, C)  # as the trainer records it
    layout = data.layout.to_dict()
    extra = {"model_spec": spec, "layout": layout, "target": "increment", "inputs": "differences"}
    return save_checkpoint(
        path,
        model=model,
        config={"trainer": {"n_in": 4}},
        stats=layout["stats"],
        grid=data.grid.to_dict(),
        step=0,
        epoch=0,
        extra={**extra, "wet": data.wet} if masked else extra,
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
        tiny_scale_overrides(tmp_path, "_pointwise_test", "1e-2"),
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


def test_a_masked_model_gets_the_finer_grids_own_mask(make_tiny_dataset, tmp_path):
    coarse = make_tiny_dataset(tmp_path / "c", nlat=9, nlon=16, masked=True)
    fine = make_tiny_dataset(tmp_path / "f", nlat=17, nlon=32, masked=True)
    ckpt = _checkpoint(tmp_path / "last.pt", "dandelion", coarse, masked=True)
    fdata = WindowDataset(fine, "test", n_in=4, n_out=1)
    fc, rule = T.transfer_forecaster(ckpt, fdata)
    assert rule["transferable"] and torch.equal(fc.wet, fdata.wet) and fc.wet.shape == (17, 32)
    res = evaluate(fc, fdata, n_steps=2, batch_size=4, spectra_leads=[], sample=False)["results"]
    assert all(math.isfinite(v) for v in res["summary"]["mean_1_2"]["vrmse"].values())
    with pytest.raises(ValueError, match="wet mask"):
        T.transfer_forecaster(
            ckpt, WindowDataset(make_tiny_dataset(tmp_path / "u", nlat=17, nlon=32), "test", n_in=4, n_out=1)
        )


def _leaderboard_markdown(results_dir) -> str:
    """The text of the cpu leaderboard rendered (without plots) from ``results_dir``."""
    res = LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": results_dir, "plots": False}))
    return open(res["markdown"]).read()


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
    md = _leaderboard_markdown(cfg.scale.results_dir)
    assert "Retrained checkpoints" in md and "2 of these seeds' 2 transfer results" in md
    # retrained on another machine, the model scores otherwise: the transfer table's trained column is that model's own
    rec["retrained"]["next_step"] = 0.98765
    T.retrained_path(cfg.scale.results_dir, cell).write_text(json.dumps(rec))
    md = _leaderboard_markdown(cfg.scale.results_dir)
    section = md[md.index(HEADING) :]
    assert "| _pointwise_test | next step | 0.9877 ± n/a |" in section and "0.9877" not in md[: md.index(HEADING)]
    # a record of another checkpoint (another machine retrained later): the results here are not its model's
    rec["checkpoint_sha256"] = "f" * 64
    T.retrained_path(cfg.scale.results_dir, cell).write_text(json.dumps(rec))
    md = _leaderboard_markdown(cfg.scale.results_dir)
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


def test_a_column_scored_on_fewer_seeds_says_how_many():
    """A transfer mean over some of a model's seeds (a set still being scored) names the count, so it is not read as
    the mean over all of them."""
    from dandelion.benchmarks.transfer.report import _fmt

    assert "(1 of 3 seeds)" in _fmt([0.1], seeds=3)
    assert "seeds" not in _fmt([0.1, 0.2, 0.3], seeds=3)
    assert "(1 non-finite)" in _fmt([0.1, float("nan"), 0.3], seeds=3)
