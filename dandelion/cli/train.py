"""``dandelion-train``: train a model on a generated dataset folder (or one in the Well's layout).

Protocol: ``n_in`` = 4 normalised frames in, the next frame out, trained with
AdamW, a linear warm-up then a cosine decay of the learning rate (Loshchilov & Hutter 2017), and an
area-weighted MSE in normalised units (quadrature weights normalised to mean 1, so the loss is the
integral of the squared error over the sphere divided by 4*pi). Then an autoregressive fine-tune
phase: windows of ``n_out >= 2`` targets, the model's own predictions fed back as inputs, loss
averaged over the steps. ``trainer.target`` says what the network outputs
(:func:`dandelion.step.next_frame`):
``frame`` = the next normalised frame itself, ``x_{t+1} = model([x_{t-n_in+1} .. x_t])``, or
``increment`` = the normalised one-step increment, ``x_{t+1} = x_t + s * model(...)`` with ``s`` the
per-channel ratio of the train split's one-step-difference spread to the field spread
(:meth:`ChannelLayout.increment_scale`, from stats.yaml), so that the output has unit spread and a
zero output is persistence; the loss is then measured in units of the increment. ``trainer.inputs``
says what it sees: ``frames`` (the window of normalised frames) or ``differences``
(:func:`dandelion.step.difference_window`: the older frames as scaled differences to the newest). Both choices are
stored in the checkpoint and used by every rollout.

Exact resume: the data order of an epoch is a pure function of ``(seed, epoch)`` (a permutation
from a generator seeded with ``seed + epoch``, sharded across ranks like ``DistributedSampler``),
the checkpoint holds model, optimiser, scheduler, RNG states (of every rank), step, epoch and the
batch reached in the epoch, so ``resume=PATH`` continues bit-identically on CPU (on GPU up to the
non-determinism of its kernels). The pieces: :class:`dandelion.training.trainer.Trainer`, the schedule and
sampler of :mod:`dandelion.training.schedule`, the process group of :class:`dandelion.runtime.ProcessGroup`.
``trainer.max_steps`` bounds the run and the schedule;
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

This module only turns the configuration into the plain-Python objects of :mod:`dandelion.training`
(:func:`build_trainer`: :class:`~dandelion.training.options.TrainOptions` from the ``trainer`` group, a model spec
from ``model``, the dataset folder, seed, device, run_dir, resume) and fits. From Python without hydra:
:func:`dandelion.training.train`; with a configuration composed from ``dandelion.configs/train.yaml``: :func:`train`.
"""

from __future__ import annotations

import contextlib
import json
import logging
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
    check_unlocked,
    explicit_choice,
    is_set,
    require,
    run,
)
from dandelion.forecast import INPUTS, TARGETS
from dandelion.locks import OutputLock, noting_state
from dandelion.registry import available_models, import_plugins, resolved_hyperparameters
from dandelion.runtime import check_writable, plain
from dandelion.training.options import TrainOptions
from dandelion.training.trainer import Trainer

__all__ = ["train", "build_trainer", "check", "main"]

log = logging.getLogger("dandelion.cli.train")


def build_trainer(cfg) -> Trainer:
    """The :class:`~dandelion.training.trainer.Trainer` of a composed ``train.yaml`` configuration (a DictConfig or a
    plain mapping): ``plugins`` imported, ``trainer.*`` as :class:`~dandelion.training.options.TrainOptions`,
    ``model.{name,preset,overrides}`` as the model spec, ``dataset.path`` for both splits, ``seed``, ``device``,
    ``run_dir``, ``resume``; the resolved configuration, with the model group as its spec (the keys left null are the
    preset's values), is the run's ``config.yaml``.

    Raises
    ------
    ValueError
        For a missing ``dataset.path``, a bad trainer option (named ``trainer.<option>``), or any of
        :class:`Trainer`'s errors.
    """
    c = plain(cfg)
    import_plugins(c.get("plugins"))  # modules registering extra models
    dataset = c.get("dataset") or {}
    path = dataset.get("path")
    if path is None or path == "???":
        raise ValueError(
            "dataset.path is not set: pass dataset=NAME dataset.path=DIR (a folder made by dandelion-generate)"
        )
    options = TrainOptions.from_dict(c.get("trainer") or {}, prefix="trainer.")
    model = c.get("model") or {}
    spec = model_spec_from_config(model)
    trainer = Trainer(
        spec,
        Path(str(path)),
        Path(str(path)),
        options,
        run_dir=c.get("run_dir"),
        seed=int(c.get("seed", 0)),
        device=c.get("device", "auto"),
        resume=c.get("resume"),
        config={**c, "model": spec},  # the model as its spec: the record a run built from Python writes too
        allow_other_data=bool(c.get("allow_other_data", False)),
    )
    name, found = dataset.get("name"), trainer.train_sets[0].metadata.get("name")
    if name and str(name) != str(found):
        log.warning("dataset.name=%s but %s/dataset.yaml names %s", name, trainer.data_path, found)
    return trainer


