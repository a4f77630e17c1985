"""The resolution trend of the leaderboard: how each model's error, and its ratio to SFNO's, changes from one grid
to the next, per dataset trained at two or more grids.

For every dataset (the ``dataset`` name of its cells) with keys at two or more grids, :func:`trend_table` gives one
row per model and grid: next-step and 1:20 VRMSE, the headline's statistics of that column
(:func:`~dandelion.benchmarks.leaderboard.stats.column_stats`: the mean of the seeds that did not fail ± the
half-width of its 95 % Student-t interval over them, ✗k for k failed seeds), and the ratio of that mean to SFNO's at
the same grid. Every number of the trend (ratios, their errors, the seed counts) uses those same statistics.
:func:`verdict` says whether a warp model's lead over SFNO grows, shrinks or holds from the coarsest to the finest
grid, judged against the seed spread: the ratio ``r = model / SFNO`` at each grid carries a relative uncertainty
``sqrt((s_m / m)^2 / n_m + (s_s / s)^2 / n_s)`` (standard errors of the two means, first-order propagation); the
change of ``r`` is called real when it exceeds ``t_{0.975, n - 1}`` times the combined uncertainty of the two
ratios, ``n`` the fewest seeds of the four means (Student's t, :mod:`~dandelion.benchmarks.leaderboard.stats`: 12.7
with two seeds, 4.30 with three), else the lead
"holds". A lower ratio at the finer grid is a growing lead (or a shrinking deficit: the sentence says which side of
1 the ratios are on, judged against the seed spread too: ahead, behind, or level with SFNO). With one seed the
spread is unknown and the verdict is "no spread".
"""

from __future__ import annotations

import math
from pathlib import Path

from dandelion.benchmarks.leaderboard.qualify import NOT_MEASURED, counted, mark, statuses, summary_sentence
from dandelion.benchmarks.leaderboard.stats import column_stats, half_width, saturation, summary_leads, t_critical
from dandelion.reporting.numbers import fmt_mean_std
from dandelion.reporting.plotting import pyplot, save_figure

__all__ = [
    "WARP_MODELS",
    "BASELINE",
    "families",
    "trend_table",
    "saturated",
    "verdict",
    "trend_section",
    "plot_trend",
]

#: The warp models whose lead over :data:`BASELINE` the trend judges, in this order.
WARP_MODELS = ("dandelion", "dandelion_fast", "flower2d")
BASELINE = "sfno"
PARTS = (("next_step", "next step"), ("rollout_mean", "1:20"))


def _stat(entry: dict, part: str) -> tuple[float, float, int, int]:
    """``(centre, std, n, failed)`` of one model's field-averaged VRMSE for ``part``: the headline's column statistics
    (:func:`~dandelion.benchmarks.leaderboard.stats.column_stats`: the seeds that did not fail, and how many did)."""
    s = column_stats({"m": entry}, part, n_leads=summary_leads([entry]))["m"]
    return float(s["mean"]), float(s["std"]), int(s["n"]), int(s["failed"])


def families(agg: dict) -> dict[str, list[str]]:
    """Dataset name -> its keys sorted by grid (``nlat``), for the datasets trained at two or more grids."""
    by: dict[str, list[str]] = {}
    for key, models in agg.items():
        by.setdefault(next(iter(models.values()))["dataset"], []).append(key)
    out = {}
    for name, keys in sorted(by.items()):
        keys.sort(key=lambda k: next(iter(agg[k].values()))["nlat"])
        if len({next(iter(agg[k].values()))["nlat"] for k in keys}) >= 2:
            out[name] = keys
    return out


def _ratio(agg: dict, key: str, model: str, part: str) -> tuple[float, float, int] | None:
    """``(model mean / SFNO mean, its relative standard error, the fewer seeds of the two)`` at ``key``; None
    without both (the error is NaN with a single seed on either side)."""
    if model not in agg[key] or BASELINE not in agg[key] or "vrmse" not in agg[key][model][part]:
        return None
    m, sm, nm, _ = _stat(agg[key][model], part)
    b, sb, nb, _ = _stat(agg[key][BASELINE], part)
    if not (math.isfinite(m) and math.isfinite(b)) or b <= 0 or m <= 0:
        return None
    rel = math.sqrt((sm / m) ** 2 / nm + (sb / b) ** 2 / nb) if nm > 1 and nb > 1 else math.nan
    return m / b, rel, min(nm, nb)


