"""Which datasets the resolution trend may judge: those where the finer grid adds resolved content that matters
against the models' own errors (Issue #71, item 1).

The rule. A forecast limited to the coarse grid's band (degrees below ``band``, 16 for 32x64) cannot hold the part
of the one-step increment above it; scored against the fine truth, its squared error is its in-band error squared
plus that part's power (spherical harmonics are orthogonal under the area weights). In VRMSE units the part is
``forced_f = sqrt(increment_f) * P_f`` per scored field ``f``: ``increment_f`` the fraction of the increments'
variance above the band (:func:`~dandelion.benchmarks.leaderboard.resolution.content`, measured on the fine data)
and ``P_f`` persistence's next-step VRMSE at the fine grid (its error is the increment itself; the mean over the
field's levels). The dataset's forced error ``F`` is the mean of ``forced_f`` over the scored variables (each
field weighted by its number of levels and components, as the headline's mean over fields is; forcing fields,
``dataset.yaml`` ``forcing_fields``, are not scored and do not count). A dataset *qualifies* when
``F / B >= QUALIFY_RATIO``, ``B`` the best model's next-step VRMSE at the coarse grid (the lowest mean over seeds,
as in the headline; the mean over fields).

Why a quarter. At ``F = B / 4`` a band-limited forecast as good as the best coarse model scores at least
``sqrt(B^2 + F^2) = 1.031 B`` on the fine truth: 3.1 %, half as much again as the median seed-to-seed spread of the
v2 next-step cells (relative standard deviation 2.1 % over the 69 model/key pairs with two or more seeds, quartiles
0.8 % and 3.5 %). Below it, what the finer grid adds moves a score by less than re-running a seed does, so a
change of a ratio to SFNO between the grids says nothing about resolution; above it, resolving the added content
is worth more than a seed's noise. A share of variance alone (say 5 % of the increments above the band) would not
say this: 2.7 % of Cahn-Hilliard's increments lie above degree 16, which is 0.56 of the best 32x64 model's error
because the models are good there, while the same share would be noise on a dataset that every model forecasts
poorly. Approximations: VRMSE is a mean of per-forecast ratios and the shares are ratios of sums over frames;
``B`` is normalised by the coarse truth's variance, ``P_f`` by the fine one's (equal within the states' share
above the band).
"""

from __future__ import annotations

import math
from pathlib import Path

from dandelion.benchmarks.leaderboard.resolution import read_json
from dandelion.benchmarks.leaderboard.stats import column_stats, summary_leads

__all__ = [
    "QUALIFY_RATIO",
    "CONTENT_FILE",
    "NO_TEST",
    "NOT_MEASURED",
    "forced_error",
    "qualifies",
    "qualification",
    "load_content",
    "statuses",
    "counted",
    "mark",
    "summary_sentence",
]

#: A dataset qualifies when its forced error is at least this fraction of the best coarse model's next-step VRMSE
#: (module docstring: at 1/4 it moves a score by 3.1 %, more than the median seed spread of 2.1 %).
QUALIFY_RATIO = 0.25

#: The measured content beside the results (written by ``resolution.py --json``).
CONTENT_FILE = "resolution_content.json"

NO_TEST = "no resolution test"
NOT_MEASURED = "resolution content not measured"


def load_content(results_dir) -> dict | None:
    """Dataset key -> content (:func:`~dandelion.benchmarks.leaderboard.resolution.read_json`) from
    :data:`CONTENT_FILE` in ``results_dir``; None when the file is absent."""
    path = Path(results_dir) / CONTENT_FILE
    return read_json(path) if path.exists() else None


def forced_error(fields: dict, persistence: dict) -> float:
    """``F``: the mean over scored variables of ``sqrt(increment share) * persistence's VRMSE`` (module docstring).
    ``fields``: content's fields (``increment``, ``variables``, ``forcing``); ``persistence``: variable -> next-step
    VRMSE at the fine grid. NaN when no scored variable has both.

    Raises:
        ValueError: a share is outside [0, 1]."""
    num, n = 0.0, 0
    for name, f in fields.items():
        share = f["increment"]
        if f.get("forcing") or not math.isfinite(share):
            continue
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{name}: increment share {share} is not a fraction; remeasure with resolution.py")
        pv = [persistence[v] for v in f.get("variables") or [name] if v in persistence]
        num += len(pv) * math.sqrt(share) * (sum(pv) / len(pv) if pv else 0.0)
        n += len(pv)
    return num / n if n else math.nan


