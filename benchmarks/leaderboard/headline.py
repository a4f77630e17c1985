"""The headline of the leaderboard: which model is best in each column (dataset key x lead summary), judged with
the statistics of :mod:`dandelion.benchmarks.leaderboard.stats`, and the table that shows it.

:func:`columns` computes, per column, each model's statistics (:func:`~dandelion.benchmarks.leaderboard.stats.
column_stats`: Student-t intervals over the seeds that did not fail, and the failed ones), the best models
(:func:`best_within_spread`), the two reference floors (persistence: a model worse than it is never best, marked
†; linear AR: a model that does not beat it is marked ‡ and counted in the verdict) and, for the 1:N summary, the
skill horizons of a saturated column, which is not ranked. :func:`headline_table` renders it; the verdict paragraph
(:mod:`dandelion.benchmarks.leaderboard.verdict`) counts from the same columns.

A dataset key is ranked only when it is complete: every model the scale trains there has a cell for every seed
(:func:`completeness`; the scale's lists, or, for results without a scale, each model with the seeds it has at that
grid, :func:`expected_cells`). An incomplete key shows its entries without bold or skill horizons and is named
"incomplete: k of n models" in the headline and the verdict: a column of two models, one with one seed, would
otherwise call a model best of a comparison the others never entered.
"""

from __future__ import annotations

import math

from dandelion.benchmarks.grid.cells import REFERENCES
from dandelion.benchmarks.leaderboard.stats import column_stats, differ, half_width, saturation, summary_leads
from dandelion.reporting.numbers import fmt_mean_std, fmt_value

__all__ = [
    "PARTS",
    "bold_best",
    "best_within_spread",
    "expected_cells",
    "completeness",
    "columns",
    "entry_text",
    "headline_table",
    "horizon_table",
    "incomplete_text",
    "reference_value",
]

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


def _grid(entry: dict) -> tuple:
    return entry.get("nlat"), entry.get("nlon")


def expected_cells(agg: dict) -> dict:
    """Dataset key -> {model: seeds} that a complete key holds when no scale says: every model with cells at the
    key's grid (nlat x nlon) in ``agg``, each with every seed it has at that grid."""
    by_grid: dict = {}
    for models in agg.values():
        for m, e in models.items():
            by_grid.setdefault(_grid(e), {}).setdefault(m, set()).update(int(k) for k in e.get("seeds", []))
    return {
        d: {m: sorted(k) for m, k in by_grid[_grid(next(iter(models.values())))].items()} for d, models in agg.items()
    }


def completeness(agg: dict, d: str, expected: dict | None = None) -> tuple[int, int]:
    """``(k, n)``: of the ``n`` models dataset key ``d`` should hold (``expected``: key -> {model: seeds}, the
    scale's lists; default :func:`expected_cells`), the ``k`` that have a cell for every one of their seeds. The key
    is complete, and ranked, when ``k == n``."""
    need = (expected if expected is not None else expected_cells(agg)).get(d) or {}
    have = {m: {int(k) for k in e.get("seeds", [])} for m, e in agg[d].items()}
    return sum(1 for m, seeds in need.items() if {int(k) for k in seeds} <= have.get(m, set())), len(need)


def columns(
    agg: dict, datasets: list[str], models: list[str], metric: str = "vrmse", expected: dict | None = None
) -> dict:
    """``(dataset key, part) -> {"stats", "best", "persistence", "linear_ar", "horizons", "n_leads",
    "incomplete"}``: the column statistics (model -> :func:`~dandelion.benchmarks.leaderboard.stats.column_stats`),
    the best models (empty for a saturated or incomplete column), the two floors, the skill horizons (model ->
    ``(past persistence, past 1)`` leads; None unless the column is a saturated 1:N summary,
    :func:`~dandelion.benchmarks.leaderboard.stats.saturation`, of a complete key) and ``(k, n)`` of
    :func:`completeness` when the key is incomplete (None when complete; ``expected`` is passed to it)."""
    out = {}
    expected = expected if expected is not None else expected_cells(agg)
    for d in datasets:
        entries = {m: agg[d][m] for m in models if m in agg[d]}
        refs = next(iter(agg[d].values())).get("references") or {}
        n = summary_leads(agg[d].values())
        k, n_models = completeness(agg, d, expected)
        incomplete = (k, n_models) if k < n_models else None
        for p in PARTS:
            stats = column_stats(entries, p, metric, "mean", n)
            floor = reference_value(refs, "persistence", p, metric)
            horizons = None
            if p == "rollout_mean" and metric == "vrmse" and stats and incomplete is None:
                pers = ((refs.get("persistence") or {}).get("curves") or {}).get("vrmse", {}).get("mean")
                horizons = saturation({m: entries[m] for m in stats}, pers, n)
            out[(d, p)] = {
                "stats": stats,
                "best": set() if horizons or incomplete else best_within_spread(stats, floor),
                "persistence": floor,
                "linear_ar": reference_value(refs, "linear_ar", p, metric),
                "horizons": horizons,
                "n_leads": n,
                "incomplete": incomplete,
            }
    return out


def incomplete_text(col: dict) -> str:
    """``"incomplete: k of n models"`` for a column of an incomplete key, else ``""``."""
    if not col.get("incomplete"):
        return ""
    k, n = col["incomplete"]
    return f"incomplete: {k} of {n} models"


def _lead(h: int | None, n: int) -> str:
    return f">{n}" if h is None else str(h)


def entry_text(col: dict, m: str, interval: bool = False) -> str:
    """One model's entry of a column: its centre (the mean of its seeds that did not fail; with ``interval``,
    ``mean ± the half-width of its 95 % t interval``, :func:`~dandelion.benchmarks.leaderboard.stats.half_width`)
    with † (worse than persistence), ‡ (does not beat linear AR) and ✗k (k failed seeds), bold when best; in a
    saturated column ``h P,V`` instead (its skill horizon: first lead past persistence, past VRMSE 1)."""
    s = col["stats"][m]
    if col["horizons"]:
        p, v = col["horizons"][m]
        return f"h {_lead(p, col['n_leads'])},{_lead(v, col['n_leads'])}"
    txt = fmt_mean_std(s["mean"], half_width(s["std"], s["n"])) if interval else fmt_value(s["mean"])
    if s["mean"] > col["persistence"]:
        txt += "†"
    elif s["mean"] >= col["linear_ar"]:
        txt += "‡"
    if s.get("failed"):
        txt += f" ✗{s['failed']}"
    return f"**{txt}**" if m in col["best"] else txt


def headline_table(
    agg: dict, datasets: list[str], models: list[str], metric: str = "vrmse", expected: dict | None = None
) -> list[str]:
    """One row per dataset, one column per model, then the references in italics (persistence; linear AR where any
    dataset has it): ``next step / 1:N`` of the field-averaged ``metric`` (:func:`entry_text`; mean over the seeds that
    did not fail). **Bold**: the best of the row for that lead summary and every model
    tied with it within the t interval (:func:`best_within_spread`; never a reference, never a model worse than
    persistence); a saturated 1:N column shows skill horizons and nothing bold; an incomplete key (:func:`completeness`
    with ``expected``) nothing bold, its row named "(incomplete: k of n models)"."""
    refs = [r for r in REFERENCES if any(r in (agg[d][next(iter(agg[d]))].get("references") or {}) for d in datasets)]
    refs = refs or ["persistence"]
    cols = columns(agg, datasets, models, metric, expected)
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
        row = [d + (f" ({incomplete_text(cols[(d, PARTS[0])])})" if cols[(d, PARTS[0])]["incomplete"] else "")]
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
