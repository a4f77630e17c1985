"""``dandelion-well-resample`` marks its output incomplete until done: nothing reads a partial output (no statistics
are cached from a partial split), a rerun of the same command resumes it, another source or grid is refused."""

from __future__ import annotations

import pytest
import tiny_model  # noqa: F401 - registers "_pointwise_test"
import tiny_well
import yaml
from cli_result import one_line_error

from dandelion.cli import train, well_resample
from dandelion.datasets import well_resample as resample_module
from dandelion.datasets.well import STATS_CACHE, WellFolder

NLAT, NLON, T = 12, 24, 8
_RESAMPLE_FILE = resample_module.resample_well_file


def _src(tmp_path):
    splits = {"train": [0, 1, 2, 3, 4], "valid": [5], "test": [6]}
    rows = tiny_well.planetswe_rows(NLAT)
    return tiny_well.make_well_folder(tmp_path / "pswe", rows, NLON, n_frames=T, splits=splits)


def _interrupt_after(monkeypatch, n: int, exc=KeyboardInterrupt):
    """Make the resample stop (as a Ctrl-C or a kill would) after ``n`` files; returns the list of files written."""
    done, real = [], _RESAMPLE_FILE

    def partial(src, dst, grid):
        if len(done) == n:
            raise exc()
        done.append(dst)
        return real(src, dst, grid)

    monkeypatch.setattr(resample_module, "resample_well_file", partial)
    return done


def test_interrupted_resample_is_refused_by_train_before_any_statistics(tmp_path, monkeypatch, capsys):
    src, dst = _src(tmp_path), tmp_path / "lg"
    _interrupt_after(monkeypatch, 3)
    err = one_line_error(well_resample.main, [f"src={src}", f"dst={dst}"], capsys, status=130)
    assert err.startswith("dandelion-well-resample: error: interrupted: state in") and str(dst) in err
    assert "dandelion-well-resample src=" in err and "to continue" in err
    assert len(list((dst / "data" / "train").glob("*.hdf5"))) == 3  # a partial train split, no valid/test
    argv = [f"dataset.path={dst}", f"run_dir={tmp_path / 'run'}", "model.name=_pointwise_test", "trainer=quick"]
    err = one_line_error(train.main, [*argv, "device=cpu"], capsys)
    assert "unfinished dandelion-well-resample output" in err and "splits.json" not in err
    assert not (dst / STATS_CACHE).exists() and not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="unfinished dandelion-well-resample"):
        WellFolder(dst)
    assert not (dst / STATS_CACHE).exists()


def test_rerun_resumes_an_unfinished_resample(tmp_path, monkeypatch):
    src, dst = _src(tmp_path), tmp_path / "lg"
    _interrupt_after(monkeypatch, 2, exc=RuntimeError)
    with pytest.raises(RuntimeError):
        resample_module.resample_well_folder(src, dst)
    first = sorted((dst / "data" / "train").glob("*.hdf5"))
    stamps = {p: p.stat().st_mtime_ns for p in first}
    done = _interrupt_after(monkeypatch, 100)
    resample_module.resample_well_folder(src, dst)
    assert len(done) == 7 - len(first)  # only the missing files are computed
    assert all(p.stat().st_mtime_ns == stamps[p] for p in first)
    assert yaml.safe_load((dst / "dandelion_resample.yaml").read_text())["complete"] is True
    assert not (dst / ".dandelion.lock").exists()
    wf = WellFolder(dst)
    assert len(wf.trajectories("train")) == 5 and (dst / STATS_CACHE).is_file()


def test_rerun_with_another_grid_is_refused(tmp_path, monkeypatch):
    src, dst = _src(tmp_path), tmp_path / "lg"
    _interrupt_after(monkeypatch, 1, exc=RuntimeError)
    with pytest.raises(RuntimeError):
        resample_module.resample_well_folder(src, dst)
    with pytest.raises(FileExistsError, match="choose a new dst"):
        resample_module.resample_well_folder(src, dst, nlat=NLAT - 2)
