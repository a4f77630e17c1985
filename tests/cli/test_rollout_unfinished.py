"""A rollout folder counts as finished only when every file the rollout writes is there (issue #70 item 10): a
rollout killed after ``metrics.json`` but before ``sample_forecast.nc`` (or ``forecasts.nc``) is completed by the
rerun; a finished folder is still refused without ``overwrite``; resume or rollout on other data is refused."""

from __future__ import annotations

import pytest
import tiny_model  # noqa: F401 - registers "_pointwise_test"
from cli_result import one_line_error

from dandelion.cli import export, rollout, train


@pytest.fixture
def trained(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data")
    run = tmp_path / "run"
    train.main(
        [
            f"dataset.path={data}",
            f"run_dir={run}",
            "model.name=_pointwise_test",
            "model.preset=tiny",
            "trainer=quick",
            "device=cpu",
            "trainer.progress=false",
        ]
    )
    return data, run / "best.pt"


@pytest.mark.parametrize("missing", ["sample_forecast.nc", "forecasts.nc"])
def test_a_rollout_killed_before_its_last_file_is_completed_by_the_rerun(trained, tmp_path, capsys, missing):
    data, ckpt = trained
    out = tmp_path / "roll"
    argv = [f"checkpoint={ckpt}", f"dataset.path={data}", f"output_dir={out}", "n_steps=2", "save_forecasts=true"]
    rollout.main([*argv, "plots=false"])
    (out / missing).unlink()  # killed before this file was written
    rollout.main([*argv, "plots=false"])
    assert (out / missing).is_file()
    capsys.readouterr()
    err = one_line_error(rollout.main, [*argv, "plots=false"], capsys)  # finished: refused
    assert "already holds the results" in err


def test_rollout_and_export_on_other_data_are_refused_unless_allowed(trained, make_tiny_dataset, tmp_path, capsys):
    data, ckpt = trained
    other = make_tiny_dataset(tmp_path / "other", n_frames=11)
    roll = [
        f"checkpoint={ckpt}",
        f"dataset.path={other}",
        f"output_dir={tmp_path / 'roll'}",
        "n_steps=2",
        "plots=false",
    ]
    exp = [f"checkpoint={ckpt}", f"dataset.path={other}", f"output={tmp_path / 'fc.nc'}", "n_steps=2"]
    for main, argv in ((rollout.main, roll), (export.main, exp)):
        capsys.readouterr()
        err = one_line_error(main, argv, capsys)
        assert "trained on other data" in err and "allow_other_data=true" in err, err
        main([*argv, "allow_other_data=true"])
    assert (tmp_path / "fc.nc").is_file() and (tmp_path / "roll" / "metrics.json").is_file()
