"""The verdict paragraph that opens ``leaderboard.md``: generated from the same columns as the headline
(:func:`~dandelion.benchmarks.leaderboard.headline.columns`) and the same trend verdicts
(:func:`~dandelion.benchmarks.leaderboard.trend.verdict`), so that it can never disagree with the tables.

Per grid it says which model is best or tied in how many columns (and where it is best alone), which dataset keys
are incomplete (not every model of the scale has every seed's cell: not ranked, as in the headline), which columns
are saturated (not ranked), in which the best model does not beat the linear-AR reference, and which seeds failed;
then
the resolution trend's counts, naming the dataset behind each gain or loss and marking those whose caveats
(``trend_notes.yaml``) change what the verdict means; then the budget axis (the same datasets at a multiple of the step
budget, :mod:`~dandelion.benchmarks.leaderboard.budget_axis`): pending, or the best models at each budget and where
the ranking changes.
"""

from __future__ import annotations

from dandelion.benchmarks.leaderboard.headline import incomplete_text
from dandelion.benchmarks.leaderboard.qualify import NOT_MEASURED, counted, statuses, summary_sentence
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
    incomplete = [d for d in keys if cols[(d, "next_step")].get("incomplete")]
    complete = [d for d in keys if d not in incomplete]
    ranked = [(d, p) for d in complete for p in _LABEL if not cols[(d, p)]["horizons"]]
    saturated = [f"{_name(agg, d)} {_LABEL[p]}" for d in complete for p in _LABEL if cols[(d, p)]["horizons"]]
    wins = []
    for m in models:
        best = [(d, p) for d, p in ranked if m in cols[(d, p)]["best"]]
        if not best:
            continue
        alone = [f"{_name(agg, d)} {_LABEL[p]}" for d, p in best if cols[(d, p)]["best"] == {m}]
        wins.append((len(best), m, alone))
    wins.sort(key=lambda w: (-w[0], w[1]))
    text = (
        f"At {grid} ({len(keys)} dataset{'s' if len(keys) > 1 else ''}, {_seeds_text(agg, complete or keys)}), of "
        f"{len(ranked)} ranked column{'s' if len(ranked) != 1 else ''}, "
    )
    if wins:
        text += "; ".join(
            f"{m} is best or tied in {n}" + (f" (alone: {', '.join(alone)})" if alone else "") for n, m, alone in wins
        )
    elif ranked:
        text += "no model is best (every one is worse than persistence)"
    else:
        text += "none is ranked yet"
    text += "."
    if incomplete:
        named = ", ".join(f"{_name(agg, d)} ({incomplete_text(cols[(d, 'next_step')])})" for d in incomplete)
        text += (
            f" {len(incomplete)} dataset{'s are' if len(incomplete) > 1 else ' is'} not ranked, incomplete (models "
            f"of the scale with a cell for every seed): {named}."
        )
    if saturated:
        are = "s are" if len(saturated) > 1 else " is"
        text += (
            f" {len(saturated)} saturated column{are} not ranked (every model past persistence or VRMSE 1 by "
            f"mid-window; skill horizons instead): {', '.join(saturated)}."
        )
    floors = [f"{_name(agg, d)} {_LABEL[p]}" for d, p in ranked if _under_linear_ar(cols[(d, p)])]
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
        text += f" Failed seeds (✗, left out of their model's mean and interval): {'; '.join(failed)}."
    return text


def _named(word: str, names: list[str], notes: dict, st: dict | None = None) -> str:
    """``"<word> k"``, then the ``k`` datasets in brackets, each with "caveat" when it has a trend note and "not
    measured" when its resolution content was not measured (``st``: :func:`~dandelion.benchmarks.leaderboard.
    qualify.statuses`)."""
    if not names:
        return f"{word} 0"
    st = st or {}

    def flags(n):
        out = [
            f
            for f, on in (("caveat", notes.get(n)), ("not measured", (st.get(n) or {}).get("status") == NOT_MEASURED))
            if on
        ]
        return f" ({', '.join(out)})" if out else ""

    return f"{word} {len(names)} (" + ", ".join(n + flags(n) for n in names) + ")"


