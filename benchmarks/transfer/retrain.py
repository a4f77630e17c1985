"""Checkpoints for the zero-shot resolution transfer on a machine that did not train the cells.

A benchmark cell (``results_dir/<dataset>/<model>/seed<k>.json``, committed) names the run it scored
(``run.run_dir``, under ``work_dir/runs``, not committed). On a fresh clone, or a machine that lost its runs, the
transfer (:mod:`dandelion.benchmarks.transfer.zero_shot`) cannot load that checkpoint. ``retrain_missing=true``
retrains it: :func:`retrain_cell` trains the cell's run again into its own folder, at the cell's seed and chosen
rate, and only if the scale's training protocol is still the cell's (the run folder's ``t<hash>``,
:func:`dandelion.benchmarks.grid.cells.training_hash`); it then scores the model on the trained grid with the cell's
evaluation and records both scores (:func:`retrained_path`), so that a retrained model's transfer is read against
its own trained-grid error. The record and every transfer JSON carry the checkpoint's SHA-256, which says which
model a transfer result comes from. A marker in the run folder (:data:`MARKER`), removed once the record is written,
makes an interrupted retrain (killed while training or while being scored) finish on the next call, whatever record
an earlier retrain (another machine's, committed) left. Protocol: docs/datasets/README.md
("Zero-shot resolution transfer").
"""

from __future__ import annotations

import functools
import json
import math
import time
from pathlib import Path

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid.cells import cell_path, metric_summaries, model_architecture, training_hash
from dandelion.checkpoint import load_model
from dandelion.datasets.folder import sha256_file
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.evaluation.scoring import evaluate
from dandelion.runtime import machine, versions, write_json_atomic

__all__ = [
    "MARKER",
    "RETRAINED_SCHEMA",
    "selected_checkpoint",
    "checkpoint_ready",
    "retrained_path",
    "retrained_record",
    "needs_retraining",
    "retrain_cell",
    "checkpoint_sha256",
    "score",
]

#: File written into a run folder before :func:`retrain_cell` trains there and removed once its record is written:
#: while it exists the retrain is unfinished (it trains on or is scored on the next call).
MARKER = ".retrained_by_transfer"
RETRAINED_SCHEMA = "dandelion-transfer-retrained/2"


def selected_checkpoint(cell: dict) -> Path:
    """``last.pt`` of the run the cell evaluated: ``cell["run"]``, the seed's own run (the ``sweep`` entries may be
    another seed's when the rate was swept on one seed)."""
    return Path(cell["run"]["run_dir"]) / "last.pt"


