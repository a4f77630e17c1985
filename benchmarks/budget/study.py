"""``dandelion-budget``: is a benchmark cell's training budget at a plateau?

A cell of ``dandelion-benchmark`` (:mod:`dandelion.benchmarks.grid.benchmark`) trains for a fixed number of
optimiser steps: ``epochs * max_batches_per_epoch`` of pretraining, then ``finetune.epochs *
max_batches_per_epoch`` of the autoregressive fine-tune, with warm-up and cosine decay to zero. A loss
that "flattens" at the end of such a run only shows that the learning rate reached zero. The test is
to train again with a longer budget: for every finished cell named by the config (``configs/budget.yaml``),
the model is retrained from scratch at the cell's chosen learning rate and seed, with BOTH phases
multiplied by each of ``multipliers`` (the warm-up keeps its step count, the cosine decay stretches), and scored with the cell's
evaluation (next-step and 1:20 VRMSE on the test split). The ``x1`` row is the cell itself, not retrained.

The budget counts as flat at the first multiplier whose step up (a doubling for ``[2, 4]``) changes the
final validation loss by less than ``flat_tolerance`` (a fraction); a rise beyond it is marked ``rose`` (the
longer run at the same peak rate ended worse: a sign of an unstable rate at that budget, not of a plateau); until then the cell's numbers describe
models that are still learning, and a comparison between models holds at that budget only.

One JSON per run is written atomically to ``results_dir/budget/<dataset>/<model>/seed<k>_x<m>.json``;
a finished one is skipped (one scored before the stability record existed is scored again from its checkpoint
to add it) and an interrupted training run continues from its checkpoint (the runs live in
``work_dir/runs`` under their own ``t<hash>`` folder, :func:`dandelion.benchmarks.grid.cells.training_hash`).
Then ``results_dir/budget/budget.md`` (a table per dataset) and ``results_dir/budget_<dataset>.png`` (validation
loss against step, one line per budget) are rewritten from every JSON there.

Use::

    dandelion-budget scale=cpu                                   # configs/budget.yaml: Galewsky, SFNO and Dandelion, x2 and x4
    dandelion-budget scale=cpu 'only.models=[sfno]' 'multipliers=[2]'
    dandelion-budget scale=cpu 'datasets=[shock_caps_32x64]' 'models=[dandelion]' 'multipliers=[2]' lr=1e-3   # another rate
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

from dandelion.benchmarks.budget.saturation import fit_saturation, saturating_power_law
from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid.cells import (
    cell_finished,
    cell_path,
    data_digest,
    lr_tag,
    metric_summaries,
    protocol_hash,
    resolved_trainer,
    training_hash,
)
from dandelion.cli.common import UsageError, check_choice, check_device, run
from dandelion.evaluation.rollout import UNSTABLE_VRMSE
from dandelion.reporting.plotting import plain_log_ticks, pyplot, save_figure
from dandelion.runtime import write_json_atomic, write_text_atomic

__all__ = ["budget", "budget_run", "render", "valid_over_train", "check", "main"]

BUDGET_SCHEMA = 1
MIN_FIT_POINTS = 4  # budgets a saturation fit needs (three fix its three parameters; a fourth tests them)
GAP_EPOCHS = 5  # last pretraining epochs over which valid_over_train compares the two losses


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
    if not cell_finished(path, protocol_hash(cfg, key), resolved_trainer(cfg)):
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
    if st:  # forecasts that blew up (dandelion.evaluation.rollout): one of them can dominate the 1:20 mean
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
                f"[budget] warning: {key}/{model}/seed{seed} x{m} trained {rec['steps']} steps, not {m} x {cell['steps']}",
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


def _fmt(x, digits: int = 4) -> str:
    return "" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}g}"


def _blew_up(rec: dict) -> str:
    """``' (3 of 36 blew up; median 0.62)'`` for a record whose test forecasts blew up within 20 steps, ``' (blew up;
    not counted)'`` for a record without the stability record whose 1:20 mean is not finite or above the threshold,
    else ``''``."""
    st = rec.get("stability")
    if not st:
        r = rec.get("rollout_mean")
        blown = r is not None and not (math.isfinite(r) and r <= UNSTABLE_VRMSE)
        scored = math.isfinite(rec.get("next_step", math.nan))  # a diverged training run has no rollout at all
        return " (blew up; not counted)" if blown and scored else ""
    if not st.get("n_unstable"):
        return ""
    med = st["median_vrmse_1_20"]
    return f" ({st['n_unstable']} of {st['n_forecasts']} blew up; median {_fmt(med) if math.isfinite(med) else 'not finite'})"


def _change(prev: float | None, now: float) -> float | None:
    return None if prev is None or not math.isfinite(now) else now / prev - 1.0


def _verdict(change: float | None, tol: float) -> str:
    """The 'flat' column of a step up: ``'no'`` (the loss fell by ``tol`` or more), ``'yes'``, ``'rose'`` (it grew by
    ``tol`` or more), ``''`` for the first budget of a series."""
    return "" if change is None else ("no" if change <= -tol else "yes" if change < tol else "rose")


def valid_over_train(rec: dict, n_epochs: int = GAP_EPOCHS) -> float | None:
    """Generalisation gap of a run: the mean validation loss over the last ``n_epochs`` pretraining epochs of
    ``rec["curve"]`` divided by the mean training loss over the same epochs (both the area-weighted next-step MSE of
    :class:`~dandelion.training.trainer.Trainer`; the training loss is the epoch's mean over its batches).

    Near 1: the model fits unseen trajectories as well as the ones it trains on, so a longer budget is the lever. Growing
    with the budget: it memorises its training trajectories, and more data is the lever. None without such epochs.
    """
    pre = [
        c
        for c in rec.get("curve") or []
        if c.get("phase") == "pretrain"
        and all(c.get(k) is not None and math.isfinite(c[k]) for k in ("train_loss", "val_loss"))
    ][-n_epochs:]
    if not pre:
        return None
    train = sum(c["train_loss"] for c in pre)
    return sum(c["val_loss"] for c in pre) / train if train > 0 else None


def _steps_text(steps: float, base: float) -> str:
    """``steps`` as ``'16,700 steps (x13.9)'`` against the x1 budget ``base``; ``'never'`` when infinite, ``'beyond
    x1000 (x4.3e+29)'`` past a thousand times the x1 budget (where the digits would mean nothing)."""
    if not math.isfinite(steps):
        return "never"
    if steps > 1000 * base:
        return f"beyond x1000 (x{steps / base:.2g})"
    return f"{steps:,.0f} steps (x{steps / base:.3g})"


def _series_fits(mine: list[dict], tol: float, ax) -> list[str]:
    """Table rows of the saturation fits of one model's series (seed, rate), and their panel: final valid loss
    against steps, with the fitted law drawn out to twice the fitted flat budget (at most 64 times the largest)."""
    rows, ticks = [], set()
    for seed, rate in sorted({(int(r["seed"]), r["lr"]) for r in mine}, key=lambda x: (x[0], -x[1])):
        series = sorted((r for r in mine if int(r["seed"]) == seed and r["lr"] == rate), key=lambda r: r["multiplier"])
        done = [r for r in series if math.isfinite(r["val_loss"]) and r.get("steps")]
        pts = [(int(r["steps"]), float(r["val_loss"])) for r in done]
        if not pts:
            continue
        label = f"seed {seed}, lr {rate:g}"
        ax.plot(*zip(*pts), "o", label=label)
        ticks.update(p[0] for p in pts)
        if len(pts) < MIN_FIT_POINTS or any(_verdict(_change(a[1], b[1]), tol) != "no" for a, b in zip(pts, pts[1:])):
            continue  # too short, or a step up is already flat or rose: nothing to extrapolate
        fit = fit_saturation([p[0] for p in pts], [p[1] for p in pts], tol)
        base = int(done[0]["steps"]) / int(done[0]["multiplier"])  # the x1 budget
        top = max(p[0] for p in pts)
        end = min(64 * top, max(2 * top, 2 * fit.flat_steps if math.isfinite(fit.flat_steps) else 64 * top))
        s = np.geomspace(base, end, 100)
        ax.plot(s, saturating_power_law(s, fit.c, fit.b, fit.alpha, fit.s0), "--", color=ax.lines[-1].get_color(), lw=1)
        loo = "" if fit.loo_flat_steps is None else " to ".join(_steps_text(v, base) for v in fit.loo_flat_steps)
        rows.append(
            f"| {series[0]['model']} | {seed} | {rate:g} | {', '.join('x' + str(r['multiplier']) for r in done)} | "
            f"{fit.c:.3g} | {fit.alpha:.2f} | {100 * fit.max_rel_residual:.1f} % | {_steps_text(fit.flat_steps, base)}"
            f"{' (at a bound)' if fit.at_bound else ''} | {loo} |"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.minorticks_off()
    if ticks:  # the measured budgets (a log axis within one decade would show no label)
        ax.set_xticks(sorted(ticks), [f"{t:,}" for t in sorted(ticks)], fontsize=7, rotation=45)
    plain_log_ticks(ax)
    ax.set_xlabel("budget (optimiser steps)")
    ax.set_ylabel("final valid loss")
    ax.set_title("final loss against budget (dashed: saturation fit)", fontsize=8)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return rows


def render(results_dir, records: list[dict], tol: float) -> Path:
    """Write ``results_dir/budget/budget.md`` (a table per dataset) and ``results_dir/budget_<dataset>.png``
    (validation loss against step, a panel per model) from ``records`` (x1 rows included)."""
    root = Path(results_dir) / "budget"
    lines = [
        "# Training budget: the cells retrained with longer budgets",
        "",
        "Made by `dandelion-budget` (benchmarks/budget/study.py): each cell retrained from scratch at its chosen learning "
        "rate and seed with both phases (pretrain, autoregressive fine-tune) multiplied; x1 is the cell itself. "
        "'change' is the final valid loss's relative change from the previous finite budget of the same model, seed and rate; "
        f"flat: it changed by less than {100 * tol:g} %; 'rose': it grew by more (a longer run at the same peak rate "
        "that ended worse: an unstable rate for that budget, not a plateau). VRMSE area-weighted on the test split; "
        "'blew up': test forecasts whose VRMSE went above 10 or was not finite within 20 steps (dandelion-rollout's "
        "stability record; such a forecast dominates the 1:20 mean), with the median over forecasts averaged over leads 1-20; "
        "'blew up; not counted': a record without that record (a cell's x1 row, or a run scored before it existed "
        "whose checkpoint is gone; asking for its budget again adds it from the checkpoint) whose 1:20 mean "
        f"is not finite or above 10. 'valid / train': the mean valid loss over the last {GAP_EPOCHS} pretraining epochs over the mean "
        "training loss of the same epochs (the same next-step loss); near 1 the model generalises to unseen trajectories "
        "as it fits its own, and growing with the budget it memorises them (more data, not more steps, is then the lever).",
        "",
        "'Saturation fit': where no measured step up is flat yet, a saturating power law L(S) = c + b (S/S0)^-alpha "
        f"(benchmarks/budget/saturation.py; Kaplan et al. 2020, eq. 1.6 at fixed model size) fitted to the final valid losses of a model, "
        f"seed and rate with at least {MIN_FIT_POINTS} finite budgets and no 'rose' ('flat' and 'rose' compare neighbouring "
        f"finite budgets). 'doubling gains < {100 * tol:g} % from': the budget S from which training 2S instead of S would lower the "
        "loss by less than that (the row of 2S would read 'flat: yes'), in steps and as a multiple of x1; 'never' where the "
        "fitted floor c is 0, 'beyond x1000' where the floor is so low that no budget within reach flattens (per-doubling gains "
        "that do not shrink, as a pure power law or faster); '(at a bound)' where the fit ended on a bound of alpha or c (not to be trusted). An "
        "extrapolation: the leave-one-out range (fits through all but one point) says how firmly the points pin it down.",
        "",
    ]
    plt = pyplot()
    for key in sorted({r["dataset_key"] for r in records}):
        rows = sorted(
            (r for r in records if r["dataset_key"] == key),
            key=lambda r: (r["model"], int(r["seed"]), -r["lr"], r["multiplier"]),
        )
        lines += [
            f"## {key}",
            "",
            "| model | seed | lr | budget | steps | final valid loss | change | valid / train | next step | 1:20 | flat |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        models = sorted({r["model"] for r in rows})
        fits = []
        fig, axes = plt.subplots(2, len(models), figsize=(4.6 * len(models), 7.0), squeeze=False)
        for ax, fax, model in zip(axes[0], axes[1], models):
            mine = [r for r in rows if r["model"] == model]
            fits += _series_fits(mine, tol, fax)
            for seed, rate in sorted({(int(r["seed"]), r["lr"]) for r in mine}, key=lambda x: (x[0], -x[1])):
                prev = None
                for r in (r for r in mine if int(r["seed"]) == seed and r["lr"] == rate):
                    change = _change(prev, r["val_loss"])
                    diverged = not math.isfinite(r["val_loss"])
                    flat = _verdict(change, tol)
                    lines.append(
                        f"| {model} | {seed} | {r['lr']:g} | x{r['multiplier']} | {'' if diverged else r['steps']} | "
                        f"{'diverged' if diverged else _fmt(r['val_loss'])} | {'' if change is None else f'{100 * change:+.1f} %'} | "
                        f"{'' if diverged else _fmt(valid_over_train(r), 3)} | {_fmt(r['next_step'])} | {_fmt(r['rollout_mean'])}{_blew_up(r)} | {flat} |"
                    )
                    prev = prev if diverged else r["val_loss"]
                    pts = [
                        (c["step"], c["val_loss"])
                        for c in r.get("curve") or []
                        if c.get("val_loss") is not None and math.isfinite(c["val_loss"])
                    ]
                    if pts:
                        ax.plot(
                            *zip(*pts),
                            label=f"x{r['multiplier']} ({r['steps']} steps)"
                            + (f", seed {seed}" if len({int(q["seed"]) for q in mine}) > 1 else "")
                            + (f", lr {rate:g}" if len({q["lr"] for q in mine}) > 1 else ""),
                        )
            ax.set_yscale("log")
            rates = ", ".join(sorted({f"{r['lr']:g}" for r in mine}))
            ax.set_title(f"{model} (lr {rates})")
            ax.set_xlabel("optimiser step")
            ax.set_ylabel("valid loss (normalised increment MSE)")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        fig.suptitle(f"{key}: validation loss at longer budgets", fontsize=10)
        # about an inch on the left for log-scale tick labels and the y label, whatever the number of panels
        fig.subplots_adjust(left=1.0 / fig.get_figwidth(), right=0.97, bottom=0.1, top=0.92, wspace=0.35, hspace=0.35)
        save_figure(fig, Path(results_dir) / f"budget_{key}.png")
        lines.append("")
        if fits:
            lines += (
                [
                    f"Saturation fit ({key}):",
                    "",
                    f"| model | seed | lr | budgets | floor c | alpha | worst misfit | doubling gains < {100 * tol:g} % from | leave-one-out |",
                    "|---|---:|---:|---|---:|---:|---:|---|---|",
                ]
                + fits
                + [""]
            )
    write_text_atomic(root / "budget.md", "\n".join(lines))
    return root / "budget.md"


def _stored_current(cfg) -> list[dict]:
    """Every stored budget record under ``results_dir/budget`` that is current (:func:`_current`) for a finished cell."""
    root = Path(cfg.scale.results_dir) / "budget"
    out = []
    for p in sorted(root.rglob("seed*_x*.json")) if root.exists() else []:
        rec = json.loads(p.read_text())
        path = cell_path(cfg.scale.results_dir, rec["dataset_key"], rec["model"], int(rec["seed"]))
        if rec["dataset_key"] in cfg.scale.datasets and cell_finished(
            path, protocol_hash(cfg, rec["dataset_key"]), resolved_trainer(cfg)
        ):
            if _current(cfg, rec, json.loads(path.read_text()), None):
                out.append(rec)
                continue
        print(f"[budget] {p}: made under other settings than the current cell's; left out of budget.md", flush=True)
    return out


def budget(cfg) -> dict:
    """Every (dataset, model) of the config at x1 and every multiplier (module docstring); returns ``{"records": [...]}``.

    Raises
    ------
    UsageError
        Before any training, if a named cell is not finished under the scale's current protocol.
    """
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
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
                f"[budget] {key}/{model}/seed{seed} x{m} lr {rec['lr']:g}: {rec['steps']} steps, valid loss {rec['val_loss']:.4g}, "
                f"next step {rec['next_step']:.4g}, 1:20 {rec['rollout_mean']:.4g}",
                flush=True,
            )
    stored = _stored_current(cfg)
    pairs = sorted({(r["dataset_key"], r["model"], int(r["seed"])) for r in stored})
    every = stored + [budget_run(cfg, k, mdl, s, 1) for k, mdl, s in pairs]
    render(cfg.scale.results_dir, every, float(cfg.get("flat_tolerance", 0.05)))
    return {"records": records}


def check(cfg, overrides=()) -> None:
    """What ``dandelion-budget`` checks first: the device, datasets and models of the scale, positive integer multipliers."""
    check_device(cfg.get("device") or cfg.scale.get("device") or "cpu")
    for key in _only(cfg, "datasets"):
        check_choice(key, list(cfg.scale.datasets), "datasets")
    for name in _only(cfg, "models"):
        check_choice(name, [str(m) for m in cfg.scale.models], "models")
    bad = [m for m in cfg.multipliers if isinstance(m, bool) or not (isinstance(m, int) and m >= 1)]
    if bad or not list(cfg.multipliers):
        raise UsageError(
            f"multipliers must be positive integers (budgets as multiples of the scale's), got {list(cfg.multipliers)}: "
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
        budget(cfg)
        print("[budget] made by: dandelion-budget " + " ".join(shlex.quote(a) for a in argv if a != "--debug"))

    run("dandelion-budget", "budget", _job, check=check, argv=argv)


if __name__ == "__main__":
    main()
