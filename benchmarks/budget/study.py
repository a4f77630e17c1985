"""``dandelion-budget``: is a benchmark cell's training budget at a plateau?

A cell of ``dandelion-benchmark`` (:mod:`dandelion.benchmarks.grid.benchmark`) trains for a fixed number of
optimiser steps: ``epochs * max_batches_per_epoch`` of pretraining, then ``finetune.epochs *
max_batches_per_epoch`` of the autoregressive fine-tune, with warm-up and cosine decay to zero. A loss
that "flattens" at the end of such a run only shows that the learning rate reached zero. The test is
to train again with a longer budget: for every finished cell named by the config (``configs/budget.yaml``),
the model is retrained from scratch at the cell's chosen learning rate and seed, with BOTH phases
multiplied by each of ``multipliers`` (the warm-up keeps its step count, the cosine decay stretches), and scored with
the cell's
evaluation (next-step and 1:20 VRMSE on the test split). The ``x1`` row is the cell itself, not retrained.

The budget counts as flat at the first multiplier whose step up (a doubling for ``[2, 4]``) changes the
final validation loss by less than ``flat_tolerance`` (a fraction); a rise beyond it is marked ``rose`` (the
longer run at the same peak rate ended worse: a sign of an unstable rate at that budget, not of a plateau); until then
the cell's numbers describe
models that are still learning, and a comparison between models holds at that budget only.

One JSON per run is written atomically to ``results_dir/budget/<dataset>/<model>/seed<k>_x<m>.json``;
a finished one is skipped (one scored before the stability record existed is scored again from its checkpoint
to add it) and an interrupted training run continues from its checkpoint (the runs live in
``work_dir/runs`` under their own ``t<hash>`` folder, :func:`dandelion.benchmarks.grid.cells.training_hash`).
Then ``results_dir/budget/budget.md`` (a table per dataset) and ``results_dir/budget_<dataset>.png`` (validation
loss against step, one line per budget) are rewritten from every JSON there.

Use::

    dandelion-budget scale=cpu                                   # configs/budget.yaml: Galewsky, SFNO and Dandelion,
    x2 and x4
    dandelion-budget scale=cpu 'only.models=[sfno]' 'multipliers=[2]'
    dandelion-budget scale=cpu 'datasets=[shock_caps_32x64]' 'models=[dandelion]' 'multipliers=[2]' lr=1e-3   #
    another rate
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from dandelion.benchmarks.budget.report import render, valid_over_train
from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid.cells import (
    cell_finished,
    cell_path,
    data_digest,
    lr_tag,
    metric_summaries,
    model_architecture,
    protocol_hash,
    resolved_trainer,
    training_hash,
)
from dandelion.benchmarks.paths import resolve_scale_dirs
from dandelion.cli.common import UsageError, check_choice, check_device, run
from dandelion.runtime import write_json_atomic

__all__ = ["budget", "budget_run", "render", "valid_over_train", "check", "main"]

BUDGET_SCHEMA = 1


def _only(cfg, name: str) -> list[str]:
    sub = (cfg.get("only") or {}).get(name)
    return [str(x) for x in (cfg.get(name) if sub is None else sub)]


def _scaled(cfg, m: int):
    """A copy of ``cfg`` whose scale trains ``m`` times as many steps in each phase (pretrain and, when the
    resolved trainer has one, the fine-tune; a ``max_steps`` cap is scaled too; the warm-up keeps its step count).

    Raises
    ------
    UsageError
        If the trainer stops on wall time or at a fixed step (``max_minutes``, ``stop_at_step``): a longer
        budget could not be told from an early stop.
    """
    t = resolved_trainer(cfg)
    for k in ("max_minutes", "stop_at_step"):
        if t.get(k) is not None:
            raise UsageError(
                f"trainer.{k}={t[k]} would stop a longer budget early: set scale.trainer.{k}=null for dandelion-budget"
            )
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    OmegaConf.set_struct(out, False)
    tr = out.scale.trainer
    tr.epochs = int(t["epochs"]) * m
    if t.get("finetune") and t["finetune"].get("epochs"):
        tr.finetune = {**t["finetune"], "epochs": int(t["finetune"]["epochs"]) * m}
    if t.get("max_steps"):
        tr.max_steps = int(t["max_steps"]) * m
    return out


def _run_dir(cfg, key: str, model: str, seed: int, lr: float, m: int) -> str:
    """The run folder ``_train_one`` uses for the ``m``-times budget (its ``t<hash>`` names the scaled trainer)."""
    scaled = _scaled(cfg, m)
    return str(
        Path(scaled.scale.work_dir)
        / "runs"
        / key
        / model
        / f"seed{seed}"
        / f"t{training_hash(scaled, key)}"
        / lr_tag(lr)
    )


def _current(cfg, rec: dict, cell: dict, data_sha: str | None) -> bool:
    """Whether a stored budget record was made from ``cell`` under the current settings (same cell protocol, same
    scaled training setup at the record's rate, and the same data: the cell's digest, else ``data_sha`` when given)."""
    want, have = cell.get("data_files_sha256") or data_sha, rec.get("data_files_sha256_run")
    return (
        rec.get("cell_protocol_hash") == cell["protocol_hash"]
        and rec.get("run_dir")
        == _run_dir(cfg, rec["dataset_key"], rec["model"], int(rec["seed"]), float(rec["lr"]), int(rec["multiplier"]))
        and (want is None or have is None or have == want)
    )


def _cell(cfg, key: str, model: str, seed: int) -> dict:
    path = cell_path(cfg.scale.results_dir, key, model, seed)
    arch = model_architecture(model, str(cfg.scale.preset))  # a cell of a superseded network is not this model's
    if not cell_finished(path, protocol_hash(cfg, key), resolved_trainer(cfg), arch):
        raise UsageError(
            f"no finished benchmark cell {path} under the current protocol of scale={cfg.scale.name}: run "
            f"dandelion-benchmark scale={cfg.scale.name} 'only.datasets=[{key}]' 'only.models=[{model}]' first"
        )
    return json.loads(Path(path).read_text())


def _summary(next_step: dict, rollout_mean: dict) -> dict:
    return {"next_step": next_step["vrmse"]["mean"], "rollout_mean": rollout_mean["vrmse"]["mean"]}


def _score(scaled, key: str, ckpt: Path, data_path: Path) -> dict:
    """The cell's evaluation of the checkpoint ``ckpt`` (into ``<run>/rollout_test``): next-step and 1:20 VRMSE, the
    stability record over leads 1-20 (None when no field was scored) and the rollout command (``rollout_command``)."""
    results, rollout_cmd = B._evaluate(scaled, key, ckpt, data_path, ckpt.parent / "rollout_test")
    s = metric_summaries(results)
    out = {**_summary(s["next_step"], s["rollout_mean"]), "stability": None, "rollout_command": rollout_cmd}
    st = results.get("stability")
    if st:  # forecasts that blew up (dandelion.evaluation.scoring): one of them can dominate the 1:20 mean
        n20 = min(20, len(st["median_vrmse"]))
        out["stability"] = {
            "n_unstable": st["unstable_by_lead"][n20 - 1],
            "n_forecasts": st["n_forecasts"],
            "first_unstable_lead_step": st["first_unstable_lead_step"],
            "median_vrmse_1_20": float(np.mean(st["median_vrmse"][:n20])),
        }
    return out


def _complete_stability(cfg, key: str, m: int, rec: dict, data_path: Path, out: Path) -> dict:
    """``rec`` as stored, or, for a scored record made before the stability record existed whose checkpoint is still
    in its run folder, scored again to add it (the VRMSEs are recomputed too; a change is printed) and rewritten."""
    ckpt = Path(rec.get("run_dir") or "") / "last.pt"
    if "stability" in rec or not math.isfinite(rec.get("next_step", math.nan)) or not ckpt.is_file():
        return rec
    new = _score(_scaled(cfg, m), key, ckpt, data_path)
    for k in ("next_step", "rollout_mean"):
        a, b = float(new[k]), float(rec[k])
        if not (math.isclose(a, b, rel_tol=1e-6) or (math.isnan(a) and math.isnan(b))):
            print(f"[budget] {out}: {k} rescored {a:.6g} (stored {b:.6g})", flush=True)
    cmd = new.pop("rollout_command")
    rec = {
        **rec,
        **new,
        "commands": {**rec.get("commands", {}), "rollout": cmd},
        "stability_added_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json_atomic(out, rec)
    return rec


def budget_run(cfg, key: str, model: str, seed: int, m: int, lr: float | None = None) -> dict:
    """Train (or reuse) the cell ``(key, model, seed)`` at ``m`` times its budget and score it; returns the record
    (also written to ``results_dir/budget/<key>/<model>/seed<seed>_x<m>.json``). ``m == 1`` is the cell itself.
    ``lr`` (None: the cell's chosen rate) trains at another peak rate instead (``seed<seed>_x<m>_lr<rate>.json``;
    ``m == 1`` is then trained too): a longer budget may need a lower rate.

    Raises
    ------
    UsageError
        If the cell is not finished under the scale's current protocol.
    """
    cell = _cell(cfg, key, model, seed)
    own = lr is None or math.isclose(float(lr), float(cell["lr"]), rel_tol=1e-9)
    lr = float(cell["lr"]) if own else float(lr)
    base = {
        "schema": BUDGET_SCHEMA,
        "dataset_key": key,
        "model": model,
        "seed": int(seed),
        "multiplier": int(m),
        "lr": lr,
        "cell_lr": float(cell["lr"]),
        "cell_protocol_hash": cell["protocol_hash"],
        "data_files_sha256": cell.get("data_files_sha256"),
    }
    if m == 1 and own:
        return {
            **base,
            "steps": int(cell["steps"]),
            "val_loss": float(cell["run"]["val_loss"]),
            "curve": cell["run"]["curve"],
            **_summary(cell["next_step"], cell["rollout_mean"]),
            "minutes": cell["run"].get("minutes"),
            "commands": {"train": cell["commands"]["selected_train"], "rollout": cell["commands"]["rollout"]},
        }
    out = (
        Path(cfg.scale.results_dir)
        / "budget"
        / key
        / model
        / (f"seed{seed}_x{m}.json" if own else f"seed{seed}_x{m}_{lr_tag(lr)}.json")
    )
    data_path = B.ensure_dataset(cfg, key)
    now = data_digest(data_path)
    if cell.get("data_files_sha256") and now != cell["data_files_sha256"]:
        raise UsageError(
            f"the dataset {data_path} (data_files_sha256 {now}) is not the one the cell {key}/{model}/seed{seed} was "
            f"scored on ({cell['data_files_sha256']}): regenerate it with the cell's configuration, or rerun the cell"
        )
    if out.exists():
        rec = json.loads(out.read_text())
        if _current(cfg, rec, cell, now):
            return _complete_stability(cfg, key, m, rec, data_path, out)
    scaled = _scaled(cfg, m)
    t0 = time.perf_counter()
    res = B._train_one(scaled, key, model, seed, lr, data_path)
    rec = {
        **base,
        "steps": int(res["step"]),
        "val_loss": float(res["val_loss"]),
        "curve": B._read_curve(res["run_dir"]),
        "run_dir": str(res["run_dir"]),
        "stopped": res.get("stopped"),
    }
    if math.isfinite(rec["val_loss"]):
        if rec["steps"] != m * int(cell["steps"]):
            print(
                f"[budget] warning: {key}/{model}/seed{seed} x{m} trained {rec['steps']} steps, not {m} x "
                f"{cell['steps']}",
                flush=True,
            )
        rec.update(_score(scaled, key, Path(res["last"]), data_path))
        rec["commands"] = {"train": res["command"], "rollout": rec.pop("rollout_command")}
    else:
        rec.update(next_step=math.nan, rollout_mean=math.nan, commands={"train": res["command"]}, stopped="diverged")
    rec["minutes"] = (time.perf_counter() - t0) / 60.0
    rec["data_files_sha256_run"] = now
    rec["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json_atomic(out, rec)
    return rec


def _stored_current(cfg) -> list[dict]:
    """Every stored budget record under ``results_dir/budget`` that is current (:func:`_current`) for a finished
    cell."""
    root = Path(cfg.scale.results_dir) / "budget"
    out = []
    for p in sorted(root.rglob("seed*_x*.json")) if root.exists() else []:
        rec = json.loads(p.read_text())
        path = cell_path(cfg.scale.results_dir, rec["dataset_key"], rec["model"], int(rec["seed"]))
        arch = model_architecture(rec["model"], str(cfg.scale.preset))
        if rec["dataset_key"] in cfg.scale.datasets and cell_finished(
            path, protocol_hash(cfg, rec["dataset_key"]), resolved_trainer(cfg), arch
        ):
            if _current(cfg, rec, json.loads(path.read_text()), None):
                out.append(rec)
                continue
        print(f"[budget] {p}: made under other settings than the current cell's; left out of budget.md", flush=True)
    return out


def budget(cfg) -> dict:
    """Every (dataset, model) of the config at x1 and every multiplier (module docstring); returns ``{"records":
    [...]}``.

    Raises
    ------
    UsageError
        Before any training, if a named cell is not finished under the scale's current protocol.
    """
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    resolve_scale_dirs(cfg, cfg.get("_argv"))
    if cfg.scale.get("threads"):
        torch.set_num_threads(int(cfg.scale.threads))
    seed = int(cfg.get("seed", 0))
    lr = cfg.get("lr")
    mults = sorted({*(() if lr is not None else (1,)), *(int(m) for m in cfg.multipliers)})
    todo = [(key, model) for key in _only(cfg, "datasets") for model in _only(cfg, "models")]
    for key, model in todo:
        _cell(cfg, key, model, seed)  # every cell exists before anything trains
    records = []
    for key, model in todo:
        for m in mults:
            rec = budget_run(cfg, key, model, seed, m, lr)
            records.append(rec)
            print(
                f"[budget] {key}/{model}/seed{seed} x{m} lr {rec['lr']:g}: {rec['steps']} steps, valid loss "
                f"{rec['val_loss']:.4g}, "
                f"next step {rec['next_step']:.4g}, 1:20 {rec['rollout_mean']:.4g}",
                flush=True,
            )
    stored = _stored_current(cfg)
    pairs = sorted({(r["dataset_key"], r["model"], int(r["seed"])) for r in stored})
    every = stored + [budget_run(cfg, k, mdl, s, 1) for k, mdl, s in pairs]
    render(cfg.scale.results_dir, every, float(cfg.get("flat_tolerance", 0.05)))
    return {"records": records}


def check(cfg, overrides=()) -> None:
    """What ``dandelion-budget`` checks first: the device, datasets and models of the scale, positive integer
    multipliers, and that the scale's folders can be found (:mod:`dandelion.benchmarks.paths`)."""
    resolve_scale_dirs(cfg, overrides)
    check_device(cfg.get("device") or cfg.scale.get("device") or "cpu")
    for key in _only(cfg, "datasets"):
        check_choice(key, list(cfg.scale.datasets), "datasets")
    for name in _only(cfg, "models"):
        check_choice(name, [str(m) for m in cfg.scale.models], "models")
    bad = [m for m in cfg.multipliers if isinstance(m, bool) or not (isinstance(m, int) and m >= 1)]
    if bad or not list(cfg.multipliers):
        raise UsageError(
            "multipliers must be positive integers (budgets as multiples of the scale's), got "
            f"{list(cfg.multipliers)}: "
            "e.g. 'multipliers=[2,4]'"
        )
    tol = cfg.get("flat_tolerance", 0.05)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
        raise UsageError(f"flat_tolerance must be a fraction between 0 and 1, got {tol!r}: e.g. flat_tolerance=0.05")
    lr = cfg.get("lr")
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0):
        raise UsageError(
            f"lr must be a positive peak learning rate (or null: each cell's chosen rate), got {lr!r}: e.g. lr=1e-3"
        )
    if isinstance(cfg.get("seed", 0), bool) or not isinstance(cfg.get("seed", 0), int):
        raise UsageError(f"seed must be an integer (the cell's seed), got {cfg.get('seed')!r}: e.g. seed=0")
    extra = sorted(set(cfg.get("only") or {}) - {"datasets", "models"})
    if extra:
        raise UsageError(f"only.{extra[0]} is not a subset dandelion-budget knows: use only.datasets or only.models")


def main(argv: list[str] | None = None) -> None:
    """``dandelion-budget scale=cpu [datasets=[..]] [models=[..]] [multipliers=[2,4]]`` (``--help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)

    def _job(cfg: DictConfig) -> None:
        OmegaConf.set_struct(cfg, False)
        cfg._argv = [a for a in argv if a != "--debug"]
        budget(cfg)
        print("[budget] made by: dandelion-budget " + " ".join(shlex.quote(a) for a in argv if a != "--debug"))

    run("dandelion-budget", "budget", _job, check=check, argv=argv)


if __name__ == "__main__":
    main()
