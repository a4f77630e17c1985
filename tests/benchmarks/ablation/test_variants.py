"""The ablation runner: a variant is trained with its base cell's own command (seed, rate, budget) plus its model
overrides, scored alike, written once and then reused; the table lists it next to the base cells."""

import json

import pytest
from omegaconf import OmegaConf
from tiny_scale import tiny_scale_overrides

from dandelion.benchmarks.ablation import variants as V
from dandelion.benchmarks.grid import benchmark as B


@pytest.fixture
def tiny_scale(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(
        tmp_path / "data", nlat=16, nlon=32, n_frames=10, splits={"train": [0, 1], "valid": [2], "test": [3]}
    )
    cfg = B.compose("benchmark", [*tiny_scale_overrides(tmp_path, "dandelion", "1e-3"), "scale.preset=tiny"])
    OmegaConf.set_struct(cfg, False)
    cfg.scale.datasets = {"tiny_16x32": {"dataset": "solid_body", "path": str(data), "overrides": {}}}
    return cfg


def test_variant_retrains_the_cell_with_its_overrides_then_is_reused(tiny_scale, monkeypatch):
    with pytest.raises(FileNotFoundError, match="dandelion-benchmark"):
        V.run_variant(tiny_scale, "spectral_path", "tiny_16x32", 0)  # no base cell yet: the fix is named
    base = B.run_cell(tiny_scale, "tiny_16x32", "dandelion", 0)
    monkeypatch.setitem(V.VARIANTS, "_test", {"model": "dandelion", "overrides": {"spectral_lmax": 8}, "what": "t"})
    rec = V.run_variant(tiny_scale, "_test", "tiny_16x32", 0)
    assert rec["lr"] == base["lr"] and rec["seed"] == 0 and rec["base_model"] == "dandelion"
    assert "+model.overrides.spectral_lmax=8" in rec["commands"]["train"]
    assert base["commands"]["selected_train"].split("run_dir=")[0] in rec["commands"]["train"]  # same data, seed, model
    assert rec["n_parameters"] > base["n_parameters"]  # the path's weights
    assert rec["train"]["step"] == base["steps"]  # the same budget
    for part in ("next_step", "rollout_mean"):
        assert set(rec[part]["vrmse"]) == set(base[part]["vrmse"])
    path = V.variant_path(tiny_scale.scale.results_dir, "_test", "tiny_16x32", 0)
    stamp = path.stat().st_mtime_ns
    assert V.run_variant(tiny_scale, "_test", "tiny_16x32", 0) == json.loads(path.read_text())
    assert path.stat().st_mtime_ns == stamp  # finished: read back, nothing trained or written
    monkeypatch.setitem(V.VARIANTS["_test"], "overrides", {"spectral_lmax": 4})
    with pytest.raises(ValueError, match="delete it"):  # a record of other overrides is refused, not reused
        V.run_variant(tiny_scale, "_test", "tiny_16x32", 0)
    table = V.ablation_table(tiny_scale.scale.results_dir, "_test", ["tiny_16x32"], [])
    assert "| tiny_16x32 | dandelion + _test |" in table and "(1)" in table


def test_a_variant_that_builds_the_presets_own_network_is_refused(tiny_scale):
    """Since the presets took advected persistence, the advect variant is its base: refused before any work;
    the stock variant (without it) is a real comparison and only waits for its base cell."""
    with pytest.raises(ValueError, match="nothing to compare"):
        V.run_variant(tiny_scale, "advect", "tiny_16x32", 0)
    with pytest.raises(FileNotFoundError, match="dandelion-benchmark"):
        V.run_variant(tiny_scale, "stock", "tiny_16x32", 0)


def test_unknown_variant_is_refused(tiny_scale):
    with pytest.raises(ValueError, match="choose one of"):
        V.run_variant(tiny_scale, "no_such_variant", "tiny_16x32", 0)


def _record(path, **fields):
    path.parent.mkdir(parents=True, exist_ok=True)
    score = {"vrmse": {"mean": fields.pop("score")}}
    path.write_text(json.dumps({"next_step": score, "rollout_mean": score, "n_parameters": 10, **fields}))


def test_table_leaves_out_cells_of_another_protocol(tmp_path):
    """A stale base cell (made under another protocol, e.g. on the dataset's earlier size) is not compared with a
    variant trained on the current data; seed ranges and the step cost come from the kept cells only."""
    root = tmp_path / "results"
    _record(root / "k" / "dandelion" / "seed0.json", protocol_hash="new", score=0.5, train_cpu_seconds=100.0)
    _record(root / "k" / "dandelion" / "seed1.json", protocol_hash="new", score=0.7, train_cpu_seconds=120.0)
    _record(root / "k" / "dandelion" / "seed2.json", protocol_hash="old", score=9.0, train_cpu_seconds=1.0)
    _record(root / "ablation" / "cartesian" / "k" / "seed0.json", base_protocol_hash="new", score=0.25)
    _record(root / "ablation" / "cartesian" / "k" / "seed1.json", base_protocol_hash="old", score=8.0)
    table = V.ablation_table(root, "cartesian", ["k"], [], {"k": "new"})
    base = next(line for line in table.splitlines() if line.startswith("| k | dandelion |"))
    assert "0.6000 (0.5000-0.7000, 2)" in base and "110 (100-120, 2)" in base
    variant = next(line for line in table.splitlines() if "+ cartesian" in line)
    assert "0.2500 (1)" in variant and "8.0" not in variant
    assert "9.0" in V.ablation_table(root, "cartesian", ["k"], [])  # without protocols, every cell is listed


def test_table_leaves_out_variants_made_on_a_base_of_another_network(tmp_path):
    """After a preset change (Dandelion took advected persistence) the base cells are re-made on the new network: a
    variant trained beside the old base is no longer compared with them, nor is a base cell of the old network."""
    root = tmp_path / "results"
    _record(root / "k" / "dandelion" / "seed0.json", protocol_hash="p", architecture="new", score=0.5)
    _record(root / "k" / "dandelion" / "seed1.json", protocol_hash="p", architecture="old", score=9.0)
    _record(
        root / "ablation" / "cartesian" / "k" / "seed0.json",
        base_protocol_hash="p",
        base_architecture="new",
        score=0.25,
    )
    _record(
        root / "ablation" / "cartesian" / "k" / "seed1.json", base_protocol_hash="p", base_architecture="old", score=8.0
    )
    table = V.ablation_table(root, "cartesian", ["k"], [], {"k": "p"}, {"dandelion": "new"})
    base = next(line for line in table.splitlines() if line.startswith("| k | dandelion |"))
    variant = next(line for line in table.splitlines() if "+ cartesian" in line)
    assert "0.5000 (1)" in base and "9.0" not in base
    assert "0.2500 (1)" in variant and "8.0" not in variant


def test_a_variant_of_a_base_cell_of_another_network_is_refused(tiny_scale, monkeypatch):
    base = B.run_cell(tiny_scale, "tiny_16x32", "dandelion", 0)
    monkeypatch.setitem(V.VARIANTS, "_test", {"model": "dandelion", "overrides": {"norm_groups": 2}, "what": "t"})
    rec = V.run_variant(tiny_scale, "_test", "tiny_16x32", 0)
    assert rec["base_architecture"] == base["architecture"]
    cell = B.cell_path(tiny_scale.scale.results_dir, "tiny_16x32", "dandelion", 0)
    cell.write_text(json.dumps({**base, "architecture": "another"}))  # the base re-made on a changed preset
    with pytest.raises(ValueError, match="base network"):
        V.run_variant(tiny_scale, "_test", "tiny_16x32", 0)
