"""``dandelion-bench target=loader``: samples per second of the trainer's data loader alone (no model).

The windows of ``loader.path``'s ``loader.split`` are read through :class:`dandelion.training.loader.EpochLoaders`
(the trainer's loader: workers kept across epochs, ``PREFETCH_FACTOR`` batches read ahead per worker, pinned memory
on CUDA), batches of ``loader.batch_size`` in the trainer's shuffled order
(:class:`~dandelion.training.schedule.EpochSampler`), for each worker count of ``loader.num_workers`` and
``loader.epochs`` epochs of ``loader.n_batches`` batches (fewer where the split is smaller). Per epoch: wall
seconds and samples per second (the first batch included: the first epoch pays for starting the workers, the
next ones show the kept workers); on CUDA each batch is copied to the device (``non_blocking``) as the trainer
does. Compare ``samples_per_s`` with a model's training-step rate (``target=models`` or ``target=roofline``:
batch / step time) to tell which limits a step. Use::

    dandelion-bench target=loader loader.path=data/galewsky 'loader.num_workers=[0,4]' loader.batch_size=16
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.training.loader import PREFETCH_FACTOR, EpochLoaders
from dandelion.training.schedule import EpochSampler

__all__ = ["loader_rows", "bench_loader"]


def loader_rows(ds: WindowDataset, device: str, batch_size: int, workers: int, epochs: int, n_batches: int) -> list:
    """One row per epoch of reading ``n_batches`` batches of ``ds`` with ``workers`` kept workers."""
    dev = torch.device(device)
    loaders = EpochLoaders(batch_size, workers, dev, seed=0)
    rows = []
    try:
        for e in range(int(epochs)):
            sampler = EpochSampler(len(ds), seed=0, epoch=e, stop=int(n_batches) * int(batch_size))
            t0, n, batches = time.perf_counter(), 0, 0
            for batch in loaders(ds, sampler):
                x = batch["x"].to(dev, non_blocking=True)
                batch["y"].to(dev, non_blocking=True)
                n += x.shape[0]
                batches += 1
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            dt = time.perf_counter() - t0
            rows.append(
                {
                    "num_workers": int(workers),
                    "epoch": e,
                    "batch_size": int(batch_size),
                    "batches": batches,
                    "samples": n,
                    "seconds": dt,
                    "samples_per_s": n / max(dt, 1e-9),
                    "persistent_workers": workers > 0,
                    "prefetch_factor": PREFETCH_FACTOR if workers > 0 else None,
                    "pin_memory": dev.type == "cuda",
                }
            )
    finally:
        loaders.close()
    return rows


def bench_loader(c, device: str, save: Callable[[dict], None] | None = None, out: dict | None = None) -> dict:
    """``target=loader`` for the ``loader`` config section ``c`` (see the module docstring)."""
    out = {} if out is None else out
    rows = out.setdefault("rows", [])
    ds = WindowDataset(str(c.path), str(c.split), n_in=int(c.n_in), n_out=int(c.n_out))
    out["dataset"] = {"path": str(c.path), "split": str(c.split), "windows": len(ds), "grid": ds.grid.to_dict()}
    try:
        for w in c.num_workers:
            new = loader_rows(ds, device, int(c.batch_size), int(w), int(c.epochs), int(c.n_batches))
            rows.extend(new)
            if save:
                save(out)
            for r in new:
                print(
                    f"[loader] workers {r['num_workers']} epoch {r['epoch']}: {r['samples']} samples in "
                    f"{r['seconds']:.2f} s = {r['samples_per_s']:.1f} samples/s",
                    flush=True,
                )
    finally:
        ds.close()
    return out
