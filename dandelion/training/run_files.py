"""The files of a run directory that outlive a process: the default folder's name, ``metrics.jsonl`` and the temporary
files of dead writers; and the one-line warning for a plan that cuts the warm-up or the fine-tune.

* :func:`default_run_dir`: ``outputs/train/<date_time>_<pid>``, unique per process (two runs started in the same
  second never share a folder);
* :func:`rewrite_metrics`: on resume, ``metrics.jsonl`` is rewritten atomically to the checkpoint's history, so a
  run killed after an epoch's record but before its ``last.pt`` never holds that epoch twice; :func:`append_metrics`
  adds one record;
* :func:`remove_dead_temps` (:mod:`dandelion.disk`) runs when the trainer opens the folder;
* :func:`short_plan_warning`: ``max_steps`` or ``stop_at_step`` below the warm-up or the fine-tune's first step.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from dandelion.disk import remove_dead_temps
from dandelion.runtime import write_text_atomic

__all__ = ["default_run_dir", "open_run_dir", "rewrite_metrics", "append_metrics", "short_plan_warning"]

log = logging.getLogger(__name__)


def default_run_dir() -> str:
    """``outputs/train/<YYYY-mm-dd_HH-MM-SS>_<pid>``: the timestamp of ``dandelion-train``'s default with this
    process's id, so runs started in the same second get their own folders."""
    return f"outputs/train/{time.strftime('%Y-%m-%d_%H-%M-%S')}_{os.getpid()}"


def open_run_dir(trainer, resumed: bool):
    """Make ``trainer.run_dir`` (rank 0): remove the temporary files of dead writers (a ``.last.pt.PID.tmp`` of a
    killed run), write ``metrics.jsonl`` as the trainer's history (empty for a new run, the checkpoint's on resume:
    :func:`rewrite_metrics`) and ``config.yaml``; returns the tensorboard writer (``trainer.tensorboard``) or None.

    Raises ImportError (one line) for ``tensorboard=True`` without the package."""
    if not trainer.dist.main:
        return None
    run_dir = trainer.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    for p in remove_dead_temps(run_dir):
        log.info("removed %s, left by a writer that died", p)
    if resumed or (run_dir / "metrics.jsonl").exists():
        rewrite_metrics(run_dir, trainer.history)
    text = yaml.safe_dump(trainer.config, default_flow_style=False, allow_unicode=True, sort_keys=False)
    write_text_atomic(run_dir / "config.yaml", text)
    if not trainer.options.tensorboard:
        return None
    try:  # deferred: tensorboard is an optional dependency, needed only with tensorboard=True
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:
        raise ImportError(
            "trainer.tensorboard=true needs the tensorboard package: pip install tensorboard, "
            "or set trainer.tensorboard=false"
        ) from err
    return SummaryWriter(str(run_dir / "tensorboard"))


def rewrite_metrics(run_dir: Path, history: Sequence[dict]) -> Path:
    """Write ``run_dir/metrics.jsonl`` atomically as the records of ``history`` (one JSON line each): what a resumed
    run's file holds before it trains on, whatever a killed process had appended after its last checkpoint."""
    return write_text_atomic(Path(run_dir) / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in history))


def append_metrics(run_dir: Path, record: dict) -> None:
    """Append one epoch's record to ``run_dir/metrics.jsonl``."""
    with open(Path(run_dir) / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")


def short_plan_warning(warmup: int, finetune_start: int | None, stop: int | None, key: str) -> str | None:
    """One line when the run stops (``key`` = ``stop``, e.g. ``trainer.max_steps=200``) before the warm-up ends
    (``warmup`` steps: the learning rate never reaches ``trainer.lr``) or before the fine-tune's first step
    (``finetune_start``; None without a fine-tune). Logged as a warning and returned; None when the plan is whole."""
    if stop is None:
        return None
    parts = []
    if stop < warmup:
        parts.append(
            f"below trainer.warmup_steps={warmup}, so the learning rate never reaches trainer.lr (lower warmup_steps "
            "or set warmup_fraction)"
        )
    if finetune_start is not None and stop <= finetune_start:
        parts.append(f"at or before the fine-tune's first step ({finetune_start}), so the fine-tune is skipped")
    if not parts:
        return None
    text = f"{key}={stop} is " + "; and ".join(parts)
    log.warning("%s", text)
    return text
