"""``dandelion-train``: train a model on a generated dataset folder (or one in the Well's layout).

Protocol: ``n_in`` = 4 normalised frames in, the next frame out, trained with
AdamW, a linear warm-up then a cosine decay of the learning rate (Loshchilov & Hutter 2017), and an
area-weighted MSE in normalised units (quadrature weights normalised to mean 1, so the loss is the
integral of the squared error over the sphere divided by 4*pi). Then an autoregressive fine-tune
phase: windows of ``n_out >= 2`` targets, the model's own predictions fed back as inputs, loss
averaged over the steps. ``trainer.target`` says what the network outputs
(:func:`dandelion.forecast.next_frame`):
``frame`` = the next normalised frame itself, ``x_{t+1} = model([x_{t-n_in+1} .. x_t])``, or
``increment`` = the normalised one-step increment, ``x_{t+1} = x_t + s * model(...)`` with ``s`` the
per-channel ratio of the train split's one-step-difference spread to the field spread
(:meth:`ChannelLayout.increment_scale`, from stats.yaml), so that the output has unit spread and a
zero output is persistence; the loss is then measured in units of the increment. ``trainer.inputs``
says what it sees: ``frames`` (the window of normalised frames) or ``differences``
(:func:`dandelion.forecast.difference_window`: the older frames as scaled differences to the newest). Both choices are
stored in the checkpoint and used by every rollout.

Exact resume: the data order of an epoch is a pure function of ``(seed, epoch)`` (a permutation
from a generator seeded with ``seed + epoch``, sharded across ranks like ``DistributedSampler``),
the checkpoint holds model, optimiser, scheduler, RNG states (of every rank), step, epoch and the
batch reached in the epoch, so ``resume=PATH`` continues bit-identically on CPU (on GPU up to the
non-determinism of its kernels). The pieces: :class:`dandelion.training.trainer.Trainer`, the schedule and
sampler of :mod:`dandelion.training.schedule`, the process group of :class:`dandelion.runtime.ProcessGroup`. ``trainer.max_steps`` bounds the run and the schedule;
``trainer.max_minutes`` and ``trainer.stop_at_step`` stop it early without changing the schedule.
A resume whose configuration plans another number of steps than the checkpoint (other epochs or
``max_steps``) follows ``trainer.resume_schedule`` (:func:`dandelion.training.schedule.replan`): ``replan``
(default) continues the learning rate the checkpoint reached with a cosine decay to the new last step, and
refuses when the checkpoint's schedule had ended (its rate at the floor), naming ``restart``: a new
warm-up and cosine over the remaining steps; ``checkpoint`` keeps the checkpoint's schedule and stops
where it ends. No step is ever taken past the end of a schedule. ``trainer.amp=true``: bf16 autocast
on CUDA or CPU.

Distributed: under ``torchrun --nproc_per_node=N`` the model is wrapped in DDP (gloo on CPU, nccl
on CUDA); every rank trains on its shard of the same per-epoch permutation; rank 0 writes the run
directory, which must be given (``run_dir=DIR``) so that all ranks agree on it.

Use::

    dandelion-train dataset=galewsky dataset.path=DIR model=dandelion model.preset=tiny trainer=quick run_dir=runs/x
    torchrun --nproc_per_node=2 -m dandelion.cli.train dataset.path=DIR run_dir=runs/ddp

or from Python: ``train(cfg)`` with an OmegaConf config composed from ``dandelion.configs/train.yaml``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from omegaconf import DictConfig

from dandelion.cli.common import (
    UsageError,
    check_checkpoint,
    check_choice,
    check_dataset_folder,
    check_device,
    check_positive,
    explicit_choice,
    is_set,
    require,
    run,
)
from dandelion.forecast import INPUTS, TARGETS
from dandelion.registry import available_models, import_plugins
from dandelion.training.trainer import Trainer

__all__ = ["train", "check", "main"]


def train(cfg) -> dict:
    """Train from a composed ``train.yaml`` configuration; returns :meth:`Trainer.fit`'s dict."""
    trainer = Trainer(cfg)
    try:
        return trainer.fit()
    finally:
        trainer.close()


# ---------------------------------------------------------------------------------------------- CLI
def _check_torchrun_argv(argv: list[str]) -> None:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not any(
        a.startswith(("run_dir=", "+run_dir=", "++run_dir=")) for a in argv
    ):
        raise SystemExit(
            "dandelion-train under torchrun needs run_dir=DIR, so that every rank writes to the same run "
            "directory (a default made from each process's clock could differ between ranks)"
        )


def check(cfg, overrides=()) -> None:
    """What ``dandelion-train`` checks before building anything: the dataset folder (complete, and of the
    ``dataset=`` named on the command line), the device, the checkpoint to resume, the model name (after
    importing ``plugins``), the trainer's target, inputs and sizes. Raises :class:`dandelion.cli.common.UsageError`."""
    path = require(cfg, "dataset.path", "pass dataset=NAME dataset.path=DIR (a folder written by dandelion-generate)")
    check_dataset_folder(path, name=explicit_choice(list(overrides), "dataset"))
    check_device(cfg.get("device", "auto"))
    if is_set(cfg, "resume"):
        check_checkpoint(cfg.resume, key="resume")
    elif is_set(cfg, "run_dir"):
        run_dir = Path(str(cfg.run_dir)).expanduser()
        done = [n for n in ("last.pt", "best.pt", "result.json") if (run_dir / n).exists()]
        if done:
            raise UsageError(
                f"run_dir={run_dir} already holds a training run ({', '.join(done)}): pass another run_dir=, "
                f"or resume=RUN/last.pt to continue it, or delete the folder to replace it"
            )
    import_plugins(cfg.get("plugins"))
    check_choice(cfg.model.name, available_models(), "model.name")
    check_choice(cfg.trainer.get("target", "frame"), TARGETS, "trainer.target")
    check_choice(cfg.trainer.get("inputs", "frames"), INPUTS, "trainer.inputs")
    check_positive(cfg, ["trainer.n_in", "trainer.batch_size", "trainer.max_steps", "trainer.max_batches_per_epoch"])


def _job(cfg: DictConfig) -> None:
    result = train(cfg)
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(result, indent=1))


def main(argv: list[str] | None = None) -> None:
    """``dandelion-train`` (hydra: ``model=``, ``dataset=NAME dataset.path=DIR``, ``trainer=``, ``experiment=``, ...; ``--help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _check_torchrun_argv(argv)
    run("dandelion-train", "train", _job, check=check, argv=argv)


if __name__ == "__main__":
    main()
