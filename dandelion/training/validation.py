"""Validation of a training run: next-step loss and area-weighted VRMSE on the valid split, sharded over ranks."""

from __future__ import annotations

import math

import torch

from dandelion.forecast import rollout
from dandelion.metrics import vrmse
from dandelion.training.inputs import worker_errors
from dandelion.training.schedule import validation_indices

__all__ = ["validate"]


@torch.no_grad()
def validate(trainer, epoch: int = 0) -> dict:
    """A :class:`~dandelion.training.trainer.Trainer`'s next-step loss (area-weighted MSE in the target's units:
    normalised frames, or normalised increments for ``target=increment``) and area-weighted VRMSE (of the frames) on
    the valid split.

    VRMSE: :func:`dandelion.metrics.vrmse` per sample and channel (normalised units,
    area-weighted), averaged. Sharded across ranks without padding and summed, so every rank
    gets the value over the whole split (or, with ``trainer.val_max_batches``, over the windows
    :func:`~dandelion.training.schedule.validation_indices` picks by ``trainer.val_subset`` after ``epoch``).
    """
    model = trainer.bare_model  # no DDP collectives during evaluation
    model.eval()
    o = trainer.options
    indices = validation_indices(
        len(trainer.valid_set),
        max_batches=o.val_max_batches,
        batch_size=trainer.rank_batch,
        rank=trainer.dist.rank,
        world_size=trainer.dist.world_size,
        subset=o.val_subset,
        epoch=epoch,
    )
    w64 = trainer.grid.weights.to(trainer.device)
    sums = [0.0, 0.0, 0.0]  # loss * n, vrmse sum, n
    for batch in worker_errors(trainer._loader(trainer.valid_set, indices)):
        x, y = batch["x"].to(trainer.device), batch["y"][:, 0].to(trainer.device)
        with trainer._autocast():
            pred = rollout(
                model,
                x,
                1,
                y.shape[1],
                trainer.increment_scale,
                trainer.input_scale,
                trainer.wet,
                None if trainer.forcing is None else (trainer.forcing, y[:, None]),
            )[:, 0].float()
        n = x.shape[0]
        sq = (pred - y) ** 2 if trainer.wet is None else torch.where(trainer.wet, (pred - y) ** 2, 0.0)
        sums[0] += float((sq * trainer.weights).mean((-3, -2, -1)).sum())
        sums[1] += float(vrmse(pred.double(), y.double(), w64, wet=trainer.wet)[:, trainer.scored].mean(-1).sum())
        sums[2] += n
    total = trainer.dist.all_sum(sums)
    model.train()
    if total[2] == 0:
        return {"val_loss": math.nan, "val_vrmse": math.nan}
    return {"val_loss": total[0] / total[2], "val_vrmse": total[1] / total[2]}
