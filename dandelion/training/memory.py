"""Memory that fits: micro-batches with gradient accumulation, and block checkpointing, chosen from an estimate.

A training step of batch ``B`` keeps, until its backward, the activations autograd saves: about ``B * n_out * s``
bytes for a rollout of ``n_out`` steps of a model saving ``s`` bytes per sample and step (the paper Dandelion at
256x512 in bf16: ``s`` = 4,012 MiB, so a batch-16 fine-tune on 4-step windows would hold 251 GiB; issue #69).
This module

* counts ``s`` without running the model (:func:`saved_bytes_per_sample`: one forward on fake tensors under
  :func:`torch.autograd.graph.saved_tensors_hooks`, unique storages, parameters and buffers excluded; the
  accounting of ``dandelion-bench target=models`` and ``target=roofline``, which use :func:`saved_activation_bytes`);
* chooses the micro-batch (:func:`plan_micro_batch`): the largest ``m <= B`` whose saved activations fit the
  budget, the batch then split into ``ceil(B / m)`` micro-batches whose gradients are accumulated before the one
  optimiser step; where even ``m = 1`` does not fit and the model can checkpoint its blocks (an attribute
  ``checkpoint_blocks``, Dandelion's), checkpointing is turned on and ``s`` counted again;
* runs the accumulated step (:func:`accumulate`): micro-batch ``i`` of ``n_i`` samples contributes
  ``(n_i / B) * loss_i`` to the loss and its gradient, so for a loss that is a mean over samples (the trainer's
  :func:`dandelion.metrics.area_weighted_mse`) the optimiser sees the gradient of the whole batch's loss, up to
  rounding (``tests/training/test_memory.py``). Under DDP the gradient all-reduce runs once, at the last
  micro-batch (``no_sync`` before).

The budget (:func:`device_budget`): on CUDA ``fraction`` of the free device memory after the model's parameters,
gradients and AdamW moments (4 copies of the parameters) are allocated; on the CPU None (no split) unless given.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from dandelion.registry import unwrap_model
from dandelion.step import advected, increment_step

__all__ = [
    "per_rank_batch",
    "plan_phases",
    "MicroBatchPlan",
    "saved_activation_bytes",
    "saved_bytes_per_sample",
    "plan_micro_batch",
    "device_budget",
    "accumulate",
]


def _storage(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s._cdata, s.nbytes()


def saved_activation_bytes(fn: Callable[[], object], resident: list[torch.Tensor] = ()) -> int:
    """Bytes of the distinct storages autograd packs for the backward while ``fn()`` runs, minus ``resident`` ones.

    Storages are told apart by identity (works for real and fake tensors); a view counts with its base once.
    ``resident``: tensors whose storages are not activations (parameters, buffers, and their fake copies).
    The graph ``fn`` builds is dropped before returning.
    """
    skip = {_storage(t)[0] for t in resident}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key, n = _storage(t)
        seen[key] = n
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return int(sum(n for k, n in seen.items() if k not in skip))


def saved_bytes_per_sample(
    model: torch.nn.Module, in_shape: tuple[int, int, int], n_steps: int = 1, amp: bool = False
) -> int:
    """Activations saved per sample by a training forward of ``n_steps`` autoregressive steps (bytes).

    ``in_shape``: ``(in_channels, nlat, nlon)`` of the model's input. The forward runs at batch 1 on fake tensors
    (nothing is computed or allocated; seconds for a paper model at 256x512) in train mode, under bf16 autocast
    when ``amp``; each step's output replaces the oldest channels of the input, as :func:`dandelion.forecast.rollout`
    does (a model with advected persistence, ``advect_state``, makes its step as :func:`dandelion.step.next_frame`
    does: the newest frame, the last ``C`` input channels, moved along the three displacement channels, plus the
    increment; on a masked dataset the wet-aware sampling of :func:`dandelion.step.advected` is not modelled, about
    1 % low); the float32 loss on the stacked outputs is included. Saved bytes are linear in the batch (every saved
    tensor carries the batch axis or is resident).
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    core = unwrap_model(model)
    advects = bool(getattr(core, "advects_state", False))
    was_training = model.training
    model.train()
    device = next(model.parameters()).device
    tensors = list(model.parameters()) + list(model.buffers())
    mode = FakeTensorMode(allow_non_fake_inputs=True)

    def ones(c: int) -> torch.Tensor:
        return torch.ones(c, device=device)

    with mode:
        fakes = [mode.from_tensor(t) for t in tensors]  # memoised: the model's forward sees these same copies

        def step():
            x = torch.empty((1, *in_shape), device=device)
            ctx = torch.autocast(device.type, dtype=torch.bfloat16) if amp else contextlib.nullcontext()
            preds = []
            with ctx:
                for k in range(n_steps):
                    pred = model(x)
                    if advects:  # advected persistence: the newest frame moved along the last three channels plus
                        c = pred.shape[1] - 3  # the increment at unit scale, as next_frame does
                        pred = increment_step(pred[:, :c], advected(core, x[:, -c:], pred[:, -3:]), c, ones(c))
                    preds.append(pred)
                    if k + 1 < n_steps:
                        c = pred.shape[1]
                        x = torch.cat([x[:, c:], pred.to(x.dtype)], dim=1)
            return torch.stack([p.float() for p in preds], 1).square().mean()

        n = saved_activation_bytes(step, tensors + fakes)
    model.train(was_training)
    return n


