"""The training options as a plain dataclass: the keys of ``configs/trainer/default.yaml``, same names, same defaults.

:class:`TrainOptions` is what :class:`dandelion.training.trainer.Trainer` reads; ``dandelion-train`` builds it from the
``trainer`` group of its configuration (:meth:`TrainOptions.from_dict` with ``prefix="trainer."``), a notebook builds it
directly (``TrainOptions(lr=2e-3, epochs=10)``) or passes the options as keywords to the trainer. Every option is
checked when the object is made: a bad value raises :class:`OptionError` (a ``ValueError``) in one line that names the
option, its value and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from dandelion.forecast import INPUTS, TARGETS
from dandelion.training.schedule import RESUME_SCHEDULES, VAL_SUBSETS

__all__ = ["TrainOptions", "FinetuneOptions", "OptionError", "as_options"]


class OptionError(ValueError):
    """A training option with a bad value: ``"<prefix><name>=<value>: <why>"`` in one line.

    ``name`` and ``value`` are kept as attributes, so that a caller may name the option its own way
    (:meth:`TrainOptions.from_dict` prefixes ``trainer.`` for the command line).
    """

    def __init__(self, name: str, value, why: str, prefix: str = ""):
        self.name, self.value, self.why = name, value, why
        shown = repr(value) if isinstance(value, str) else value
        super().__init__(f"{prefix}{name}={shown}: {why}")

    def with_prefix(self, prefix: str) -> OptionError:
        return OptionError(self.name, self.value, self.why, prefix)


def _int(name: str, v, low: int, what: str, none_ok: bool = False):
    """``v`` as an int >= ``low`` (an integral float is accepted); None when ``none_ok``."""
    if v is None and none_ok:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise OptionError(name, v, f"{what} must be an integer >= {low}" + (" or None" if none_ok else ""))
    if v < low:
        raise OptionError(name, v, f"{what} must be >= {low}" + (" (None for no limit)" if none_ok else ""))
    return int(v)


def _float(name: str, v, what: str, low: float = 0.0, strict: bool = False, high: float = math.inf):
    """``v`` as a finite float in ``[low, high]`` (``(low, high]`` when ``strict``)."""
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    if not ok or v < low or (strict and v == low) or v > high:
        bound = f"> {low:g}" if strict else f">= {low:g}"
        bound += f" and <= {high:g}" if math.isfinite(high) else ""
        raise OptionError(name, v, f"{what} must be a finite number {bound}")
    return float(v)


def _bool(name: str, v, what: str) -> bool:
    if not isinstance(v, bool):
        raise OptionError(name, v, f"{what} must be True or False")
    return v


def _choice(name: str, v, choices, what: str) -> str:
    if v not in choices:
        raise OptionError(name, v, f"expected one of {tuple(choices)} ({what})")
    return str(v)


def _unknown(names, known, prefix: str = "") -> ValueError:
    bad = sorted(names)[0]
    close = difflib.get_close_matches(bad, known, n=1)
    hint = f"did you mean {prefix}{close[0]}? " if close else ""
    return ValueError(f"unknown training option {prefix}{bad}: {hint}the options are {', '.join(known)}")


@dataclass(frozen=True)
class FinetuneOptions:
    """The autoregressive fine-tune phase (``trainer.finetune``): ``epochs`` (0 = none) of windows with ``n_out``
    targets, the model's own predictions fed back as inputs (``n_out >= 2`` when ``epochs > 0``)."""

    epochs: int = 5
    n_out: int = 2

    def __post_init__(self):
        epochs = _int("finetune.epochs", self.epochs, 0, "the number of fine-tune epochs")
        n_out = _int("finetune.n_out", self.n_out, 0, "the fine-tune steps per window")
        if epochs > 0 and n_out < 2:
            raise OptionError(
                "finetune.n_out", self.n_out, "the autoregressive phase needs n_out >= 2 (or finetune.epochs=0)"
            )
        object.__setattr__(self, "epochs", epochs)
        object.__setattr__(self, "n_out", n_out)


