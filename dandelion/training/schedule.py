"""The training schedule: learning-rate factor, the data order of an epoch, the phases of a run.

The data order of an epoch is a pure function of ``(seed, epoch)`` (:class:`EpochSampler`), so that a
resumed run sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import math

import torch

__all__ = ["WarmupCosine", "RESUME_SCHEDULES", "replan", "EpochSampler", "VAL_SUBSETS", "validation_indices", "phases"]

#: The rules for which validation windows a capped validation evaluates (:func:`validation_indices`).
VAL_SUBSETS = ("spread", "first")
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


class WarmupCosine:
    """Learning-rate factor: linear warm-up over ``warmup_steps``, then cosine decay to ``min_ratio``.

    ``factor(step) = (s + 1) / warmup_steps`` for ``s < warmup_steps``, then
    ``min_ratio + (1 - min_ratio) * (1 + cos(pi * p)) / 2`` with ``p = (s - warmup) / (total - start - warmup)``
    clipped to [0, 1], where ``s = step - start`` (SGDR, Loshchilov & Hutter 2017, eq. 5, one cycle). ``start``
    (default 0) begins the cycle at a later step: a warm restart over the steps ``start .. total_steps``.

    With ``start_factor`` given, there is no warm-up: the factor decays by the same cosine from
    ``start_factor`` at ``start`` to ``min_ratio`` at ``total_steps`` (a schedule re-planned at a resume,
    continuous with the factor the checkpoint had reached).

    A callable object (not a lambda) so that ``LambdaLR.state_dict()`` stores it as plain numbers; every
    variant is this one class, so a checkpoint's schedule loads back whatever it was.
    """

    def __init__(
        self,
        warmup_steps: int,
        total_steps: int,
        min_ratio: float = 0.0,
        start: int = 0,
        start_factor: float | None = None,
    ):
        self.warmup_steps = int(max(0, warmup_steps))
        self.total_steps = int(max(1, total_steps))
        self.min_ratio = float(min_ratio)
        self.start = int(start)
        self.start_factor = None if start_factor is None else float(start_factor)

    def __call__(self, step: int) -> float:
        s = step - self.start
        cosine = lambda p: 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, p))))  # noqa: E731
        if self.start_factor is not None:
            span = max(1, self.total_steps - self.start)
            return self.min_ratio + (self.start_factor - self.min_ratio) * cosine(s / span)
        if s < self.warmup_steps:
            return (s + 1) / self.warmup_steps
        span = max(1, self.total_steps - self.start - self.warmup_steps)
        return self.min_ratio + (1.0 - self.min_ratio) * cosine((s - self.warmup_steps) / span)


#: What a resume does when the configuration plans another number of steps than the checkpoint
#: (``trainer.resume_schedule``): see :func:`replan`.
RESUME_SCHEDULES = ("replan", "restart", "checkpoint")


def replan(
    schedule: WarmupCosine, mode: str, step: int, total_steps: int, warmup_steps: int, min_ratio: float
) -> WarmupCosine | None:
    """The learning-rate factor for the rest of a resumed run whose plan changed to ``total_steps``.

    Parameters
    ----------
    schedule : the checkpoint's factor (as loaded); step : steps done (the next step's index).
    mode : ``"replan"``: continue from the factor the checkpoint reached, ``schedule(step)``, with a cosine
        decay to ``min_ratio`` at the new ``total_steps`` (no new warm-up, the learning rate is continuous);
        ``"restart"``: a warm restart, ``warmup_steps`` of linear warm-up to the peak learning rate, then a cosine
        decay to ``min_ratio`` over the remaining steps; ``"checkpoint"``: keep the checkpoint's schedule
        (returns None; the run then stops where that schedule ends).

    Raises
    ------
    ValueError
        For an unknown mode, or with ``"replan"`` when the checkpoint's schedule had ended (factor at its floor
        ``min_ratio``, the learning rate the remaining steps would keep): the message names
        ``trainer.resume_schedule=restart``.
    """
    if mode not in RESUME_SCHEDULES:
        raise ValueError(f"trainer.resume_schedule={mode!r}: expected one of {RESUME_SCHEDULES}")
    if mode == "checkpoint":
        return None
    if mode == "restart":
        return WarmupCosine(warmup_steps, total_steps, min_ratio, start=step)
    f0 = float(schedule(step))
    if f0 <= schedule.min_ratio + 1e-12:
        raise ValueError(
            f"the checkpoint's learning-rate schedule has ended (factor {f0:g} at step {step}, its floor): "
            f"continuing it would train the {total_steps - step} new steps at that rate. "
            "Pass trainer.resume_schedule=restart for a warm restart (warm-up to trainer.lr, cosine decay over the "
            "new steps), or start a new run"
        )
    return WarmupCosine(warmup_steps, total_steps, min_ratio, start=step, start_factor=f0)


class EpochSampler(torch.utils.data.Sampler):
    """Indices of one epoch, a pure function of ``(seed, epoch, rank, world_size)``.

    As ``torch.utils.data.DistributedSampler``: a permutation of ``range(n)`` from a
    ``torch.Generator`` seeded with ``seed + epoch`` (identity if ``shuffle`` is False), padded by
    wrapping to a multiple of ``world_size`` (``pad=True``; without padding shards may differ by one),
    then every ``world_size``-th index from ``rank``. Of this shard, indices ``[start, stop)`` are
    yielded, which lets a resumed run skip the batches an interrupted run already used.
    """

    def __init__(
        self,
        n: int,
        *,
        seed: int,
        epoch: int,
        rank: int = 0,
        world_size: int = 1,
        shuffle: bool = True,
        pad: bool = True,
        start: int = 0,
        stop: int | None = None,
    ):
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


def validation_indices(
    n: int,
    *,
    max_batches: int | None,
    batch_size: int,
    rank: int = 0,
    world_size: int = 1,
    subset: str = "spread",
    epoch: int = 0,
) -> list[int]:
    """Indices of the validation windows that rank ``rank`` evaluates at the validation after epoch ``epoch``.

    Without a cap (``max_batches`` None), or with one that holds the whole split, every window of ``range(n)``, every
    ``world_size``-th from ``rank`` (no padding). With a cap of ``m = max_batches * batch_size * world_size < n``
    windows in all:

    * ``"spread"``: the ``m`` windows at ``floor((i + u) n / m)``, ``i = 0 .. m-1``, evenly spaced over the split,
      then dealt out every ``world_size``-th from ``rank``; the phase ``u = frac(1/2 + epoch g)`` (``g`` the golden
      ratio's fractional part, a low-discrepancy sequence) moves the subset between epochs, so consecutive
      validations read interleaved windows, and every run validates the same windows after the same epoch. A window
      dataset is ordered trajectory by trajectory and in time within each, so each subset holds every part of the
      split (its trajectories, early and late frames) in proportion, and a mean over several epochs' validations
      estimates the loss over the whole split from that many more windows (a split whose loss is dominated by a few
      windows, such as Cahn-Hilliard's first frames, needs that).
    * ``"first"``: the first ``max_batches * batch_size`` windows of the rank's shard (the rule before ``"spread"``
      existed): on a trajectory-ordered split, the first few trajectories only, a biased estimate of the split's
      loss (kept to reproduce the runs made with it).

    Raises
    ------
    ValueError
        For an unknown ``subset`` (naming :data:`VAL_SUBSETS`).
    """
    if subset not in VAL_SUBSETS:
        raise ValueError(f"val_subset={subset!r}: use one of {list(VAL_SUBSETS)}")
    n, world_size = int(n), int(world_size)
    if max_batches is None or int(max_batches) * int(batch_size) * world_size >= n:
        return list(range(n))[rank::world_size]
    per_rank = int(max_batches) * int(batch_size)
    if subset == "first":
        return list(range(n))[rank::world_size][:per_rank]
    m = per_rank * world_size
    u = (0.5 + int(epoch) * _GOLDEN) % 1.0
    return [int((i + u) * n / m) for i in range(m)][rank::world_size]


def phases(options) -> list[dict]:
    """The phases of a run from the training options (:class:`dandelion.training.options.TrainOptions`, or any object
    with ``epochs`` and ``finetune.epochs``, ``finetune.n_out``): ``pretrain`` (``epochs`` epochs of one-step targets),
    then, when ``finetune.epochs > 0``, ``finetune`` (windows of ``finetune.n_out >= 2`` targets).

    Raises
    ------
    ValueError
        If ``finetune.n_out < 2`` with fine-tune epochs (the autoregressive phase needs two steps or more).
    """
    phases = [{"name": "pretrain", "epochs": int(options.epochs), "n_out": 1}]
    ft = options.finetune
    if int(ft.epochs or 0) > 0:
        n_out = int(ft.n_out)
        if n_out < 2:
            raise ValueError(
                f"trainer.finetune.n_out={n_out}: the autoregressive phase needs n_out >= 2 (or finetune.epochs=0)"
            )
        phases.append({"name": "finetune", "epochs": int(ft.epochs), "n_out": n_out})
    return phases
