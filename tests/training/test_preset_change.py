"""A preset that changes after a checkpoint was written (Dandelion's presets took advected persistence on
2026-12-07): the checkpoint still rebuilds the network it holds, a resume into the changed network is refused unless
overrides restore it, and the benchmark does not reuse a sweep run of the old network."""

from __future__ import annotations

import pytest
import torch

from dandelion import checkpoint as ck
from dandelion.benchmarks.grid import runs
from dandelion.model import PRESETS
from dandelion.registry import build_model
from dandelion.training import Trainer

GRID = {"nlat": 9, "nlon": 16, "grid": "equiangular"}
STATS = {"h": {"kind": "scalar", "mean": 1.0, "std": 2.0}}


def _quick():
    return dict(
        batch_size=4, finetune={"epochs": 1, "n_out": 2}, warmup_steps=1, num_workers=0, max_batches_per_epoch=2
    )


def _changed(preset: dict) -> dict:
    """The preset with one layer changed (a head count), so the old state_dict no longer fits it."""
    return {**preset, "heads": 2 * preset["heads"]}


def _saved(tmp_path, spec: dict):
    """A checkpoint of an untrained Dandelion built from ``spec`` (9x16 grid), and the model."""
    torch.manual_seed(0)
    model = build_model("dandelion", spec["preset"], 8, 2, 9, 16, "equiangular", **spec["overrides"])
    path = ck.save_checkpoint(
        tmp_path / "a.pt",
        model=model,
        config={},
        stats=STATS,
        grid=GRID,
        step=1,
        epoch=0,
        extra={"model_spec": spec},
    )
    return model.eval(), path


def _spec(preset: str = "tiny", **overrides):
    from dandelion.training.inputs import model_spec

    return model_spec({"name": "dandelion", "preset": preset, "overrides": overrides}, 8, 2)


def test_a_checkpoint_rebuilds_its_own_network_after_its_preset_changed(tmp_path, monkeypatch):
    model, path = _saved(tmp_path, _spec())
    monkeypatch.setitem(PRESETS, "tiny", _changed(PRESETS["tiny"]))
    with pytest.raises(RuntimeError):  # the preset as it is now does not fit the saved weights
        build_model("dandelion", "tiny", 8, 2, 9, 16, "equiangular").load_state_dict(ck.load_checkpoint(path)["model"])
    x = torch.randn(1, 8, 9, 16)
    with torch.no_grad():
        assert torch.equal(ck.model_from_checkpoint(path)(x), model(x))
    heads = PRESETS["tiny"]["heads"]
    assert ck.preset_changes(ck.load_checkpoint(path)) == {"heads": (heads // 2, heads)}


def test_a_checkpoint_written_before_the_record_loads_as_it_was_built(tmp_path, monkeypatch):
    """A checkpoint without recorded hyper-parameters predates the change: rebuilt with the legacy overrides."""
    spec = {**_spec(), "hyperparameters": None}
    legacy = ck.LEGACY_OVERRIDES["dandelion"]
    model, path = _saved(tmp_path, {**spec, "overrides": dict(legacy)})
    ckpt = ck.load_checkpoint(path)
    ckpt["extra"]["model_spec"] = {**spec, "overrides": {}}  # written with the preset as it was then
    monkeypatch.setitem(PRESETS, "tiny", {**PRESETS["tiny"], **{k: not v for k, v in legacy.items()}})
    x = torch.randn(1, 8, 9, 16)
    with torch.no_grad():
        assert torch.equal(ck.model_from_checkpoint(ckpt)(x), model(x))
    assert set(ck.preset_changes(ckpt)) == set(legacy)


@pytest.mark.parametrize("preset", ["tiny", "tiny_fast"])
def test_an_unchanged_preset_reports_no_change_for_old_or_new_checkpoints(tmp_path, preset):
    """Nothing changed: neither a recorded checkpoint nor one written before the record (whose legacy overrides are
    what its preset gives) reports a change, so the benchmark never sets a good run aside."""
    spec = _spec(preset)
    _, path = _saved(tmp_path, spec)
    ckpt = ck.load_checkpoint(path)
    assert ck.preset_changes(ckpt) == {}
    ckpt["extra"]["model_spec"] = {k: v for k, v in spec.items() if k != "hyperparameters"}
    # read by the legacy rule as stock Dandelion: a change only where the preset now takes advected persistence
    flipped = bool(PRESETS[preset].get("advect_state"))
    assert ck.preset_changes(ckpt) == ({"advect_state": (False, True)} if flipped else {})


def test_a_record_without_a_later_preset_key_still_rebuilds_its_network(tmp_path, monkeypatch):
    """A record that lacks a key the preset sets later (a default then) is completed with the default, not with
    the preset's new value: the network it rebuilds is the saved one."""
    spec = _spec()
    spec["hyperparameters"] = {k: v for k, v in spec["hyperparameters"].items() if k != "norm_groups"}
    model, path = _saved(tmp_path, spec)
    monkeypatch.setitem(PRESETS, "tiny", {**PRESETS["tiny"], "norm_groups": 2})
    x = torch.randn(1, 8, 9, 16)
    with torch.no_grad():
        assert torch.equal(ck.model_from_checkpoint(path)(x), model(x))
    assert ck.preset_changes(ck.load_checkpoint(path)) == {"norm_groups": (1, 2)}


def test_an_execution_option_is_not_a_change_of_network(tmp_path, monkeypatch):
    _, path = _saved(tmp_path, _spec())
    monkeypatch.setitem(PRESETS, "tiny", {**PRESETS["tiny"], "warp_kernel": "eager", "checkpoint_blocks": True})
    assert ck.preset_changes(ck.load_checkpoint(path)) == {}


def test_a_resume_into_a_changed_preset_is_refused_unless_overrides_restore_it(
    make_tiny_dataset, tmp_path, monkeypatch
):
    data = make_tiny_dataset(tmp_path / "data")
    run = tmp_path / "run"
    kw = dict(run_dir=run, device="cpu", epochs=2, progress=False, **_quick())
    model = {"name": "dandelion", "preset": "tiny"}
    Trainer(model, data, stop_at_step=2, **kw).fit()
    heads = PRESETS["tiny"]["heads"]
    monkeypatch.setitem(PRESETS, "tiny", _changed(PRESETS["tiny"]))
    with pytest.raises(ValueError, match="other hyper-parameters.*heads"):
        Trainer(model, data, resume=run / "last.pt", **kw).fit()
    restored = {**model, "overrides": {"heads": heads}}
    assert Trainer(restored, data, resume=run / "last.pt", **kw).fit()["step"] > 2


@pytest.mark.parametrize("changed", [False, True])
def test_the_benchmark_sets_aside_a_sweep_run_of_another_network(tmp_path, monkeypatch, changed):
    run_dir = tmp_path / "t0" / "lr1e-3"
    run_dir.mkdir(parents=True)
    _, path = _saved(tmp_path, _spec())
    path.rename(run_dir / "last.pt")
    (run_dir / "result.json").write_text("{}")
    if changed:
        monkeypatch.setitem(PRESETS, "tiny", _changed(PRESETS["tiny"]))
    runs._set_aside_superseded(run_dir)
    aside = sorted(p.name for p in run_dir.parent.glob("lr1e-3.superseded-*"))
    assert run_dir.exists() is not changed and len(aside) == int(changed)
    if changed:  # nothing lost: the old run is kept beside
        assert (run_dir.parent / aside[0] / "result.json").exists()
