"""The trainer of ``dandelion-train`` (:mod:`dandelion.cli.train` describes the protocol).

:class:`Trainer` builds the model, optimiser, schedule and data of a run from a composed ``train.yaml``
configuration, resumes exactly from a checkpoint, trains and validates, and writes the run directory
(``config.yaml``, ``metrics.jsonl``, ``best.pt``, ``last.pt``, ``result.json``). The forecast step it
trains is :func:`dandelion.forecast.rollout`, the loss :func:`dandelion.metrics.area_weighted_mse`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm.auto import tqdm

from dandelion.checkpoint import load_checkpoint, model_state, rng_state, save_checkpoint, set_rng_state
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.forecast import INPUTS, TARGETS, forcing_channels, nonzero_scale, rollout
from dandelion.metrics import area_weighted_mse, loss_weights, vrmse
from dandelion.registry import build_model, count_parameters, import_plugins, unwrap_model
from dandelion.runtime import ProcessGroup, write_json_atomic, write_text_atomic
from dandelion.training.schedule import RESUME_SCHEDULES, EpochSampler, WarmupCosine, phases, replan

__all__ = ["Trainer", "parameter_hash"]

log = logging.getLogger("dandelion.cli.train")


def parameter_hash(model) -> str:
    """SHA-256 of the bare model's parameters and buffers in state_dict order (bitwise equality test)."""
    h = hashlib.sha256()
    for k, v in unwrap_model(model).state_dict().items():
        if isinstance(v, torch.Tensor):
            h.update(k.encode())
            h.update(v.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes() if v.numel() else b"")
    return h.hexdigest()


