"""User mistakes on the command line: one line naming the fix, exit status 2, no traceback, nothing written.

Each job's ``main(argv)`` is called in-process (the console scripts call the same function): the
checks of :mod:`dandelion.cli.common` run before hydra creates any folder and before any model or solver.
"""

import types

import pytest
import torch
import xarray as xr

from dandelion.benchmarks.grid import benchmark
from dandelion.benchmarks.speed import bench
from dandelion.cli import export, generate, quickstart, report, rollout, train, verify
from dandelion.cli.common import compose_config
from dandelion.export.forecasts import write_zarr


def _fails(main, argv, capsys) -> str:
    """Run ``main(argv)``; assert exit status 2 and exactly one stderr line without a traceback; return it."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


def _checkpoint(tmp_path):
    """A torch file where a checkpoint is expected: it passes the checkpoint check (a readable torch archive) and
    is never loaded (the other checks fail first)."""
    p = tmp_path / "run" / "best.pt"
    p.parent.mkdir()
    torch.save({"not": "loaded"}, p)
    return p


# ------------------------------------------------------------------------------------------ dandelion-generate
def test_generate_unknown_key_suggests_the_right_one_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "data"
    err = _fails(generate.main, ["dataset.nlatt=32", f"dataset.path={out}"], capsys)
    assert err.startswith("dandelion-generate: error:") and "did you mean dataset.nlat=32?" in err
    assert not out.exists()


def test_generate_suggests_plus_only_for_a_new_key(tmp_path, capsys):
    """An existing key is suggested as KEY=VALUE (a + there is refused by hydra); +KEY= only for the unknown key."""
    out = tmp_path / "data"
    err = _fails(generate.main, ["dataset.nlatt=32", f"dataset.path={out}"], capsys)
    assert "+dataset.nlat=" not in err and "+dataset.nlatt=VALUE adds it as a new key" in err
    assert "dandelion-generate --cfg job prints every key" in err  # --help lists the top-level keys only
    err = _fails(generate.main, ["+dataset.nlat=32", f"dataset.path={out}"], capsys)
    assert "write dataset.nlat=32 without the +" in err and "++" not in err
    err = _fails(generate.main, ["dataset.K=[1]", f"dataset.path={out}"], capsys)
    assert "did you mean dataset=" not in err  # the key's own parent node is no fix
    assert not out.exists()


def test_generate_unknown_dataset_suggests_the_option(tmp_path, capsys):
    err = _fails(generate.main, ["dataset=galewksy", f"dataset.path={tmp_path / 'd'}"], capsys)
    assert "dataset=galewsky" in err and "held_suarez" in err
    assert not (tmp_path / "d").exists()


def test_generate_refuses_a_foreign_folder_before_writing(tmp_path, capsys):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "paper.tex").write_text("x")
    err = _fails(generate.main, ["dataset=galewsky", f"dataset.path={out}"], capsys)
    assert "dataset.path" in err and "empty or new folder" in err
    assert sorted(p.name for p in out.iterdir()) == ["paper.tex"]


def test_debug_shows_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        generate.main(["--debug", "dataset.nlatt=32", f"dataset.path={tmp_path / 'd'}"])


# ------------------------------------------------------------------------------------------ dandelion-verify
def test_verify_missing_folder(tmp_path, capsys):
    err = _fails(verify.main, [str(tmp_path / "nowhere")], capsys)
    assert "does not exist" in err and "dandelion-generate" in err


def test_verify_hydra_spelling_names_the_fix(tmp_path, capsys):
    # the other jobs take dataset.path=DIR; dandelion-verify takes DIR: the message says so
    err = _fails(verify.main, [f"dataset.path={tmp_path}"], capsys)
    assert f"dandelion-verify {tmp_path}" in err and "no dataset.path=" in err


def test_verify_foreign_folder(tmp_path, capsys):
    err = _fails(verify.main, [str(tmp_path)], capsys)
    assert "not a Dandelion dataset folder" in err


# ------------------------------------------------------------------------------------------ dandelion-train
def test_train_missing_dataset_leaves_no_run_folder(tmp_path, capsys):
    run = tmp_path / "run"
    err = _fails(train.main, [f"dataset.path={tmp_path / 'nowhere'}", f"run_dir={run}", "trainer=quick"], capsys)
    assert "does not exist" in err and "dandelion-generate dataset=NAME" in err
    assert not run.exists() and sorted(tmp_path.iterdir()) == []


def test_train_unknown_model_and_key(make_tiny_dataset, tmp_path, capsys):
    data = make_tiny_dataset(tmp_path / "data")
    run = tmp_path / "run"
    err = _fails(train.main, [f"dataset.path={data}", f"run_dir={run}", "model.name=dandelon"], capsys)
    assert "did you mean model.name=dandelion" in err
    err = _fails(train.main, [f"dataset.path={data}", f"run_dir={run}", "trainer.lrr=0.1"], capsys)
    assert "did you mean trainer.lr=0.1?" in err
    err = _fails(train.main, [f"dataset.path={data}", f"run_dir={run}", f"resume={run / 'last.pt'}"], capsys)
    assert "resume=" in err and "does not exist" in err
    assert not run.exists()


def test_train_refuses_a_run_dir_that_holds_a_finished_run(make_tiny_dataset, tmp_path, capsys):
    """A second training into the same run_dir would replace best.pt/last.pt and mix metrics.jsonl: refused,
    and the old run is untouched."""
    data = make_tiny_dataset(tmp_path / "data")
    run = tmp_path / "run"
    run.mkdir()
    (run / "last.pt").write_bytes(b"an earlier run")
    (run / "metrics.jsonl").write_text("{}\n")
    err = _fails(train.main, [f"dataset.path={data}", f"run_dir={run}", "trainer=quick"], capsys)
    assert "already holds a training run" in err and "resume=" in err and "another run_dir" in err
    assert (run / "last.pt").read_bytes() == b"an earlier run" and (run / "metrics.jsonl").read_text() == "{}\n"


def test_train_refuses_the_frame_target_for_a_preset_that_advects(make_tiny_dataset, tmp_path, capsys):
    """Dandelion's presets move the newest frame (advect_state): the frame target is refused before any work, with
    both ways out named; the stock network (advect_state=false) takes it."""
    data = make_tiny_dataset(tmp_path / "data")
    run = tmp_path / "run"
    argv = [f"dataset.path={data}", f"run_dir={run}", "model=dandelion", "model.preset=tiny", "trainer.target=frame"]
    err = _fails(train.main, argv, capsys)
    assert "advect_state" in err and "trainer.target=increment" in err and "model.advect_state=false" in err
    assert not run.exists()
    train.check(compose_config("train", [*argv, "model.advect_state=false"]))  # no error


# ------------------------------------------------------------------------------------------ dandelion-benchmark
def test_benchmark_unknown_dataset_key(capsys):
    err = _fails(benchmark.main, ["scale=cpu", "only.datasets=[galewsky_32x32]", "dry_run=true"], capsys)
    assert "did you mean only.datasets=galewsky_32x64" in err
    err = _fails(benchmark.main, ["scale=cpuu"], capsys)
    assert "scale=cpu" in err


# ------------------------------------------------------------------------------------------ dandelion-rollout
def test_rollout_missing_checkpoint(make_tiny_dataset, tmp_path, capsys):
    data = make_tiny_dataset(tmp_path / "data")
    out = tmp_path / "rollout"
    err = _fails(
        rollout.main,
        [f"checkpoint={tmp_path / 'run' / 'best.pt'}", f"dataset.path={data}", f"output_dir={out}"],
        capsys,
    )
    assert "checkpoint=" in err and "does not exist" in err and "dandelion-train" in err
    assert not out.exists()


def test_rollout_misspelt_dataset_folder_suggests_the_sibling(make_tiny_dataset, tmp_path, capsys):
    data = make_tiny_dataset(tmp_path / "galewsky_small")
    err = _fails(
        rollout.main, [f"checkpoint={_checkpoint(tmp_path)}", f"dataset.path={tmp_path / 'galewsky_smal'}"], capsys
    )
    assert f"did you mean {data}?" in err


def test_rollout_foreign_dataset(make_tiny_dataset, tmp_path, capsys):
    data = make_tiny_dataset(tmp_path / "data")  # a dataset named "tiny"
    ckpt = _checkpoint(tmp_path)
    err = _fails(rollout.main, [f"checkpoint={ckpt}", "dataset=cahn_hilliard", f"dataset.path={data}"], capsys)
    assert "holds a tiny dataset" in err and "dataset=tiny" in err
    assert not (ckpt.parent / "rollout_test").exists()


def test_rollout_folder_without_dataset_yaml(tmp_path, capsys):
    ckpt = _checkpoint(tmp_path)
    (tmp_path / "folder").mkdir()
    err = _fails(rollout.main, [f"checkpoint={ckpt}", f"dataset.path={tmp_path / 'folder'}"], capsys)
    assert "no dataset.yaml" in err and "dandelion-generate" in err


def test_rollout_well_layout_folder_passes_and_its_missing_split_is_named(tmp_path, capsys):
    from dandelion.cli.common import check_dataset_folder

    root = tmp_path / "planetswe"
    for split in ("train", "valid"):
        (root / "data" / split).mkdir(parents=True)
        (root / "data" / split / "a.hdf5").write_bytes(b"")
    assert check_dataset_folder(root, split="train") == root
    assert check_dataset_folder(root, split="val") == root
    err = _fails(rollout.main, [f"checkpoint={_checkpoint(tmp_path)}", f"dataset.path={root}", "split=test"], capsys)
    assert "Well's layout" in err and "data/test" in err
    # the Well's base path (one folder per dataset) is not itself a dataset: the message points one level down
    (tmp_path / "well" / "datasets" / "planetswe").mkdir(parents=True)
    err = _fails(
        rollout.main, [f"checkpoint={tmp_path / 'run' / 'best.pt'}", f"dataset.path={tmp_path / 'well'}"], capsys
    )
    assert "no dataset.yaml" in err and "Well's layout" in err and "datasets/NAME" in err


# ------------------------------------------------------------------------------------------ dandelion-export
def test_export_refuses_an_existing_file_before_any_model_call(make_tiny_dataset, tmp_path, capsys, monkeypatch):
    data = make_tiny_dataset(tmp_path / "data")
    ckpt = _checkpoint(tmp_path)
    target = tmp_path / "forecasts.nc"
    target.write_bytes(b"earlier results")

    def forbidden(*args, **kwargs):
        raise AssertionError("the model or data was touched before the output check")

    for name in ("load_model", "WindowDataset", "stream_forecasts", "import_plugins"):
        monkeypatch.setattr(export, name, forbidden)
    argv = [f"checkpoint={ckpt}", f"dataset.path={data}", f"output={target}"]
    err = _fails(export.main, argv, capsys)
    assert "exists" in err and "overwrite=true" in err
    # the Python entry point refuses it just as early
    from dandelion.cli.common import compose_config

    with pytest.raises(FileExistsError, match="overwrite=true"):
        export.export(compose_config("export", argv))
    assert target.read_bytes() == b"earlier results"


def test_export_missing_output_key(make_tiny_dataset, tmp_path, capsys):
    err = _fails(export.main, [f"checkpoint={_checkpoint(tmp_path)}", f"dataset.path={tmp_path}"], capsys)
    assert "output is not set" in err and "output=FILE.nc" in err


def test_export_zarr_output_rules(make_tiny_dataset, tmp_path, capsys):
    """format=zarr writes a folder: an existing Zarr store is replaced only with overwrite=true, a foreign
    folder never; an unknown format or convention and chunks without format=zarr fail before any work."""
    from dandelion.cli.common import UsageError, check_new_file, compose_config

    data = make_tiny_dataset(tmp_path / "data")
    ckpt = _checkpoint(tmp_path)
    store = tmp_path / "fc.zarr"
    store.mkdir()
    (store / ".zgroup").write_text('{"zarr_format": 2}')
    base = [f"checkpoint={ckpt}", f"dataset.path={data}"]
    err = _fails(export.main, base + [f"output={store}", "format=zarr"], capsys)
    assert "exists" in err and "overwrite=true" in err
    # with overwrite=true an existing store passes the checks (the netCDF rule "is a folder" must not apply)
    export.check(compose_config("export", base + [f"output={store}", "format=zarr", "overwrite=true"]))
    assert check_new_file(store, overwrite=True, store=True) == store
    foreign = tmp_path / "results"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    err = _fails(export.main, base + [f"output={foreign}", "format=zarr", "overwrite=true"], capsys)
    assert "not a Zarr store" in err
    with pytest.raises(UsageError, match="not a Zarr store"):
        check_new_file(foreign, overwrite=True, store=True)
    assert (foreign / "keep.txt").read_text() == "mine"
    out = tmp_path / "new.nc"
    assert "did you mean format=zarr" in _fails(export.main, base + [f"output={out}", "format=zar"], capsys)
    assert "convention=wb3 is not one of" in _fails(export.main, base + [f"output={out}", "convention=wb3"], capsys)
    assert "format=zarr only" in _fails(export.main, base + [f"output={out}", "chunks={init_time: 2}"], capsys)
    assert "positive integer" in _fails(
        export.main, base + [f"output={store}x", "format=zarr", "chunks={init_time: 0}"], capsys
    )
    err = _fails(export.main, base + [f"output={store}x", "format=zarr", "chunks={time: 4}"], capsys)
    assert "no dimension time" in err and "init_time" in err  # time is the wb2 name
    export.check(
        compose_config("export", base + [f"output={store}x", "format=zarr", "convention=wb2", "chunks={time: 4}"])
    )
    assert not out.exists()


def test_export_passes_max_trajectories_to_the_rollout(make_tiny_dataset, tmp_path, monkeypatch):
    """``max_trajectories`` (configs/export.yaml, checked positive) reaches the rollout, not silently dropped."""
    from dandelion.cli.common import compose_config

    seen = {}

    class Stop(Exception):
        pass

    def fake_forecast(model, ds, path, **kwargs):
        seen.update(kwargs)
        raise Stop

    closed = []
    dataset = types.SimpleNamespace(close=lambda: closed.append(True), path=tmp_path)
    monkeypatch.setattr(export, "WindowDataset", lambda *a, **k: dataset)
    monkeypatch.setattr(export, "load_model", lambda *a, **k: None)
    monkeypatch.setattr(export, "load_checkpoint", lambda *a, **k: {})  # the checkpoint of this test is a stub
    monkeypatch.setattr(export, "stream_forecasts", fake_forecast)
    cfg = compose_config(
        "export",
        [
            f"checkpoint={_checkpoint(tmp_path)}",
            f"dataset.path={tmp_path}",
            f"output={tmp_path / 'f.nc'}",
            "max_trajectories=1",
        ],
    )
    with pytest.raises(Stop):
        export.export(cfg)
    assert seen["max_trajectories"] == 1
    assert closed == [True]  # the dataset is closed when the export fails


def test_write_zarr_never_replaces_a_foreign_folder(tmp_path):
    foreign = tmp_path / "results"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a Zarr store"):
        write_zarr(xr.Dataset({"a": ("x", [1.0, 2.0])}), foreign, overwrite=True)
    assert (foreign / "keep.txt").read_text() == "mine"


def test_export_unparsable_override(capsys):
    err = _fails(export.main, ["n_steps=[1"], capsys)
    assert "'n_steps=[1'" in err and "KEY=VALUE" in err


# ------------------------------------------------------------------------------------------ dandelion-report
def test_report_missing_rollout_folder(tmp_path, capsys):
    out = tmp_path / "plots"
    err = _fails(report.main, [f"rollouts=[{tmp_path / 'rollout_test'}]", f"output_dir={out}"], capsys)
    assert "does not exist" in err and "dandelion-rollout" in err
    assert not out.exists()


# ------------------------------------------------------------------------------------------ dandelion-bench
def test_bench_unknown_key_and_bad_target(tmp_path, capsys):
    out = tmp_path / "bench.json"
    err = _fails(bench.main, ["models.nmaes=[sfno]", f"output={out}"], capsys)
    assert "did you mean models.names=[sfno]?" in err
    err = _fails(bench.main, ["target=model", f"output={out}"], capsys)
    assert "did you mean target=models" in err
    err = _fails(bench.main, ["models.names=[dandelion,sfn]", f"output={out}"], capsys)
    assert "models.names=sfn" in err and "did you mean models.names=sfno" in err
    err = _fails(bench.main, ["models.dtypes=[fp32,fp16]", f"output={out}"], capsys)
    assert "models.dtypes=fp16" in err and "bf16" in err
    err = _fails(bench.main, ["target=solvers", "solvers.scenarios=[galewsky,shockcaps]", f"output={out}"], capsys)
    assert "did you mean solvers.scenarios=shock_caps" in err
    assert not out.exists()


# ------------------------------------------------------------------------------------------ dandelion-quickstart
def test_quickstart_unknown_key_and_model(tmp_path, capsys):
    out = tmp_path / "qs"
    err = _fails(quickstart.main, ["--fast", "trainer.max_minute=1", f"quickstart.output_dir={out}"], capsys)
    assert "did you mean trainer.max_minutes=1?" in err
    err = _fails(quickstart.main, ["--fast", "quickstart.models=[dandelon]", f"quickstart.output_dir={out}"], capsys)
    assert "quickstart.models=dandelion" in err
    assert not out.exists()


# ------------------------------------------------------------------------------------------ --help
@pytest.mark.parametrize(
    "main,own,foreign",
    [
        (generate.main, ["dataset:", "batch_size"], ["model:", "trainer:", "scale:", "checkpoint"]),
        (train.main, ["dataset:", "model:", "trainer:", "experiment:", "run_dir"], ["scale:", "rollouts"]),
        (benchmark.main, ["scale:", "only:"], ["dataset:", "model:", "trainer:"]),
        (export.main, ["dataset:", "checkpoint", "overwrite"], ["model:", "trainer:", "scale:"]),
        (bench.main, ["target", "models:"], ["dataset:", "trainer:", "scale:"]),
        (report.main, ["scale:", "rollouts"], ["dataset:", "model:", "trainer:"]),
    ],
)
def test_help_lists_only_the_jobs_own_groups(main, own, foreign, capsys):
    main(["--help"])
    text = capsys.readouterr().out
    for word in own:
        assert word in text
    for word in foreign:
        assert f"\n  {word}" not in text, word