def checkpoint_sha256(cell: dict) -> str | None:
    """SHA-256 of the cell's selected checkpoint file (None if it is not on this machine). Hashed once per file
    version (path, size, modification time): the transfer asks for it once per fine test set and again per record."""
    p = selected_checkpoint(cell)
    if not p.exists():
        return None
    st = p.stat()
    return _sha256_of(str(p.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(Path(path))


def retrained_path(results_dir, cell: dict) -> Path:
    """``results_dir/transfer/retrained/<dataset>/<model>/seed<k>.json``."""
    return cell_path(Path(results_dir) / "transfer" / "retrained", cell["dataset_key"], cell["model"], cell["seed"])


def retrained_record(results_dir, cell: dict) -> dict | None:
    """The cell's retrain record, or None (none, or a torn file)."""
    try:
        return json.loads(retrained_path(results_dir, cell).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _run_result(cell: dict) -> dict | None:
    try:
        return json.loads((selected_checkpoint(cell).parent / "result.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def needs_retraining(cell: dict) -> str | None:
    """Why the cell's selected checkpoint cannot be transferred (not on this machine, its run unfinished or diverged,
    or a retrain of it unfinished: :data:`MARKER`), or None when it can."""
    ckpt = selected_checkpoint(cell)
    res = _run_result(cell)
    if not ckpt.exists() or res is None:
        return f"checkpoint {ckpt} is not on this machine (or its run did not finish)"
    if res.get("stopped") == "diverged":
        return f"the run in {ckpt.parent} diverged ({res.get('error')})"
    if (ckpt.parent / MARKER).exists():
        return f"the retrain in {ckpt.parent} did not finish"
    return None


def checkpoint_ready(cell: dict) -> bool:
    """Whether the cell's selected checkpoint can be transferred (:func:`needs_retraining` finds nothing)."""
    return needs_retraining(cell) is None


def score(forecaster, data, evaluation: dict, progress: bool = False) -> dict:
    """The cell's evaluation (``evaluation``: ``n_steps``, ``init_stride``, ``max_inits``, ``batch_size``) of a
    forecaster on ``data``, without spectra or samples: :func:`dandelion.evaluation.scoring.evaluate`'s results."""
    e = evaluation
    return evaluate(
        forecaster,
        data,
        n_steps=int(e["n_steps"]),
        init_stride=int(e.get("init_stride", 1)),
        max_inits=e.get("max_inits"),
        batch_size=int(e.get("batch_size", 8)),
        spectra_leads=[],
        sample=False,
        progress=progress,
    )["results"]


def retrain_cell(cfg, cell: dict, device: str = "cpu", progress: bool = False) -> dict:
    """Retrain (or finish retraining) the cell's run into its own folder and record it (module docstring); returns
    the record, also written atomically to :func:`retrained_path`.

    Raises
    ------
    ValueError
        If the scale's training protocol (``training_hash``) differs from the one the cell's run folder was made
        with: the retrained model would not be the cell's (rerun ``dandelion-benchmark`` to renew the cells); or
        the cell's run folder is another seed's (an old cell without its own run record), or the cell's network is
        not the one its preset builds now (a preset changed since: its recorded ``architecture``).
    FloatingPointError
        If the retrain diverged (recorded in its ``result.json``).
    """
    key, model, seed, lr = cell["dataset_key"], cell["model"], int(cell["seed"]), float(cell["lr"])
    ckpt = selected_checkpoint(cell)
    if ckpt.parent.parent.parent.name != f"seed{seed}":  # an old cell whose run is another seed's sweep entry
        raise ValueError(
            f"cell {key} {model} seed {seed}: its checkpoint {ckpt} is another seed's run; rerun dandelion-benchmark"
        )
    now, was = f"t{training_hash(cfg, key)}", ckpt.parent.parent.name
    if now != was:
        raise ValueError(
            f"cell {key} {model} seed {seed} was trained under protocol {was} ({ckpt.parent}), the scale's is now "
            f"{now}: a retrained model would not be the cell's; rerun dandelion-benchmark to renew the cells, "
            "then the transfer"
        )
    arch = model_architecture(model, str(cfg.scale.preset))
    if cell.get("architecture") is not None and arch is not None and cell["architecture"] != arch:
        raise ValueError(
            f"cell {key} {model} seed {seed} holds a network (architecture {cell['architecture']}) that preset "
            f"{cfg.scale.preset!r} no longer builds ({arch}): a retrained model would not be the cell's; rerun "
            "dandelion-benchmark to renew the cells, then the transfer"
        )
    data_path = B.ensure_dataset(cfg, key)
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    marker = ckpt.parent / MARKER
    if not marker.exists():
        write_json_atomic(
            marker, {"cell": cell.get("_path"), "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        )
    print(
        f"[transfer] retraining {key} {model} seed {seed} at lr {lr:g} into {ckpt.parent} "
        "(its checkpoint was not on this machine)",
        flush=True,
    )
    run = B._train_one(cfg, key, model, seed, lr, data_path, run_dir=ckpt.parent)
    if run.get("stopped") == "diverged":
        raise FloatingPointError(f"retraining {key} {model} seed {seed} diverged: {run.get('error')}")
    e = dict(cell["evaluation"])
    n_in = int((cell.get("trainer") or {}).get("n_in", 4))
    data = WindowDataset(data_path, e.get("split", "test"), n_in=n_in, n_out=1)
    res = metric_summaries(score(load_model(ckpt, device, dataset=data), data, e, progress))
    parts = ("next_step", "rollout_mean")
    rec = {
        "schema": RETRAINED_SCHEMA,
        "dataset_key": key,
        "model": model,
        "seed": seed,
        "lr": lr,
        "checkpoint": str(ckpt),
        "checkpoint_sha256": checkpoint_sha256(cell),
        "training_protocol": now,
        "n_steps": int(e["n_steps"]),
        "cell": {p: cell[p]["vrmse"]["mean"] for p in parts},
        "retrained": {p: res[p]["vrmse"]["mean"] for p in parts},
        "training_minutes": run.get("minutes"),
        "versions": versions(),
        "machine": machine(device),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    rec["relative_change"] = {
        p: (rec["retrained"][p] / rec["cell"][p] - 1.0) if rec["cell"][p] else math.nan for p in parts
    }
    write_json_atomic(retrained_path(cfg.scale.results_dir, cell), rec)
    marker.unlink()
    print(
        f"[transfer] retrained {key} {model} seed {seed}: next-step VRMSE {rec['retrained']['next_step']:.4f} "
        f"(the cell's {rec['cell']['next_step']:.4f})",
        flush=True,
    )
    return rec
