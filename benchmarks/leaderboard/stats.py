"""The statistics of the leaderboard's verdicts: Student-t intervals over seeds, the tie rule, failed seeds and
saturated lead summaries.

* **Intervals.** The mean over ``n`` seeds carries the 95 % Student-t interval ``mean ± t_{0.975, n-1} s / sqrt(n)``
  (``s``: sample std). Two means (``a``, ``b``) differ when their gap exceeds ``t_{0.975, df} sqrt(s_a^2 / n_a +
  s_b^2 / n_b)`` with the conservative ``df = min(n_a, n_b) - 1`` (Welch's degrees of freedom lie between it and
  ``n_a + n_b - 2``; the smaller one never calls a difference that Welch's would not). With two seeds
  ``t_{0.975, 1} = 12.7``, with three ``4.30``: a two-seed comparison is rarely a gain or a loss, and the tables
  say so rather than call one.
* **Failed seeds.** A seed fails a column when its rollout blew up within the window (the cell's recorded
  ``stability`` count, :data:`dandelion.evaluation.UNSTABLE_VRMSE`; a cell made before the count was recorded: its
  mean VRMSE curve passing that threshold, which needs at least one forecast past it) or when it is an outlier: with
  three or more seeds, outside the 95 % t prediction interval of the other seeds, ``|x - mean_o| > t_{0.975, n-2}
  s_o sqrt(1 + 1 / (n - 1))``, and more than :data:`OUTLIER_MARGIN` (50 %) away from their median. The interval
  alone is not enough at three seeds: two seeds that happen to agree to 0.5 % make a third 5 % away an "outlier"
  (on the v2 cells it flagged 18 columns for 2-12 % deviations); the margin keeps the seeds that trained
  differently (v2: chained turbulence 32x64 Dandelion seed 1, 78 % above the others' median at the next step),
  above the largest ordinary spread of the v2 cells (30 %, shock caps 32x64 DISCO 1:20). With two seeds no
  outlier can be named (no spread of the others). A column with a failed seed is ranked by each model's median over
  seeds; the spread of the tie rule is then the spread of the seeds that did not fail.
* **Saturation.** A 1:N summary (mean over leads 1..N) is saturated when every model's skill horizon, the first lead
  where its VRMSE (median over seeds) exceeds persistence's or exceeds 1, falls in the first half of the window
  (lead ``<= N // 2``): the summary then averages blown-up errors, and it is not ranked; the horizons are reported
  instead (Issue #71, item 2).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as st

from dandelion.evaluation import UNSTABLE_VRMSE

__all__ = [
    "LEVEL",
    "OUTLIER_MARGIN",
    "t_critical",
    "half_width",
    "differ",
    "outliers",
    "blown_up",
    "column_stats",
    "skill_horizon",
    "saturation",
]

LEVEL = 0.95  # two-sided confidence of every interval
OUTLIER_MARGIN = 0.5  # a seed is an outlier only this far (relative) from the other seeds' median, too


def t_critical(df: int) -> float:
    """``t_{(1 + LEVEL) / 2, df}`` of Student's t (12.71 at ``df = 1``, 4.30 at 2); NaN for ``df < 1``."""
    return float(st.t.ppf(0.5 + LEVEL / 2, df)) if df >= 1 else math.nan


def half_width(std: float, n: int) -> float:
    """Half-width of the 95 % t interval of a mean of ``n`` values of sample std ``std`` (NaN for ``n < 2``)."""
    return t_critical(n - 1) * std / math.sqrt(n) if n >= 2 and math.isfinite(std) else math.nan


def differ(a: dict, b: dict) -> bool | None:
    """Whether the centres (``mean``) of ``a`` and ``b`` (``{"mean", "std", "n"}``) differ beyond the t interval of
    their difference (module docstring); None when either side has fewer than two seeds (the spread is unknown)."""
    if min(a["n"], b["n"]) < 2 or not (math.isfinite(a["std"]) and math.isfinite(b["std"])):
        return None
    se = math.sqrt(a["std"] ** 2 / a["n"] + b["std"] ** 2 / b["n"])
    return abs(a["mean"] - b["mean"]) > t_critical(min(a["n"], b["n"]) - 1) * se


def outliers(values: list[float], margin: float = OUTLIER_MARGIN) -> list[int]:
    """Indices of ``values`` (one per seed) outside the 95 % t prediction interval of the others and more than
    ``margin`` (relative) from their median (module docstring); none with fewer than three values, and a non-finite
    value is always one."""
    v = np.asarray(values, dtype=float)
    out = [i for i in range(v.size) if not math.isfinite(v[i])]
    if v.size < 3:
        return out
    for i in range(v.size):
        o = np.delete(v, i)
        o = o[np.isfinite(o)]
        if i in out or o.size < 2:
            continue
        band = t_critical(o.size - 1) * o.std(ddof=1) * math.sqrt(1 + 1 / o.size)
        med = float(np.median(o))
        if abs(v[i] - o.mean()) > band and abs(v[i] - med) > margin * abs(med):
            out.append(i)
    return sorted(out)