def model_spec_from_config(model: dict) -> dict:
    """The ``{"name", "preset", "overrides"}`` spec of a composed ``model`` group (``configs/model/<name>.yaml``).

    Every other key of the group is a preset hyper-parameter, null meaning the preset's value: the keys set
    (``model.width=32``) become overrides, and ``model.overrides`` (``+model.overrides.<key>=``) is applied over
    them. With every key null the spec is the one made before the keys were listed, so checkpoints and resumes
    of older runs compare equal.
    """
    keys = {k: v for k, v in model.items() if k not in ("name", "preset", "overrides") and v is not None}
    overrides = {**keys, **dict(model.get("overrides") or {})}
    return {"name": model.get("name"), "preset": model.get("preset"), "overrides": overrides}


def train(cfg) -> dict:
    """Train from a composed ``train.yaml`` configuration (:func:`build_trainer`); returns :meth:`Trainer.fit`'s
    dict (the run's ``result.json``). A given ``run_dir`` is locked while it is written (:class:`OutputLock`: a
    second training into it is refused in one line naming this one)."""
    run_dir = plain(cfg).get("run_dir")
    main_rank = int(os.environ.get("RANK", "0")) == 0
    fresh = bool(run_dir) and not Path(str(run_dir)).exists()
    try:
        with OutputLock.folder(run_dir, "dandelion-train") if run_dir and main_rank else contextlib.nullcontext():
            trainer = build_trainer(cfg)
            try:
                with noting_state(lambda: _state(trainer.run_dir)):  # what an interrupted run says (Ctrl-C)
                    return trainer.fit()
            finally:
                trainer.close()
    except BaseException:
        if fresh and main_rank and not any(Path(str(run_dir)).iterdir()):
            Path(str(run_dir)).rmdir()  # refused before it wrote anything: no empty run folder is left
        raise


def _state(run_dir: Path) -> str:
    """Where an interrupted training keeps its state and how to continue it."""
    last = run_dir / "last.pt"
    if last.is_file():
        return (
            f"state in {last} (written at the end of each epoch); rerun the same command with resume={last} to continue"
        )
    return f"no checkpoint in {run_dir} yet (the first is written at the end of the first epoch); rerun to start again"


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
    importing ``plugins``), the trainer's target, inputs and sizes, then every trainer option
    (:class:`~dandelion.training.options.TrainOptions`). Raises :class:`dandelion.cli.common.UsageError`."""
    path = require(cfg, "dataset.path", "pass dataset=NAME dataset.path=DIR (a folder written by dandelion-generate)")
    check_dataset_folder(path, name=explicit_choice(list(overrides), "dataset"))
    check_device(cfg.get("device", "auto"))
    if is_set(cfg, "run_dir") and int(os.environ.get("RANK", "0")) == 0:  # rank 0 locks it (train)
        check_writable(Path(str(cfg.run_dir)) / "config.yaml", "run_dir")  # a read-only folder: one line
        check_unlocked(cfg.run_dir, "dandelion-train")  # another training is writing it now
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
    check_choice(cfg.trainer.get("target", "increment"), TARGETS, "trainer.target")
    check_choice(cfg.trainer.get("inputs", "frames"), INPUTS, "trainer.inputs")
    spec = model_spec_from_config(plain(cfg.model))
    try:  # the preset's value counts as well as an override (Dandelion's presets set advect_state)
        hyper = resolved_hyperparameters(spec["name"], spec["preset"] or "small", spec["overrides"]) or {}
    except ValueError as err:
        raise UsageError(str(err)) from None
    target = cfg.trainer.get("target", "increment")  # TrainOptions' default
    if hyper.get("advect_state") and target != "increment":
        key = "model.overrides" if "advect_state" in (plain(cfg.model).get("overrides") or {}) else "model"
        raise UsageError(
            f"model={spec['name']} (preset {spec['preset'] or 'small'}) has advected persistence (advect_state): it "
            "moves the newest frame and adds an increment, so it needs trainer.target=increment (got "
            f"trainer.target={target}); or set {key}.advect_state=false"
        )
    check_positive(cfg, ["trainer.n_in", "trainer.batch_size", "trainer.max_steps", "trainer.max_batches_per_epoch"])
    TrainOptions.from_dict(plain(cfg.trainer), prefix="trainer.")  # every other trainer option, named if bad


def _job(cfg: DictConfig) -> None:
    result = train(cfg)
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(result, indent=1))


def main(argv: list[str] | None = None) -> None:
    """``dandelion-train`` (hydra: ``model=``, ``dataset=NAME dataset.path=DIR``, ``trainer=``, ``experiment=``, ...;
    ``--help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _check_torchrun_argv(argv)
    run("dandelion-train", "train", _job, check=check, argv=argv)


if __name__ == "__main__":
    main()
