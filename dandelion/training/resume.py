"""Exact resume of a training run: what :class:`dandelion.training.trainer.Trainer` saves and restores.

The checkpoint holds model, optimiser and scheduler states, the RNG states of every rank, step, epoch and the batch
reached in the epoch (``extra.batch_in_epoch``), the run's history and best validation loss, so that together with the
data order of :class:`dandelion.training.schedule.EpochSampler` (a pure function of seed and epoch) a resumed run takes
bit-identically the steps an uninterrupted one would (on CPU; on GPU up to the non-determinism of its kernels).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from dandelion.checkpoint import (
    checkpoint_hyperparameters,
    load_checkpoint,
    model_state,
    network_differences,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from dandelion.datasets.integrity import check_checkpoint_data
from dandelion.training.schedule import replan

__all__ = ["save", "resume", "replan_schedule"]

log = logging.getLogger(__name__)


def save(trainer, name: str) -> Path:
    """Write the trainer's state to ``trainer.run_dir / name`` (rank 0 only; other ranks return the path).

    A collective under torchrun: every rank calls it at the same points (the RNG states of all ranks are gathered).
    ``extra`` holds the model spec, channel layout, target and inputs, the position in the epoch, the best validation
    loss, the plan, the history, the world size, the dataset folder, the RNG states per rank, the CPU-seconds trained so
    far and the torch thread counts (:class:`dandelion.training.cost.TrainCost`; and the land mask of a masked
    dataset).
    """
    path = trainer.run_dir / name
    per_rank = trainer.dist.all_gather(rng_state())  # collective: every rank calls save at the same points
    cost = trainer.cost.state(trainer.dist)  # collective too: the CPU-seconds so far, summed over the ranks
    if trainer.dist.main:
        extra = {
            "model_spec": trainer.model_spec,
            "layout": trainer.layout.to_dict(),
            "target": trainer.target,
            "inputs": trainer.inputs,
            "batch_in_epoch": trainer.batch_in_epoch,
            "best_val": trainer.best_val,
            "total_steps": trainer.total_steps,
            "history": trainer.history,
            "world_size": trainer.dist.world_size,
            "dataset_path": str(trainer.data_path),
            "data_fingerprint": trainer.data_fingerprint,  # compared on resume and rollout (datasets.integrity)
            "rng_per_rank": per_rank,
            **cost,  # train_cpu_seconds (None: unknown, an older checkpoint was resumed), train_threads
        }
        if trainer.wet is not None:  # the model's extra input channel (dandelion.step.next_frame)
            extra["wet"] = trainer.wet.cpu()
        save_checkpoint(
            path,
            model=trainer.model,
            optimizer=trainer.optimizer,
            scheduler=trainer.scheduler,
            config=trainer.config,
            stats=trainer.layout.to_dict()["stats"],
            grid=trainer.grid.to_dict(),
            step=trainer.step,
            epoch=trainer.epoch,
            extra=extra,
        )
    return path


def resume(trainer, path: Path) -> None:
    """Load ``path`` into ``trainer`` (model, optimiser, scheduler, counters, history, RNG of this rank).

    Raises
    ------
    ValueError
        If the checkpoint was trained on other data and ``trainer.allow_other_data`` is false
        (:func:`dandelion.datasets.integrity.check_checkpoint_data`), if the checkpoint's model spec, ``target``,
        ``inputs`` or grid differ from the trainer's (naming the fix), or its network's hyper-parameters differ
        from the ones the configuration builds now (a preset changed since it was saved), or its plan differs and
        ``resume_schedule`` refuses the re-plan (:func:`replan_schedule`).
    """
    ckpt = load_checkpoint(path, map_location="cpu")
    extra = ckpt.get("extra", {})
    check_checkpoint_data(path, extra, trainer.data_path, trainer.allow_other_data, "resume")
    spec, mine = extra.get("model_spec"), trainer.model_spec
    if spec is not None and mine is not None:
        _check_same_network(path, ckpt, spec, mine)
    for key, value, default in (("target", trainer.target, "frame"), ("inputs", trainer.inputs, "frames")):
        saved = extra.get(key, default)
        if saved != value:
            raise ValueError(
                f"resume={path}: the checkpoint was trained with trainer.{key}={saved} but the configuration "
                f"says {value}: resume with trainer.{key}={saved}"
            )
    if ckpt["grid"] != trainer.grid.to_dict():
        raise ValueError(
            f"resume={path}: checkpoint grid {ckpt['grid']} differs from the data grid {trainer.grid.to_dict()}"
        )
    trainer.bare_model.load_state_dict(model_state(ckpt, trainer.bare_model))
    trainer.optimizer.load_state_dict(ckpt["optimizer"])
    trainer.scheduler.load_state_dict(ckpt["scheduler"])
    trainer.step, trainer.epoch = int(ckpt["step"]), int(ckpt["epoch"])
    planned = int(extra.get("total_steps", trainer.total_steps))
    if planned != trainer.total_steps and trainer.total_steps > trainer.step:
        replan_schedule(trainer, path, planned)
    trainer.batch_in_epoch = int(extra.get("batch_in_epoch", 0))
    trainer.best_val = float(extra.get("best_val", math.inf))
    trainer.history = list(extra.get("history", []))
    trainer.cost.restore(extra, trainer.dist.rank)  # no train_cpu_seconds (an older checkpoint): the total is unknown
    per_rank = extra.get("rng_per_rank") or []
    dist = trainer.dist
    if len(per_rank) == dist.world_size:  # each rank continues its own random streams
        set_rng_state(per_rank[dist.rank])
    elif ckpt.get("rng") is not None:  # another world size: rank 0's states
        set_rng_state(ckpt["rng"])
    log.info(
        "resumed from %s at step %d (epoch %d, batch %d)", path, trainer.step, trainer.epoch, trainer.batch_in_epoch
    )


def _check_same_network(path, ckpt: dict, spec: dict, mine: dict) -> None:
    """Refuse (ValueError) to resume a checkpoint into another network: another name, preset or channel count, or
    other hyper-parameters (compared resolved where both sides have them, so an override that restores what a
    changed preset no longer gives is accepted; else the overrides as given)."""
    keys = ("name", "preset", "in_channels", "out_channels")
    if {k: spec[k] for k in keys} != {k: mine[k] for k in keys}:
        raise ValueError(
            f"resume={path}: checkpoint holds model {spec} but the configuration builds {mine}; "
            "resume with the same model=, model.preset=, model.overrides and dataset"
        )
    saved, now = checkpoint_hyperparameters(ckpt), mine.get("hyperparameters")
    if saved is None or now is None:
        if dict(spec.get("overrides") or {}) != dict(mine["overrides"]):
            raise ValueError(
                f"resume={path}: checkpoint holds model {spec} but the configuration builds {mine}; "
                "resume with the same model.overrides"
            )
        return
    diff = network_differences(spec["name"], saved, now)
    if diff:
        raise ValueError(
            f"resume={path}: the checkpoint's network has other hyper-parameters than the configuration builds "
            f"(saved, now: {diff}; a changed preset or other model.overrides); resume with model.overrides that "
            "restore the saved values, or start a new run"
        )


def replan_schedule(trainer, path: Path, planned: int) -> None:
    """The checkpoint planned ``planned`` steps, the trainer ``trainer.total_steps``: re-plan the learning rate of the
    remaining steps as ``options.resume_schedule`` says (:func:`dandelion.training.schedule.replan`).

    Raises
    ------
    ValueError
        When the re-plan is refused (the checkpoint's schedule had ended and ``resume_schedule=replan``).
    """
    o = trainer.options
    try:
        new = replan(
            trainer.scheduler.lr_lambdas[0],
            o.resume_schedule,
            trainer.step,
            trainer.total_steps,
            o.warmup_for(trainer.total_steps - trainer.step),
            o.min_lr_ratio,
        )
    except ValueError as err:
        raise ValueError(
            f"resume={path}: the checkpoint planned {planned} steps, this configuration {trainer.total_steps}; {err}"
        ) from err
    if new is None:  # the checkpoint's schedule: the run ends where it ends
        trainer.schedule_end = planned
        log.warning(
            "resume: the checkpoint planned %d steps, this configuration %d; trainer.resume_schedule=checkpoint keeps "
            "the checkpoint's schedule, so training stops at step %d",
            planned,
            trainer.total_steps,
            min(planned, trainer.total_steps),
        )
        return
    scheduler, optimizer = trainer.scheduler, trainer.optimizer
    scheduler.lr_lambdas = [new for _ in scheduler.lr_lambdas]
    for group, base in zip(optimizer.param_groups, scheduler.base_lrs):
        group["lr"] = base * new(trainer.step)
    scheduler._last_lr = [g["lr"] for g in optimizer.param_groups]
    log.warning(
        "resume: the checkpoint planned %d steps, this configuration %d; learning rate re-planned (%s) for steps "
        "%d..%d, from %.3g",
        planned,
        trainer.total_steps,
        o.resume_schedule,
        trainer.step,
        trainer.total_steps - 1,
        optimizer.param_groups[0]["lr"],
    )
