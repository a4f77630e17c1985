"""The headline of the leaderboard: which model is best in each column (dataset key x lead summary), judged with
the statistics of :mod:`dandelion.benchmarks.leaderboard.stats`, and the table that shows it.

:func:`columns` computes, per column, each model's statistics (:func:`~dandelion.benchmarks.leaderboard.stats.
column_stats`: Student-t intervals, failed seeds and the median they switch the column to), the best models
(:func:`best_within_spread`), the two reference floors (persistence: a model worse than it is never best, marked
†; linear AR: a model that does not beat it is marked ‡ and counted in the verdict) and, for the 1:N summary, the
skill horizons of a saturated column, which is not ranked. :func:`headline_table` renders it; the verdict paragraph
(:mod:`dandelion.benchmarks.leaderboard.verdict`) counts from the same columns.
"""

from __future__ import annotations

import math

from dandelion.benchmarks.grid.cells import REFERENCES
from dandelion.benchmarks.leaderboard.stats import column_stats, differ, saturation
from dandelion.reporting.numbers import fmt_value

__all__ = ["PARTS", "bold_best", "best_within_spread", "columns", "headline_table", "horizon_table", "reference_value"]

PARTS = ("next_step", "rollout_mean")


def bold_best(values: dict) -> set:
    """Keys of ``values`` (key -> float, lower is better) holding the minimum (ties all win; NaN never wins)."""
    finite = {k: v for k, v in values.items() if v is not None and math.isfinite(v)}
    if not finite:
        return set()
    best = min(finite.values())
    return {k for k, v in finite.items() if v <= best * (1 + 1e-12)}


def best_within_spread(stats: dict, floor: float = math.inf) -> set:
    """Keys of ``stats`` (key -> ``{"mean", "std", "n"}`` over seeds, lower is better) that are the best: the lowest
    mean (:func:`bold_best`), and every key whose mean the 95 % Student-t interval of the difference does not separate
    from it (:func:`~dandelion.benchmarks.leaderboard.stats.differ`: ``t_{0.975, min(n_a, n_b) - 1} sqrt(s_a^2 / n_a
    + s_b^2 / n_b)``; a tie within the seed spread). A key with one seed has no spread, so it ties only on an equal
    mean. A key whose mean is above ``floor`` (the persistence score, where the table has one) is never among the
    best, however wide its spread."""
    means = {k: v["mean"] for k, v in stats.items()}
    best = bold_best(means)
    out = set(best)
    for b in best:
        for k, v in stats.items():
            if k not in out and math.isfinite(means[k]) and differ(stats[b], v) is False:
                out.add(k)
    return {k for k in out if means[k] <= floor}


def reference_value(refs: dict, name: str, part: str, metric: str = "vrmse", field: str = "mean") -> float:
    """Reference ``name``'s ``metric`` of ``field`` (``"mean"``: over the fields) for lead summary ``part``; ``inf``
    (no floor) where the dataset has none or its value is not finite."""
    value = ((refs.get(name) or {}).get(part) or {}).get(metric, {}).get(field, math.inf)
    return value if math.isfinite(value) else math.inf


def _n_leads(agg: dict, d: str, default: int = 20) -> int:
    for e in agg[d].values():
        for c in e.get("cells") or []:
            return min(default, int((c.get("evaluation") or {}).get("n_steps", default)))
    return default


def columns(agg: dict, datasets: list[str], models: list[str], metric: str = "vrmse") -> dict:
    """``(dataset key, part) -> {"stats", "best", "persistence", "linear_ar", "horizons", "n_leads"}``: the
    column statistics (model -> :func:`~dandelion.benchmarks.leaderboard.stats.column_stats`), the best models (empty
    for a saturated column), the two floors and the skill horizons (model -> ``(past persistence, past 1)`` leads;
    None unless the column is a saturated 1:N summary, :func:`~dandelion.benchmarks.leaderboard.stats.saturation`)."""
    out = {}
    for d in datasets:
        entries = {m: agg[d][m] for m in models if m in agg[d]}
        refs = next(iter(agg[d].values())).get("references") or {}
        n = _n_leads(agg, d)
        for p in PARTS:
            stats = column_stats(entries, p, metric, "mean", n)
            floor = reference_value(refs, "persistence", p, metric)
            horizons = None
            if p == "rollout_mean" and metric == "vrmse" and stats:
                pers = ((refs.get("persistence") or {}).get("curves") or {}).get("vrmse", {}).get("mean")
                horizons = saturation({m: entries[m] for m in stats}, pers, n)
            out[(d, p)] = {
                "stats": stats,
                "best": set() if horizons else best_within_spread(stats, floor),
                "persistence": floor,
                "linear_ar": reference_value(refs, "linear_ar", p, metric),
                "horizons": horizons,
                "n_leads": n,
            }
    return out


