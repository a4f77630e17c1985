"""The report of ``dandelion-budget`` (:mod:`dandelion.benchmarks.budget.study`): ``budget.md``, one table per dataset
(each budget's steps, final validation loss and its change over the step before, flat or not, test next-step and
1:20 VRMSE, the generalisation gap :func:`valid_over_train`, defined in :mod:`dandelion.benchmarks.grid.records` and
re-exported here), and ``budget_<dataset>.png`` (validation loss against step, one line per budget, with the
saturation fit of :mod:`dandelion.benchmarks.budget.saturation` where there are enough budgets).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from dandelion.benchmarks.budget.saturation import fit_saturation, saturating_power_law
from dandelion.benchmarks.grid.records import GAP_EPOCHS, valid_over_train  # re-exported: it lived here first
from dandelion.evaluation.scoring import UNSTABLE_VRMSE
from dandelion.reporting.plotting import plain_log_ticks, pyplot, save_figure
from dandelion.runtime import write_text_atomic

__all__ = ["GAP_EPOCHS", "MIN_FIT_POINTS", "render", "valid_over_train"]

MIN_FIT_POINTS = 4  # budgets a saturation fit needs (three fix its three parameters; a fourth tests them)


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
    med_text = _fmt(med) if math.isfinite(med) else "not finite"
    return f" ({st['n_unstable']} of {st['n_forecasts']} blew up; median {med_text})"


def _change(prev: float | None, now: float) -> float | None:
    return None if prev is None or not math.isfinite(now) else now / prev - 1.0


def _verdict(change: float | None, tol: float) -> str:
    """The 'flat' column of a step up: ``'no'`` (the loss fell by ``tol`` or more), ``'yes'``, ``'rose'`` (it grew by
    ``tol`` or more), ``''`` for the first budget of a series."""
    return "" if change is None else ("no" if change <= -tol else "yes" if change < tol else "rose")


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
        "Made by `dandelion-budget` (benchmarks/budget/study.py): each cell retrained from scratch at its chosen "
        "learning "
        "rate and seed with both phases (pretrain, autoregressive fine-tune) multiplied; x1 is the cell itself. "
        "'change' is the final valid loss's relative change from the previous finite budget of the same model, seed "
        "and rate; "
        f"flat: it changed by less than {100 * tol:g} %; 'rose': it grew by more (a longer run at the same peak rate "
        "that ended worse: an unstable rate for that budget, not a plateau). VRMSE area-weighted on the test split; "
        "'blew up': test forecasts whose VRMSE went above 10 or was not finite within 20 steps (dandelion-rollout's "
        "stability record; such a forecast dominates the 1:20 mean), with the median over forecasts averaged over "
        "leads 1-20; "
        "'blew up; not counted': a record without that record (a cell's x1 row, or a run scored before it existed "
        "whose checkpoint is gone; asking for its budget again adds it from the checkpoint) whose 1:20 mean "
        f"is not finite or above 10. 'valid / train': the mean valid loss over the last {GAP_EPOCHS} pretraining "
        "epochs over the mean "
        "training loss of the same epochs (the same next-step loss); near 1 the model generalises to unseen "
        "trajectories "
        "as it fits its own, and growing with the budget it memorises them (more data, not more steps, is then the "
        "lever).",
        "",
        "'Saturation fit': where no measured step up is flat yet, a saturating power law L(S) = c + b (S/S0)^-alpha "
        "(benchmarks/budget/saturation.py; Kaplan et al. 2020, eq. 1.6 at fixed model size) fitted to the final "
        "valid losses of a model, "
        f"seed and rate with at least {MIN_FIT_POINTS} finite budgets and no 'rose' ('flat' and 'rose' compare "
        "neighbouring "
        f"finite budgets). 'doubling gains < {100 * tol:g} % from': the budget S from which training 2S instead of S "
        "would lower the "
        "loss by less than that (the row of 2S would read 'flat: yes'), in steps and as a multiple of x1; 'never' "
        "where the "
        "fitted floor c is 0, 'beyond x1000' where the floor is so low that no budget within reach flattens "
        "(per-doubling gains "
        "that do not shrink, as a pure power law or faster); '(at a bound)' where the fit ended on a bound of alpha "
        "or c (not to be trusted). An "
        "extrapolation: the leave-one-out range (fits through all but one point) says how firmly the points pin it "
        "down.",
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
            "| model | seed | lr | budget | steps | final valid loss | change | valid / train | next step | 1:20 | "
            "flat |",
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
                        f"{'diverged' if diverged else _fmt(r['val_loss'])} | "
                        f"{'' if change is None else f'{100 * change:+.1f} %'} | "
                        f"{'' if diverged else _fmt(valid_over_train(r), 3)} | {_fmt(r['next_step'])} | "
                        f"{_fmt(r['rollout_mean'])}{_blew_up(r)} | {flat} |"
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
                    "| model | seed | lr | budgets | floor c | alpha | worst misfit | doubling gains < "
                    f"{100 * tol:g} % from | leave-one-out |",
                    "|---|---:|---:|---|---:|---:|---:|---|---|",
                ]
                + fits
                + [""]
            )
    write_text_atomic(root / "budget.md", "\n".join(lines))
    return root / "budget.md"
