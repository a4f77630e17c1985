"""One call that trains: :func:`train` builds a :class:`~dandelion.training.trainer.Trainer`, fits and closes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch.nn as nn

from dandelion.training.options import TrainOptions
from dandelion.training.trainer import Trainer

__all__ = ["train", "TrainResult"]


@dataclass
class TrainResult:
    """What :func:`train` returns; unpacks as ``model, history = train(...)``.

    Attributes
    ----------
    model : the trained network (bare, not DDP-wrapped; the final state, in eval mode, on the run's device);
        ``best.pt`` in ``run_dir`` holds the state of lowest validation loss.
    history : one record per epoch trained (``epoch``, ``phase``, ``step``, ``train_loss``, ``lr``, ``samples_per_s``,
        ``epoch_complete``, ``val_loss``, ``val_vrmse``), the lines of ``metrics.jsonl``; a resumed run's history
        starts with the checkpoint's records.
    summary : :meth:`Trainer.fit`'s dict (the run's ``result.json``: step, stop reason, losses, checkpoint paths, ...).
    """

    model: nn.Module
    history: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return Path(self.summary["run_dir"])

    def __iter__(self):
        yield self.model
        yield self.history


def train(
    model,
    train_data,
    valid_data=None,
    options: TrainOptions | Mapping | None = None,
    *,
    run_dir=None,
    seed: int = 0,
    device="auto",
    resume=None,
    **option_overrides,
) -> TrainResult:
    """Train ``model`` on ``train_data``, validating on ``valid_data``; the arguments are :class:`Trainer`'s.

    Example::

        from dandelion.training import train
        result = train({"name": "dandelion", "preset": "tiny"}, "data/galewsky", run_dir="runs/x",
                       epochs=2, finetune={"epochs": 0}, warmup_steps=10, num_workers=0)
        model, history = result
        again = train({"name": "dandelion", "preset": "tiny"}, "data/galewsky", run_dir="runs/x",
                      epochs=4, finetune={"epochs": 0}, warmup_steps=10, num_workers=0,
                      resume="runs/x/last.pt")  # continues exactly (the schedule re-planned to 4 epochs)

    Returns
    -------
    :class:`TrainResult` (``.model``, ``.history``, ``.summary``).

    Raises
    ------
    ValueError / TypeError
        As :class:`Trainer`; ``FloatingPointError`` for a non-finite training loss.
    """
    trainer = Trainer(
        model,
        train_data,
        valid_data,
        options,
        run_dir=run_dir,
        seed=seed,
        device=device,
        resume=resume,
        **option_overrides,
    )
    try:
        summary = trainer.fit()
    finally:
        trainer.close()
    return TrainResult(model=trainer.bare_model.eval(), history=list(trainer.history), summary=summary)
