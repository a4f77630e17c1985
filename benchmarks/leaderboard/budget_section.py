"""The budget axis's section of ``leaderboard.md`` and its figures (issue 71, item 3): the judgement of
:mod:`~dandelion.benchmarks.leaderboard.budget_axis` as a table, one sentence per key and a figure per key.

:func:`budget_section` writes, for every dataset key of the multiple's scale and both lead summaries (next step, 1:N):

* a table, one row per key and model: per budget the headline's entry (:func:`~dandelion.benchmarks.leaderboard.
  headline.entry_text`, with the ± half-width of the 95 % Student-t interval: the same †, ‡, ✗k, bold and ``h P,V``
  marks as the headline), the mean training CPU-seconds of one run, the largest ``valid_over_train`` (flagged over
  :data:`~dandelion.benchmarks.leaderboard.compute.GAP_FLAG`) and the cells kept out of those needed;
* one sentence per judged key (dataset and grid) saying whether the ranking changes with the budget
  (:func:`~dandelion.benchmarks.leaderboard.budget_axis.key_sentence`);
* a figure per judged key, ``budget_axis_<key>.png``: score against training CPU-seconds (log), one line per model
  through its points at each budget, error bars the t interval (:func:`budget_figure`, :func:`plot_budget_axis`);
* what is pending (missing or stale cells, a network or data that differs between budgets), a sentence for the
  verdict paragraph (:func:`~dandelion.benchmarks.leaderboard.budget_axis.verdict_sentence`) and one for the
  provenance (where the other budgets' cells come from).
"""

from __future__ import annotations

import math
from pathlib import Path

from dandelion.benchmarks.leaderboard.budget_axis import is_judged, judge_key, key_sentence, verdict_sentence
from dandelion.benchmarks.leaderboard.compute import GAP_FLAG
from dandelion.benchmarks.leaderboard.headline import PARTS, entry_text
from dandelion.benchmarks.leaderboard.stats import half_width
from dandelion.reporting.plotting import plain_log_ticks, pyplot, save_figure

__all__ = ["HEADING", "budget_figure", "plot_budget_axis", "budget_section"]

#: The heading of the section in ``leaderboard.md``.
HEADING = "## Budget axis: the same datasets at a multiple of the step budget"

_LABEL = {"next_step": "next step", "rollout_mean": "1:20"}


def budget_figure(judged: dict, labels: list[str]):
    """The matplotlib figure of one key (a :func:`~dandelion.benchmarks.leaderboard.budget_axis.judge_key` result):
    next-step (left) and 1:N (right) mean VRMSE against the mean CPU-seconds per run (log x axis), one line per model
    through its points at each budget of ``labels``, error bars the half-width of the 95 % t interval
    (:func:`~dandelion.benchmarks.leaderboard.stats.half_width`; none with one seed). None when no model has a cost
    at two budgets. The caller saves or closes it."""
    lines = {}
    for m in next(iter(judged["cols"].values()))["next_step"]["stats"]:
        pts = []
        for lab in labels:
            secs = judged["cost"].get(lab, {}).get(m)
            if secs is not None and m in judged["cols"][lab]["next_step"]["stats"]:
                pts.append((lab, secs))
        if len(pts) >= 2:
            lines[m] = pts
    if not lines:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6))
    for ax, p in zip(axes, PARTS):
        for i, (m, pts) in enumerate(lines.items()):
            s = [judged["cols"][lab][p]["stats"][m] for lab, _ in pts]
            x = [secs for _, secs in pts]
            y = [v["mean"] for v in s]
            err = [half_width(v["std"], v["n"]) for v in s]
            err = [e if math.isfinite(e) else 0.0 for e in err]
            ax.errorbar(x, y, yerr=err, color=f"C{i}", marker="o", ms=4, capsize=3, label=m)
            for (lab, secs), v in zip(pts, y):
                ax.annotate(lab, (secs, v), textcoords="offset points", xytext=(4, 4), fontsize=7, color=f"C{i}")
        ax.set_xscale("log")
        plain_log_ticks(ax, axis="x")  # 100, 200, 500, not 10^2
        ax.set_xlabel("training cost per run [process CPU-s]")
        ax.set_title(_LABEL[p], fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("test VRMSE (mean over fields and seeds)")
    axes[1].legend(fontsize=7)
    fig.suptitle(
        f"{judged['key']}: score against training cost at {' and '.join(labels)} the step budget "
        "(error bars: 95 % t interval)",
        fontsize=9,
    )
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.16, top=0.86, wspace=0.25)
    return fig


def plot_budget_axis(judged: dict, labels: list[str], path) -> Path | None:
    """:func:`budget_figure` saved as a PNG at ``path``; None (nothing written) when it has no line."""
    fig = budget_figure(judged, labels)
    return None if fig is None else save_figure(fig, path)


def _entry(col: dict | None, m: str) -> str:
    """The headline's entry of model ``m`` in ``col`` with its t half-width (:func:`~dandelion.benchmarks.
    leaderboard.headline.entry_text`); ``–`` without a value."""
    s = (col or {}).get("stats", {}).get(m)
    if s is None or not (col["horizons"] or math.isfinite(s["mean"])):
        return "–"
    return entry_text(col, m, interval=True)


def _gap(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}" + (f" (over {GAP_FLAG:g})" if v > GAP_FLAG else "")


