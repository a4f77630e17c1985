"""Damaged inputs (checkpoint, HDF5 file, statistics cache): each job refuses them in one line naming the file and
the fix, exit status 2, no traceback, and never torch's advice to load with ``weights_only=False``."""

from __future__ import annotations

import pytest
import tiny_well
import torch
from cli_result import one_line_error
from small_generation import generate_folder
from tiny_checkpoint import pointwise_checkpoint

from dandelion.checkpoint import load_checkpoint
from dandelion.cli import export, report, rollout, train, well_resample
from dandelion.datasets.well import STATS_CACHE
from dandelion.sphere import SphereGrid


def _fails(main, argv, capsys) -> str:
    """One line, exit status 2 (:func:`cli_result.one_line_error`), and no advice to load with weights_only=False."""
    err = one_line_error(main, argv, capsys)
    assert "weights_only" not in err
    return err


def _truncate(path, keep: float = 0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


@pytest.fixture
def run(make_tiny_dataset, tmp_path):
    """A tiny dataset and a real checkpoint of the pointwise model (written as dandelion-train writes it)."""
    data = make_tiny_dataset(tmp_path / "data")
    return data, pointwise_checkpoint(data, tmp_path / "run" / "best.pt")


def _jobs(data, ckpt, tmp_path):
    """argv of train (resuming ``ckpt``), rollout and export reading ``data`` with ``ckpt``."""
    return {
        train.main: [
            f"dataset.path={data}",
            f"run_dir={tmp_path / 'again'}",
            f"resume={ckpt}",
            "model.name=_pointwise_test",
            "model.preset=tiny",
            "trainer=quick",
            "device=cpu",
        ],
        rollout.main: [f"checkpoint={ckpt}", f"dataset.path={data}", f"output_dir={tmp_path / 'roll'}", "n_steps=2"],
        export.main: [f"checkpoint={ckpt}", f"dataset.path={data}", f"output={tmp_path / 'fc.nc'}", "n_steps=2"],
    }


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_checkpoint_is_one_line_for_train_rollout_and_export(run, tmp_path, capsys, damage):
    data, ckpt = run
    if damage == "garbage":
        ckpt.write_bytes(b"\x80\x02 not a checkpoint at all " * 40)
    else:
        _truncate(ckpt)
    for main, argv in _jobs(data, ckpt, tmp_path).items():
        err = _fails(main, argv, capsys)
        assert str(ckpt) in err and "not a readable checkpoint" in err and "dandelion-train" in err
    assert not (tmp_path / "roll").exists() and not (tmp_path / "fc.nc").exists()


def test_load_checkpoint_refuses_an_unsafe_pickle_without_advising_weights_only_false(tmp_path):
    """A torch file holding a non-tensor object: ``weights_only=True`` refuses it; the error names the file and the
    fix and does not pass on torch's advice to load it unsafely."""
    from dandelion.runtime import DamagedFileError

    p = tmp_path / "evil.pt"
    torch.save({"format": "dandelion-checkpoint/1", "obj": SphereGrid(4, 8)}, p)
    with pytest.raises(DamagedFileError) as info:
        load_checkpoint(p)
    assert str(p) in str(info.value) and "weights_only" not in str(info.value)
    _truncate(p)
    with pytest.raises(DamagedFileError, match="truncated"):
        load_checkpoint(p)


@pytest.mark.parametrize("split", ["train", "test"])
def test_truncated_trajectory_file_is_one_line_for_train_rollout_and_export(run, tmp_path, capsys, split):
    data, ckpt = run
    bad = _truncate(sorted((data / split).glob("*.h5"))[0])
    jobs = _jobs(data, ckpt, tmp_path)
    jobs[train.main] = [a for a in jobs[train.main] if not a.startswith("resume=")]
    for main, argv in jobs.items():
        if (split == "train") != (main is train.main):
            continue  # training reads the train and valid splits, rollout and export the test split
        err = _fails(main, argv, capsys)
        # the folder's size list names the truncation before HDF5 is asked (datasets/integrity.py)
        assert str(bad) in err and "truncated" in err and "dandelion-generate" in err
    assert not (tmp_path / "again" / "last.pt").exists()


def _well(tmp_path):
    rows = SphereGrid(12, 24, "legendre-gauss").colat.numpy()[::-1].copy()
    return tiny_well.make_well_folder(tmp_path / "well", rows, 24, n_frames=8)


def test_truncated_file_of_a_well_folder_is_named_by_train_and_resample(tmp_path, capsys):
    root = _well(tmp_path)
    bad = _truncate(sorted((root / "data" / "train").glob("*.hdf5"))[1])
    argv = [f"dataset.path={root}", f"run_dir={tmp_path / 'run'}", "model.name=_pointwise_test", "trainer=quick"]
    err = _fails(train.main, [*argv, "device=cpu"], capsys)
    assert str(bad) in err and "truncated or corrupt HDF5" in err
    assert not (root / STATS_CACHE).exists()
    src = tiny_well.make_well_folder(tmp_path / "pswe", tiny_well.planetswe_rows(12), 24, n_frames=8)
    bad = _truncate(sorted((src / "data" / "train").glob("*.hdf5"))[1])
    err = _fails(well_resample.main, [f"src={src}", f"dst={tmp_path / 'lg'}"], capsys)
    assert str(bad) in err and "truncated or corrupt HDF5" in err


def test_damaged_statistics_cache_is_named_with_its_fix(tmp_path, capsys):
    root = _well(tmp_path)
    (root / STATS_CACHE).write_text("fields: [unclosed\n")
    argv = [f"dataset.path={root}", f"run_dir={tmp_path / 'run'}", "model.name=_pointwise_test", "trainer=quick"]
    err = _fails(train.main, [*argv, "device=cpu"], capsys)
    assert str(root / STATS_CACHE) in err and "delete it" in err


@pytest.mark.parametrize("name", ["metrics.json", "sample_forecast.nc"])
def test_damaged_rollout_outputs_are_named_by_report(tmp_path, capsys, name):
    folder = tmp_path / "rollout"
    folder.mkdir()
    (folder / "metrics.json").write_text('{"model": "m"}')
    (folder / "sample_forecast.nc").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)  # a truncated netCDF4 file
    if name == "metrics.json":
        (folder / name).write_text('{"model": "m", "metrics": {')
        (folder / "sample_forecast.nc").unlink()
    err = _fails(report.main, [f"rollouts=[{folder}]", f"output_dir={tmp_path / 'out'}"], capsys)
    assert str(folder / name) in err and "rerun the dandelion-rollout" in err


