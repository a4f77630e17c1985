"""The trainer: a model, training and validation data and :class:`~dandelion.training.options.TrainOptions` in, a
trained model, its history and a run directory out. No configuration framework: ``dandelion-train``
(:mod:`dandelion.cli.train`, which describes the protocol) builds a :class:`Trainer` from its hydra configuration, a
notebook builds one directly or calls :func:`dandelion.training.train`.

:class:`Trainer` builds the model (or takes one), optimiser, schedule and data windows of a run, resumes exactly from a
checkpoint (:mod:`dandelion.training.resume`), trains and validates, and writes the run directory (``config.yaml``,
``metrics.jsonl``, ``best.pt``, ``last.pt``, ``result.json``). The forecast step it trains is
:func:`dandelion.forecast.rollout`, the loss :func:`dandelion.metrics.area_weighted_mse`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm.auto import tqdm

from dandelion.datasets.folder import data_fingerprint
from dandelion.datasets.torch_dataset import warn_small_split
from dandelion.forecast import forcing_channels, nonzero_scale, rollout
from dandelion.metrics import area_weighted_mse, loss_weights
from dandelion.registry import build_model, count_parameters, unwrap_model
from dandelion.runtime import ProcessGroup, write_json_atomic
from dandelion.training.cost import TrainCost
from dandelion.training.inputs import (
    check_same_data,
    config_record,
    model_channels,
    model_spec,
    open_windows,
    worker_errors,
)
from dandelion.training.loader import EpochLoaders
from dandelion.training.memory import accumulate, per_rank_batch, plan_phases
from dandelion.training.options import TrainOptions, as_options
from dandelion.training.resume import resume as resume_from
from dandelion.training.resume import save as save_state
from dandelion.training.run_files import append_metrics, default_run_dir, open_run_dir, short_plan_warning
from dandelion.training.schedule import EpochSampler, WarmupCosine, phases
from dandelion.training.validation import validate as validate_trainer

__all__ = ["Trainer", "parameter_hash"]

log = logging.getLogger(__name__)


def parameter_hash(model) -> str:
    """SHA-256 of the bare model's parameters and buffers in state_dict order (bitwise equality test)."""
    h = hashlib.sha256()
    for k, v in unwrap_model(model).state_dict().items():
        if isinstance(v, torch.Tensor):
            h.update(k.encode())
            h.update(v.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes() if v.numel() else b"")
    return h.hexdigest()