def _lead(h: int | None, n: int) -> str:
    return f">{n}" if h is None else str(h)


def entry_text(col: dict, m: str) -> str:
    """One model's entry of a column: its centre (mean, or median when the column has a failed seed) with † (worse
    than persistence), ‡ (does not beat linear AR) and ✗k (k failed seeds), bold when best; in a saturated column
    ``h P,V`` instead (its skill horizon: first lead past persistence, past VRMSE 1)."""
    s = col["stats"][m]
    if col["horizons"]:
        p, v = col["horizons"][m]
        return f"h {_lead(p, col['n_leads'])},{_lead(v, col['n_leads'])}"
    txt = fmt_value(s["mean"])
    if s["mean"] > col["persistence"]:
        txt += "†"
    elif s["mean"] >= col["linear_ar"]:
        txt += "‡"
    if s.get("failed"):
        txt += f" ✗{s['failed']}"
    return f"**{txt}**" if m in col["best"] else txt


def headline_table(agg: dict, datasets: list[str], models: list[str], metric: str = "vrmse") -> list[str]:
    """One row per dataset, one column per model, then the references in italics (persistence; linear AR where any
    dataset has it): ``next step / 1:N`` of the field-averaged ``metric`` (:func:`entry_text`; mean over seeds, the
    median in a column with a failed seed). **Bold**: the best of the row for that lead summary and every model
    tied with it within the t interval (:func:`best_within_spread`; never a reference, never a model worse than
    persistence); a saturated 1:N column shows skill horizons and nothing bold."""
    refs = [r for r in REFERENCES if any(r in (agg[d][next(iter(agg[d]))].get("references") or {}) for d in datasets)]
    refs = refs or ["persistence"]
    cols = columns(agg, datasets, models, metric)
    lines = [
        "| dataset | "
        + " | ".join(models)
        + " | "
        + " | ".join(f"*{REFERENCES[r].split(' (')[0]}*" for r in refs)
        + " |",
        "|---|" + "---:|" * (len(models) + len(refs)),
    ]
    for d in datasets:
        have = agg[d][next(iter(agg[d]))].get("references") or {}
        row = [d]
        for m in models:
            if any(m not in cols[(d, p)]["stats"] for p in PARTS):
                row.append("–")
                continue
            row.append(" / ".join(entry_text(cols[(d, p)], m) for p in PARTS))
        for r in refs:
            ref = have.get(r)
            ok = ref is not None and all(metric in ref[p] for p in PARTS)
            row.append(" / ".join(f"*{fmt_value(ref[p][metric]['mean'])}*" for p in PARTS) if ok else "–")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def horizon_table(agg: dict, cols: dict) -> list[str]:
    """The saturated columns (:func:`columns` with ``horizons``), one row each: every model's skill horizon and its
    1:N value (median over seeds), which the headline does not rank; empty when no column is saturated."""
    sat = [(d, p) for (d, p), c in cols.items() if c["horizons"]]
    if not sat:
        return []
    n = cols[sat[0]]["n_leads"]
    lines = [
        f"Saturated 1:{n} columns (not ranked): each model's skill horizon, the first lead where its VRMSE (median "
        f"over seeds) exceeds persistence's / exceeds 1 ('>{n}': never within the window), and its 1:{n} value:",
        "",
        "| dataset | " + " | ".join(sorted({m for c in sat for m in cols[c]["stats"]})) + " |",
    ]
    models = sorted({m for c in sat for m in cols[c]["stats"]})
    lines.append("|---|" + "---:|" * len(models))
    for d, p in sat:
        col = cols[(d, p)]
        row = [d]
        for m in models:
            if m not in col["horizons"]:
                row.append("–")
                continue
            a, b = col["horizons"][m]
            row.append(f"{_lead(a, n)} / {_lead(b, n)} ({fmt_value(col['stats'][m]['median'])})")
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]
