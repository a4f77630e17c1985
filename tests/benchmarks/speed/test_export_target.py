"""``dandelion-bench target=export`` (benchmarks/speed/export_memory.py): the peak RSS of a process as wait4 reports
it, and one row per dandelion-export run with the forecasts it wrote (no memory figure of the export is asserted:
those are measurements, in benchmarks/speed/README.md)."""

from __future__ import annotations

import sys

import pytest
from omegaconf import OmegaConf

from dandelion.benchmarks.speed.export_memory import bench_export, markdown, peak_rss
from dandelion.checkpoint import save_checkpoint
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.registry import build_model
from dandelion.training.inputs import model_spec


def test_the_peak_of_a_process_counts_the_memory_it_touched():
    """A child that writes 256 MiB peaks at least 240 MiB above one that allocates nothing."""
    touch = "b = bytearray(256 * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
    idle, busy = peak_rss([sys.executable, "-c", "pass"]), peak_rss([sys.executable, "-c", touch])
    assert idle["returncode"] == busy["returncode"] == 0
    assert busy["peak_rss_kib"] - idle["peak_rss_kib"] >= 240 * 1024


def _dandelion_checkpoint(data, file):
    """An untrained tiny Dandelion saved as dandelion-train saves it (n_in 4), on ``data``'s grid and fields."""
    ds = WindowDataset(data, "train", n_in=4)
    C, g = ds.layout.n_channels, ds.grid
    spec = model_spec({"name": "dandelion", "preset": "tiny"}, 4 * C, C)  # with the hyper-parameter record
    model = build_model("dandelion", "tiny", 4 * C, C, g.nlat, g.nlon, g.grid)
    extra = {"model_spec": spec, "layout": ds.layout.to_dict(), "n_in": 4, "target": "increment"}  # trainer default
    path = save_checkpoint(
        file, model=model, config={"trainer": {"n_in": 4}}, stats=ds.layout.to_dict()["stats"], grid=g.to_dict(),
        step=0, epoch=0, extra=extra,
    )  # fmt: skip
    ds.close()
    return path


def test_bench_export_has_the_imports_row_and_one_row_per_run(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data", nlat=16, nlon=32, n_frames=10)
    ckpt = _dandelion_checkpoint(data, tmp_path / "run" / "best.pt")
    cfg = OmegaConf.create(
        {"checkpoint": str(ckpt), "dataset_path": str(data), "dataset": None, "split": "test",
         "runs": [[1, 2], [None, 3]], "include_truth": True, "batch_size": 2, "threads": 1}
    )  # fmt: skip
    rows = bench_export(cfg, "cpu")["rows"]
    assert [r["run"] for r in rows] == ["imports", "1 x 2", "all x 3"]
    assert [r.get("forecasts") for r in rows] == [None, 1, 10 - 4 + 1 - 3]  # one test trajectory of 10 frames
    assert all(r["peak_rss_kib"] > 0 for r in rows) and rows[2]["file_bytes"] > rows[1]["file_bytes"] > 0
    assert rows[2]["command"].startswith("dandelion-export checkpoint=") and "max_inits" not in rows[2]["command"]
    assert markdown(rows).count("\n") == 1 + len(rows)


def test_bench_export_needs_a_checkpoint_and_a_dataset():
    with pytest.raises(ValueError, match="export.checkpoint"):
        bench_export(OmegaConf.create({"checkpoint": None, "dataset_path": None}), "cpu")
