"""The bookkeeping of the benchmark grid: which cells exist, where their results live, whether they are finished.

A cell is ``(dataset key, model, seed)`` of one scale (``configs/scale/<scale>.yaml``). Its result JSON
``results_dir/<dataset>/<model>/seed<k>.json`` (schema :data:`CELL_SCHEMA`) is finished when it was made
under the current protocol (:func:`protocol_hash` of the scale's settings, and the resolved trainer
configuration, :func:`resolved_trainer`); otherwise it is ``stale`` (to be run again) or ``todo``.
:func:`metric_summaries` picks from a rollout's ``metrics.json`` what a cell keeps of each registered
metric (:mod:`dandelion.metrics`). The driver that runs cells is :mod:`dandelion.benchmarks.benchmark`.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from omegaconf import OmegaConf

from dandelion.metrics import metric_names

from .compose import compose

__all__ = ["CELL_SCHEMA", "REFERENCES", "data_digest", "reference_path", "cell_finished", "cells", "cell_path", "dataset_spec", "protocol_hash", "training_hash", "resolved_trainer",
           "stored_hash", "fmt_value", "flatten_overrides", "lr_tag", "metric_summaries", "load_cells"]

#: Schema tag of a cell's result JSON.
CELL_SCHEMA = "dandelion-benchmark-cell/1"

#: The reference forecasts of every dataset (:mod:`dandelion.benchmarks.references`), in the order the
#: leaderboard shows them: name -> label.
REFERENCES = {"persistence": "persistence (reference)", "linear_ar": "linear AR (reference)"}


def fmt_value(v) -> str:
    """``v`` as a hydra override value: booleans lower case, None as ``null``, lists as ``[a,b]``."""
    if isinstance(v, bool):
        return str(v).lower()
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(fmt_value(x) for x in v) + "]"
    return str(v)


def flatten_overrides(d: dict, prefix: str) -> list[str]:
    """A nested mapping as hydra overrides ``<prefix><key.path>=<value>`` (:func:`fmt_value`)."""
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += flatten_overrides(v, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}={fmt_value(v)}")
    return out


def data_digest(data_path) -> str | None:
    """SHA-256 (16 hex digits) of a dataset folder's ``checksums.sha256``: which data a cell was trained and
    scored on. The HDF5 files are written without timestamps, so regenerating a dataset with the same
    configuration on the same kind of machine gives the same digest, and a different one means different
    numbers in the files (on another CPU the solvers' round-off can differ: the ocean set regenerated on an
    Intel Xeon differs from the AMD EPYC one, its references by 7e-8 relative; :func:`data_equivalences`).
    None when the folder has no checksum file (an incomplete dataset)."""
    p = Path(data_path) / "checksums.sha256"
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.exists() else None


def protocol_hash(cfg, key: str) -> str:
    """Fingerprint (12 hex digits) of the scale's settings that decide a cell's numbers for dataset ``key``.

    SHA-256 of the scale's ``trainer`` overrides, ``lr_sweep``, ``lr_ladder``, ``sweep_seed``, ``preset`` and ``evaluation`` settings
    and the dataset's spec (config group and overrides). A cell result (or persistence reference) made
    under another fingerprint is listed as ``stale`` and run again. Defaults the scale does not set
    (``configs/trainer/default.yaml``) are compared separately through the resolved trainer
    configuration each cell records (:func:`resolved_trainer`).
    """
    s = cfg.scale
    spec = dataset_spec(cfg, key)
    payload = {"trainer": OmegaConf.to_container(s.trainer, resolve=True), "lr_sweep": [float(x) for x in s.lr_sweep],
               "lr_ladder": [float(x) for x in (s.get("lr_ladder") or [])], "sweep_seed": s.get("sweep_seed"),
               "preset": str(s.preset), "evaluation": OmegaConf.to_container(s.evaluation, resolve=True),
               "dataset": spec["dataset"], "dataset_overrides": spec["overrides"]}
    return _digest(payload)


def _digest(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


def resolved_trainer(cfg) -> dict:
    """The trainer configuration a sweep run of this scale trains with: ``configs/trainer/default.yaml``
    merged with the scale's ``trainer`` overrides (without ``lr`` and ``progress``, which vary per run
    and do not change the result)."""
    over = flatten_overrides(OmegaConf.to_container(cfg.scale.trainer, resolve=True), "trainer.")
    t = OmegaConf.to_container(compose("train", over).trainer, resolve=True)
    for k in ("lr", "progress"):
        t.pop(k, None)
    return t


def training_hash(cfg, key: str) -> str:
    """Fingerprint of one sweep run's training setup (resolved trainer, preset, dataset spec; not the
    evaluation settings or the rest of the sweep): the ``t<hash>`` folder of its run directory, so that runs
    of different setups never mix and a change of the evaluation alone re-uses the trained runs."""
    spec = dataset_spec(cfg, key)
    return _digest({"trainer": resolved_trainer(cfg), "preset": str(cfg.scale.preset), "dataset": spec["dataset"],
                    "dataset_overrides": spec["overrides"]})


def _stored(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def stored_hash(path: Path) -> str | None:
    """The ``protocol_hash`` of the result JSON at ``path`` (None if it is missing or torn)."""
    return _stored(path).get("protocol_hash")


def _cell_state(path: Path, h: str, trainer: dict) -> str:
    if not path.exists():
        return "todo"
    rec = _stored(path)
    if rec.get("protocol_hash") != h:
        return "stale"
    if "trainer_resolved" in rec and json.loads(json.dumps(rec["trainer_resolved"])) != json.loads(json.dumps(trainer)):
        return "stale"  # a default of configs/trainer/default.yaml changed since the cell was made
    return "finished"


def cell_finished(path: Path, h: str, trainer: dict) -> bool:
    """Whether the cell result at ``path`` exists and was made under protocol ``h`` with the resolved trainer ``trainer``."""
    return _cell_state(Path(path), h, trainer) == "finished"


def lr_tag(lr: float) -> str:
    """The run-folder tag of a learning rate, e.g. ``lr1e-3``."""
    return f"lr{lr:.0e}".replace("e-0", "e-").replace("+0", "")


# ---------------------------------------------------------------------------------------------- grid


def cells(cfg) -> list[dict]:
    """The grid of the configured scale (restricted by ``only.*``): dicts ``dataset``, ``model``, ``seed``, ``path``,
    ``finished`` (its result JSON exists and was made under the current protocol, :func:`protocol_hash`) and
    ``state`` (``finished``, ``stale``: a result of another protocol, to be run again, or ``todo``).

    Raises
    ------
    ValueError
        If ``only`` names a dataset or model that the scale does not have.
    """
    s = cfg.scale
    ds_keys = list(s.datasets)
    models = [str(m) for m in s.models]
    seeds = [int(k) for k in s.seeds]
    only = cfg.get("only") or {}
    if only.get("datasets"):
        bad = [d for d in only.datasets if d not in ds_keys]
        if bad:
            raise ValueError(f"only.datasets={list(only.datasets)}: {bad} not in scale={s.name} (datasets {ds_keys}); pick from those")
        ds_keys = [d for d in ds_keys if d in list(only.datasets)]
    if only.get("models"):
        bad = [m for m in only.models if m not in models]
        if bad:
            raise ValueError(f"only.models={list(only.models)}: {bad} not in scale={s.name} (models {models}); pick from those")
        models = [m for m in models if m in list(only.models)]
    if only.get("seeds") is not None:
        seeds = [int(k) for k in only.seeds]
    out = []
    trainer = resolved_trainer(cfg)
    for d in ds_keys:
        h = protocol_hash(cfg, d)
        for m in models:
            for k in seeds:
                p = cell_path(s.results_dir, d, m, k)
                state = _cell_state(p, h, trainer)
                out.append({"dataset": d, "model": m, "seed": k, "path": p, "finished": state == "finished", "state": state,
                            "protocol_hash": h})
    return out


def reference_path(results_dir, key: str, name: str) -> Path:
    """Where a reference forecast's record lives: ``results_dir/<key>/<name>.json``."""
    return Path(results_dir) / key / f"{name}.json"


