"""The training schedule: learning-rate factor, the data order of an epoch, the phases of a run.

The data order of an epoch is a pure function of ``(seed, epoch)`` (:class:`EpochSampler`), so that a
resumed run sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import math

import torch

__all__ = ["WarmupCosine", "EpochSampler", "phases"]


class WarmupCosine:
    """Learning-rate factor: linear warm-up over ``warmup_steps``, then cosine decay to ``min_ratio``.

    ``factor(step) = (step + 1) / warmup_steps`` for ``step < warmup_steps``, then
    ``min_ratio + (1 - min_ratio) * (1 + cos(pi * p)) / 2`` with ``p = (step - warmup) / (total - warmup)``
    clipped to [0, 1] (SGDR, Loshchilov & Hutter 2017, eq. 5, one cycle). A callable object (not a
    lambda) so that ``LambdaLR.state_dict()`` stores it as plain numbers.
    """

    def __init__(self, warmup_steps: int, total_steps: int, min_ratio: float = 0.0):
        self.warmup_steps = int(max(0, warmup_steps))
        self.total_steps = int(max(1, total_steps))
        self.min_ratio = float(min_ratio)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        span = max(1, self.total_steps - self.warmup_steps)
        p = min(1.0, max(0.0, (step - self.warmup_steps) / span))
        return self.min_ratio + (1.0 - self.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * p))


class EpochSampler(torch.utils.data.Sampler):
    """Indices of one epoch, a pure function of ``(seed, epoch, rank, world_size)``.

    As ``torch.utils.data.DistributedSampler``: a permutation of ``range(n)`` from a
    ``torch.Generator`` seeded with ``seed + epoch`` (identity if ``shuffle`` is False), padded by
    wrapping to a multiple of ``world_size`` (``pad=True``; without padding shards may differ by one),
    then every ``world_size``-th index from ``rank``. Of this shard, indices ``[start, stop)`` are
    yielded, which lets a resumed run skip the batches an interrupted run already used.
    """

    def __init__(self, n: int, *, seed: int, epoch: int, rank: int = 0, world_size: int = 1, shuffle: bool = True,
                 pad: bool = True, start: int = 0, stop: int | None = None):
        if shuffle:
            g = torch.Generator()
            g.manual_seed(int(seed) + int(epoch))
            idx = torch.randperm(n, generator=g).tolist()
        else:
            idx = list(range(n))
        if pad and world_size > 1 and n % world_size:
            extra = world_size - n % world_size
            idx += (idx * math.ceil(extra / max(1, n)))[:extra]
        shard = idx[rank::world_size]
        self.indices = shard[start:stop]

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


def phases(t) -> list[dict]:
    """The phases of a run from the trainer config ``t``: ``pretrain`` (``t.epochs`` epochs of one-step targets),
    then, when ``t.finetune.epochs > 0``, ``finetune`` (windows of ``t.finetune.n_out >= 2`` targets).

    Raises
    ------
    ValueError
        If ``finetune.n_out < 2`` with fine-tune epochs (the autoregressive phase needs two steps or more).
    """
    phases = [{"name": "pretrain", "epochs": int(t.epochs), "n_out": 1}]
    ft = t.get("finetune") or {}
    if int(ft.get("epochs", 0) or 0) > 0:
        n_out = int(ft.get("n_out", 2))
        if n_out < 2:
            raise ValueError(f"trainer.finetune.n_out={n_out}: the autoregressive phase needs n_out >= 2 (or finetune.epochs=0)")
        phases.append({"name": "finetune", "epochs": int(ft.epochs), "n_out": n_out})
    return phases