def _flip_middle(path, n: int = 64):
    """Flip ``n`` bytes in the middle of ``path`` (a damaged disk or copy, not a truncation)."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + n] = bytes(b ^ 0xFF for b in data[mid : mid + n])
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("split", ["train", "test"])
def test_trajectory_file_with_flipped_bytes_is_one_line_for_train_rollout_and_export(tmp_path, capsys, split):
    """64 bytes flipped in the middle of a generated file (a frame's chunk): each job exits 2 with one line naming
    the file and ``dandelion-verify``, not h5py's traceback; the folder's checksums list still matches the sizes."""
    data = generate_folder(tmp_path / "data", {"name": "solid_body", "n_frames": 8})
    ckpt = pointwise_checkpoint(data, tmp_path / "run" / "best.pt")
    bad = _flip_middle(sorted((data / split).glob("*.h5"))[0])
    jobs = _jobs(data, ckpt, tmp_path)
    jobs[train.main] = [a for a in jobs[train.main] if not a.startswith("resume=")] + ["dataset=solid_body"]
    for main, argv in jobs.items():
        if (split == "train") != (main is train.main):
            continue
        err = _fails(main, argv, capsys)
        assert str(bad) in err and "dandelion-verify" in err and "regenerate" in err, err
    assert not (tmp_path / "roll" / "metrics.json").exists() and not (tmp_path / "fc.nc").exists()
