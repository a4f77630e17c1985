"""Checks that used to come late (after the work, or never) now come before any work: one line, exit status 2."""

from __future__ import annotations

import errno

import pytest
import tiny_dataset
from cli_result import one_line_error
from tiny_checkpoint import pointwise_checkpoint

from dandelion.cli import export, generate, rollout

GEN = ["dataset=solid_body", "dataset.n_trajectories=5", "dataset.n_frames=6", "progress=false", "device=cpu"]


def test_generate_refuses_a_solver_band_limit_beyond_any_use_before_work(tmp_path, capsys):
    out = tmp_path / "data"
    err = one_line_error(generate.main, [*GEN, "dataset.lmax=40", f"dataset.path={out}"], capsys)
    assert "dataset.lmax=40" in err and "band limit" in err and "dataset.lmax<=8" in err
    assert not out.exists()


def test_generate_states_which_models_an_nlon_cannot_train(tmp_path, capsys):
    out = tmp_path / "data"
    generate.main([*GEN, "dataset.nlon=30", f"dataset.path={out}"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "dataset.nlon=30" in line]
    assert len(lines) == 1 and "dandelion" in lines[0] and "SFNO" in lines[0]
    generate.main([*GEN, f"dataset.path={tmp_path / 'even'}"])  # nlon 32: nothing to say
    assert "warning" not in capsys.readouterr().err


@pytest.fixture
def run(tmp_path):
    data = tiny_dataset.make_tiny_dataset(tmp_path / "data")
    return data, pointwise_checkpoint(data, tmp_path / "run" / "best.pt")


def test_export_to_a_place_that_refuses_files_is_refused_before_the_rollout(run, tmp_path, capsys, monkeypatch):
    data, ckpt = run
    target = tmp_path / "ro" / "fc.nc"
    target.parent.mkdir()

    def refuse(*args, **kwargs):  # what the OS answers in a read-only folder
        raise PermissionError(errno.EACCES, "Permission denied")

    def forbidden(*args, **kwargs):
        raise AssertionError("the rollout ran before the output was checked")

    monkeypatch.setattr("dandelion.runtime.tempfile.mkstemp", refuse)
    monkeypatch.setattr(export, "stream_forecasts", forbidden)
    err = one_line_error(export.main, [f"checkpoint={ckpt}", f"dataset.path={data}", f"output={target}"], capsys)
    assert f"output={target}" in err and str(target.parent) in err and "writable" in err


def test_rollout_rerun_is_refused_unless_overwrite(run, tmp_path, capsys):
    data, ckpt = run
    out = tmp_path / "roll"
    argv = [f"checkpoint={ckpt}", f"dataset.path={data}", f"output_dir={out}", "n_steps=2", "plots=false"]
    rollout.main([*argv, "progress=false"])
    first = (out / "metrics.json").read_text()
    capsys.readouterr()
    err = one_line_error(rollout.main, argv, capsys)
    assert "metrics.json" in err and "overwrite=true" in err and str(out) in err
    assert (out / "metrics.json").read_text() == first
    rollout.main([*argv, "overwrite=true", "progress=false"])
    assert (out / "metrics.json").is_file()