@dataclass(frozen=True)
class TrainOptions:
    """Every option of a training run, as ``configs/trainer/default.yaml`` (the benchmark protocol) defines them.

    Protocol: ``n_in`` normalised frames in, the next frame out; AdamW (``lr``, ``weight_decay``, ``betas``) with a
    linear warm-up over ``warmup_steps`` (or, when ``warmup_fraction`` is given, over that fraction of the planned
    steps, rounded, so that every model and budget warms up alike; a resume re-planned with ``restart`` warms up over
    that fraction of the remaining steps) then a cosine
    decay to ``min_lr_ratio * lr`` over the planned steps
    (:class:`dandelion.training.schedule.WarmupCosine`; Loshchilov & Hutter 2017); ``epochs`` of one-step targets,
    then ``finetune`` (:class:`FinetuneOptions`). ``target``: what the network outputs (``"increment"`` or
    ``"frame"``, :data:`dandelion.step.TARGETS`); ``inputs``: what it sees (``"differences"`` or ``"frames"``,
    :data:`dandelion.step.INPUTS`). ``stride``: frames between the starts of consecutive training windows;
    ``batch_size``: the global batch of one optimiser step (divided evenly over the ranks of a torchrun, so that
    steps, batches and learning rate do not depend on the world size; :func:`dandelion.training.memory.per_rank_batch`);
    ``micro_batch``: samples per forward/backward, gradients accumulated to the batch (None: chosen from the device's
    free memory and the model's saved activations on CUDA, the whole batch on the CPU; ``memory_budget_gib``
    replaces the device's figure; :mod:`dandelion.training.memory`); ``grad_clip``: max global gradient norm (0 or
    None = off); ``amp``: bf16 autocast on CUDA and CPU; ``num_workers``: DataLoader workers per rank (kept across
    epochs, :mod:`dandelion.training.loader`). Limits (None = none): ``max_batches_per_epoch`` and
    ``val_max_batches`` (per rank; ``val_subset`` says which windows a capped validation takes: ``"spread"``, evenly
    spaced over the split, or ``"first"``, the first ones, :func:`dandelion.training.schedule.validation_indices`),
    ``max_steps`` (bounds the run and the schedule), ``max_minutes`` and
    ``stop_at_step`` (stop early with checkpoints, the schedule unchanged). ``resume_schedule``: what a resume whose
    plan differs from the checkpoint's does (:func:`dandelion.training.schedule.replan`). ``progress``: a tqdm bar on
    rank 0; ``tensorboard``: write ``run_dir/tensorboard`` (needs the tensorboard package).

    ``finetune`` may be given as a mapping (``finetune={"epochs": 0}``): missing keys keep their defaults.
    Frozen: :meth:`replace` makes a changed copy (checked again).

    Raises
    ------
    OptionError
        (a ``ValueError``) for a bad value: one line naming the option and the fix, e.g.
        ``lr=-1: the learning rate must be a finite number > 0``.
    """

    n_in: int = 4
    target: str = "increment"
    inputs: str = "differences"
    stride: int = 1
    batch_size: int = 8
    micro_batch: int | None = None
    memory_budget_gib: float | None = None
    epochs: int = 20
    finetune: FinetuneOptions = field(default_factory=FinetuneOptions)
    lr: float = 1.0e-3
    weight_decay: float = 1.0e-2
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = 500
    warmup_fraction: float | None = None
    min_lr_ratio: float = 0.0
    resume_schedule: str = "replan"
    grad_clip: float | None = 1.0
    amp: bool = False
    num_workers: int = 2
    max_batches_per_epoch: int | None = None
    val_max_batches: int | None = None
    val_subset: str = "spread"
    max_steps: int | None = None
    max_minutes: float | None = None
    stop_at_step: int | None = None
    progress: bool = True
    tensorboard: bool = False

    def warmup_for(self, total_steps: int) -> int:
        """The warm-up steps of a run planning ``total_steps``: ``round(warmup_fraction * total_steps)`` when
        ``warmup_fraction`` is given, else ``warmup_steps``."""
        if self.warmup_fraction is None:
            return int(self.warmup_steps)
        return int(round(float(self.warmup_fraction) * int(total_steps)))

    def __post_init__(self):
        ft = self.finetune
        if isinstance(ft, Mapping):
            extra = set(ft) - {"epochs", "n_out"}
            if extra:
                raise _unknown({f"finetune.{k}" for k in extra}, ["finetune.epochs", "finetune.n_out"])
            ft = FinetuneOptions(**ft)
        elif not isinstance(ft, FinetuneOptions):
            raise OptionError("finetune", ft, "expected FinetuneOptions(epochs=..., n_out=...) or a mapping of them")
        betas = self.betas
        two = not isinstance(betas, (str, bytes)) and hasattr(betas, "__len__") and len(betas) == 2
        if not two or not all(
            not isinstance(b, bool) and isinstance(b, (int, float)) and 0.0 <= b < 1.0 for b in betas
        ):
            shown = list(betas) if two else betas
            raise OptionError("betas", shown, "AdamW's betas are two numbers in [0, 1), e.g. [0.9, 0.999]")
        betas = tuple(float(b) for b in betas)
        minutes = self.max_minutes
        if minutes is not None:
            minutes = _float("max_minutes", minutes, "the wall-clock budget in minutes (None for none)", strict=True)
        checked = {
            "n_in": _int("n_in", self.n_in, 1, "the number of input frames"),
            "target": _choice("target", self.target, TARGETS, "what the network outputs"),
            "inputs": _choice("inputs", self.inputs, INPUTS, "what the network sees"),
            "stride": _int("stride", self.stride, 1, "the stride between training windows"),
            "batch_size": _int("batch_size", self.batch_size, 1, "the global batch size"),
            "micro_batch": _int("micro_batch", self.micro_batch, 1, "the micro-batch", none_ok=True),
            "memory_budget_gib": None
            if self.memory_budget_gib is None
            else _float("memory_budget_gib", self.memory_budget_gib, "the activation memory budget", strict=True),
            "epochs": _int("epochs", self.epochs, 0, "the number of one-step epochs"),
            "finetune": ft,
            "lr": _float("lr", self.lr, "the learning rate", strict=True),
            "weight_decay": _float("weight_decay", self.weight_decay, "the weight decay"),
            "betas": betas,
            "warmup_steps": _int("warmup_steps", self.warmup_steps, 0, "the number of warm-up steps"),
            "warmup_fraction": None
            if self.warmup_fraction is None
            else _float(
                "warmup_fraction", self.warmup_fraction, "the warm-up as a fraction of the planned steps", high=1.0
            ),
            "min_lr_ratio": _float("min_lr_ratio", self.min_lr_ratio, "the final learning-rate ratio", high=1.0),
            "resume_schedule": _choice(
                "resume_schedule",
                self.resume_schedule,
                RESUME_SCHEDULES,
                "what a resume with another number of planned steps does with the learning-rate schedule",
            ),
            "grad_clip": None
            if self.grad_clip is None
            else _float("grad_clip", self.grad_clip, "the gradient-norm clip (0 or None = off)"),
            "amp": _bool("amp", self.amp, "bf16 autocast"),
            "num_workers": _int("num_workers", self.num_workers, 0, "the number of DataLoader workers"),
            "max_batches_per_epoch": _int(
                "max_batches_per_epoch", self.max_batches_per_epoch, 1, "the cap on batches per epoch", none_ok=True
            ),
            "val_max_batches": _int(
                "val_max_batches", self.val_max_batches, 1, "the cap on validation batches", none_ok=True
            ),
            "val_subset": _choice(
                "val_subset", self.val_subset, VAL_SUBSETS, "which windows a capped validation evaluates"
            ),
            "max_steps": _int("max_steps", self.max_steps, 1, "the cap on optimiser steps", none_ok=True),
            "max_minutes": minutes,
            "stop_at_step": _int("stop_at_step", self.stop_at_step, 1, "the step to stop at", none_ok=True),
            "progress": _bool("progress", self.progress, "the progress bar"),
            "tensorboard": _bool("tensorboard", self.tensorboard, "tensorboard logging"),
        }
        for k, v in checked.items():
            object.__setattr__(self, k, v)

    @classmethod
    def names(cls) -> list[str]:
        """The option names, in the order of ``configs/trainer/default.yaml``."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, options: Mapping, prefix: str = "") -> TrainOptions:
        """Options from a mapping such as the ``trainer`` group of a configuration (missing keys keep their defaults).

        ``prefix`` is put before option names in error messages (``"trainer."`` for the command line).

        Raises
        ------
        ValueError
            For an unknown key (naming the closest option) or a bad value (:class:`OptionError`).
        """
        options = dict(options or {})
        unknown = set(options) - set(cls.names())
        if unknown:
            raise _unknown(unknown, cls.names(), prefix)
        try:
            return cls(**options)
        except OptionError as err:
            raise err.with_prefix(prefix) from None

    def replace(self, **changes) -> TrainOptions:
        """A copy with ``changes`` (a ``finetune`` mapping is merged into the current fine-tune options).

        Raises
        ------
        ValueError
            For an unknown option name or a bad value.
        """
        if isinstance(changes.get("finetune"), Mapping):
            changes["finetune"] = {**dataclasses.asdict(self.finetune), **changes["finetune"]}
        unknown = set(changes) - set(self.names())
        if unknown:
            raise _unknown(unknown, self.names())
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain containers (``finetune`` a dict, ``betas`` a list), the layout of ``configs/trainer/default.yaml``."""
        d = dataclasses.asdict(self)
        d["betas"] = list(d["betas"])
        return d


def as_options(options, overrides: dict) -> TrainOptions:
    """``options`` (a :class:`TrainOptions`, a mapping of options, or None: the defaults) with ``overrides`` replaced
    (:meth:`TrainOptions.replace`).

    Raises
    ------
    TypeError
        For anything else than those three.
    """
    if options is None:
        options = TrainOptions()
    elif isinstance(options, Mapping):
        options = TrainOptions.from_dict(options)
    elif not isinstance(options, TrainOptions):
        raise TypeError(f"options={type(options).__name__}: expected a TrainOptions, a mapping of options, or None")
    return options.replace(**overrides) if overrides else options
