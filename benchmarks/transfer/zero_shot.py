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
transfer rule (:func:`transfer_rule`) and scored with the cell's evaluation settings (next-step and
1:20 VRMSE, area-weighted and the Well's) by :func:`dandelion.evaluation.rollout.evaluate`. One JSON per
(fine dataset, model, seed) is written atomically to ``results_dir/transfer/<fine key>/<model>/seed<k>.json``;
a finished one (same cell, checkpoint, fine dataset and model's transfer rule, :data:`RULE_REVISIONS`) is skipped,
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
from dandelion.channels import ChannelLayout
from dandelion.checkpoint import config_from_checkpoint, layout_from_checkpoint, load_checkpoint, model_state
from dandelion.cli.common import check_choice, check_device, run
from dandelion.datasets.folder import load_metadata
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.forecast import Forecaster
from dandelion.grid_guard import allow_grid_change
from dandelion.registry import build_model, import_plugins
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


# ---------------------------------------------------------------------------------------------- models


def _keep_trained_modes(model, spec: dict) -> tuple[dict, str]:
    return (
        {"lmax": int(model.lmax)},
        f"spectral weights kept for the trained degrees l < {int(model.lmax)} (lmax fixed); its SHTs run on the finer grid, "
        "so degrees above the trained band limit are not represented inside the network",
    )


def _keep_trained_band_limits(model, spec: dict) -> tuple[dict, str]:
    pool = [int(b) for b in model.pool_lmax]
    return (
        {"pool_lmax": pool},
        f"same weights; warps are great-circle displacements in radians; each spectral pooling keeps its trained band limit "
        f"(pool_lmax {pool}, fixed as SFNO's lmax) instead of the finer level grids' (which would double them)",
    )


#: Model name -> ``f(model built on the training grid, model_spec) -> (build overrides, description)`` for a
#: model whose weights, or whose band limits, depend on the resolution but keep their meaning at another grid once
#: the overrides hold. SFNO keeps its trained modes; Dandelion its trained pooling band limits: built on a finer grid
#: it would otherwise pool at what the finer levels resolve, a different operator from the one trained (measured in
#: benchmarks/results/cpu/NOTES.md, "Zero-shot resolution transfer").
TRANSFER_RULES = {"sfno": _keep_trained_modes, "dandelion": _keep_trained_band_limits}

#: Model key of the scale's cells (``cell["model"]``, the registry name for every model today) -> revision of its
#: transfer rule, part of its records' hash: a rule changed after records were made makes that model's records stale
#: (and only that model's), also on a machine without the checkpoints, where its cells are then pending until
#: ``retrain_missing=true``. A model without an entry has its first rule. Editing a rule in :data:`TRANSFER_RULES`
#: (or a model's build) without a new revision here leaves its old records counted as current.
RULE_REVISIONS = {"dandelion": "trained pooling band limits (pool_lmax), 2026-12-02"}

_RESOLUTION_FREE = {
    "disco": "same weights, filters rebuilt at the finer grid with the same cutoff radius in radians (theta_cutoff)",
    "flower2d": (
        "same weights: warp displacements are in normalised image coordinates (a fraction of the longitude turn and "
        "of the pole-to-pole rows), so they move as far in radians at every grid; its 2x2 strided down/up "
        "convolutions act per pixel, i.e. over half the angular distance at 2x resolution"
    ),
}


def transfer_rule(ckpt: dict) -> dict:
    """How the checkpoint's model runs at another grid: ``{"transferable", "treatment" | "reason", "overrides"}``.

    Resolution-free models (``resolution_dependent = False``, :mod:`dandelion.grid_guard`) keep their weights;
    a model with a rule in :data:`TRANSFER_RULES` is rebuilt with the rule's overrides (SFNO: keep the trained modes;
    Dandelion: keep the trained pooling band limits); any other resolution-dependent model is not transferable and
    the reason says why.
    """
    spec = ckpt["extra"]["model_spec"]
    g = ckpt["grid"]
    model = build_model(
        spec["name"],
        spec["preset"],
        int(spec["in_channels"]),
        int(spec["out_channels"]),
        int(g["nlat"]),
        int(g["nlon"]),
        str(g["grid"]),
        **dict(spec.get("overrides") or {}),
    )
    name = str(spec["name"])
    if name in TRANSFER_RULES:
        over, text = TRANSFER_RULES[name](model, spec)
        return {"transferable": True, "treatment": text, "overrides": over}
    if not getattr(model, "resolution_dependent", True):
        return {
            "transferable": True,
            "treatment": _RESOLUTION_FREE.get(name, "same weights (resolution_dependent = False)"),
            "overrides": {},
        }
    return {
        "transferable": False,
        "overrides": {},
        "reason": f"{type(model).__name__} has resolution-dependent weights (resolution_dependent = True) and no transfer rule "
        "in dandelion.benchmarks.transfer.zero_shot.TRANSFER_RULES",
    }


def transfer_forecaster(
    checkpoint, dataset, device: str = "cpu", ckpt: dict | None = None, overrides: dict | None = None
) -> tuple[Forecaster | None, dict]:
    """The checkpoint's model as a :class:`~dandelion.forecast.Forecaster` on ``dataset``'s grid, normalised
    with the CHECKPOINT's statistics; returns ``(forecaster or None, rule)`` (:func:`transfer_rule`). ``overrides``
    (build hyper-parameters, e.g. Dandelion's ``pool_lmax``) apply on top of the rule's, for diagnostics.

    Raises
    ------
    ValueError
        If the dataset's fields differ from the checkpoint's, the grid types differ, or one of the two has a wet mask
        and the other none. A masked model gets the dataset's own mask (the finer grid's land) as its input channel.
    """
    ckpt = load_checkpoint(checkpoint) if ckpt is None else ckpt
    layout = layout_from_checkpoint(ckpt)
    if dataset.layout.fields != layout.fields:
        raise ValueError(
            f"checkpoint {checkpoint} was trained on fields {layout.fields} but {dataset.path} has {dataset.layout.fields}"
        )
    if dataset.grid.grid != str(ckpt["grid"]["grid"]):
        raise ValueError(
            f"checkpoint {checkpoint} was trained on a {ckpt['grid']['grid']!r} grid, {dataset.path} is {dataset.grid.grid!r}: "
            "the transfer changes the resolution only"
        )
    rule = transfer_rule(ckpt)
    if not rule["transferable"]:
        return None, rule
    spec = ckpt["extra"]["model_spec"]
    model = build_model(
        spec["name"],
        spec["preset"],
        int(spec["in_channels"]),
        int(spec["out_channels"]),
        dataset.grid.nlat,
        dataset.grid.nlon,
        dataset.grid.grid,
        **{**dict(spec.get("overrides") or {}), **rule["overrides"], **dict(overrides or {})},
    )
    with allow_grid_change(model):  # PyTorch still checks every weight shape
        model.load_state_dict(model_state(ckpt, model))
    extra = ckpt.get("extra", {})
    layout = ChannelLayout(
        layout.fields, layout.stats, dataset.grid, stats_source=f"checkpoint {checkpoint}", levels=layout.levels
    )
    n_in = extra.get("n_in")
    if n_in is None:  # as dandelion.checkpoint.load_model: the trainer's n_in, else the input channels per frame
        n_in = (config_from_checkpoint(ckpt).get("trainer") or {}).get("n_in") or int(
            spec["in_channels"]
        ) // layout.n_channels
    wet = extra.get("wet")
    if (wet is None) != (getattr(dataset, "wet", None) is None):
        raise ValueError(
            f"checkpoint {checkpoint} was trained {'without' if wet is None else 'with'} a wet mask but {dataset.path} "
            f"{'has one' if wet is None else 'has none'}: the transfer needs the same kind of dataset"
        )
    # a masked model gets the finer grid's own mask (land rasterised there) as its constant input channel
    fc = Forecaster(
        model.eval(),
        layout,
        int(n_in),
        name=str(spec["name"]),
        checkpoint=checkpoint,
        target=extra.get("target", "frame"),
        inputs=extra.get("inputs", "frames"),
        wet=None if wet is None else dataset.wet,
    )
    return fc.to(device_name(device)).eval(), rule


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
    set, evaluation and transfer rule revision (:data:`RULE_REVISIONS`) and, where the checkpoint is on this machine, from the same checkpoint file (its SHA-256; a
    JSON without one is taken as the cell's original unless a retrain record says the file was replaced); else None
    (none, torn or stale). Without the checkpoint here a JSON stays current: results need no runs."""
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
            f"cell {cell.get('_path')} is seed {cell['seed']} but its checkpoint {ckpt_path} was trained with seed {seed}"
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
    datasets of the scale. Raises :class:`dandelion.cli.common.UsageError` (with the closest name)."""
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
        out = transfer(cfg)
        print(json.dumps({k: v for k, v in out.items() if k != "datasets"}))
        print("[transfer] made by: dandelion-transfer " + " ".join(shlex.quote(a) for a in argv if a != "--debug"))

    run("dandelion-transfer", "transfer", _job, check=check, argv=argv)


if __name__ == "__main__":
    main()
