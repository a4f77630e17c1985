"""A real checkpoint of the tiny pointwise model, and a live process holding an output lock, for the tests of
damaged inputs and concurrent writers (tests/conftest.py puts tests/helpers on sys.path)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import tiny_model  # noqa: F401 - registers "_pointwise_test"

from dandelion.checkpoint import save_checkpoint
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.registry import build_model


def pointwise_checkpoint(data, file) -> Path:
    """``file`` written as dandelion-train writes a checkpoint: the untrained pointwise model on ``data``'s grid and
    fields, ``n_in`` 4."""
    ds = WindowDataset(data, "train", n_in=4)
    C, g = ds.layout.n_channels, ds.grid
    model = build_model("_pointwise_test", "tiny", 4 * C, C, g.nlat, g.nlon, g.grid)
    spec = {"name": "_pointwise_test", "preset": "tiny", "in_channels": 4 * C, "out_channels": C, "overrides": {}}
    path = save_checkpoint(
        file,
        model=model,
        config={"trainer": {"n_in": 4}},
        stats=ds.layout.to_dict()["stats"],
        grid=g.to_dict(),
        step=0,
        epoch=0,
        extra={"model_spec": spec, "layout": ds.layout.to_dict(), "n_in": 4},
    )
    ds.close()
    return path


def hold_lock(folder, prog: str) -> subprocess.Popen:
    """Another live process holding ``folder``'s :class:`dandelion.locks.OutputLock` (as a running ``prog`` does);
    the caller kills it."""
    code = textwrap.dedent(
        f"""
        import time
        from dandelion.locks import OutputLock
        OutputLock.folder({str(folder)!r}, {prog!r}).acquire()
        print("held", flush=True)
        time.sleep(120)
        """
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p
