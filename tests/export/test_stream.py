"""Streaming export (dandelion/export/stream.py): the file written batch by batch equals the one written from the
whole forecast in memory, in both formats and conventions; a failed write leaves no temporary file and an existing
output untouched; the memory held at once is one rollout batch and one forecast's Dataset, never more."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
import tiny_model  # noqa: F401 - registers "_pointwise_test"
import xarray as xr
from tiny_checkpoint import pointwise_checkpoint

from dandelion import forecast as forecast_module
from dandelion.checkpoint import load_model
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.disk import DiskFullError
from dandelion.export import stream
from dandelion.export.forecasts import write_forecast
from dandelion.forecast import forecast


@pytest.fixture
def model_and_data(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data", n_frames=12)
    ckpt = pointwise_checkpoint(data, tmp_path / "run" / "best.pt")
    ds = WindowDataset(data, "train", n_in=4, n_out=1)  # three trajectories
    yield load_model(ckpt, dataset=ds), ds
    ds.close()


def _open(path, fmt):
    return xr.open_zarr(path) if fmt == "zarr" else xr.open_dataset(path)


@pytest.mark.parametrize(
    "fmt, convention, truth, batch_size",
    [("netcdf", "cf", True, 3), ("netcdf", "wb2", False, 2), ("zarr", "cf", True, 4), ("zarr", "wb2", True, 1)],
)
def test_streamed_file_equals_the_file_written_from_memory(
    model_and_data, tmp_path, fmt, convention, truth, batch_size
):
    model, ds = model_and_data
    ext = ".zarr" if fmt == "zarr" else ".nc"
    kw = dict(include_truth=truth, format=fmt, convention=convention)
    whole = write_forecast(forecast(model, ds, n_steps=3, batch_size=batch_size), tmp_path / f"a{ext}", **kw)
    path, n = stream.stream_forecasts(model, ds, tmp_path / f"b{ext}", n_steps=3, batch_size=batch_size, **kw)
    a, b = _open(whole, fmt), _open(path, fmt)
    assert n == a.sizes["trajectory"] * a.sizes["init_time" if convention == "cf" else "time"] == 3 * 6
    xr.testing.assert_identical(a, b)
    for name in a.data_vars:
        assert a[name].encoding.get("chunks", a[name].encoding.get("chunksizes")) == b[name].encoding.get(
            "chunks", b[name].encoding.get("chunksizes")
        )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_write_refused_when_the_estimate_exceeds_the_free_space(model_and_data, tmp_path, monkeypatch):
    """A disk with less free space than the file needs: one line naming the path and the free space, before any
    forecast is written; an existing output stays as it was and no temporary file is left."""
    model, ds = model_and_data
    out = tmp_path / "f.nc"
    out.write_bytes(b"old")

    class Usage:
        free = 1000

    monkeypatch.setattr("dandelion.disk.shutil.disk_usage", lambda p: Usage)
    with pytest.raises(DiskFullError) as info:
        stream.stream_forecasts(model, ds, out, n_steps=3, include_truth=True, overwrite=True)
    assert str(out) in str(info.value) and "1 kB free" in str(info.value)
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["data", "f.nc", "run"]


def test_a_write_that_runs_out_of_space_is_one_line_and_leaves_nothing(model_and_data, tmp_path, monkeypatch):
    model, ds = model_and_data
    real = stream._NetcdfWriter.write
    calls = []

    def fail_second(self, data, traj, slot):
        calls.append(traj)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(self, data, traj, slot)

    monkeypatch.setattr(stream._NetcdfWriter, "write", fail_second)
    with pytest.raises(DiskFullError, match="disk is full"):
        stream.stream_forecasts(model, ds, tmp_path / "f.nc", n_steps=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "run"]
    assert np.isfinite(len(calls))


def test_a_batch_is_written_one_forecast_at_a_time(model_and_data, tmp_path, monkeypatch):
    """Each Dataset built and written holds WRITE_FORECASTS (one) forecast whatever the rollout's batch, and the
    writes cover every (trajectory, initial time) once: the conversion's copies cost one forecast, not a batch."""
    model, ds = model_and_data
    real = stream._NetcdfWriter.write
    writes = []

    def spy(self, data, traj, slot):
        writes.append((traj, slot, data.sizes["init_time"]))
        real(self, data, traj, slot)

    monkeypatch.setattr(stream._NetcdfWriter, "write", spy)
    _, n = stream.stream_forecasts(model, ds, tmp_path / "f.nc", n_steps=3, batch_size=4, include_truth=True)
    assert {size for *_, size in writes} == {1} == {stream.WRITE_FORECASTS}
    assert sorted((traj, slot) for traj, slot, _ in writes) == [(t, s) for t in range(3) for s in range(6)]
    assert n == len(writes) == 18


def test_the_next_batch_is_rolled_out_once_the_last_one_is_released(model_and_data, tmp_path, monkeypatch):
    """When a batch is rolled out, no array of an earlier batch is alive (its normalised rollout, decoded forecast
    and truth): the export's memory is one batch, not two (torch's no_grad around a generator held the batch last
    yielded while the next was made)."""
    model, ds = model_and_data
    earlier, alive = [], []
    real_rollout, real_decode = forecast_module.rollout, model.layout.decode

    def rollout(*args, **kwargs):
        alive.append(sum(ref() is not None for ref in earlier))
        out = real_rollout(*args, **kwargs)
        earlier.append(weakref.ref(out))
        return out

    def decode(x):
        fields = real_decode(x)
        earlier.extend(weakref.ref(v) for v in fields.values())
        return fields

    monkeypatch.setattr(forecast_module, "rollout", rollout)
    monkeypatch.setattr(model.layout, "decode", decode)
    _, n = stream.stream_forecasts(model, ds, tmp_path / "f.nc", n_steps=3, batch_size=2, include_truth=True)
    assert n == 18 and alive == [0] * 9
