"""The leaderboard's per-seed table: every seed's headline score, so that a reader can check each mean, median and
interval, and see which seed failed (:mod:`dandelion.benchmarks.leaderboard.stats`)."""

from __future__ import annotations

from dandelion.benchmarks.leaderboard.headline import PARTS
from dandelion.reporting.numbers import fmt_value

__all__ = ["per_seed_table"]


def _values(col: dict, m: str) -> str:
    s = col["stats"][m]
    if not s.get("values"):
        return "–"
    seeds = [c["seed"] for c in col["cells"][m]]
    failed = set(s.get("failed_seeds") or [])
    return ", ".join(f"s{k}: {fmt_value(v)}" + ("✗" if k in failed else "") for k, v in zip(seeds, s["values"]))


def per_seed_table(agg: dict, datasets: list[str], models: list[str], cols: dict) -> list[str]:
    """One row per dataset key and model: the seeds' field-averaged VRMSE at the next step and over 1:N, a failed
    seed marked ✗ (``cols``: :func:`~dandelion.benchmarks.leaderboard.headline.columns`)."""
    lines = [
        "## Per seed, VRMSE",
        "",
        "Each seed's test VRMSE (area-weighted, mean over the fields), next step and 1:20; ✗ = a failed seed (its "
        "rollout blew up within the window, or it lies outside the 95 % t prediction interval of the other seeds "
        "and 50 % from their median; `benchmarks/leaderboard/stats.py`), whose column is ranked by the median.",
        "",
        "| dataset | model | next step per seed | 1:20 per seed |",
        "|---|---|---|---|",
    ]
    for d in datasets:
        for m in models:
            if m not in agg[d] or any(m not in cols[(d, p)]["stats"] for p in PARTS):
                continue
            row = [d, m]
            for p in PARTS:
                col = {**cols[(d, p)], "cells": {m: agg[d][m].get("cells") or []}}
                row.append(_values(col, m))
            lines.append("| " + " | ".join(row) + " |")
    return lines + [""]