def saturated(agg: dict, key: str) -> bool:
    """Whether the 1:N summary of dataset key ``key`` is saturated (:func:`~dandelion.benchmarks.leaderboard.stats.
    saturation`, against the persistence reference's curve in its entries' ``references``); False without curves."""
    e0 = next(iter(agg[key].values()))
    pers = (((e0.get("references") or {}).get("persistence") or {}).get("curves") or {}).get("vrmse", {}).get("mean")
    return saturation(agg[key], pers, summary_leads(agg[key].values())) is not None


def verdict(agg: dict, keys: list[str], model: str, part: str) -> dict | None:
    """The trend of ``model``'s ratio to SFNO from ``keys[0]`` (coarsest) to ``keys[-1]`` (finest) for ``part``
    (``next_step`` | ``rollout_mean``): ``{"coarse", "fine", "change", "threshold", "word"}`` with ``word`` one of
    ``grows`` (the ratio fell by more than ``t_{0.975, n - 1}`` times the combined standard error, ``n`` the fewest
    seeds of the four means), ``shrinks`` (rose by more), ``holds``, ``no spread`` (a side with one seed) or
    ``saturated`` (the 1:N summary is saturated at either grid, :func:`saturated`: not judged); None
    when either grid lacks the model or SFNO. Also ``coarse_band`` and ``fine_band``: the half-width of each ratio's
    t interval (``t_{0.975, n - 1}`` times its standard error, ``n`` the fewer seeds of that grid; NaN with one
    seed), the band around 1 within which the model is level with SFNO at that grid."""
    a, b = _ratio(agg, keys[0], model, part), _ratio(agg, keys[-1], model, part)
    if a is None or b is None:
        return None
    change = b[0] - a[0]
    err = math.hypot(a[0] * a[1], b[0] * b[1])
    if not math.isfinite(err):
        word = "no spread"
    else:
        t = t_critical(min(a[2], b[2]) - 1)
        word = "grows" if change < -t * err else "shrinks" if change > t * err else "holds"
    if part == "rollout_mean" and (saturated(agg, keys[0]) or saturated(agg, keys[-1])):
        word = "saturated"  # a summary of blown-up errors at a grid: not judged (stats.saturation)
    return {
        "coarse": a[0],
        "fine": b[0],
        "change": change,
        "threshold": t_critical(min(a[2], b[2]) - 1) * err,
        "word": word,
        "coarse_band": t_critical(a[2] - 1) * a[0] * a[1],
        "fine_band": t_critical(b[2] - 1) * b[0] * b[1],
    }


def _side(ratio: float, band: float) -> str:
    """``ahead`` (ratio below 1 beyond ``band``), ``behind`` (above), ``level`` (within it); without a band (one
    seed) the side of 1 the ratio is on (``level`` at exactly 1)."""
    if abs(ratio - 1) <= (band if math.isfinite(band) else 0.0):
        return "level"
    return "ahead" if ratio < 1 else "behind"