def equivalence_path(results_dir, key: str) -> Path:
    """Where the recorded equivalences of a dataset's data versions live: ``results_dir/<key>/data_equivalence.json``
    (written by ``tools/verify_references.py --equivalent-within=TOL``)."""
    return Path(results_dir) / key / "data_equivalence.json"


def data_equivalences(results_dir, key: str) -> list[dict]:
    """The recorded equivalences of dataset ``key``'s versions: entries ``{"versions": [a, b],
    "max_relative_difference": {reference: x}, "tolerance", ...}`` (empty when none is recorded)."""
    p = equivalence_path(results_dir, key)
    return list(json.loads(p.read_text()).get("equivalences", [])) if p.exists() else []


def equivalent(versions, equivalences: list[dict]) -> bool:
    """Whether every digest of ``versions`` is linked to every other through recorded ``equivalences`` (pairs)."""
    versions = set(versions)
    if len(versions) < 2:
        return True
    group = {next(iter(versions))}
    grew = True
    while grew:
        grew = False
        for e in equivalences:
            pair = set(e.get("versions", []))
            if len(pair) == 2 and pair & group and not pair <= group:
                group |= pair
                grew = True
    return versions <= group


def max_relative_difference(old: dict, new: dict) -> float:
    """The largest ``|new - old| / |old|`` over every summary (``next_step``, ``rollout_mean``; each metric and
    field) of two records of the same forecast (a reference recomputed on regenerated data); 0 when identical.

    Raises
    ------
    KeyError
        If ``new`` lacks a summary, metric or field that ``old`` has.
    """
    worst = 0.0
    for part in ("next_step", "rollout_mean"):
        for metric, fields in old[part].items():
            for v, x in fields.items():
                y = new[part][metric][v]
                if x != y:
                    worst = max(worst, abs(y - x) / abs(x) if x else math.inf)
    return worst


