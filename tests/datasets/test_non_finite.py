"""Non-finite values: no file is marked complete with a NaN or Inf; readers name the file, trajectory and frame of
one in the data (the statistics pass and each window), so that it is never blamed on the model."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import tiny_well
from tiny_checkpoint import pointwise_checkpoint

from dandelion.cli import rollout
from dandelion.datasets import folder, storage
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.datasets.well import STATS_CACHE, WellFolder
from dandelion.sphere import SphereGrid


def _poison(path, frame: int, group="t0_fields", name="h", value=np.nan):
    """Put ``value`` into one frame, and relist the folder's sizes when it has a list, as if generated so (the
    integrity check of :mod:`dandelion.datasets.integrity` would otherwise refuse the changed file first)."""
    with h5py.File(path, "r+") as f:
        d = f[group][name]
        a = d[0, frame]
        a[1, 2] = value
        d[0, frame] = a
    root = path.parent.parent
    if (root / "checksums.sha256").is_file():
        folder.write_checksums(root, folder.read_checksums(root))


def test_writer_refuses_a_value_that_is_inf_in_float32(tmp_path):
    """1e39 is finite in float64 (what the solver checks) and Inf once stored as float32: the file is not written."""
    g = SphereGrid(5, 8)
    path = tmp_path / "train" / "traj_000000.h5"
    fields = {"h": {"kind": "scalar", "units": "m", "long_name": "h"}}
    w = storage.TrajectoryWriter(
        path,
        dataset_name="x",
        grid=g,
        lmax=g.lmax,
        trajectory_id=0,
        times=[0.0, 1.0],
        time_units="s",
        scalars={},
        fields=fields,
    )
    w.write_frame(0, {"h": np.ones(g.shape)})
    big = np.ones(g.shape)
    big[2, 3] = 1e39
    with pytest.raises(FloatingPointError, match=r"frame 1 of field 'h'.*Inf"):
        with w:
            w.write_frame(1, {"h": big})
    assert not path.exists() and not list(path.parent.glob(".*tmp"))


def test_window_names_the_file_trajectory_and_frame_of_a_nan(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data", n_frames=10)
    bad = data / "test" / "traj_000004.h5"
    _poison(bad, frame=6)
    ds = WindowDataset(data, "test", n_in=4, n_out=1)
    ds[0]  # frames 0..4: finite
    with pytest.raises(ValueError) as info:
        ds[2]  # frames 2..6
    msg = str(info.value)
    assert str(bad) in msg and "trajectory 4" in msg and "frame 6" in msg and "'h'" in msg


def test_well_statistics_pass_names_a_nan_and_caches_nothing(tmp_path):
    rows = SphereGrid(12, 24, "legendre-gauss").colat.numpy()[::-1].copy()
    root = tiny_well.make_well_folder(tmp_path / "well", rows, 24, n_frames=8)
    bad = sorted((root / "data" / "train").glob("*.hdf5"))[1]
    _poison(bad, frame=5, group="t1_fields", name="velocity", value=np.inf)
    with pytest.raises(ValueError) as info:
        WellFolder(root)
    assert str(bad) in str(info.value) and "frame 5" in str(info.value) and "velocity" in str(info.value)
    assert not (root / STATS_CACHE).exists()


def test_rollout_on_data_with_a_nan_is_one_line_and_writes_no_metrics(make_tiny_dataset, tmp_path, capsys):
    data = make_tiny_dataset(tmp_path / "data")
    ckpt = pointwise_checkpoint(data, tmp_path / "run" / "best.pt")
    bad = data / "test" / "traj_000004.h5"
    _poison(bad, frame=3)
    out = tmp_path / "roll"
    with pytest.raises(SystemExit) as info:
        rollout.main([f"checkpoint={ckpt}", f"dataset.path={data}", f"output_dir={out}", "n_steps=2"])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(bad) in err and "not finite" in err and "frame 3" in err
    assert not (out / "metrics.json").exists()