def _trend_sentence(agg: dict, notes: dict, content: dict | None = None) -> str:
    """The trend's counts per warp model and lead summary over the datasets that qualify or were not measured
    (``content``: the measured resolution content, :mod:`~dandelion.benchmarks.leaderboard.qualify`; None: every
    dataset); a gain or a loss names its datasets (marked "caveat" where ``notes``, the trend notes, say the count
    does not mean a resolution effect, "not measured" where no content was measured), the holds are only counted.
    Then how many datasets qualify, and which."""
    fams = families(agg)
    if not fams:
        return ""
    st = statuses(agg, fams, content)
    judged = {n: keys for n, keys in fams.items() if counted(st, n)}
    counts = []
    for m in WARP_MODELS:
        for part, label in TREND_PARTS:
            words = {n: v["word"] for n, keys in judged.items() if (v := verdict(agg, keys, m, part)) is not None}
            if not words:
                continue
            by = {w: [n for n, x in words.items() if x == w] for w in ("grows", "holds", "shrinks", "no spread")}
            by["saturated"] = [n for n, x in words.items() if x == "saturated"]
            counts.append(
                f"{m} {label}: {_named('gains on SFNO', by['grows'], notes, st)}, holds {len(by['holds'])}, "
                + _named("loses ground", by["shrinks"], notes, st)
                + (f", no spread {len(by['no spread'])}" if by["no spread"] else "")
                + (f", saturated (not judged) {len(by['saturated'])}" if by["saturated"] else "")
            )
    over = f"the {len(judged)} datasets trained at two grids" + (" that qualify or were not measured" if st else "")
    text = summary_sentence(st, fams) + " "
    if counts:
        text += (
            f"Resolution trend over {over} (a warp model's ratio to SFNO, judged against the t interval of its "
            "change; each gain or loss names its dataset): " + "; ".join(counts) + "."
        )
    else:
        text += "No dataset is left for the resolution trend's counts."
    caveats = [n for n in judged if notes.get(n)]
    if caveats:
        text += (
            " A dataset marked caveat has a note below its trend table that changes what its verdict means (a "
            "finer grid that adds little resolved content, two grids in different regimes, a chosen rate at the "
            f"edge of its bracket): {', '.join(caveats)}."
        )
    return text


def verdict_paragraph(
    agg: dict,
    datasets: list[str],
    models: list[str],
    cols: dict,
    notes: dict | None = None,
    content=None,
    budget: str | None = None,
):
    """The lines of the verdict (a heading and one paragraph per grid, then the trend and the budget axis), finest
    grid first. ``content``: the measured resolution content (:func:`~dandelion.benchmarks.leaderboard.qualify.
    load_content`; None: not measured), which decides the datasets the trend counts; ``budget``: the budget axis's
    sentence (:func:`~dandelion.benchmarks.leaderboard.budget_axis.verdict_sentence`; None: the scale has none)."""
    grids: dict[str, list[str]] = {}
    for d in datasets:
        grids.setdefault(grid_of(agg, d), []).append(d)
    order = sorted(grids, key=lambda g: -int(g.split("x")[0]))
    L = [VERDICT, ""]
    for g in order:
        L += [_grid_sentence(agg, g, grids[g], models, cols), ""]
    trend = _trend_sentence(agg, notes or {}, content)
    if trend:
        L += [trend, ""]
    if budget:
        L += [budget, ""]
    L += [
        "Bold ties and trend verdicts are judged with 95 % Student-t intervals over seeds (t_0.975,n-1: "
        f"{t_critical(1):#.3g} with two seeds, {t_critical(2):#.3g} with three), so no two-seed comparison is called "
        "a gain or a loss unless that interval separates it; the columns' statistics, floors and failed seeds are "
        "in `benchmarks/leaderboard/stats.py`.",
        "",
    ]
    return L
