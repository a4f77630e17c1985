"""The trainer's data loaders: one per dataset for the whole run, workers kept, batches prefetched, pinned on CUDA.

Reading one window costs CPU (gzip, Fletcher-32, the finite check: about 24 ms for a 5-frame 256x512 window,
issue #69), so a GPU step waits on the loader unless the workers run ahead. :class:`EpochLoaders` builds ONE
:class:`torch.utils.data.DataLoader` per dataset and keeps it: with ``num_workers > 0`` its workers persist across
epochs (``persistent_workers=True``: not re-spawned, their open files kept) and each prefetches
``prefetch_factor`` batches; on CUDA batches come in pinned memory (``pin_memory=True``, so the trainer's
``non_blocking`` copies overlap). The epoch's indices change through a :class:`SwappableSampler` (the
trainer's :class:`~dandelion.training.schedule.EpochSampler` of that epoch, or a list of validation indices),
so the batches, their order and the results are those of a new loader per epoch. ``dandelion-bench
target=loader`` measures samples per second of these loaders alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

__all__ = ["SwappableSampler", "EpochLoaders", "PREFETCH_FACTOR"]

#: Batches each worker reads ahead.
PREFETCH_FACTOR = 4


class SwappableSampler(torch.utils.data.Sampler):
    """A sampler whose indices are replaced between epochs (``inner``: any iterable of indices with a length)."""

    def __init__(self, inner: Iterable[int] = ()):
        self.inner = inner

    def __iter__(self) -> Iterator[int]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


class EpochLoaders:
    """One kept DataLoader per dataset (see the module docstring); call with ``(dataset, indices)`` for an epoch.

    Parameters
    ----------
    batch_size : int
        Samples per batch (the trainer's per-rank batch).
    num_workers : int
        Worker processes per loader (0: read in the main process, nothing persists).
    device : torch.device
        Pinned memory on CUDA.
    seed : int
        Seeds the loaders' generator (the global RNG stays untouched).
    """

    def __init__(self, batch_size: int, num_workers: int, device: torch.device, seed: int = 0):
        self.batch_size, self.num_workers = int(batch_size), int(num_workers)
        self.pin = torch.device(device).type == "cuda"
        self.seed = int(seed)
        self._kept: dict[int, tuple[torch.utils.data.DataLoader, SwappableSampler]] = {}

    def __call__(self, ds, indices: Iterable[int]) -> torch.utils.data.DataLoader:
        """The loader of ``ds`` yielding the batches of ``indices`` (in order, the last one possibly smaller)."""
        kept = self._kept.get(id(ds))
        if kept is None:
            sampler = SwappableSampler()
            workers = self.num_workers > 0
            loader = torch.utils.data.DataLoader(
                ds,
                batch_size=self.batch_size,
                sampler=sampler,
                num_workers=self.num_workers,
                pin_memory=self.pin,
                drop_last=False,
                generator=torch.Generator().manual_seed(self.seed),
                persistent_workers=workers,
                prefetch_factor=PREFETCH_FACTOR if workers else None,
            )
            kept = self._kept[id(ds)] = (loader, sampler)
        kept[1].inner = indices
        return kept[0]

    def close(self) -> None:
        """Stop the kept workers (persistent workers otherwise live until the loaders are garbage-collected)."""
        for loader, _ in self._kept.values():
            it = getattr(loader, "_iterator", None)
            if it is not None and hasattr(it, "_shutdown_workers"):
                it._shutdown_workers()
        self._kept.clear()