def _table(results: list[dict], labels: list[str], models: list[str]) -> list[str]:
    head = [f"{_LABEL[p]} {lab}" for p in PARTS for lab in labels]
    head += [f"{what} {lab}" for what in ("CPU-s", "valid/train", "seeds") for lab in labels]
    lines = ["| dataset | model | " + " | ".join(head) + " |", "|---|---|" + "---:|" * len(head)]
    for r in results:
        for m in models:
            if not any(m in r["cols"].get(lab, {}).get("next_step", {}).get("stats", {}) for lab in labels):
                continue
            row = [r["key"], m]
            row += [_entry(r["cols"].get(lab, {}).get(p), m) for p in PARTS for lab in labels]
            costs = [r["cost"].get(lab, {}).get(m) for lab in labels]
            row += [f"{c:,.0f}" if c is not None else "–" for c in costs]
            row += [_gap(r["gap"].get(lab, {}).get(m)) for lab in labels]
            kept = [r["kept"].get(lab, {}).get(m) for lab in labels]
            row += [f"{k[0]}/{k[1]}" if k else f"0/{len(r['needed'].get(m, []))}" for k in kept]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _intro(budgets: list[dict], labels: list[str], steps: dict, models: list[str]) -> str:
    return (
        "The models "
        + ", ".join(models)
        + " trained on the same datasets at "
        + " and ".join(
            f"{lab} ({steps[lab]:,} optimiser steps per run, scale `{b['scale']}`)" for lab, b in zip(labels, budgets)
        )
        + ": the same warm-up fraction and fine-tune share, the learning rate chosen again at each budget by its "
        "scale's rules (`configs/scale/<scale>.yaml`). Entries: "
        "test VRMSE (area-weighted, mean over the fields), mean ± the half-width of the 95 % Student-t interval over "
        "the seeds that did not fail, marked as in the headline: **bold** the best of these models and its ties at "
        "that budget by the headline's rule, † worse than persistence (never bold), ‡ not better than linear AR, ✗k "
        "k failed seeds, `h P,V` a saturated 1:20 column (not ranked: the skill horizon). CPU-s: mean process "
        "CPU-seconds of one training run (the selected rate's; the sweep not counted); valid/train: the largest "
        f"`valid_over_train` over the model's cells (over {GAP_FLAG:g}: it memorises its training trajectories, and "
        "the key's sentence says so); seeds: cells kept (failed in neither lead summary) / seeds needed, every seed "
        "any budget's scale asks for, at both budgets. A key is judged only when every budget holds every needed "
        "cell, each model's cells record one network at both budgets and the cells of both budgets were scored on "
        "the same data. The ranking (the order of the means) changes only when the best model changes (no model "
        "best at both budgets) or two models that the t interval separates at both budgets swap places "
        "(`benchmarks/leaderboard/budget_axis.py`)."
    )


def _provenance(budgets: list[dict]) -> str:
    """Where the numbers of the budgets other than the first come from (their scales' ``results_dir``)."""
    return "; ".join(
        f"the budget section's {b['label']} numbers come from the cell files of scale `{b['scale']}` in "
        f"`{b['results_dir']}` (made by `dandelion-benchmark scale={b['scale']}`)"
        for b in budgets[1:]
        if b.get("results_dir")
    )


def budget_section(budgets: list[dict], keys: list[str], models: list[str], results_dir, plots: bool = True) -> dict:
    """The budget axis of ``leaderboard.md``: ``{"lines", "verdict", "provenance", "plots"}`` (markdown lines of the
    section, the verdict's sentence, where the other budgets' numbers come from, and figure name -> PNG path under
    ``results_dir``).

    ``budgets``: the budgets in increasing order, the first the leaderboard's own scale, each a dict as
    :func:`~dandelion.benchmarks.leaderboard.budget_axis.judge_key` reads it plus ``steps`` (optimiser steps per run,
    :func:`~dandelion.benchmarks.leaderboard.compute.budget_steps`) and ``results_dir`` (its scale's configured
    folder, for the provenance); ``keys``: the dataset keys of the multiple's scale; ``models``: the models it trains.
    The first two budgets are the ones the ranking sentences compare."""
    labels = [b["label"] for b in budgets]
    steps = {b["label"]: int(b["steps"]) for b in budgets}
    results = [judge_key(k, budgets, models) for k in keys]
    pair = (labels[0], labels[1])
    L = [HEADING, "", _intro(budgets, labels, steps, models), "", *_table(results, labels, models), ""]
    out_plots = {}
    for r in results:
        if not is_judged(r, labels):
            continue
        L += [f"- {key_sentence(r, pair)}"]
        if plots:
            p = plot_budget_axis(r, labels, Path(results_dir) / f"budget_axis_{r['key']}.png")
            if p is not None:
                out_plots[f"budget_axis_{r['key']}"] = str(p)
    if any(is_judged(r, labels) for r in results):
        L.append("")
    pending = [lab for r in results for lab in r["pending"] + r["blocked"]]
    if pending:
        L += ["Pending (no sentence or figure for a key until every cell is in, at every budget):", ""]
        L += [f"- `{lab}`" + (f": {why}" if why else "") for lab, why in pending] + [""]
    for name, png in out_plots.items():
        L += [f"![{name.removeprefix('budget_axis_')}: score against training cost]({Path(png).name})", ""]
    return {
        "lines": L,
        "verdict": verdict_sentence(results, labels, steps, models),
        "provenance": _provenance(budgets),
        "plots": out_plots,
    }
