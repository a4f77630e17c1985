"""The budget axis of the leaderboard (issue 71, item 3): the same dataset keys trained at the scale's step budget
and at a multiple of it, side by side.

A scale names the scales that train its datasets at other budgets in ``budget_axis`` (``configs/scale/cpu.yaml``:
``[cpu_4x]``, four times the steps with the same warm-up fraction and fine-tune share, the learning rate swept again;
``configs/scale/cpu_4x.yaml``). :mod:`~dandelion.benchmarks.leaderboard.render` gathers each budget's current cells
(those made under its scale's protocol), references and expected cells, and :func:`budget_section` writes, for every
dataset key of the multiple's scale and both lead summaries (next step, 1:N):

* per model and budget, the mean VRMSE over seeds with its 95 % Student-t interval and the best model or ties, from
  the headline's own columns (:func:`~dandelion.benchmarks.leaderboard.headline.columns`: failed seeds left out and
  counted, the persistence floor, a saturated 1:N column or an incomplete key not ranked), and the mean training
  CPU-seconds of one run (:func:`~dandelion.benchmarks.grid.records.cell_cpu_seconds`: the selected run, without the
  learning-rate sweep);
* one sentence per key (dataset and grid) saying whether the ranking changes with the budget (:func:`ranking_change`);
* a figure per key, ``budget_axis_<key>.png``: score against training CPU-seconds, one line per model through its
  points at each budget, error bars the t interval (:func:`plot_budget_axis`);
* a sentence for the verdict paragraph (:func:`verdict_sentence`).

A key is judged only when every model has a cell for every seed at every budget (each budget's scale says which
seeds); until then its missing cells are listed as pending, and its sentence and figure are left out.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.ticker import FuncFormatter

from dandelion.benchmarks.grid.records import cell_cpu_seconds
from dandelion.benchmarks.leaderboard.headline import PARTS, columns
from dandelion.benchmarks.leaderboard.markdown import aggregate
from dandelion.benchmarks.leaderboard.stats import differ, half_width
from dandelion.reporting.numbers import fmt_mean_std
from dandelion.reporting.plotting import pyplot, save_figure

__all__ = [
    "HEADING",
    "budget_steps",
    "judge_key",
    "ranking_change",
    "key_sentence",
    "verdict_sentence",
    "plot_budget_axis",
    "budget_section",
]

#: The heading of the section in ``leaderboard.md``.
HEADING = "## Budget axis: the same datasets at a multiple of the step budget"

_LABEL = {"next_step": "next step", "rollout_mean": "1:20"}


def budget_steps(trainer: dict) -> int:
    """Optimiser steps of one run under ``trainer`` (a scale's ``trainer`` settings, or a cell's
    ``trainer_resolved``): ``(epochs + finetune.epochs) * max_batches_per_epoch`` (``configs/scale/cpu.yaml``)."""
    ft = trainer.get("finetune") or {}
    return (int(trainer.get("epochs", 0)) + int(ft.get("epochs", 0))) * int(trainer.get("max_batches_per_epoch") or 0)


def _seeds_word(seeds: list[int]) -> str:
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def judge_key(key: str, budgets: list[dict], models: list[str]) -> dict:
    """What dataset ``key`` holds at each budget: ``{"key", "pending": [label, ...], "n_pending" (cells), "cols":
    {budget label: {part: column}}, "cost": {budget label: {model: mean CPU-s per run or None}}, "grid",
    "dataset"}``.

    ``budgets``: dicts ``label`` (e.g. ``"1x"``), ``scale`` (its name), ``cells`` (current cell records),
    ``references`` (dataset key -> reference name -> record) and ``expected`` (dataset key -> {model: seeds} its scale
    trains; a model absent there is pending with the seeds of the last budget). ``cols`` holds a budget's columns
    (:func:`~dandelion.benchmarks.leaderboard.headline.columns` over ``models`` alone) only when it has cells of the
    key; ``pending`` names every missing cell, ``"<key> at <label> (scale <scale>): <models> (seeds ...)"`` (one label
    per budget and set of missing seeds)."""
    out = {"key": key, "pending": [], "n_pending": 0, "cols": {}, "cost": {}, "grid": None, "dataset": None}
    last = (budgets[-1].get("expected") or {}).get(key) or {}
    for b in budgets:
        cells = [c for c in b["cells"] if c["dataset_key"] == key and c["model"] in models]
        want = (b.get("expected") or {}).get(key) or {}
        need = {m: [int(k) for k in (want.get(m) or last.get(m) or [])] for m in models}
        have = {m: {int(c["seed"]) for c in cells if c["model"] == m} for m in models}
        gaps: dict[tuple, list[str]] = {}  # missing seeds -> the models missing them
        for m in models:
            missing = tuple(k for k in need[m] if k not in have[m])
            if missing:
                gaps.setdefault(missing, []).append(m)
                out["n_pending"] += len(missing)
        for missing, ms in gaps.items():
            out["pending"].append(
                f"{key} at {b['label']} (scale {b['scale']}): {', '.join(ms)} ({_seeds_word(missing)})"
            )
        if not cells:
            continue
        agg = aggregate(cells)
        for e in agg[key].values():
            e["references"] = (b.get("references") or {}).get(key) or {}
        e0 = next(iter(agg[key].values()))
        out["grid"], out["dataset"] = f"{e0['nlat']}x{e0['nlon']}", e0["dataset"]
        here = [m for m in models if m in agg[key]]
        cols = columns(agg, [key], here, expected={key: need})
        out["cols"][b["label"]] = {p: cols[(key, p)] for p in PARTS}
        out["cost"][b["label"]] = {
            m: (
                float(np.mean(s))
                if (s := [x for x in map(cell_cpu_seconds, agg[key][m]["cells"]) if x is not None])
                else None
            )
            for m in here
        }
    return out


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def ranking_change(a: dict, b: dict, labels: tuple[str, str] = ("1x", "4x")) -> dict:
    """Whether the ranking of one column (a key and lead summary) changes from budget ``a`` to budget ``b`` (each a
    column of :func:`~dandelion.benchmarks.leaderboard.headline.columns`): ``{"word", "text"}``.

    The ranking is the order of the models' means (the headline's centres). ``word`` is ``"changes"`` only when the
    best model changes (the best sets of the two budgets, the headline's tie rule, share no model) or two models that
    the t interval separates at both budgets swap places; else ``"holds"`` (a swap within the seed spread at either
    budget is a tie, not a change). ``"not ranked"`` when either column is saturated (skill horizons instead) or
    either has no best (incomplete, or every model worse than persistence). ``text`` says what the word rests on."""
    for col, label in ((a, labels[0]), (b, labels[1])):
        if col.get("horizons"):
            return {
                "word": "not ranked",
                "text": f"saturated at {label}: every model past persistence or VRMSE 1 by mid-window",
            }
        if not col.get("best"):
            return {
                "word": "not ranked",
                "text": f"no model is best at {label} (incomplete, or every one worse than persistence)",
            }
    models = [m for m in a["stats"] if m in b["stats"]]
    swaps = []
    for i, m in enumerate(models):
        for n in models[i + 1 :]:
            sa, sb = a["stats"], b["stats"]
            if differ(sa[m], sa[n]) and differ(sb[m], sb[n]):
                if _sign(sa[m]["mean"] - sa[n]["mean"]) != _sign(sb[m]["mean"] - sb[n]["mean"]):
                    swaps.append(f"{m} and {n} swap places")
    best = [", ".join(sorted(col["best"])) for col in (a, b)]
    if a["best"] == b["best"]:
        best_text = f"best at both: {best[0]}"
    else:
        best_text = f"best at {labels[0]}: {best[0]}; at {labels[1]}: {best[1]}"
    changed = not (a["best"] & b["best"]) or bool(swaps)
    if swaps:
        best_text += "; " + ", ".join(swaps) + " (separated at both budgets)"
    return {"word": "changes" if changed else "holds", "text": best_text}


def key_sentence(judged: dict, labels: tuple[str, str]) -> str:
    """One sentence for a judged key: whether the ranking changes from ``labels[0]`` to ``labels[1]`` at the next step
    and over 1:N, and why (:func:`ranking_change`)."""
    parts = []
    for p in PARTS:
        r = ranking_change(judged["cols"][labels[0]][p], judged["cols"][labels[1]][p], labels)
        verb = "is not ranked" if r["word"] == "not ranked" else r["word"]
        parts.append(f"{verb} {'at the next step' if p == 'next_step' else 'over 1:20'} ({r['text']})")
    name = f"{judged['dataset']} {judged['grid']}" if judged["dataset"] else judged["key"]
    return f"{name}: the ranking " + " and ".join(parts) + "."


def _judged(judged: dict, labels: list[str]) -> bool:
    return not judged["pending"] and all(lab in judged["cols"] for lab in labels)


def verdict_sentence(results: list[dict], labels: list[str], steps: dict, models: list[str]) -> str:
    """The budget axis in one sentence for the verdict paragraph: which model is best or tied in how many ranked
    columns at each budget, in which columns the ranking changes between the first two budgets; or that it is pending.
    ``results``: :func:`judge_key` per key; ``steps``: budget label -> optimiser steps per run."""
    head = (
        "Budget axis ("
        + ", ".join(f"{lab}: {steps[lab]:,} steps" for lab in labels)
        + f"; {', '.join(models)} on {len(results)} dataset key{'s' if len(results) != 1 else ''})"
    )
    done = [r for r in results if _judged(r, labels)]
    n_pending = sum(r["n_pending"] for r in results)
    if not done:
        return f"{head}: pending, no key has every cell at every budget yet ({n_pending} cells pending)."
    per_budget = []
    for lab in labels:
        ranked = [r["cols"][lab][p] for r in done for p in PARTS if r["cols"][lab][p]["best"]]
        wins = sorted(((sum(m in c["best"] for c in ranked), m) for m in models), key=lambda w: (-w[0], w[1]))
        per_budget.append(
            f"at {lab}, of {len(ranked)} ranked column{'s' if len(ranked) != 1 else ''}, "
            + ", ".join(f"{m} is best or tied in {n}" for n, m in wins if n)
            if ranked
            else f"at {lab} no column is ranked"
        )
    changes, holds = [], 0
    for r in done:
        for p in PARTS:
            word = ranking_change(r["cols"][labels[0]][p], r["cols"][labels[1]][p], tuple(labels[:2]))["word"]
            if word == "changes":
                changes.append(f"{r['dataset']} {r['grid']} {'next' if p == 'next_step' else '1:20'}")
            holds += word == "holds"
    text = f"{head}, over the {len(done)} keys with every cell at every budget: " + "; ".join(per_budget) + ". "
    text += (
        f"The ranking changes in {len(changes)} column{'s' if len(changes) != 1 else ''}"
        + (f" ({', '.join(changes)})" if changes else "")
        + f" and holds in {holds}"
    )
    left = len(results) - len(done)
    return text + (f"; {left} key{'s' if left != 1 else ''} pending ({n_pending} cells)." if left else ".")


def _plain(v: float) -> str:
    return f"{v:,.0f}" if v >= 1 else f"{v:.2g}"


def _leading(v: float) -> int:
    return round(v / 10 ** math.floor(math.log10(v))) if v > 0 else 0


def plot_budget_axis(judged: dict, labels: list[str], path) -> Path | None:
    """Score against training cost for one key: next-step (left) and 1:N (right) mean VRMSE against the mean
    CPU-seconds per run (log x), one line per model through its points at each budget, error bars the half-width of
    the 95 % t interval. None when no model has a cost at two budgets."""
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
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _plain(v)))  # 100, 200, 500, not 10^2
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: _plain(v) if _leading(v) in (2, 5) else ""))
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
    return save_figure(fig, path)


def _entry(col: dict | None, m: str) -> str:
    """``mean ± t half-width`` (✗k failed seeds), bold when best; ``–`` without a value."""
    s = (col or {}).get("stats", {}).get(m)
    if s is None or not math.isfinite(s["mean"]):
        return "–"
    txt = fmt_mean_std(s["mean"], half_width(s["std"], s["n"])) + (f" ✗{s['failed']}" if s.get("failed") else "")
    return f"**{txt}**" if m in col["best"] else txt


def _table(results: list[dict], labels: list[str], models: list[str]) -> list[str]:
    head = [f"{_LABEL[p]} {lab}" for p in PARTS for lab in labels] + [f"CPU-s {lab}" for lab in labels]
    lines = ["| dataset | model | " + " | ".join(head) + " | seeds |", "|---|---|" + "---:|" * (len(head) + 1)]
    for r in results:
        for m in models:
            if not any(m in r["cols"].get(lab, {}).get("next_step", {}).get("stats", {}) for lab in labels):
                continue
            row = [r["key"], m]
            row += [_entry(r["cols"].get(lab, {}).get(p), m) for p in PARTS for lab in labels]
            costs = [r["cost"].get(lab, {}).get(m) for lab in labels]
            row += [f"{c:,.0f}" if c is not None else "–" for c in costs]
            ns = [
                str((r["cols"].get(lab, {}).get("next_step", {}).get("stats", {}).get(m) or {}).get("n", 0))
                for lab in labels
            ]
            lines.append("| " + " | ".join(row + [" / ".join(ns)]) + " |")
    return lines


def budget_section(budgets: list[dict], keys: list[str], models: list[str], results_dir, plots: bool = True) -> dict:
    """The budget axis of ``leaderboard.md``: ``{"lines", "verdict", "plots"}`` (markdown lines of the section, the
    verdict's sentence, and figure name -> PNG path under ``results_dir``).

    ``budgets``: the budgets in increasing order, the first the leaderboard's own scale, each a dict as
    :func:`judge_key` reads it plus ``steps`` (optimiser steps per run, :func:`budget_steps`); ``keys``: the dataset
    keys of the multiple's scale; ``models``: the models it trains. The first two budgets are the ones the ranking
    sentences compare."""
    labels = [b["label"] for b in budgets]
    steps = {b["label"]: int(b["steps"]) for b in budgets}
    results = [judge_key(k, budgets, models) for k in keys]
    pair = (labels[0], labels[1])
    L = [
        HEADING,
        "",
        "The models "
        + ", ".join(models)
        + " trained on the same datasets at "
        + " and ".join(
            f"{lab} ({steps[lab]:,} optimiser steps per run, scale `{b['scale']}`)" for lab, b in zip(labels, budgets)
        )
        + ": the same warm-up fraction and fine-tune share, the learning rate swept again at each budget. Entries: "
        "test VRMSE (area-weighted, mean over the fields), mean ± the half-width of the 95 % Student-t interval over "
        "the seeds that did not fail (✗k: k failed), **bold** the best of these models and its ties at that budget "
        "by the headline's rule; CPU-s: mean process CPU-seconds of one training run (the selected rate's; the sweep "
        "not counted); seeds: per budget. The ranking (the order of the means) changes only when the best model "
        "changes (no model best at both budgets) or two models that the t interval separates at both budgets swap "
        "places (`benchmarks/leaderboard/budget_axis.py`).",
        "",
        *_table(results, labels, models),
        "",
    ]
    out_plots = {}
    for r in results:
        if not _judged(r, labels):
            continue
        L += [f"- {key_sentence(r, pair)}"]
        if plots:
            p = plot_budget_axis(r, labels, Path(results_dir) / f"budget_axis_{r['key']}.png")
            if p is not None:
                out_plots[f"budget_axis_{r['key']}"] = str(p)
    if any(_judged(r, labels) for r in results):
        L.append("")
    pending = [lab for r in results for lab in r["pending"]]
    if pending:
        L += ["Pending (no sentence or figure for a key until every cell is in, at every budget):", ""]
        L += [f"- `{lab}`" for lab in pending] + [""]
    for name, png in out_plots.items():
        L += [f"![{name.removeprefix('budget_axis_')}: score against training cost]({Path(png).name})", ""]
    return {"lines": L, "verdict": verdict_sentence(results, labels, steps, models), "plots": out_plots}