@dataclass(frozen=True)
class MicroBatchPlan:
    """How one batch is run: ``micro_batch`` samples per forward/backward, ``n_micro`` of them per optimiser step.

    ``per_sample_bytes``: saved activations per sample of the step (None: not estimated); ``budget_bytes``: what they
    may take (None: no limit); ``checkpoint_blocks``: whether block checkpointing had to be turned on; ``reason``:
    one line for the log.
    """

    batch: int
    micro_batch: int
    per_sample_bytes: int | None = None
    budget_bytes: int | None = None
    checkpoint_blocks: bool = False
    reason: str = ""

    @property
    def n_micro(self) -> int:
        return math.ceil(self.batch / self.micro_batch)

    def as_dict(self) -> dict:
        return {
            "batch": self.batch,
            "micro_batch": self.micro_batch,
            "n_micro": self.n_micro,
            "per_sample_bytes": self.per_sample_bytes,
            "budget_bytes": self.budget_bytes,
            "checkpoint_blocks": self.checkpoint_blocks,
            "reason": self.reason,
        }


def _balanced(batch: int, m: int) -> int:
    """The smallest micro-batch that needs no more micro-batches than ``m`` does (16 at most 11: 2 of 8, not 11 + 5)."""
    return math.ceil(batch / math.ceil(batch / m)) if m >= 1 else m