class Trainer:
    """Everything :func:`train` does, in an object whose pieces tests and notebooks can inspect.

    Attributes after construction: ``model`` (DDP-wrapped under torchrun), ``optimizer``,
    ``scheduler``, ``layout``, ``grid``, ``run_dir``, ``step``, ``epoch``; :meth:`fit` trains.

    Raises
    ------
    ValueError
        For a missing ``dataset.path``, statistics lacking a field, a missing split, a checkpoint
        whose model does not match the configuration, or bad trainer settings (messages name the fix).
    """

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
        import_plugins(cfg.get("plugins"))  # modules registering extra models
        self.dist = ProcessGroup(cfg.get("device", "auto"))
        self.device = self.dist.device
        t = self.t = cfg.trainer
        path = OmegaConf.select(cfg, "dataset.path", default=None, throw_on_missing=False)
        if path is None or OmegaConf.is_missing(cfg.dataset, "path"):
            raise ValueError(
                "dataset.path is not set: pass dataset=NAME dataset.path=DIR (a folder made by dandelion-generate)"
            )
        self.data_path = Path(str(path))
        self.seed = int(cfg.get("seed", 0))
        self.phases = phases(t)
        n_in = int(t.n_in)
        stride = int(t.get("stride", 1))
        self.train_sets = [
            WindowDataset(self.data_path, "train", n_in=n_in, n_out=p["n_out"], stride=stride) for p in self.phases
        ]
        self.valid_set = WindowDataset(self.data_path, "valid", n_in=n_in, n_out=1, stride=stride)
        self.layout, self.grid = self.train_sets[0].layout, self.train_sets[0].grid
        name = OmegaConf.select(cfg, "dataset.name")
        if name and str(name) != str(self.train_sets[0].metadata.get("name")):
            log.warning(
                "dataset.name=%s but %s/dataset.yaml names %s",
                name,
                self.data_path,
                self.train_sets[0].metadata.get("name"),
            )
        C = self.layout.n_channels
        overrides = cfg.model.get("overrides")
        overrides = (
            OmegaConf.to_container(overrides, resolve=True)
            if isinstance(overrides, DictConfig)
            else dict(overrides or {})
        )
        wet = self.train_sets[0].wet  # masked dataset: one more input channel, the mask (dandelion.forecast.next_frame)
        self.model_spec = {
            "name": str(cfg.model.name),
            "preset": str(cfg.model.preset),
            "in_channels": n_in * C + (wet is not None),
            "out_channels": C,
            "overrides": overrides,
        }
        self.target = str(t.get("target", "frame"))
        if self.target not in TARGETS:
            raise ValueError(f"trainer.target={self.target!r}: expected one of {TARGETS} (what the network outputs)")
        self.inputs = str(t.get("inputs", "frames"))
        if self.inputs not in INPUTS:
            raise ValueError(f"trainer.inputs={self.inputs!r}: expected one of {INPUTS} (what the network sees)")
        need = self.target == "increment" or self.inputs == "differences"
        scale = self.layout.increment_scale().to(self.device) if need else None
        self.increment_scale = scale if self.target == "increment" else None
        self.input_scale = scale if self.inputs == "differences" else None

        # seeded model initialisation: identical on every rank (DDP also broadcasts rank 0's weights)
        torch.manual_seed(self.seed)
        g = self.grid
        model = build_model(
            self.model_spec["name"],
            self.model_spec["preset"],
            self.model_spec["in_channels"],
            C,
            g.nlat,
            g.nlon,
            g.grid,
            **self.model_spec["overrides"],
        ).to(self.device)
        self.bare_model = model
        self.n_parameters = count_parameters(model)  # real scalars, as in the speed and parameter tables
        betas = tuple(float(b) for b in t.get("betas", (0.9, 0.999)))
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=float(t.lr), betas=betas, weight_decay=float(t.weight_decay)
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
        bs = int(t.batch_size)
        cap = t.get("max_batches_per_epoch")
        self.batches_per_epoch = []
        for ds in self.train_sets:
            per_rank = math.ceil(len(ds) / self.dist.world_size)
            n = math.ceil(per_rank / bs)
            self.batches_per_epoch.append(min(n, int(cap)) if cap else n)
        planned = sum(p["epochs"] * n for p, n in zip(self.phases, self.batches_per_epoch))
        self.total_steps = min(planned, int(t.max_steps)) if t.get("max_steps") else planned
        if self.total_steps < 1:
            raise ValueError(
                f"no training steps planned (epochs={t.epochs}, max_steps={t.get('max_steps')}): raise trainer.epochs or max_steps"
            )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, WarmupCosine(int(t.warmup_steps), self.total_steps, float(t.get("min_lr_ratio", 0.0)))
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

        self.resume_schedule = str(t.get("resume_schedule", "replan"))
        if self.resume_schedule not in RESUME_SCHEDULES:
            raise ValueError(
                f"trainer.resume_schedule={self.resume_schedule!r}: expected one of {RESUME_SCHEDULES} (what a resume with "
                "another number of planned steps does with the learning-rate schedule)"
            )
        self.schedule_end = None  # step at which the checkpoint's schedule ends (resume_schedule=checkpoint)
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0
        self.best_val = math.inf
        self.history: list[dict] = []
        if cfg.get("resume"):
            self._resume(Path(str(cfg.resume)))

        run_dir = cfg.get("run_dir") or f"outputs/train/{time.strftime('%Y-%m-%d_%H-%M-%S')}"
        self.run_dir = Path(self.dist.broadcast(str(run_dir)))  # rank 0's choice, for all ranks
        self.writer = None
        if self.dist.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.run_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
            tb = t.get("tensorboard", False)
            if tb:
                try:  # deferred: tensorboard is an optional dependency, needed only with trainer.tensorboard=true
                    from torch.utils.tensorboard import SummaryWriter
                except ImportError as err:
                    raise ImportError(
                        "trainer.tensorboard=true needs the tensorboard package: pip install tensorboard, "
                        "or set trainer.tensorboard=false"
                    ) from err
                self.writer = SummaryWriter(str(self.run_dir / "tensorboard"))

    # ------------------------------------------------------------------ checkpoints
    def _resume(self, path: Path):
        ckpt = load_checkpoint(path, map_location="cpu")
        spec = ckpt.get("extra", {}).get("model_spec")
        keys = ("name", "preset", "in_channels", "out_channels")
        if spec is not None and (
            {k: spec[k] for k in keys} != {k: self.model_spec[k] for k in keys}
            or dict(spec.get("overrides") or {}) != dict(self.model_spec["overrides"])
        ):
            raise ValueError(
                f"resume={path}: checkpoint holds model {spec} but the configuration builds {self.model_spec}; "
                "resume with the same model=, model.preset=, model.overrides and dataset"
            )
        for key, mine, default in (("target", self.target, "frame"), ("inputs", self.inputs, "frames")):
            saved = ckpt.get("extra", {}).get(key, default)
            if saved != mine:
                raise ValueError(
                    f"resume={path}: the checkpoint was trained with trainer.{key}={saved} but the configuration "
                    f"says {mine}: resume with trainer.{key}={saved}"
                )
        if ckpt["grid"] != self.grid.to_dict():
            raise ValueError(
                f"resume={path}: checkpoint grid {ckpt['grid']} differs from the data grid {self.grid.to_dict()}"
            )
        self.bare_model.load_state_dict(model_state(ckpt, self.bare_model))
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        extra = ckpt.get("extra", {})
        self.step, self.epoch = int(ckpt["step"]), int(ckpt["epoch"])
        planned = int(extra.get("total_steps", self.total_steps))
        if planned != self.total_steps and self.total_steps > self.step:
            self._replan_schedule(path, planned)
        self.batch_in_epoch = int(extra.get("batch_in_epoch", 0))
        self.best_val = float(extra.get("best_val", math.inf))
        self.history = list(extra.get("history", []))
        per_rank = extra.get("rng_per_rank") or []
        if len(per_rank) == self.dist.world_size:  # each rank continues its own random streams
            set_rng_state(per_rank[self.dist.rank])
        elif ckpt.get("rng") is not None:  # another world size: rank 0's states
            set_rng_state(ckpt["rng"])
        log.info("resumed from %s at step %d (epoch %d, batch %d)", path, self.step, self.epoch, self.batch_in_epoch)

    def _replan_schedule(self, path: Path, planned: int) -> None:
        """The checkpoint planned ``planned`` steps, this configuration ``self.total_steps``: re-plan the learning rate
        of the remaining steps as ``trainer.resume_schedule`` says (:func:`dandelion.training.schedule.replan`)."""
        t = self.t
        try:
            new = replan(
                self.scheduler.lr_lambdas[0],
                self.resume_schedule,
                self.step,
                self.total_steps,
                int(t.warmup_steps),
                float(t.get("min_lr_ratio", 0.0)),
            )
        except ValueError as err:
            raise ValueError(
                f"resume={path}: the checkpoint planned {planned} steps, this configuration {self.total_steps}; {err}"
            ) from err
        if new is None:  # the checkpoint's schedule: the run ends where it ends
            self.schedule_end = planned
            log.warning(
                "resume: the checkpoint planned %d steps, this configuration %d; trainer.resume_schedule=checkpoint keeps "
                "the checkpoint's schedule, so training stops at step %d",
                planned,
                self.total_steps,
                min(planned, self.total_steps),
            )
            return
        self.scheduler.lr_lambdas = [new for _ in self.scheduler.lr_lambdas]
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base * new(self.step)
        self.scheduler._last_lr = [g["lr"] for g in self.optimizer.param_groups]
        log.warning(
            "resume: the checkpoint planned %d steps, this configuration %d; learning rate re-planned (%s) for steps %d..%d, "
            "from %.3g",
            planned,
            self.total_steps,
            self.resume_schedule,
            self.step,
            self.total_steps - 1,
            self.optimizer.param_groups[0]["lr"],
        )

    def save(self, name: str) -> Path:
        """Write ``run_dir/name`` (rank 0 only; other ranks return the path)."""
        path = self.run_dir / name
        per_rank = self.dist.all_gather(rng_state())  # collective: every rank calls save at the same points
        if self.dist.main:
            extra = {
                "model_spec": self.model_spec,
                "layout": self.layout.to_dict(),
                "target": self.target,
                "inputs": self.inputs,
                "batch_in_epoch": self.batch_in_epoch,
                "best_val": self.best_val,
                "total_steps": self.total_steps,
                "history": self.history,
                "world_size": self.dist.world_size,
                "dataset_path": str(self.data_path),
                "rng_per_rank": per_rank,
            }
            if self.wet is not None:  # the model's extra input channel (dandelion.forecast.next_frame)
                extra["wet"] = self.wet.cpu()
            save_checkpoint(
                path,
                model=self.model,
                optimizer=self.optimizer,
                scheduler=self.scheduler,
                config=self.cfg,
                stats=self.layout.to_dict()["stats"],
                grid=self.grid.to_dict(),
                step=self.step,
                epoch=self.epoch,
                extra=extra,
            )
        return path

    # ------------------------------------------------------------------ loops
    def _loader(self, ds, sampler):
        t = self.t
        workers = int(t.get("num_workers", 0))
        return torch.utils.data.DataLoader(
            ds,
            batch_size=int(t.batch_size),
            sampler=sampler,
            num_workers=workers,
            pin_memory=self.device.type == "cuda",
            drop_last=False,
            generator=torch.Generator().manual_seed(self.seed),  # keeps the global RNG untouched
            persistent_workers=False,
        )

    def _autocast(self):
        """bf16 autocast on the run's device (CUDA or CPU) with ``trainer.amp=true``; the models keep their spectral
        transforms in float32 (e.g. :class:`dandelion.baselines.sfno.Float32Transform`) and the loss is taken in float32."""
        if bool(self.t.get("amp", False)) and self.device.type in ("cuda", "cpu"):
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def train_step(self, batch) -> float:
        """One optimiser step on a batch; returns the loss."""
        x = batch["x"].to(self.device, non_blocking=True)
        y = batch["y"].to(self.device, non_blocking=True)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
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
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"non-finite training loss {loss.item()} at step {self.step}: lower trainer.lr or "
                "check the dataset's statistics"
            )
        loss.backward()
        clip = float(self.t.get("grad_clip", 0) or 0)
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return float(loss.detach())

    @torch.no_grad()
    def validate(self) -> dict:
        """Next-step loss (area-weighted MSE in the target's units: normalised frames, or normalised
        increments for ``target=increment``) and area-weighted VRMSE (of the frames) on the valid split.

        VRMSE: :func:`dandelion.metrics.vrmse` per sample and channel (normalised units,
        area-weighted), averaged. Sharded across ranks without padding and summed, so every rank
        gets the value over the whole split (or its first ``trainer.val_max_batches`` batches per rank).
        """
        model = self.bare_model  # no DDP collectives during evaluation
        model.eval()
        sampler = EpochSampler(
            len(self.valid_set),
            seed=self.seed,
            epoch=0,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            shuffle=False,
            pad=False,
        )
        cap = self.t.get("val_max_batches")
        w64 = self.grid.weights.to(self.device)
        sums = [0.0, 0.0, 0.0]  # loss * n, vrmse sum, n
        for i, batch in enumerate(self._loader(self.valid_set, sampler)):
            if cap and i >= int(cap):
                break
            x, y = batch["x"].to(self.device), batch["y"][:, 0].to(self.device)
            with self._autocast():
                pred = rollout(
                    model,
                    x,
                    1,
                    y.shape[1],
                    self.increment_scale,
                    self.input_scale,
                    self.wet,
                    None if self.forcing is None else (self.forcing, y[:, None]),
                )[:, 0].float()
            n = x.shape[0]
            sq = (pred - y) ** 2 if self.wet is None else torch.where(self.wet, (pred - y) ** 2, 0.0)
            sums[0] += float((sq * self.weights).mean((-3, -2, -1)).sum())
            sums[1] += float(vrmse(pred.double(), y.double(), w64, wet=self.wet)[:, self.scored].mean(-1).sum())
            sums[2] += n
        total = self.dist.all_sum(sums)
        model.train()
        if total[2] == 0:
            return {"val_loss": math.nan, "val_vrmse": math.nan}
        return {"val_loss": total[0] / total[2], "val_vrmse": total[1] / total[2]}

    def _stop_reason(self, t_start: float, check_time: bool = True) -> str | None:
        t = self.t
        reason = None
        if self.step >= self.total_steps:
            reason = "max_steps" if t.get("max_steps") and self.total_steps == int(t.max_steps) else "done"
        elif self.schedule_end is not None and self.step >= self.schedule_end:
            reason = "schedule_end"
        elif t.get("stop_at_step") and self.step >= int(t.stop_at_step):
            reason = "stop_at_step"
        if check_time and t.get("max_minutes"):
            late = float(time.perf_counter() - t_start > 60.0 * float(t.max_minutes))
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
        took a step), val_loss and val_vrmse of the final model, best_val_loss, n_parameters, minutes. When ``max_minutes`` cuts the plan, rank 0 prints a warning
        "stopped early at step N of M" (and logs it).
        """
        t_start = time.perf_counter()
        reason = self._stop_reason(t_start, check_time=False)
        train_loss, val = self._last_train_loss(), {}
        epoch_offsets = [0]
        for p in self.phases:
            epoch_offsets.append(epoch_offsets[-1] + p["epochs"])
        for pi, phase in enumerate(self.phases):
            if reason:
                break
            ds, n_batches = self.train_sets[pi], self.batches_per_epoch[pi]
            for e in range(epoch_offsets[pi], epoch_offsets[pi + 1]):
                if e < self.epoch:
                    continue
                start = self.batch_in_epoch if e == self.epoch else 0
                self.epoch, self.batch_in_epoch = e, start
                bs = int(self.t.batch_size)
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
                    desc=f"{phase['name']} epoch {e}",
                    disable=not (self.dist.main and self.t.get("progress", True)),
                    leave=False,
                    dynamic_ncols=True,
                )
                t0, seen, losses = time.perf_counter(), 0, []
                for batch in self._loader(ds, sampler):
                    loss = self.train_step(batch)
                    self.batch_in_epoch += 1
                    losses.append(loss)
                    seen += batch["x"].shape[0] * self.dist.world_size
                    rate = seen / max(1e-9, time.perf_counter() - t0)
                    bar.update(1)
                    bar.set_postfix(
                        loss=f"{loss:.4g}", lr=f"{self.scheduler.get_last_lr()[0]:.3g}", samples_s=f"{rate:.3g}"
                    )
                    if self.writer is not None:
                        self.writer.add_scalar("train/loss", loss, self.step)
                        self.writer.add_scalar("train/lr", self.scheduler.get_last_lr()[0], self.step)
                    reason = self._stop_reason(t_start)
                    if reason:
                        break
                bar.close()
                if losses:
                    train_loss = float(sum(losses) / len(losses))
                finished = self.batch_in_epoch >= n_batches
                if finished:  # the epoch is complete: the next one starts at its first batch
                    self.epoch, self.batch_in_epoch = e + 1, 0
                val = self.validate()
                record = {
                    "epoch": e,
                    "phase": phase["name"],
                    "step": self.step,
                    "train_loss": train_loss,
                    "lr": self.scheduler.get_last_lr()[0],
                    "samples_per_s": seen / max(1e-9, time.perf_counter() - t0),
                    "epoch_complete": finished,
                    **val,
                }
                self.history.append(record)
                if self.dist.main:
                    log.info("%s", json.dumps(record))
                    with open(self.run_dir / "metrics.jsonl", "a") as fh:
                        fh.write(json.dumps(record) + "\n")
                    if self.writer is not None:
                        for k in ("val_loss", "val_vrmse"):
                            self.writer.add_scalar(f"valid/{k[4:]}", val[k], self.step)
                improved = val["val_loss"] < self.best_val
                if improved:
                    self.best_val = val["val_loss"]
                    self.save("best.pt")
                self.save("last.pt")
                if reason:
                    break
        if not val:  # nothing was trained in this call (e.g. resumed a finished run): still report and checkpoint
            val = self.validate()
            self.save("last.pt")
            if not (self.run_dir / "best.pt").exists():
                self.save("best.pt")
        self.dist.barrier()
        if self.writer is not None:
            self.writer.close()
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
        }
        if self.dist.main:
            write_json_atomic(
                self.run_dir / "result.json", result
            )  # atomic: the benchmark reuses a run with a result.json
            if reason == "max_minutes":  # the plan was cut by the wall clock: the numbers depend on the machine
                msg = (
                    f"stopped early at step {self.step} of {self.total_steps}: trainer.max_minutes={float(self.t.max_minutes):g} ran out "
                    f"(checkpoints written; resume={self.run_dir / 'last.pt'} continues the plan)"
                )
                log.warning(msg)
                print(f"\n{'!' * 100}\nWARNING: {msg}\n{'!' * 100}\n", flush=True)
        return result

    def close(self):
        for ds in (*self.train_sets, self.valid_set):
            ds.close()
        self.dist.close()
