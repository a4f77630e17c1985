"""The verdict paragraph that opens ``leaderboard.md``: generated from the same columns as the headline
(:func:`~dandelion.benchmarks.leaderboard.headline.columns`) and the same trend verdicts
(:func:`~dandelion.benchmarks.leaderboard.trend.verdict`), so that it can never disagree with the tables.

Per grid it says which model is best or tied in how many columns (and where it is best alone), which columns are
saturated (not ranked), in which the best model does not beat the linear-AR reference, and which seeds failed; then
the resolution trend's counts, and the datasets whose caveats (``trend_notes.yaml``) change what a count means.
"""

from __future__ import annotations

from dandelion.benchmarks.leaderboard.stats import t_critical
from dandelion.benchmarks.leaderboard.trend import PARTS as TREND_PARTS
from dandelion.benchmarks.leaderboard.trend import WARP_MODELS, families, verdict

__all__ = ["VERDICT", "verdict_paragraph", "grid_of"]

#: The heading of the verdict, the first of the file.
VERDICT = "## Verdict"

_LABEL = {"next_step": "next", "rollout_mean": "1:20"}


def grid_of(agg: dict, d: str) -> str:
    """``"<nlat>x<nlon>"`` of dataset key ``d``."""
    e = next(iter(agg[d].values()))
    return f"{e['nlat']}x{e['nlon']}"


def _name(agg: dict, d: str) -> str:
    return str(next(iter(agg[d].values())).get("dataset", d))


def _seeds_text(agg: dict, keys: list[str]) -> str:
    ns = sorted({len(e["seeds"]) for d in keys for e in agg[d].values()})
    ts = ", ".join(f"t_0.975,{n - 1} = {t_critical(n - 1):#.3g}" for n in ns if n >= 2)
    return f"{'-'.join(map(str, sorted({ns[0], ns[-1]})))} seeds per model" + (f", {ts}" if ts else "")


def _under_linear_ar(col: dict) -> bool:
    """Whether no best model of the column beats the linear-AR reference (every one is marked ‡ or †)."""
    return bool(col["best"]) and all(col["stats"][m]["mean"] >= col["linear_ar"] for m in col["best"])


def _grid_sentence(agg: dict, grid: str, keys: list[str], models: list[str], cols: dict) -> str:
    ranked = [(d, p) for d in keys for p in _LABEL if not cols[(d, p)]["horizons"]]
    saturated = [f"{_name(agg, d)} {_LABEL[p]}" for d in keys for p in _LABEL if cols[(d, p)]["horizons"]]
    wins = []
    for m in models:
        best = [(d, p) for d, p in ranked if m in cols[(d, p)]["best"]]
        if not best:
            continue
        alone = [f"{_name(agg, d)} {_LABEL[p]}" for d, p in best if cols[(d, p)]["best"] == {m}]
        wins.append((len(best), m, alone))
    wins.sort(key=lambda w: (-w[0], w[1]))
    text = (
        f"At {grid} ({len(keys)} dataset{'s' if len(keys) > 1 else ''}, {_seeds_text(agg, keys)}), of {len(ranked)} "
        f"ranked column{'s' if len(ranked) != 1 else ''}, "
    )
    if wins:
        text += "; ".join(
            f"{m} is best or tied in {n}" + (f" (alone: {', '.join(alone)})" if alone else "") for n, m, alone in wins
        )
    else:
        text += "no model is best (every one is worse than persistence)"
    text += "."
    if saturated:
        are = "s are" if len(saturated) > 1 else " is"
        text += (
            f" {len(saturated)} saturated column{are} not ranked (every model past persistence or VRMSE 1 by "
            f"mid-window; skill horizons instead): {', '.join(saturated)}."
        )
    floors = [
        f"{_name(agg, d)} {_LABEL[p]}"
        for d, p in ranked
        if cols[(d, p)]["best"]
        and all(cols[(d, p)]["stats"][m]["mean"] >= cols[(d, p)]["linear_ar"] for m in cols[(d, p)]["best"])
    ]
    if floors:
        text += (
            f" In {len(floors)} of the ranked columns the best model does not beat linear AR (‡): {', '.join(floors)}."
        )
    failed = [
        f"{d} {m} {_LABEL[p]} (seed{'s' if len(s['failed_seeds']) > 1 else ''} "
        f"{', '.join(map(str, s['failed_seeds']))})"
        for d in keys
        for p in _LABEL
        for m, s in cols[(d, p)]["stats"].items()
        if s.get("failed")
    ]
    if failed:
        text += f" Failed seeds (✗, their columns ranked by the median): {'; '.join(failed)}."
    return text


def _trend_sentence(agg: dict, notes: dict) -> str:
    fams = families(agg)
    if not fams:
        return ""
    counts = []
    for m in WARP_MODELS:
        for part, label in TREND_PARTS:
            words = [v["word"] for keys in fams.values() if (v := verdict(agg, keys, m, part)) is not None]
            if words:
                c = {w: words.count(w) for w in ("grows", "holds", "shrinks", "no spread", "saturated")}
                counts.append(
                    f"{m} {label}: gains on SFNO {c['grows']}, holds {c['holds']}, loses ground {c['shrinks']}"
                    + (f", no spread {c['no spread']}" if c["no spread"] else "")
                    + (f", saturated (not judged) {c['saturated']}" if c["saturated"] else "")
                )
    text = (
        f"Resolution trend over the {len(fams)} datasets trained at two grids (a warp model's ratio to SFNO, judged "
        "against the t interval of its change): " + "; ".join(counts) + "."
    )
    caveats = [n for n in fams if notes.get(n)]
    if caveats:
        text += f" Caveats that change what a count means: {', '.join(caveats)} (below the trend tables)."
    return text


def verdict_paragraph(agg: dict, datasets: list[str], models: list[str], cols: dict, notes: dict | None = None):
    """The lines of the verdict (a heading and one paragraph per grid, then the trend), finest grid first."""
    grids: dict[str, list[str]] = {}
    for d in datasets:
        grids.setdefault(grid_of(agg, d), []).append(d)
    order = sorted(grids, key=lambda g: -int(g.split("x")[0]))
    L = [VERDICT, ""]
    for g in order:
        L += [_grid_sentence(agg, g, grids[g], models, cols), ""]
    trend = _trend_sentence(agg, notes or {})
    if trend:
        L += [trend, ""]
    L += [
        "Bold ties and trend verdicts are judged with 95 % Student-t intervals over seeds (t_0.975,n-1: 12.7 with "
        "two seeds, 4.30 with three), so no two-seed comparison is called a gain or a loss unless that interval "
        "separates it; the columns' statistics, floors and failed seeds are in `benchmarks/leaderboard/stats.py`.",
        "",
    ]
    return L
