"""``dandelion-transfer``: zero-shot resolution transfer of the benchmark's trained models.

Models trained by ``dandelion-benchmark`` on a coarse grid (the ``cpu`` scale: 32x64) are evaluated,
without retraining, on TEST data made at finer grids by the same solver, from the same initial states
and with the same physical parameters (docs/datasets/README.md, "Zero-shot resolution transfer"). Each
finer grid is made twice:

* ``coarse_band``: the solver runs at the coarse dataset's solver band limit and the stored fields are
  truncated to the coarse dataset's stored band limit (``dataset.output_lmax``): the same fields as the
  coarse test set, sampled finer (a test of discretisation consistency);
* ``fine_band``: the solver band limit scaled with the grid (``lmax * nlat / nlat_coarse``), stored at
  what the finer grid resolves: new small scales (the real test). Diffusion that a scenario defines
  per truncation degree is held fixed in physical units (:data:`FIXED_PHYSICS`).

Finite-volume datasets vary the solver's cells instead (:mod:`dandelion.benchmarks.transfer.sets`): the coarse
cells remapped onto the finer grid, and cells refined with it.

For every finished cell (``results_dir/<dataset>/<model>/seed<k>.json``) the selected checkpoint
(``last.pt`` of the chosen learning rate's run) is loaded with its OWN normalisation statistics (the
checkpoint's, never the fine test set's ``stats.yaml``), rebuilt on the finer grid by the model's
transfer rule (:func:`dandelion.benchmarks.transfer.rules.transfer_rule`) and scored with the cell's evaluation
settings (next-step and 1:20 VRMSE, area-weighted and the Well's) by :func:`dandelion.evaluation.scoring.evaluate`.
One JSON per (fine dataset, model, seed) is written atomically to
``results_dir/transfer/<fine key>/<model>/seed<k>.json``; a finished one (same cell, checkpoint, fine dataset and
model's transfer rule, :data:`~dandelion.benchmarks.transfer.rules.RULE_REVISIONS`) is skipped,
so the command resumes. A model
whose weights cannot run at the finer grid gets a JSON with ``transferable: false`` and the reason. A cell whose
checkpoint is not on this machine (a fresh clone) is listed as pending, or retrained first with
``retrain_missing=true`` (:mod:`dandelion.benchmarks.transfer.retrain`).

Use::

    dandelion-transfer scale=cpu                          # generate the fine test sets, evaluate every finished cell
    dandelion-transfer scale=cpu 'only.datasets=[galewsky_32x64]' 'only.models=[dandelion]'
    dandelion-transfer scale=cpu generate_only=true       # only the fine test sets (resumable)
    dandelion-transfer scale=cpu retrain_missing=true     # a machine without the cells' runs: retrain them first
    dandelion-report target=leaderboard scale=cpu         # the "Zero-shot resolution transfer" section

The leaderboard section and plot live in :mod:`dandelion.benchmarks.transfer.report`.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid.cells import _digest, cell_path, data_digest, load_cells, metric_summaries
from dandelion.benchmarks.grid.references import Persistence
from dandelion.benchmarks.paths import resolve_scale_dirs
from dandelion.benchmarks.transfer.report import TRANSFER_SCHEMA, VARIANTS
from dandelion.benchmarks.transfer.retrain import (
    checkpoint_ready,
    checkpoint_sha256,
    needs_retraining,
    retrain_cell,
    retrained_path,
    retrained_record,
    score,
    selected_checkpoint,
)
from dandelion.benchmarks.transfer.rules import RULE_REVISIONS, TRANSFER_RULES, transfer_forecaster, transfer_rule
from dandelion.benchmarks.transfer.sets import (
    FIXED_PHYSICS,
    FV_CELLS,
    check_test_ids,
    ensure_fine_dataset,
    fine_dataset_config,
    fine_datasets,
    generation_cost,
    solver_resolution,
)
from dandelion.checkpoint import config_from_checkpoint, load_checkpoint
from dandelion.cli.common import check_choice, check_device, run
from dandelion.datasets.folder import load_metadata
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.forecast import Forecaster
from dandelion.registry import import_plugins
from dandelion.runtime import device_name, machine, versions, write_json_atomic

__all__ = [
    "TRANSFER_SCHEMA",
    "VARIANTS",
    "FIXED_PHYSICS",
    "FV_CELLS",
    "fine_datasets",
    "fine_dataset_config",
    "ensure_fine_dataset",
    "generation_cost",
    "transfer_rule",
    "transfer_forecaster",
    "current_record",
    "checkpoint_ready",
    "retrain_cell",
    "retrained_path",
    "persistence_on",
    "transfer_cell",
    "transfer_path",
    "transfer",
    "main",
    "TRANSFER_RULES",
    "RULE_REVISIONS",
]


# ---------------------------------------------------------------------------------------------- results


def transfer_path(results_dir, fine_key: str, model: str, seed: int) -> Path:
    """``results_dir/transfer/<fine_key>/<model>/seed<seed>.json``."""
    return cell_path(Path(results_dir) / "transfer", fine_key, model, seed)


def _transfer_hash(cell: dict, fd: dict, meta: dict) -> str:
    key = {
        "cell": cell.get("protocol_hash"),
        "cell_finished": cell.get("finished_utc"),
        "checkpoint": str(selected_checkpoint(cell)),
        "fine_fingerprint": meta.get("fingerprint"),
        "evaluation": cell.get("evaluation"),
        "schema": TRANSFER_SCHEMA,
    }
    if cell.get("model") in RULE_REVISIONS:  # absent for a model's first rule, so its older records keep their hash
        key["rule"] = RULE_REVISIONS[cell["model"]]
    return _digest(key)


def current_record(cell: dict, fd: dict, results_dir) -> dict | None:
    """The transfer JSON of this cell on fine test set ``fd`` if it was made from the same cell, checkpoint path, test
    set, evaluation and transfer rule revision (:data:`~dandelion.benchmarks.transfer.rules.RULE_REVISIONS`) and,
    where the checkpoint is on this machine, from the same checkpoint file (its SHA-256); else None (none, torn or
    stale). Without the checkpoint here a JSON stays current: results need no runs. A JSON without a checkpoint
    digest (90 of the committed 216 were made before records carried one, and their checkpoints are not in the
    repository to digest them) is taken as the cell's original unless a retrain record says the file was replaced."""
    out = transfer_path(results_dir, fd["key"], cell["model"], cell["seed"])
    try:
        old = json.loads(out.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if old.get("transfer_hash") != _transfer_hash(cell, fd, load_metadata(fd["path"])):
        return None
    now = checkpoint_sha256(cell)
    if now is None:
        return old
    was = old.get("checkpoint_sha256")
    if was is None:
        return None if retrained_record(results_dir, cell) is not None else old
    return old if was == now else None


def transfer_cell(cell: dict, fd: dict, results_dir, device: str = "cpu", progress: bool = False) -> tuple[dict, bool]:
    """Evaluate one finished cell's selected checkpoint on fine test set ``fd`` and write its JSON atomically;
    returns ``(record, ran)``. A record of the same cell, checkpoint, fine dataset and evaluation is reused."""
    old = current_record(cell, fd, results_dir)
    if old is not None:
        return old, False
    out = transfer_path(results_dir, fd["key"], cell["model"], cell["seed"])
    path = Path(fd["path"])
    meta = load_metadata(path)
    h = _transfer_hash(cell, fd, meta)
    ckpt_path = selected_checkpoint(cell)
    e = dict(cell["evaluation"])
    data = WindowDataset(path, e.get("split", "test"), n_in=int((cell.get("trainer") or {}).get("n_in", 4)), n_out=1)
    t0 = time.perf_counter()
    ckpt = load_checkpoint(ckpt_path)
    seed = config_from_checkpoint(ckpt).get("seed")
    if seed is not None and int(seed) != int(cell["seed"]):
        raise ValueError(
            f"cell {cell.get('_path')} is seed {cell['seed']} but its checkpoint {ckpt_path} was trained with "
            f"seed {seed}"
        )
    model, rule = transfer_forecaster(ckpt_path, data, device=device, ckpt=ckpt)
    rec = {
        "schema": TRANSFER_SCHEMA,
        "transfer_hash": h,
        "dataset_key": cell["dataset_key"],
        "fine_key": fd["key"],
        "variant": fd["variant"],
        "model": cell["model"],
        "seed": int(cell["seed"]),
        "cell": cell.get("_path"),
        "checkpoint": str(ckpt_path),
        "trained_grid": {"nlat": cell["nlat"], "nlon": cell["nlon"], "lmax": cell.get("lmax")},
        "nlat": int(meta["nlat"]),
        "nlon": int(meta["nlon"]),
        "lmax": meta.get("lmax"),
        "solver_lmax": meta.get("solver_lmax"),
        "band_limited": bool(meta.get("band_limited", True)),
        "solver_resolution": solver_resolution(meta),
        "dataset_path": str(path),
        "data_files_sha256": data_digest(path),
        "fine_dataset": {k: meta["config"]["dataset"].get(k) for k in sorted(meta["config"]["dataset"]) if k != "path"},
        "generation": generation_cost(path),
        "transferable": bool(rule["transferable"]),
        "checkpoint_sha256": checkpoint_sha256(cell),
        "normalisation": "checkpoint statistics (the training set's stats.yaml)",
    }
    if model is None:
        rec["reason"] = rule["reason"]
    else:
        res = score(model, data, e, progress)
        rec.update(
            {
                "treatment": rule["treatment"],
                "build_overrides": rule["overrides"],
                "evaluation": {**e, "n_forecasts": int(res["n_forecasts"])},
                **metric_summaries(res),
            }
        )
        rec["finite"] = all(
            math.isfinite(v) for part in ("next_step", "rollout_mean") for v in rec[part]["vrmse"].values()
        )
    rec.update(
        {
            "minutes": (time.perf_counter() - t0) / 60.0,
            "versions": versions(),
            "machine": machine(device),
            "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    )
    write_json_atomic(out, rec)
    return rec, True


def persistence_on(fd: dict, results_dir, evaluation: dict, n_in: int = 4) -> dict:
    """Persistence scored on fine test set ``fd`` with ``evaluation`` (a cell's settings), the reference row of the
    section; written atomically to ``results_dir/transfer/<fine key>/persistence.json`` and reused while the
    test set and the settings are the same."""
    out = Path(results_dir) / "transfer" / fd["key"] / "persistence.json"
    meta = load_metadata(fd["path"])
    h = _digest({"fine_fingerprint": meta.get("fingerprint"), "evaluation": evaluation, "n_in": int(n_in)})
    if out.exists():
        try:
            old = json.loads(out.read_text())
            if old.get("transfer_hash") == h:
                return old
        except json.JSONDecodeError:
            pass
    e = evaluation
    data = WindowDataset(fd["path"], e.get("split", "test"), n_in=n_in, n_out=1)
    model = Forecaster(Persistence(data.layout.n_channels), data.layout, int(n_in), name="persistence")
    res = score(model, data, e)
    rec = {
        "schema": "dandelion-transfer-reference/1",
        "model": "persistence",
        "transfer_hash": h,
        "fine_key": fd["key"],
        "variant": fd["variant"],
        "nlat": fd["nlat"],
        "nlon": fd["nlon"],
        **metric_summaries(res),
    }
    write_json_atomic(out, rec)
    return rec


# ---------------------------------------------------------------------------------------------- the job


def _device(cfg) -> str:
    return device_name(cfg.get("device") or cfg.scale.get("device") or "cpu")


def _only(cfg, key: str):
    only = cfg.get("only") or {}
    return None if only.get(key) is None else list(only.get(key))


def transfer(cfg) -> dict:
    """Generate the fine test sets and evaluate every finished cell on them (module docstring); returns
    ``{"datasets": [...], "ran": n, "skipped": n, "retrained": n, "pending": [...]}`` (cells that could not be
    evaluated, with the reason)."""
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    resolve_scale_dirs(cfg, cfg.get("_argv"))
    import_plugins(list(cfg.scale.get("plugins") or []))
    device, progress = _device(cfg), bool(cfg.get("progress", False))
    keys = [k for k in cfg.transfer.datasets if _only(cfg, "datasets") is None or k in _only(cfg, "datasets")]
    try:
        cells = [c for c in load_cells(cfg.scale.results_dir) if c["dataset_key"] in keys]
    except FileNotFoundError:
        cells = []
    models, seeds = _only(cfg, "models"), _only(cfg, "seeds")
    cells = [
        c
        for c in cells
        if (models is None or c["model"] in models) and (seeds is None or int(c["seed"]) in [int(s) for s in seeds])
    ]
    ran = skipped = retrained = 0
    made, pending = [], []
    retrain = bool(cfg.get("retrain_missing")) and not cfg.get("generate_only")
    for key in keys:
        if retrain:
            B.ensure_dataset(
                cfg, key
            )  # a fresh clone: the coarse data first (the fine sets' configuration comes from it)
        try:
            fds = fine_datasets(cfg, key)
        except FileNotFoundError as err:
            pending.append(f"{key}: coarse dataset not generated ({err}); retrain_missing=true generates it")
            continue
        mine = [c for c in cells if c["dataset_key"] == key]
        for fd in fds:
            ensure_fine_dataset(fd, device, progress)
            check_test_ids(fd)
            made.append({"key": fd["key"], "path": fd["path"], **generation_cost(fd["path"])})
            if mine and not cfg.get("generate_only"):
                persistence_on(
                    fd,
                    cfg.scale.results_dir,
                    dict(mine[0]["evaluation"]),
                    int(mine[0].get("trainer", {}).get("n_in", 4)),
                )
        if cfg.get("generate_only"):
            continue
        for c in mine:  # one checkpoint per cell for all its fine sets: retrain (if asked) before any is evaluated
            todo = [fd for fd in fds if current_record(c, fd, cfg.scale.results_dir) is None]
            why = needs_retraining(c) if todo else None
            if why is not None and retrain:
                try:
                    retrain_cell(cfg, c, device, progress)
                    retrained, why = retrained + 1, None
                except (ValueError, FloatingPointError) as err:
                    why = str(err)
            if why is not None:
                pending.append(
                    f"{key} {c['model']} seed {c['seed']}: {why}"
                    + ("" if retrain else "; retrain_missing=true retrains it (seed, rate and protocol of the cell)")
                )
                continue
            for fd in fds:
                rec, did = transfer_cell(c, fd, cfg.scale.results_dir, device, progress)
                ran, skipped = ran + did, skipped + (not did)
                what = (
                    (
                        f"next-step VRMSE {rec['next_step']['vrmse']['mean']:.4f}, 1:{rec['evaluation']['n_steps']} "
                        f"{rec['rollout_mean']['vrmse']['mean']:.4f}"
                    )
                    if rec["transferable"]
                    else f"not transferable: {rec['reason']}"
                )
                print(
                    f"[transfer] {fd['key']} {c['model']} seed {c['seed']}: {what}{'' if did else ' (reused)'}",
                    flush=True,
                )
    return {"datasets": made, "ran": ran, "skipped": skipped, "retrained": retrained, "pending": pending}


def check(cfg, overrides=()) -> None:
    """What ``dandelion-transfer`` checks first: the device, and that ``transfer.datasets`` and ``only.*`` name
    datasets of the scale, and that the scale's folders can be found (:mod:`dandelion.benchmarks.paths`). Raises
    :class:`dandelion.cli.common.UsageError` (with the closest name, or the option to pass)."""
    resolve_scale_dirs(cfg, overrides)
    check_device(cfg.get("device") or cfg.scale.get("device") or "cpu")
    for key in cfg.transfer.datasets:
        check_choice(key, list(cfg.scale.datasets), "transfer.datasets")
    for name in _only(cfg, "datasets") or []:
        check_choice(name, list(cfg.transfer.datasets), "only.datasets")
    for name in _only(cfg, "models") or []:
        check_choice(name, [str(m) for m in cfg.scale.models], "only.models")


def main(argv: list[str] | None = None) -> None:
    """``dandelion-transfer scale=cpu [only.datasets=[..]] [only.models=[..]] [generate_only=true]`` (``--help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)

    def _job(cfg: DictConfig) -> None:
        OmegaConf.set_struct(cfg, False)
        cfg._argv = [a for a in argv if a != "--debug"]
        out = transfer(cfg)
        print(json.dumps({k: v for k, v in out.items() if k != "datasets"}))
        print("[transfer] made by: dandelion-transfer " + " ".join(shlex.quote(a) for a in argv if a != "--debug"))

    run("dandelion-transfer", "transfer", _job, check=check, argv=argv)


if __name__ == "__main__":
    main()