def qualifies(forced: float, best: float) -> bool:
    """``forced / best >= QUALIFY_RATIO`` (False with either not finite or ``best <= 0``)."""
    return math.isfinite(forced) and math.isfinite(best) and best > 0 and forced >= QUALIFY_RATIO * best


def _best_next(agg: dict, key: str) -> float:
    """The lowest next-step mean VRMSE over the models of ``key`` (the headline's column statistics)."""
    entries = {m: e for m, e in agg[key].items() if "vrmse" in e["next_step"]}
    if not entries:
        return math.nan
    stats = column_stats(entries, "next_step", n_leads=summary_leads(entries.values()))
    means = [s["mean"] for s in stats.values() if math.isfinite(s["mean"])]
    return min(means) if means else math.nan


def qualification(agg: dict, keys: list[str], content: dict | None) -> dict:
    """The status of one dataset of the trend (``keys`` coarsest to finest): ``{"status", "forced", "best",
    "ratio", "share"}``. ``status``: ``qualifies``, :data:`NO_TEST` (measured, below :data:`QUALIFY_RATIO`) or
    :data:`NOT_MEASURED` (``content`` lacks the finest key, or persistence's per-field scores are missing);
    ``share``: the largest increment share above the band over the scored fields."""
    fine = keys[-1]
    rec = (content or {}).get(fine)
    out = {"status": NOT_MEASURED, "forced": math.nan, "best": math.nan, "ratio": math.nan, "share": math.nan}
    if rec is None:
        return out
    e0 = next(iter(agg[fine].values()))
    pers = ((((e0.get("references") or {}).get("persistence") or {}).get("next_step") or {}).get("vrmse")) or {}
    scored = [f["increment"] for f in rec["fields"].values() if not f.get("forcing") and math.isfinite(f["increment"])]
    out["share"] = max(scored) if scored else math.nan
    forced, best = forced_error(rec["fields"], pers), _best_next(agg, keys[0])
    if not (math.isfinite(forced) and math.isfinite(best) and best > 0):
        return out
    out.update(forced=forced, best=best, ratio=forced / best)
    out["status"] = "qualifies" if qualifies(forced, best) else NO_TEST
    return out


def statuses(agg: dict, fams: dict, content: dict | None) -> dict:
    """Dataset name -> :func:`qualification` for every family of the trend (``fams``: name -> keys); {} when no
    content was measured (``content`` None: every dataset is counted, as before the rule)."""
    return {} if content is None else {name: qualification(agg, keys, content) for name, keys in fams.items()}


def counted(st: dict, name: str) -> bool:
    """Whether dataset ``name`` enters the trend's counts: all but those measured and below the threshold."""
    return (st.get(name) or {}).get("status") != NO_TEST


def mark(st: dict, name: str) -> str:
    """The mark of a dataset under its trend table ('' when nothing was measured)."""
    q = st.get(name)
    if q is None:
        return ""
    if q["status"] == NOT_MEASURED:
        return f"*{NOT_MEASURED}*: counted below as before the rule, flagged."
    ok = q["status"] == "qualifies"
    return (
        f"*{'resolution test' if ok else NO_TEST}*: the coarse band limit forces an error of {q['forced']:.3g} "
        f"(VRMSE), {q['ratio']:.2f} of the best coarse model's {q['best']:.3g}, "
        f"{'at least' if ok else 'below'} {QUALIFY_RATIO:g}; largest increment share above the band "
        f"{q['share']:.3g}. {'Counted' if ok else 'Not counted'}."
    )


def summary_sentence(st: dict, fams: dict) -> str:
    """How many datasets qualify and which, which have no resolution test and which were not measured."""
    if not st:
        return (
            f"No resolution content was measured ({CONTENT_FILE} absent beside the results): every dataset trained "
            "at two grids is counted, whether or not its finer grid adds resolved content."
        )
    by = {s: [n for n in fams if st[n]["status"] == s] for s in ("qualifies", NO_TEST, NOT_MEASURED)}

    def named(names):
        return f"{len(names)}" + (f" ({', '.join(names)})" if names else "")

    text = (
        f"{named(by['qualifies'])} of the {len(fams)} datasets trained at two grids qualify for the resolution "
        f"test (the error the coarse band limit forces is at least {QUALIFY_RATIO:g} of the best coarse model's "
        f"next-step VRMSE, `benchmarks/leaderboard/qualify.py`); {NO_TEST}, not counted: {named(by[NO_TEST])}"
    )
    if by[NOT_MEASURED]:
        text += f"; {NOT_MEASURED}, counted and flagged: {named(by[NOT_MEASURED])}"
    return text + "."
