"""``dandelion-budget``: is a benchmark cell's training budget at a plateau?

A cell of ``dandelion-benchmark`` (:mod:`dandelion.benchmarks.benchmark`) trains for a fixed number of
optimiser steps: ``epochs * max_batches_per_epoch`` of pretraining, then ``finetune.epochs *
max_batches_per_epoch`` of the autoregressive fine-tune, with warm-up and cosine decay to zero. A loss
that "flattens" at the end of such a run only shows that the learning rate reached zero. The test is
to train again with a longer budget: for every finished cell named by the config (``configs/budget.yaml``),
the model is retrained from scratch at the cell's chosen learning rate and seed, with BOTH phases
multiplied by each of ``multipliers`` (the schedule stretched alike), and scored with the cell's
evaluation (next-step and 1:20 VRMSE on the test split). The ``x1`` row is the cell itself, not retrained.

The budget counts as flat at the first multiplier whose doubling (or other step up) lowers the final
validation loss by less than ``flat_tolerance`` (a fraction); until then the cell's numbers describe
models that are still learning, and a comparison between models holds at that budget only.

One JSON per run is written atomically to ``results_dir/budget/<dataset>/<model>/seed<k>_x<m>.json``;
a finished one is skipped and an interrupted training run continues from its checkpoint (the runs live in
``work_dir/runs`` under their own ``t<hash>`` folder, :func:`dandelion.benchmarks.cells.training_hash`).
Then ``results_dir/budget/budget.md`` (a table per dataset) and ``budget_<dataset>.png`` (validation
loss against step, one line per budget) are rewritten from every JSON there.

Use::

    dandelion-budget scale=cpu                                   # configs/budget.yaml: Galewsky, SFNO and Dandelion, x2 and x4
    dandelion-budget scale=cpu 'only.models=[sfno]' 'multipliers=[2]'
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from dandelion.cli import UsageError, check_choice, check_device, run
from dandelion.runtime import write_json_atomic, write_text_atomic

from . import benchmark as B
from .cells import cell_finished, cell_path, data_digest, metric_summaries, protocol_hash, resolved_trainer
from .plotting import pyplot, save_figure

__all__ = ["budget", "budget_run", "render", "check", "main"]

BUDGET_SCHEMA = 1


def _only(cfg, name: str) -> list[str]:
    sub = (cfg.get("only") or {}).get(name)
    return [str(x) for x in (cfg.get(name) if sub is None else sub)]


def _scaled(cfg, m: int):
    """A copy of ``cfg`` whose scale trains ``m`` times as many steps in each phase."""
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    OmegaConf.set_struct(out, False)
    t = out.scale.trainer
    t.epochs = int(t.epochs) * m
    if t.get("finetune") is not None:
        t.finetune.epochs = int(t.finetune.epochs) * m
    return out


def _cell(cfg, key: str, model: str, seed: int) -> dict:
    path = cell_path(cfg.scale.results_dir, key, model, seed)
    if not cell_finished(path, protocol_hash(cfg, key), resolved_trainer(cfg)):
        raise UsageError(f"no finished benchmark cell {path} under the current protocol of scale={cfg.scale.name}: run "
                         f"dandelion-benchmark scale={cfg.scale.name} 'only.datasets=[{key}]' 'only.models=[{model}]' first")
    return json.loads(Path(path).read_text())


def _summary(next_step: dict, rollout_mean: dict) -> dict:
    return {"next_step": next_step["vrmse"]["mean"], "rollout_mean": rollout_mean["vrmse"]["mean"]}


def budget_run(cfg, key: str, model: str, seed: int, m: int) -> dict:
    """Train (or reuse) the cell ``(key, model, seed)`` at ``m`` times its budget and score it; returns the record
    (also written to ``results_dir/budget/<key>/<model>/seed<seed>_x<m>.json``). ``m == 1`` is the cell itself.

    Raises
    ------
    UsageError
        If the cell is not finished under the scale's current protocol.
    """
    cell = _cell(cfg, key, model, seed)
    base = {"schema": BUDGET_SCHEMA, "dataset_key": key, "model": model, "seed": int(seed), "multiplier": int(m),
            "lr": float(cell["lr"]), "cell_protocol_hash": cell["protocol_hash"], "data_sha256": cell.get("data_sha256")}
    if m == 1:
        return {**base, "steps": int(cell["steps"]), "val_loss": float(cell["run"]["val_loss"]), "curve": cell["run"]["curve"],
                **_summary(cell["next_step"], cell["rollout_mean"]), "minutes": cell["run"].get("minutes"),
                "commands": {"train": cell["commands"]["selected_train"], "rollout": cell["commands"]["rollout"]}}
    out = Path(cfg.scale.results_dir) / "budget" / key / model / f"seed{seed}_x{m}.json"
    if out.exists():
        rec = json.loads(out.read_text())
        if rec.get("cell_protocol_hash") == cell["protocol_hash"] and rec.get("lr") == base["lr"]:
            return rec
    data_path = B.ensure_dataset(cfg, key)
    scaled = _scaled(cfg, m)
    t0 = time.perf_counter()
    res = B._train_one(scaled, key, model, seed, float(cell["lr"]), data_path)
    rec = {**base, "steps": int(res["step"]), "val_loss": float(res["val_loss"]), "curve": B._read_curve(res["run_dir"]),
           "run_dir": str(res["run_dir"])}
    if math.isfinite(rec["val_loss"]):
        ckpt = Path(res["last"])
        results, rollout_cmd = B._evaluate(scaled, key, ckpt, data_path, ckpt.parent / "rollout_test")
        s = metric_summaries(results)
        rec.update(_summary(s["next_step"], s["rollout_mean"]))
        rec["commands"] = {"train": res["command"], "rollout": rollout_cmd}
    else:
        rec.update(next_step=math.nan, rollout_mean=math.nan, commands={"train": res["command"]}, stopped="diverged")
    rec["minutes"] = (time.perf_counter() - t0) / 60.0
    if data_digest(data_path) != cell.get("data_sha256") and cell.get("data_sha256"):
        rec["data_warning"] = "the dataset on disk differs from the cell's (data_sha256)"
    rec["data_sha256_run"] = data_digest(data_path)
    rec["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json_atomic(out, rec)
    return rec


def _fmt(x) -> str:
    return "" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.4g}"


def render(results_dir, records: list[dict], tol: float) -> Path:
    """Write ``budget.md`` and one ``budget_<dataset>.png`` per dataset under ``results_dir/budget`` from ``records``."""
    root = Path(results_dir) / "budget"
    lines = ["# Training budget: the cells retrained with longer budgets", "",
             "Made by `dandelion-budget` (benchmarks/budget.py): each cell retrained from scratch at its chosen learning "
             "rate and seed with both phases (pretrain, autoregressive fine-tune) multiplied; x1 is the cell itself. "
             f"'change' is the final valid loss's relative change from the row above; flat: |change| < {tol:g}. "
             "VRMSE area-weighted on the test split.", ""]
    plt = pyplot()
    for key in sorted({r["dataset_key"] for r in records}):
        rows = sorted((r for r in records if r["dataset_key"] == key), key=lambda r: (r["model"], r["multiplier"]))
        lines += [f"## {key}", "", "| model | lr | budget | steps | final valid loss | change | next step | 1:20 | flat |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        models = sorted({r["model"] for r in rows})
        fig, axes = plt.subplots(1, len(models), figsize=(4.6 * len(models), 3.6), squeeze=False)
        for ax, model in zip(axes[0], models):
            prev = None
            for r in (r for r in rows if r["model"] == model):
                change = None if prev is None else r["val_loss"] / prev - 1.0
                flat = "" if change is None else ("yes" if abs(change) < tol else "no")
                lines.append(f"| {model} | {r['lr']:g} | x{r['multiplier']} | {r['steps']} | {_fmt(r['val_loss'])} | "
                             f"{'' if change is None else f'{100 * change:+.1f} %'} | {_fmt(r['next_step'])} | {_fmt(r['rollout_mean'])} | {flat} |")
                prev = r["val_loss"]
                pts = [(c["step"], c["val_loss"]) for c in r.get("curve") or [] if c.get("val_loss") is not None and math.isfinite(c["val_loss"])]
                if pts:
                    ax.plot(*zip(*pts), label=f"x{r['multiplier']} ({r['steps']} steps)")
            ax.set_yscale("log")
            ax.set_title(f"{model} (lr {next(r['lr'] for r in rows if r['model'] == model):g})")
            ax.set_xlabel("optimiser step")
            ax.set_ylabel("valid loss (normalised increment MSE)")
            ax.legend(fontsize=8)
        fig.suptitle(f"{key}: validation loss at longer budgets", fontsize=10)
        fig.subplots_adjust(left=0.1, right=0.97, bottom=0.15, top=0.85, wspace=0.3)
        save_figure(fig, Path(results_dir) / f"budget_{key}.png")
        lines.append("")
    write_text_atomic(root / "budget.md", "\n".join(lines))
    return root / "budget.md"


def budget(cfg) -> dict:
    """Every (dataset, model) of the config at x1 and every multiplier (module docstring); returns ``{"records": [...]}``."""
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    seed = int(cfg.get("seed", 0))
    mults = sorted({1, *(int(m) for m in cfg.multipliers)})
    records = []
    for key in _only(cfg, "datasets"):
        for model in _only(cfg, "models"):
            for m in mults:
                rec = budget_run(cfg, key, model, seed, m)
                records.append(rec)
                print(f"[budget] {key}/{model}/seed{seed} x{m}: {rec['steps']} steps, valid loss {rec['val_loss']:.4g}, "
                      f"next step {rec['next_step']:.4g}, 1:20 {rec['rollout_mean']:.4g}", flush=True)
    root = Path(cfg.scale.results_dir) / "budget"
    stored = [json.loads(p.read_text()) for p in sorted(root.rglob("seed*_x*.json"))] if root.exists() else []
    pairs = sorted({(r["dataset_key"], r["model"], int(r["seed"])) for r in (*stored, *records)})
    every = [r for r in stored if (r["dataset_key"], r["model"], int(r["seed"])) in pairs]
    every += [budget_run(cfg, k, mdl, s, 1) for k, mdl, s in pairs]
    render(cfg.scale.results_dir, every, float(cfg.get("flat_tolerance", 0.05)))
    return {"records": records}


def check(cfg, overrides=()) -> None:
    """What ``dandelion-budget`` checks first: the device, datasets and models of the scale, positive integer multipliers."""
    check_device(cfg.get("device") or cfg.scale.get("device") or "cpu")
    for key in _only(cfg, "datasets"):
        check_choice(key, list(cfg.scale.datasets), "datasets")
    for name in _only(cfg, "models"):
        check_choice(name, [str(m) for m in cfg.scale.models], "models")
    bad = [m for m in cfg.multipliers if not (isinstance(m, int) and m >= 1)]
    if bad:
        raise UsageError(f"multipliers must be positive integers (budgets as multiples of the scale's), got {bad}: e.g. 'multipliers=[2,4]'")


def main(argv: list[str] | None = None) -> None:
    """``dandelion-budget scale=cpu [datasets=[..]] [models=[..]] [multipliers=[2,4]]`` (``--help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)

    def _job(cfg: DictConfig) -> None:
        budget(cfg)
        print("[budget] made by: dandelion-budget " + " ".join(shlex.quote(a) for a in argv if a != "--debug"))

    run("dandelion-budget", "budget", _job, check=check, argv=argv)


if __name__ == "__main__":
    main()