class Trainer:
    """One training run: build with the model, the data and the options, then :meth:`fit`.

    Parameters
    ----------
    model : a registered model name (``"dandelion"``, built with preset ``"small"``), a mapping
        ``{"name", "preset", "overrides"}`` (as ``configs/model/*.yaml``), built with
        :func:`dandelion.registry.build_model` for the data's channels and grid after ``torch.manual_seed(seed)``; or an
        ``nn.Module`` mapping ``(B, in_channels, nlat, nlon)`` to ``(B, out_channels, nlat, nlon)``
        (:func:`dandelion.training.inputs.model_channels` gives both; three more output channels for a Dandelion with
        ``advect_state``, :func:`dandelion.step.next_frame`), trained in place. Checkpoints of a registered
        model load with :func:`dandelion.checkpoint.load_model`; those of a module hold its weights and resume with
        the same module class.
    train_data : a dataset folder (its ``train`` split is read) or a
        :class:`~dandelion.datasets.torch_dataset.WindowDataset`; windows of ``n_in`` frames in and one (fine-tune:
        ``finetune.n_out``) out are opened from its folder and split where its own windows differ.
    valid_data : the same for validation (windows of one target); None: the ``valid`` split of ``train_data``'s folder.
    options : :class:`~dandelion.training.options.TrainOptions`, a mapping of them, or None (the defaults, the
        benchmark protocol of ``configs/trainer/default.yaml``); ``**option_overrides`` replace single options
        (``lr=2e-3``, ``finetune={"epochs": 0}``).
    run_dir : the run directory (default ``outputs/train/<date_time>_<pid>``; required under torchrun, so that every
        rank agrees). Receives ``config.yaml``, ``metrics.jsonl``, ``best.pt``, ``last.pt``, ``result.json``.
    seed : model initialisation and the data order (a pure function of seed and epoch).
    device : ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` (:func:`dandelion.runtime.resolve_device`).
    resume : a ``last.pt`` to continue exactly (same model, data and options); its ``metrics.jsonl`` is rewritten to
        the checkpoint's history (:func:`dandelion.training.run_files.rewrite_metrics`).
    allow_other_data : resume a checkpoint trained on another dataset folder (fine-tuning on new data); without it a
        checkpoint whose data fingerprint (:func:`dandelion.datasets.folder.data_fingerprint`) differs is refused.
    config : the record written as ``config.yaml`` and into checkpoints (``dandelion-train`` passes its resolved
        configuration); default: dataset, model, options, seed, device, resume and run_dir in the layout of
        ``train.yaml``.

    Attributes after construction: ``options``, ``model`` (DDP-wrapped under torchrun), ``bare_model``,
    ``optimizer``, ``scheduler``, ``layout``, ``grid``, ``run_dir``, ``step``, ``epoch``, ``history`` (the records
    of ``metrics.jsonl``, one per epoch trained, restored on resume).

    Raises
    ------
    ValueError / TypeError
        For a missing ``train_data``, bad options (:class:`~dandelion.training.options.OptionError`, naming the
        option), statistics lacking a field, a missing split, validation data on another grid, a checkpoint whose
        model does not match, or a plan of no steps (messages name the fix).
    """

    def __init__(
        self,
        model,
        train_data,
        valid_data=None,
        options: TrainOptions | Mapping | None = None,
        *,
        run_dir=None,
        seed: int = 0,
        device="auto",
        resume=None,
        config: Mapping | None = None,
        allow_other_data: bool = False,
        **option_overrides,
    ):
        self.options = o = as_options(options, option_overrides)
        if train_data is None:
            raise ValueError(
                "train_data is not set: pass a dataset folder (written by dandelion-generate) or a WindowDataset"
            )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed={seed!r}: expected an integer")
        self.dist = ProcessGroup(device)
        self.device = self.dist.device
        self.seed = int(seed)
        self.phases = phases(o)
        self.train_sets = [
            open_windows(train_data, "train", o.n_in, p["n_out"], o.stride, "train_data") for p in self.phases
        ]
        if valid_data is None:  # the valid split of the training data's folder
            valid_data = train_data if not hasattr(train_data, "path") else train_data.path
        self.valid_set = open_windows(valid_data, "valid", o.n_in, 1, o.stride, "valid_data")
        given = (train_data, valid_data)  # the caller's WindowDatasets stay open: close() closes only these
        self._opened = [ds for ds in (*self.train_sets, self.valid_set) if not any(ds is g for g in given)]
        check_same_data(self.train_sets[0], self.valid_set)
        self.data_path = Path(self.train_sets[0].path)
        self.layout, self.grid = self.train_sets[0].layout, self.train_sets[0].grid
        in_channels, C = model_channels(self.train_sets[0], o.n_in)  # masked: one more input, the mask
        self.model_spec = model_spec(model, in_channels, C)
        self.target, self.inputs = o.target, o.inputs
        need = self.target == "increment" or self.inputs == "differences"
        scale = self.layout.increment_scale().to(self.device) if need else None
        self.increment_scale = scale if self.target == "increment" else None
        self.input_scale = scale if self.inputs == "differences" else None

        # seeded model initialisation: identical on every rank (DDP also broadcasts rank 0's weights)
        torch.manual_seed(self.seed)
        g, spec = self.grid, self.model_spec
        if spec is not None:
            model = build_model(
                spec["name"], spec["preset"], in_channels, C, g.nlat, g.nlon, g.grid, **spec["overrides"]
            )
        model = model.to(self.device)
        if getattr(unwrap_model(model), "advects_state", False) and self.target != "increment":  # before any work
            raise ValueError(
                "the model has advected persistence (advect_state), which moves the newest frame and adds an "
                f"increment: train it with target='increment' (got target={self.target!r}), or build it without "
                "(overrides={'advect_state': False})"
            )
        self.bare_model = model
        self.rank_batch = per_rank_batch(o.batch_size, self.dist.world_size)  # the configured batch is global
        self.memory = plan_phases(model, self.device, self.rank_batch, (in_channels, g.nlat, g.nlon), self.phases, o)
        self._loaders = EpochLoaders(self.rank_batch, o.num_workers, self.device, self.seed)  # kept for the run
        self.n_parameters = count_parameters(model)  # real scalars, as in the speed and parameter tables
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay
        )
        if self.dist.world_size > 1:
            # Buffers are re-sent from rank 0 at every forward only for a model keeping running statistics:
            # otherwise they are constant tables (SHT, sampler, DISCO filters; about 56 MB for the paper
            # Dandelion at 256x512) rebuilt identically on every rank, and broadcasting them is pure cost.
            running = any(getattr(m, "track_running_stats", False) for m in model.modules())
            model = DDP(
                model, device_ids=[self.device.index] if self.device.type == "cuda" else None, broadcast_buffers=running
            )
        self.model = model

        # steps: each phase's batches per epoch are the same on every rank (padded shards)
        cap = o.max_batches_per_epoch
        self.batches_per_epoch = []
        for ds in self.train_sets:
            per_rank = math.ceil(len(ds) / self.dist.world_size)
            n = math.ceil(per_rank / self.rank_batch)
            self.batches_per_epoch.append(min(n, cap) if cap else n)
            warn_small_split(ds, self.rank_batch, self.dist.world_size)
        planned = sum(p["epochs"] * n for p, n in zip(self.phases, self.batches_per_epoch))
        self.total_steps = min(planned, o.max_steps) if o.max_steps else planned
        if self.total_steps < 1:
            raise ValueError(
                f"no training steps planned (epochs={o.epochs}, max_steps={o.max_steps}): "
                "raise trainer.epochs or max_steps"
            )
        finetune_start = self.phases[0]["epochs"] * self.batches_per_epoch[0] if len(self.phases) > 1 else None
        for key, stop in (("max_steps", o.max_steps), ("stop_at_step", o.stop_at_step)):
            if self.dist.main and stop is not None:
                short_plan_warning(o.warmup_for(self.total_steps), finetune_start, int(stop), f"trainer.{key}")
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, WarmupCosine(o.warmup_for(self.total_steps), self.total_steps, o.min_lr_ratio)
        )
        # masked dataset: the loss and the validation metrics are over wet points (weights zero on land)
        self.wet = None if self.train_sets[0].wet is None else self.train_sets[0].wet.to(self.device)
        # forcing channels (dataset.yaml forcing_fields) are inputs, not targets: the rollout takes them from the truth
        fch = forcing_channels(self.layout, self.train_sets[0].metadata)
        self.forcing = None if fch is None else fch.to(self.device)
        keep = torch.ones(self.layout.n_channels, dtype=torch.bool)
        if fch is not None:
            keep[fch] = False
        self.scored = keep.to(self.device)  # channels the validation VRMSE averages
        self.weights = loss_weights(self.grid, self.wet).to(
            device=self.device, dtype=torch.float32
        )  # (nlat, 1) or (nlat, nlon)
        if self.increment_scale is not None:
            # The loss is measured in units of the target (errors divided by the increment scale per channel): every
            # field's increment counts alike and persistence scores O(1). A channel with scale 0 (a field that never
            # changes) is exactly persistence; its weight stays 1.
            inv2 = nonzero_scale(self.increment_scale.to(torch.float32)) ** -2
            self.weights = self.weights * inv2.reshape(-1, 1, 1)  # (C, nlat, 1)

        self.resume_schedule = o.resume_schedule
        self.schedule_end = None  # step at which the checkpoint's schedule ends (resume_schedule=checkpoint)
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0
        self.best_val = math.inf
        self.history: list[dict] = []
        self.cost = TrainCost()  # CPU-seconds of fit, summed over resumes (dandelion.training.cost)
        self.data_fingerprint = data_fingerprint(self.data_path)  # recorded in checkpoints, compared on resume
        self.allow_other_data = bool(allow_other_data)
        if resume:
            resume_from(self, Path(str(resume)))

        run_dir = run_dir or default_run_dir()
        self.run_dir = Path(self.dist.broadcast(str(run_dir)))  # rank 0's choice, for all ranks
        self.config = dict(config) if config is not None else config_record(self, model, device, resume)
        self.writer = open_run_dir(self, resumed=bool(resume))

    # ------------------------------------------------------------------ checkpoints
    def save(self, name: str) -> Path:
        """Write ``run_dir/name`` (rank 0 only; other ranks return the path): :func:`dandelion.training.resume.save`."""
        return save_state(self, name)

    # ------------------------------------------------------------------ loops
    def _loader(self, ds, sampler):
        """The run's kept loader of ``ds`` for these indices (:class:`dandelion.training.loader.EpochLoaders`)."""
        return self._loaders(ds, sampler)

    def _autocast(self):
        """bf16 autocast on the run's device (CUDA or CPU) with ``options.amp``; the models keep their spectral
        transforms in float32 (e.g. :class:`dandelion.baselines.sfno.Float32Transform`) and the loss is taken in
        float32."""
        if self.options.amp and self.device.type in ("cuda", "cpu"):
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def train_step(self, batch) -> float:
        """One optimiser step on a batch, in the micro-batches of ``self.memory`` (gradients accumulated); returns the
        loss."""
        x = batch["x"].to(self.device, non_blocking=True)
        y = batch["y"].to(self.device, non_blocking=True)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = accumulate(self.model, x, y, self.memory[y.shape[1]].micro_batch, self._loss)
        clip = float(self.options.grad_clip or 0)
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return float(loss)

    def _loss(self, x, y) -> torch.Tensor:
        """The training loss of the windows ``x`` -> ``y`` (one micro-batch); FloatingPointError if not finite."""
        with self._autocast():
            pred = rollout(
                self.model,
                x,
                y.shape[1],
                y.shape[2],
                self.increment_scale,
                self.input_scale,
                self.wet,
                None if self.forcing is None else (self.forcing, y),
            )
        loss = area_weighted_mse(pred.float(), y, self.weights, self.wet)
        if not torch.isfinite(loss):  # the batch's frames are finite (WindowDataset checks each window): the model
            raise FloatingPointError(
                f"the model's output is not finite (loss {loss.item()}) at step {self.step}; the data is not at fault "
                f"(every window read is checked finite): lower trainer.lr (now {self.scheduler.get_last_lr()[0]:.3g}) "
                "or set trainer.grad_clip"
            )
        return loss

    def validate(self, epoch: int = 0) -> dict:
        """Next-step loss and area-weighted VRMSE on the valid split: :func:`dandelion.training.validation.validate`."""
        return validate_trainer(self, epoch)

    def _stop_reason(self, t_start: float, check_time: bool = True) -> str | None:
        o = self.options
        reason = None
        if self.step >= self.total_steps:
            reason = "max_steps" if o.max_steps and self.total_steps == o.max_steps else "done"
        elif self.schedule_end is not None and self.step >= self.schedule_end:
            reason = "schedule_end"
        elif o.stop_at_step and self.step >= o.stop_at_step:
            reason = "stop_at_step"
        if check_time and o.max_minutes:
            late = float(time.perf_counter() - t_start > 60.0 * o.max_minutes)
            if self.dist.all_sum([late])[0] > 0 and reason is None:  # every rank stops together
                reason = "max_minutes"
        return reason

    def _last_train_loss(self) -> float:
        """The last finite ``train_loss`` of the run's history (restored from a resumed checkpoint), else NaN."""
        return next(
            (float(r["train_loss"]) for r in reversed(self.history) if math.isfinite(r.get("train_loss", math.nan))),
            math.nan,
        )

    def fit(self) -> dict:
        """Train (or continue) until the plan, ``max_steps``, ``stop_at_step`` or ``max_minutes`` ends it.

        Returns a dict: run_dir, best and last checkpoint paths, step, total_steps (the plan), epoch,
        stop reason, last train loss (the mean over the last epoch trained; when this call trains nothing,
        e.g. a finished run resumed unchanged, the checkpoint's last recorded one; NaN only for a run that never
        took a step), val_loss and val_vrmse of the final model, best_val_loss, n_parameters, minutes (of this call),
        train_cpu_seconds and train_threads (:meth:`dandelion.training.cost.TrainCost.summary`: process CPU-seconds of
        the whole run, its resumed parts included; None after resuming a checkpoint older than the count). When
        ``max_minutes`` cuts the plan, rank 0 prints a warning "stopped early at step N of M" (and logs it). The
        records of ``metrics.jsonl`` are in :attr:`history`. A damaged data file found mid-run stops it with the
        reader's one-line error (:func:`dandelion.datasets.storage.damaged_file_message`); the checkpoints of the
        epochs before stay as they were.
        """
        t_start = time.perf_counter()
        self.cost.start()
        reason = self._stop_reason(t_start, check_time=False)
        train_loss, val = self._last_train_loss(), {}
        for phase_index, e in self._remaining_epochs():
            if reason:
                break
            losses, seen, seconds, reason = self._train_epoch(phase_index, e, t_start)
            if losses:
                train_loss = float(sum(losses) / len(losses))
            val = self._end_epoch(phase_index, e, train_loss, seen / max(1e-9, seconds))
        if not val:  # nothing was trained in this call (e.g. resumed a finished run): still report and checkpoint
            last = self.epoch if self.batch_in_epoch else max(self.epoch - 1, 0)  # the last validation's epoch
            val = self.validate(last)
            self.save("last.pt")
            if not (self.run_dir / "best.pt").exists():
                self.save("best.pt")
        self.dist.barrier()
        if self.writer is not None:
            self.writer.close()
        return self._finish(t_start, reason, train_loss, val)

    def _remaining_epochs(self):
        """``(phase index, epoch)`` of every epoch of the plan from the current one on, in order."""
        first = 0
        for pi, phase in enumerate(self.phases):
            for e in range(first, first + phase["epochs"]):
                if e >= self.epoch:
                    yield pi, e
            first += phase["epochs"]

    def _train_epoch(self, phase_index: int, e: int, t_start: float) -> tuple[list[float], int, float, str | None]:
        """Train epoch ``e`` of phase ``phase_index`` from the batch reached (a resume continues mid-epoch) until its
        end or a stop reason; returns the batch losses, the samples seen (all ranks), the seconds and the reason."""
        ds, n_batches = self.train_sets[phase_index], self.batches_per_epoch[phase_index]
        start = self.batch_in_epoch if e == self.epoch else 0
        self.epoch, self.batch_in_epoch = e, start
        bs = self.rank_batch
        sampler = EpochSampler(
            len(ds),
            seed=self.seed,
            epoch=e,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            start=start * bs,
            stop=n_batches * bs,
        )
        bar = tqdm(
            total=n_batches,
            initial=start,
            desc=f"{self.phases[phase_index]['name']} epoch {e}",
            disable=not (self.dist.main and self.options.progress),
            leave=False,
            dynamic_ncols=True,
        )
        t0, seen, losses, reason = time.perf_counter(), 0, [], None
        for batch in worker_errors(self._loader(ds, sampler)):
            loss = self.train_step(batch)
            self.batch_in_epoch += 1
            losses.append(loss)
            seen += batch["x"].shape[0] * self.dist.world_size
            bar.update(1)
            lr = self.scheduler.get_last_lr()[0]
            bar.set_postfix(
                loss=f"{loss:.4g}", lr=f"{lr:.3g}", samples_s=f"{seen / max(1e-9, time.perf_counter() - t0):.3g}"
            )
            if self.writer is not None:
                self.writer.add_scalar("train/loss", loss, self.step)
                self.writer.add_scalar("train/lr", lr, self.step)
            reason = self._stop_reason(t_start)
            if reason:
                break
        bar.close()
        return losses, seen, time.perf_counter() - t0, reason

    def _end_epoch(self, phase_index: int, e: int, train_loss: float, samples_per_s: float) -> dict:
        """Validate after epoch ``e``, record it (:attr:`history`, ``metrics.jsonl``, tensorboard) and write
        ``best.pt`` (when the validation loss improved) and ``last.pt``; returns the validation numbers."""
        finished = self.batch_in_epoch >= self.batches_per_epoch[phase_index]
        if finished:  # the epoch is complete: the next one starts at its first batch
            self.epoch, self.batch_in_epoch = e + 1, 0
        val = self.validate(e)
        record = {
            "epoch": e,
            "phase": self.phases[phase_index]["name"],
            "step": self.step,
            "train_loss": train_loss,
            "lr": self.scheduler.get_last_lr()[0],
            "samples_per_s": samples_per_s,
            "epoch_complete": finished,
            **val,
        }
        self.history.append(record)
        if self.dist.main:
            log.info("%s", json.dumps(record))
            append_metrics(self.run_dir, record)
            if self.writer is not None:
                for k in ("val_loss", "val_vrmse"):
                    self.writer.add_scalar(f"valid/{k[4:]}", val[k], self.step)
        if val["val_loss"] < self.best_val:
            self.best_val = val["val_loss"]
            self.save("best.pt")
        self.save("last.pt")
        return val

    def _finish(self, t_start: float, reason: str | None, train_loss: float, val: dict) -> dict:
        """The result of :meth:`fit` (its docstring), written as ``result.json`` by rank 0, with the warning of a run
        cut by ``max_minutes``."""
        result = {
            "run_dir": str(self.run_dir),
            "best": str(self.run_dir / "best.pt"),
            "last": str(self.run_dir / "last.pt"),
            "step": self.step,
            "total_steps": self.total_steps,
            "epoch": self.epoch,
            "stopped": reason or "done",
            "train_loss": train_loss,
            "val_loss": val.get("val_loss", math.nan),
            "val_vrmse": val.get("val_vrmse", math.nan),
            "best_val_loss": self.best_val,
            "n_parameters": self.n_parameters,
            "minutes": (time.perf_counter() - t_start) / 60.0,
            **self.cost.summary(self.dist),  # train_cpu_seconds (summed over resumes; None: unknown), train_threads
        }
        self.cost.stop()
        if self.dist.main:
            write_json_atomic(self.run_dir / "result.json", result)  # atomic: the benchmark reuses a run with one
            if reason == "max_minutes":  # the plan was cut by the wall clock: the numbers depend on the machine
                msg = (
                    f"stopped early at step {self.step} of {self.total_steps}: "
                    f"trainer.max_minutes={self.options.max_minutes:g} ran out "
                    f"(checkpoints written; resume={self.run_dir / 'last.pt'} continues the plan)"
                )
                log.warning(msg)
                print(f"\n{'!' * 100}\nWARNING: {msg}\n{'!' * 100}\n", flush=True)
        return result

    def close(self):
        """Close the datasets the trainer opened (not the WindowDatasets passed in) and its process group."""
        self._loaders.close()
        for ds in self._opened:
            ds.close()
        self.dist.close()
