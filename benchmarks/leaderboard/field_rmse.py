"""The per-field RMSE tables of ``leaderboard.md``: our RMSE beside WeatherBench 2's, per dataset.

Two definitions of the area-weighted RMSE per lead (:mod:`dandelion.evaluation.definitions`), both with the grid's
quadrature weights, in the physical units of each field: ours (``rmse``), the mean over forecasts of each
forecast's RMSE, and WeatherBench 2's (``rmse_wb2``, Rasp et al. 2024, Sec. 4.1), the square root of the mean over
forecasts of the area-weighted MSE. A cell made before the rollout reported ``rmse_wb2`` does not carry it: its WB2
entry is "—" (its forecasts were not kept, so it is not recomputed). Each entry is the mean ± sample std over
seeds of the cell's next-step value or 1:20 mean (mean over leads of the per-lead curve), to 4 significant digits of
the mean and the std to the same decimals.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MISSING", "NOTE", "CAPTION", "field_rmse_table"]

#: The entry of a definition that a model's cells do not carry.
MISSING = "—"

#: The legend of the per-field RMSE tables, shown once above them.
NOTE = (
    "Under each VRMSE table, the RMSE of every field in its physical units, two definitions per entry "
    "(*ours / WB2*), mean ± sample std over seeds: *ours* is the mean over forecasts of each forecast's "
    "area-weighted RMSE; *WB2* is WeatherBench 2's (Rasp et al. 2024, Sec. 4.1), the square root of the mean over "
    "forecasts (initial times) of the area-weighted MSE, never below ours (Jensen's inequality); both with the "
    f"grid's quadrature weights. {MISSING}: cells scored before the rollout reported the WB2 definition; their "
    "forecasts were not kept, so it is not recomputed."
)

#: The heading line of each per-field RMSE table.
CAPTION = "RMSE per field, ours (mean over forecasts of the RMSE) / WB2 (square root of the mean over forecasts of "
CAPTION += "the MSE):"


def _stats(values) -> tuple[float, float]:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if v.size == 0:
        return math.nan, math.nan
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else math.nan


def _text(cells: list[dict], part: str, metric: str, var: str) -> str:
    """``mean ± std`` over the cells of ``cells[i][part][metric][var]``; :data:`MISSING` when a cell lacks it."""
    if not all(var in (c.get(part) or {}).get(metric, {}) for c in cells):
        return MISSING
    mean, std = _stats([c[part][metric][var] for c in cells])
    if not math.isfinite(mean):
        return MISSING
    dec = max(0, 3 - math.floor(math.log10(abs(mean)))) if mean else 4  # 4 significant digits of the mean
    return f"{mean:.{dec}f} ± " + (f"{std:.{dec}f}" if math.isfinite(std) else "n/a")


def field_rmse_table(agg: dict, d: str, models: list[str]) -> list[str]:
    """Markdown lines of the RMSE table of dataset key ``d``: one row per variable of the cells' ``rmse`` (scalar
    fields, vector components and a vector field's frame-independent error), a units column, then one column per
    model and lead summary (next step, then 1:20), each entry *ours / WB2*.

    ``agg`` is :func:`dandelion.benchmarks.leaderboard.markdown.aggregate`'s (each entry keeps its ``cells``).
    Returns [] when no cell of ``d`` carries ``rmse``.
    """
    have = [m for m in models if m in agg[d]]
    first = next((agg[d][m]["cells"][0] for m in have if "rmse" in agg[d][m]["cells"][0].get("next_step", {})), None)
    if first is None:
        return []
    variables = [v for v in first["next_step"]["rmse"] if v != "mean"]
    units = first.get("units") or {}
    cols = [("next_step", m) for m in have] + [("rollout_mean", m) for m in have]
    head = ["field", "units"] + [f"{m} {'next' if p == 'next_step' else '1:20'} ours / WB2" for p, m in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---", "---"] + ["---:"] * len(cols)) + "|"]
    for v in variables:
        row = [v, units.get(v, "") or "1"]
        for p, m in cols:
            cs = agg[d][m]["cells"]
            row.append(f"{_text(cs, p, 'rmse', v)} / {_text(cs, p, 'rmse_wb2', v)}")
        lines.append("| " + " | ".join(row) + " |")
    return lines