def cell_path(results_dir, dataset_key: str, model: str, seed: int) -> Path:
    """Where a cell's result JSON lives: ``results_dir/<dataset_key>/<model>/seed<seed>.json``."""
    return Path(results_dir) / dataset_key / model / f"seed{int(seed)}.json"


def dataset_spec(cfg, key: str) -> dict:
    """Grid key ``key`` of the scale: its dataset config group, overrides, generation batch size and folder.

    Raises
    ------
    ValueError
        If the scale has no dataset ``key`` (the message lists those it has).
    """
    spec = cfg.scale.datasets.get(key)
    if spec is None:
        raise ValueError(f"dataset {key!r} is not in scale={cfg.scale.name}: choose from {list(cfg.scale.datasets)}")
    spec = OmegaConf.to_container(spec, resolve=True)
    return {"dataset": spec["dataset"], "overrides": spec.get("overrides") or {}, "generate_batch_size": int(spec.get("generate_batch_size", 4)),
            "path": str(spec.get("path") or Path(cfg.scale.work_dir) / key)}


def metric_summaries(results: dict, metrics: list[str] | None = None, curves: list[str] | None = None) -> dict:
    """What a cell (or the persistence reference) keeps of a rollout's ``metrics.json`` content ``results``.

    ``next_step`` and ``rollout_mean`` (the rollout's ``mean_1_<n>`` summary) of the ``metrics``
    (default: those registered with ``cell=True``) and the per-lead ``curves`` of the ``curves``
    (default: ``curve=True``), each per variable; metrics the rollout lacks are left out.
    """
    metrics = metric_names(cell=True) if metrics is None else metrics
    curves = metric_names(curve=True) if curves is None else curves
    summ = results["summary"]
    n20 = next(k for k in summ if k.startswith("mean_1_"))
    return {"next_step": {m: summ["next_step"][m] for m in metrics if m in summ["next_step"]},
            "rollout_mean": {m: summ[n20][m] for m in metrics if m in summ[n20]},
            "curves": {m: results["metrics"][m] for m in curves if m in results["metrics"]}}


def load_cells(results_dir) -> list[dict]:
    """Every cell result JSON under ``results_dir`` (sorted by dataset, model, seed).

    Raises
    ------
    FileNotFoundError
        If ``results_dir`` holds no cell result (run ``dandelion-benchmark scale=...`` first).
    """
    root = Path(results_dir)
    out = []
    for p in sorted(root.glob("*/*/seed*.json")):
        rec = json.loads(p.read_text())
        if rec.get("schema") != CELL_SCHEMA:
            continue
        rec["_path"] = str(p)
        out.append(rec)
    if not out:
        raise FileNotFoundError(f"no benchmark cell results under {root}: run `dandelion-benchmark scale=...` first "
                                "(it writes <results_dir>/<dataset>/<model>/seed<k>.json)")
    return sorted(out, key=lambda r: (r["dataset_key"], r["model"], r["seed"]))
