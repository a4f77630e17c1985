"""Checks of a dataset configuration's values before anything is written (issue #70): a frame interval that is not a
positive finite time, fewer frames than one training window, a grid whose solver state cannot fit the machine; and,
before each batch, the free space its files need.
:func:`dandelion.datasets.generate.generate` runs them after building the scenario, before it makes the folder."""

from __future__ import annotations

import os
import sys

import numpy as np
import torch
from tqdm.auto import tqdm

from dandelion.disk import check_free_space

from .scenario import Scenario

__all__ = ["MIN_FRAMES", "DEFAULT_WINDOW", "check_frames", "check_memory", "check_batch_space"]

#: Frames one training window needs with ``trainer.n_in=1`` (n_in + 1, the least a dataset must hold) and with the
#: default ``trainer.n_in=4`` (below it a warning names the ``trainer.n_in`` that still fits).
MIN_FRAMES, DEFAULT_WINDOW = 2, 5
#: Arrays of ``nlat x nlon`` float64 values per trajectory a solver holds at least (state, tendencies, stages):
#: the lower bound of :func:`check_memory`'s estimate.
_ARRAYS_PER_TRAJECTORY = 8


def check_frames(scenario: Scenario) -> None:
    """Refuse a frame interval that is not a positive finite time, and fewer frames than one training window.

    Raises ValueError naming the key and the minimum."""
    dt = float(scenario.dt_frame())
    if not (np.isfinite(dt) and dt > 0):
        key = next((k for k in ("dt_frame", "frame_hours", "frame_days") if k in scenario.cfg), "dt_frame")
        raise ValueError(
            f"dataset.{key}={scenario.cfg.get(key, dt)!r} gives a frame interval of {dt} {scenario.time_units}: the "
            "time between stored frames must be positive and finite"
        )
    n = int(scenario.cfg["n_frames"])
    if n < MIN_FRAMES:
        raise ValueError(
            f"dataset.n_frames={n} is below the {MIN_FRAMES} frames one training window needs (trainer.n_in + 1, "
            f"with n_in=1; {DEFAULT_WINDOW} for the default n_in=4): raise dataset.n_frames"
        )
    if n < DEFAULT_WINDOW:
        tqdm.write(
            f"dandelion-generate: warning: dataset.n_frames={n} is below the {DEFAULT_WINDOW} frames a training "
            f"window of the default trainer.n_in=4 needs: train it with trainer.n_in<={n - 1}",
            file=sys.stderr,
        )


def check_memory(scenario: Scenario, batch_size: int, device: str) -> None:
    """Refuse a grid whose solver state alone would exceed the machine's memory (RAM, or the GPU's on CUDA).

    The estimate is a lower bound: ``batch_size x nlat x nlon x 8 bytes x`` :data:`_ARRAYS_PER_TRAJECTORY`. Raises
    ValueError with the estimate, what the machine has and the fix."""
    g = scenario.grid
    need = batch_size * g.nlat * g.nlon * 8 * _ARRAYS_PER_TRAJECTORY
    if str(device).startswith("cuda"):
        have = torch.cuda.get_device_properties(torch.device(device)).total_memory
    else:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise ValueError(
            f"dataset.nlat={g.nlat} x dataset.nlon={g.nlon} with batch_size={batch_size} needs at least "
            f"{need / 1e9:.3g} GB for the solver state but the machine has {have / 1e9:.3g} GB "
            f"({'GPU' if str(device).startswith('cuda') else 'RAM'}): lower dataset.nlat and dataset.nlon (or "
            "batch_size)"
        )


def check_batch_space(root, scenario: Scenario, n_files: int) -> None:
    """Refuse a batch of ``n_files`` trajectory files when the folder's file system has less free space than they
    need: the size of the largest file already written, else half the uncompressed float32 frames (fields compress
    about that well). Raises :class:`dandelion.disk.DiskFullError` naming the folder and the free space."""
    if n_files < 1:
        return
    written = [p.stat().st_size for split in ("train", "valid", "test") for p in (root / split).glob("traj_*.h5")]
    if written:
        per_file = max(written)
    else:
        components = sum(len(f.source) for f in scenario.fields.values())
        levels = len(scenario.cfg.get("levels") or []) or 1
        per_file = scenario.n_frames * scenario.grid.nlat * scenario.grid.nlon * components * levels * 4 // 2
    check_free_space(root, n_files * per_file, "dataset folder")