def plan_micro_batch(
    batch: int,
    per_sample_bytes: int | None,
    budget_bytes: int | None,
    *,
    checkpointed_bytes: Callable[[], int] | None = None,
    what: str = "the model",
) -> MicroBatchPlan:
    """The micro-batch: the fewest micro-batches of at most ``m`` samples, ``m`` the largest with
    ``m * per_sample_bytes <= budget_bytes``, made equal (16 samples at ``m = 11``: two of 8).

    Where one sample does not fit and ``checkpointed_bytes`` is given (a function counting the saved bytes per sample
    with block checkpointing on), it is called and the plan made again with checkpointing on.

    Raises
    ------
    MemoryError
        In one line, when not even one sample fits (after checkpointing where offered): the budget, the bytes per
        sample, and the fixes (a smaller grid or preset, ``checkpoint_blocks``, a larger device).
    """
    batch = int(batch)
    if per_sample_bytes is None or budget_bytes is None:
        return MicroBatchPlan(batch, batch, per_sample_bytes, budget_bytes, reason="no memory budget: one batch")
    m = _balanced(batch, min(batch, int(budget_bytes // max(1, per_sample_bytes))))
    if m >= 1:
        why = "the whole batch fits" if m == batch else f"{math.ceil(batch / m)} micro-batches of <= {m}"
        return MicroBatchPlan(batch, m, per_sample_bytes, budget_bytes, reason=why)
    if checkpointed_bytes is not None:
        ck = int(checkpointed_bytes())
        m = _balanced(batch, min(batch, int(budget_bytes // max(1, ck))))
        if m >= 1:
            why = f"block checkpointing on ({per_sample_bytes / 2**20:.0f} -> {ck / 2**20:.0f} MiB per sample)"
            return MicroBatchPlan(batch, m, ck, budget_bytes, checkpoint_blocks=True, reason=why)
        per_sample_bytes = ck
    raise MemoryError(
        f"{what} saves {per_sample_bytes / 2**30:.2f} GiB of activations per sample, more than the memory budget "
        f"of {budget_bytes / 2**30:.2f} GiB: use a smaller grid or preset, turn checkpoint_blocks on where the model "
        "has it, or a device with more memory (trainer.memory_budget_gib sets the budget)"
    )


def device_budget(
    device: torch.device, model: torch.nn.Module, fraction: float = 0.6, budget_gib: float | None = None
) -> int | None:
    """Bytes the saved activations of one micro-batch may take.

    ``budget_gib`` given: that. Else on CUDA ``fraction * (free - 4 * parameter bytes)`` (free memory now, less the
    gradients and AdamW's two moments still to be allocated, the parameters being resident already counted as used;
    the rest of ``1 - fraction`` is left to the backward's transients and the allocator). Else None (no limit).
    """
    if budget_gib is not None:
        return int(float(budget_gib) * 2**30)
    if device.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(device)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return max(0, int(fraction * (free - 3 * params)))


def accumulate(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    micro_batch: int,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """Backward of ``loss_fn(x, y)`` over the batch in micro-batches of ``micro_batch`` samples; returns the loss.

    Micro-batch ``i`` (``n_i`` samples of ``B``) runs ``(n_i / B) * loss_fn(x_i, y_i)`` forward and backward, so the
    accumulated gradients and the returned (detached) sum are those of the whole batch's mean loss. Under
    ``DistributedDataParallel`` (a ``no_sync`` method) gradients are synchronised at the last micro-batch only.
    The caller zeroes the gradients before and steps the optimiser after.
    """
    b = x.shape[0]
    starts = list(range(0, b, max(1, int(micro_batch))))
    total = torch.zeros((), device=x.device)
    for i, s in enumerate(starts):
        xs, ys = x[s : s + micro_batch], y[s : s + micro_batch]
        last = i == len(starts) - 1
        sync = contextlib.nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()
        with sync:
            loss = loss_fn(xs, ys) * (xs.shape[0] / b) if len(starts) > 1 else loss_fn(xs, ys)
            loss.backward()
        total = total + loss.detach()
    return total


def per_rank_batch(batch: int, world_size: int) -> int:
    """The batch of one rank: the configured (global) ``batch`` divided by ``world_size``.

    Raises
    ------
    ValueError
        In one line when ``world_size`` does not divide ``batch``.
    """
    if int(batch) % int(world_size):
        raise ValueError(
            f"trainer.batch_size={batch} is the global batch and must divide by the {world_size} ranks: "
            f"use a multiple of {world_size} (e.g. {int(world_size) * max(1, round(int(batch) / int(world_size)))})"
        )
    return int(batch) // int(world_size)


def plan_phases(
    model: torch.nn.Module, device: torch.device, batch: int, in_shape: tuple[int, int, int], phases: list, options
) -> dict[int, MicroBatchPlan]:
    """The micro-batch plan of every training phase (keyed by its ``n_out``), block checkpointing turned on in
    ``model`` where a phase needs it.

    ``phases``: dicts with ``n_out`` (:func:`dandelion.training.schedule.phases`); ``options``: the
    :class:`~dandelion.training.options.TrainOptions` (``micro_batch``, ``memory_budget_gib``, ``amp``).
    ``micro_batch`` given: that size for every phase (no estimate). Else the saved bytes per sample of each phase
    (:func:`saved_bytes_per_sample`, ``n_steps = n_out``) against :func:`device_budget` (None on the CPU without
    ``memory_budget_gib``: the whole batch).

    Raises
    ------
    MemoryError
        From :func:`plan_micro_batch` when one sample of a phase does not fit.
    """
    n_outs, amp, micro_batch = [int(p["n_out"]) for p in phases], bool(options.amp), options.micro_batch
    if micro_batch is not None:
        m = min(int(micro_batch), int(batch))
        return {n: MicroBatchPlan(batch, m, reason=f"trainer.micro_batch={micro_batch}") for n in n_outs}
    budget = device_budget(device, model, budget_gib=options.memory_budget_gib)
    plans = {}
    for n in n_outs:
        if budget is None:
            plans[n] = plan_micro_batch(batch, None, None)
            continue
        can_checkpoint = hasattr(model, "checkpoint_blocks") and not model.checkpoint_blocks

        def checkpointed(n=n):
            model.checkpoint_blocks = True
            return saved_bytes_per_sample(model, in_shape, n, amp)

        try:
            per_sample = saved_bytes_per_sample(model, in_shape, n, amp)
        except Exception as err:  # a model whose forward fake tensors cannot run (data-dependent control flow)
            warnings.warn(
                f"the saved activations of {type(model).__name__} could not be counted ({type(err).__name__}: {err}): "
                "the whole batch runs at once; set trainer.micro_batch to split it",
                stacklevel=2,
            )
            plans[n] = plan_micro_batch(batch, None, None)
            continue
        plans[n] = plan_micro_batch(
            batch,
            per_sample,
            budget,
            checkpointed_bytes=checkpointed if can_checkpoint else None,
            what=f"{type(model).__name__} ({n}-step windows)",
        )
    return plans