def trend_table(agg: dict, keys: list[str]) -> list[str]:
    """One row per model (warp models first, then SFNO, then the others) and grid of the dataset's ``keys``."""
    models = [m for m in (*WARP_MODELS, BASELINE) if any(m in agg[k] for k in keys)]
    models += sorted({m for k in keys for m in agg[k]} - set(models))
    lines = [
        "| model | grid | seeds | next step | ratio to SFNO | 1:20 | ratio to SFNO |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for m in models:
        for k in keys:
            if m not in agg[k]:
                continue
            e = agg[k][m]
            row = [m, f"{e['nlat']}x{e['nlon']}", str(len(e["seeds"]))]
            for part, _ in PARTS:
                if "vrmse" not in e[part]:
                    row += ["–", "–"]
                    continue
                mean, std, n, failed = _stat(e, part)
                r = _ratio(agg, k, m, part)
                txt = fmt_mean_std(mean, half_width(std, n)) + (f" ✗{failed}" if failed else "")
                row += [txt, "–" if r is None else f"{r[0]:.3f}"]
            lines.append("| " + " | ".join(row) + " |")
    return lines


#: A change of side between the grids, (coarse side, fine side, word) -> its words.
_CROSSINGS = {
    ("ahead", "behind", "shrinks"): "its lead over SFNO turned into a gap",
    ("behind", "ahead", "grows"): "its gap to SFNO turned into a lead",
    ("ahead", "level", "shrinks"): "its lead over SFNO is gone",
    ("behind", "level", "grows"): "its gap to SFNO closed",
    ("level", "ahead", "grows"): "it moved ahead of SFNO",
    ("level", "behind", "shrinks"): "it fell behind SFNO",
}
#: One side at both grids, (side, word) -> its words.
_SAME_SIDE = {
    "ahead": {"grows": "its lead over SFNO grows", "shrinks": "its lead over SFNO shrinks", "holds": "its lead holds"},
    "behind": {"grows": "its gap to SFNO narrows", "shrinks": "its gap to SFNO widens", "holds": "its gap holds"},
    "level": {"grows": "it gains on SFNO", "shrinks": "it loses ground to SFNO", "holds": "its standing holds"},
}
_AT = {"ahead": "ahead of SFNO", "behind": "behind SFNO", "level": "level with SFNO"}


def _standing(v: dict) -> str:
    """Plain words for a :func:`verdict`. Each grid's standing is judged against the seed spread like the change
    is: ahead of SFNO (ratio below 1 by more than its t band, :func:`verdict`), behind (above by more) or level
    (within it). The same side at both grids is said as a lead, a gap or a level standing that grows, shrinks or
    holds; a change of side by the side's names (:data:`_CROSSINGS`), and a change of side within the spread of the
    change as no change, naming both sides. "grows" in the counts means the ratio fell, whichever side it is on.
    With one seed on a side (``no spread``) no direction is claimed."""
    coarse, fine = _side(v["coarse"], v["coarse_band"]), _side(v["fine"], v["fine_band"])
    word = v["word"]
    if word == "no spread":
        return f"no verdict yet: one seed, so the seed spread is unknown ({_AT[fine]} at the finer grid)"
    if word == "saturated":
        return "not judged: the summary is saturated (every model past persistence or VRMSE 1 by mid-window)"
    if coarse == fine:
        spread = " within the seed spread" if fine == "level" else ""
        return f"{_SAME_SIDE[fine][word]} ({_AT[fine]}{spread} at both grids)"
    sides = f"({coarse} at the coarser grid, {fine} at the finer)"
    if word == "holds":
        return f"no change beyond the seed spread {sides}"
    if (coarse, fine, word) in _CROSSINGS:
        return f"{_CROSSINGS[(coarse, fine, word)]} {sides}"
    return f"its ratio to SFNO {'fell' if word == 'grows' else 'rose'} {sides}"


def _sentence(name: str, agg: dict, keys: list[str]) -> tuple[str, dict]:
    grids = " to ".join(f"{next(iter(agg[k].values()))['nlat']}x{next(iter(agg[k].values()))['nlon']}" for k in keys)
    parts, words = [], {}
    for m in WARP_MODELS:
        for part, label in PARTS:
            v = verdict(agg, keys, m, part)
            if v is None:
                continue
            words[(m, part)] = v["word"]
            parts.append(
                f"{m} {label}: ratio to SFNO {v['coarse']:.3f} -> {v['fine']:.3f} (change {v['change']:+.3f}, "
                + (f"threshold ±{v['threshold']:.3f}" if math.isfinite(v["threshold"]) else "one seed")
                + f"): {_standing(v)}"
            )
    if not parts:
        return f"**{name}** ({grids}): no warp model has cells beside SFNO at both grids yet.", words
    return f"**{name}** ({grids}): " + "; ".join(parts) + ".", words


def trend_section(
    agg: dict, plots: dict | None = None, notes: dict | None = None, content: dict | None = None
) -> list[str]:
    """The markdown of the resolution-trend section (empty when no dataset has two grids). ``notes``: dataset name ->
    a caveat printed under its verdicts and named under the summary (what a count of that dataset does not mean, e.g.
    two grids that simulate different flows; :func:`~dandelion.benchmarks.leaderboard.render.trend_notes`).
    ``content``: the measured resolution content (finest key -> :func:`~dandelion.benchmarks.leaderboard.resolution.
    content`; None: not measured, every dataset counted and the section says so): a dataset that does not qualify
    (:mod:`~dandelion.benchmarks.leaderboard.qualify`) keeps its table and verdicts, marked "no resolution test",
    and is left out of the counts; one not measured is counted and flagged."""
    notes = notes or {}
    fams = families(agg)
    st = statuses(agg, fams, content)
    if not fams:
        return []
    L = [
        "## Resolution trend",
        "",
        "Each model's area-weighted VRMSE at every grid it was trained at, as in the headline: the mean of the "
        "seeds that did not fail ± the half-width of its 95 % Student-t interval over them (t_0.975,n-1 s / sqrt(n)), "
        "✗k for k failed seeds left out, and the ratio of its mean to SFNO's at the same "
        "grid (below 1: ahead of SFNO). A warp model's lead over SFNO *grows* when its ratio falls from the coarse "
        "to the fine grid by more than t_0.975,n-1 times the combined standard error of the two ratios (n: the "
        "fewest seeds of the four means; 12.7 with two seeds, 4.30 with three), *shrinks* when it rises by more, "
        "and *holds* otherwise (`benchmarks/leaderboard/trend.py`): with two seeds at a grid, a change is called "
        "only when that interval excludes zero. For a model behind SFNO (ratio above 1) a lead that grows is a gap "
        "that narrows, and the sentences below say which. A ratio within its own t band of 1 is *level* with SFNO "
        "at that grid.",
        "",
        summary_sentence(st, fams),
        "",
    ]
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for name, keys in fams.items():
        L += [f"### {name}", "", *trend_table(agg, keys), ""]
        text, words = _sentence(name, agg, keys)
        L += [text, ""]
        if mark(st, name):
            L += [mark(st, name), ""]
        if notes.get(name):
            L += [f"*Caveat ({name})*: {notes[name]}", ""]
        for mp, w in words.items() if counted(st, name) else ():  # a dataset with no resolution test: not counted
            counts.setdefault(mp, {}).setdefault(w, 0)
            counts[mp][w] += 1
        png = (plots or {}).get(f"error_vs_resolution_{name}")
        if png:
            L += [f"![{name}: error against grid]({Path(png).name})", ""]
    if counts:
        n = sum(counted(st, name) for name in fams)
        flagged = [name for name in fams if (st.get(name) or {}).get("status") == NOT_MEASURED]
        L += [
            f"Summary, datasets each way over the {n} dataset{'s' if n > 1 else ''} trained at two grids "
            + (f"that qualify or were not measured ({NOT_MEASURED}: {', '.join(flagged)}) " if flagged else "")
            + ("that qualify " if st and not flagged else "")
            + "(warp model, lead summary; 'gains on SFNO': its ratio to SFNO fell beyond the t interval, whether "
            "it is ahead or behind; 'loses ground': it rose):",
            "",
        ]
        L += [
            "| warp model | lead | gains on SFNO | holds | loses ground | no spread | saturated (not judged) |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for (m, part), c in counts.items():
            label = dict(PARTS)[part]
            L.append(
                f"| {m} | {label} | {c.get('grows', 0)} | {c.get('holds', 0)} | {c.get('shrinks', 0)} | "
                f"{c.get('no spread', 0)} | {c.get('saturated', 0)} |"
            )
        L.append("")
        caveats = [n for n in fams if notes.get(n)]
        if caveats:
            L += [f"Read the counts with the caveats above ({', '.join(caveats)}).", ""]
    return L


def plot_trend(agg: dict, keys: list[str], path, title: str) -> Path:
    """Next-step (left) and 1:20 (right) VRMSE against grid, one line per model trained at two or more of the
    dataset's grids (centre and error bars: the mean of the seeds that did not fail and the half-width of its
    95 % t interval, as in the tables; none with one seed), log axes."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6))
    models = sorted({m for k in keys for m in agg[k]}, key=lambda m: (m not in WARP_MODELS + (BASELINE,), m))
    xs = sorted({next(iter(agg[k].values()))["nlat"] for k in keys})
    for ax, (part, label) in zip(axes, PARTS):
        for i, m in enumerate(models):
            ks = [k for k in keys if m in agg[k] and "vrmse" in agg[k][m][part]]
            if len(ks) < 2:
                continue
            x = [agg[k][m]["nlat"] for k in ks]
            y, e = zip(*[(c, half_width(s, n)) for c, s, n, _ in (_stat(agg[k][m], part) for k in ks)])
            e = [0.0 if not math.isfinite(v) else v for v in e]
            ax.errorbar(x, y, yerr=e, marker="o", ms=4, capsize=3, color=f"C{i}", label=m)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{n}x{2 * n}" for n in xs])
        ax.set_xlabel("grid (nlat x nlon)")
        ax.set_title(f"{label}", fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("VRMSE (area-weighted, mean over fields)")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"{title}: error against grid", fontsize=10)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.16, top=0.86, wspace=0.25)
    return save_figure(fig, path)