def blown_up(cell: dict, n_leads: int) -> int | None:
    """How many of the cell's forecasts blew up within leads 1..``n_leads``: the recorded ``stability`` count; for a
    cell made before it was recorded, 1 when its mean VRMSE curve passes :data:`UNSTABLE_VRMSE` (or is not finite)
    by then, else 0 (a lower bound); None without either."""
    stab = cell.get("stability")
    if stab and stab.get("unstable_by_lead"):
        by = stab["unstable_by_lead"]
        return int(by[min(n_leads, len(by)) - 1])
    curve = ((cell.get("curves") or {}).get("vrmse") or {}).get("mean")
    if curve is None:
        return None
    c = np.asarray(curve[:n_leads], dtype=float)
    return int(bool((~np.isfinite(c) | (c > UNSTABLE_VRMSE)).any()))


def _summary(values: list[float]) -> dict:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if v.size == 0:
        return {"mean": math.nan, "std": math.nan, "n": 0}
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else math.nan, "n": int(v.size)}


def column_stats(entries: dict, part: str, metric: str = "vrmse", field: str = "mean", n_leads: int = 20) -> dict:
    """The statistics one leaderboard column ranks: model -> ``{"mean", "std", "n", "failed", "failed_seeds",
    "median", "values"}`` (``values``: one per cell, in the cells' order). ``entries``: model -> aggregated entry
    (:func:`~dandelion.benchmarks.leaderboard.markdown.aggregate`)
    whose ``cells`` carry the per-seed values; ``part``: ``next_step`` | ``rollout_mean`` (a blow-up fails a seed
    only there, within ``n_leads``). Without a failed seed in the column, ``mean``/``std``/``n`` are over all seeds;
    with one (in any model), ``mean`` is each model's median over all its seeds and ``std``/``n`` are over the seeds
    that did not fail (the module docstring). Entries without cells (a summary only) pass their summary through."""
    out, any_failed = {}, False
    for m, e in entries.items():
        s = (e.get(part) or {}).get(metric, {}).get(field)
        if s is None:
            continue
        cells = e.get("cells") or []
        values = [(c.get(part) or {}).get(metric, {}).get(field) for c in cells]
        if not cells or any(v is None for v in values):
            out[m] = {**s, "failed": 0, "failed_seeds": [], "median": s["mean"], "values": []}
            continue
        values = [float(v) for v in values]
        bad = set(outliers(values))
        if part == "rollout_mean":
            bad |= {i for i, c in enumerate(cells) if (blown_up(c, n_leads) or 0) > 0}
        any_failed |= bool(bad)
        kept = [v for i, v in enumerate(values) if i not in bad]
        med = float(np.median([v if math.isfinite(v) else math.inf for v in values]))
        out[m] = {
            **_summary(values),
            "failed": len(bad),
            "failed_seeds": [cells[i].get("seed", i) for i in sorted(bad)],
            "median": med,
            "values": values,
            "kept": _summary(kept),
        }
    if any_failed:
        for s in out.values():
            if "kept" in s:
                s.update(mean=s["median"], std=s["kept"]["std"], n=s["kept"]["n"], by_median=True)
    for s in out.values():
        s.pop("kept", None)
    return out


def skill_horizon(curve: list[float], persistence: list[float] | None) -> tuple[int | None, int | None]:
    """``(lead past persistence, lead past 1)``: the first lead (1-based) where ``curve`` (VRMSE per lead) exceeds
    persistence's curve, and where it exceeds 1 (or is not finite); None when it never does within the curve."""
    c = np.asarray(curve, dtype=float)
    bad = ~np.isfinite(c)
    past1 = np.flatnonzero(bad | (c > 1.0))
    pastp = np.array([], dtype=int)
    if persistence is not None:
        p = np.asarray(persistence[: c.size], dtype=float)
        pastp = np.flatnonzero(bad[: p.size] | (c[: p.size] > p))
    return (int(pastp[0]) + 1 if pastp.size else None, int(past1[0]) + 1 if past1.size else None)


def saturation(entries: dict, persistence: list[float] | None, n_leads: int) -> dict | None:
    """Model -> skill horizon (:func:`skill_horizon` of its median-over-seeds VRMSE curve over leads 1..``n_leads``)
    when the 1:``n_leads`` summary is saturated (every model's earlier horizon at lead ``<= n_leads // 2``), else
    None. ``entries``: model -> aggregated entry (its ``cells``' ``curves.vrmse.mean``, or the seed-mean
    ``curves``)."""
    horizons = {}
    for m, e in entries.items():
        seeds = [((c.get("curves") or {}).get("vrmse") or {}).get("mean") for c in e.get("cells") or []]
        seeds = [s[:n_leads] for s in seeds if s]
        if seeds and len({len(s) for s in seeds}) == 1:
            curve = np.median(np.where(np.isfinite(seeds), seeds, np.inf), axis=0)
        else:
            curve = ((e.get("curves") or {}).get("vrmse") or {}).get("mean")
            if curve is None:
                return None
            curve = np.asarray(curve[:n_leads], dtype=float)
        horizons[m] = skill_horizon(curve.tolist(), persistence)
    if not horizons:
        return None
    first = [min(h for h in pair if h is not None) if any(pair) else None for pair in horizons.values()]
    if all(f is not None and f <= n_leads // 2 for f in first):
        return horizons
    return None
