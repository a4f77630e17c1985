"""The budget axis of the leaderboard (issue 71, item 3), its judgement: the same dataset keys trained at the scale's
step budget and at a multiple of it, and whether the ranking changes between them.

A scale names the scales that train its datasets at other budgets in ``budget_axis`` (``configs/scale/cpu.yaml``:
``[cpu_4x]``, four times the steps with the same warm-up fraction and fine-tune share, the learning rate swept again
at 32x64 and taken from there at 64x128; ``configs/scale/cpu_4x.yaml``).
:mod:`~dandelion.benchmarks.leaderboard.render` gathers each budget's current cells (those made under its scale's
protocol and with the network its preset builds now), its stale cells, references, data equivalences and expected
cells; :func:`judge_key` says, per dataset key, what each budget holds:

* per model and budget, the headline's own columns (:func:`~dandelion.benchmarks.leaderboard.headline.columns`:
  the mean VRMSE over the seeds that did not fail with its 95 % Student-t interval, the failed seeds counted, the
  persistence and linear-AR floors, a saturated 1:N column or an incomplete key not ranked), the mean training
  CPU-seconds of one run (:func:`~dandelion.benchmarks.grid.records.cell_cpu_seconds`: the selected run, without the
  learning-rate sweep), the largest ``valid_over_train`` over its cells
  (:func:`~dandelion.benchmarks.grid.records.cell_valid_over_train`; over
  :data:`~dandelion.benchmarks.leaderboard.compute.GAP_FLAG` the model memorises its training trajectories, and the
  key's sentence says so: the issue asks the question on data that generalises) and its kept and needed cells;
* what keeps the key from being judged (its sentence and figure left out, the key listed as pending): a cell missing
  at a budget (every seed any budget's scale asks for is needed at every budget, :func:`seeds_needed`; a missing
  cell with a stale one in its place is a pending rerun), a model whose cells record different networks at the two
  budgets (``architecture``, :func:`~dandelion.benchmarks.grid.cells.model_architecture`), or cells scored on
  different data at the two budgets (:data:`~dandelion.benchmarks.leaderboard.markdown.DIGEST_KEYS`, unless recorded
  as equivalent, :func:`~dandelion.benchmarks.grid.cells.equivalent`).

:func:`ranking_change` compares one column at two budgets, :func:`key_sentence` and :func:`verdict_sentence` say it in
words. The section of ``leaderboard.md`` and the figures are :mod:`~dandelion.benchmarks.leaderboard.budget_section`.
"""

from __future__ import annotations

import numpy as np

from dandelion.benchmarks.grid.cells import equivalent
from dandelion.benchmarks.grid.records import cell_cpu_seconds, cell_valid_over_train
from dandelion.benchmarks.leaderboard.compute import GAP_FLAG
from dandelion.benchmarks.leaderboard.headline import PARTS, columns
from dandelion.benchmarks.leaderboard.markdown import DIGEST_KEYS, aggregate
from dandelion.benchmarks.leaderboard.stats import differ

__all__ = [
    "STALE",
    "NOT_ASKED",
    "NETWORK_DIFFERS",
    "DATA_DIFFERS",
    "seeds_needed",
    "judge_key",
    "is_judged",
    "gap_flags",
    "ranking_change",
    "key_sentence",
    "verdict_sentence",
]

#: Why a missing cell is pending, beyond "not run yet" (the words of the pending labels).
STALE = "rerun pending (stale: the cell there was made under another protocol or network, and is left out)"
NOT_ASKED = "its scale does not train these seeds for this key (another budget does): add them to its seeds"
#: Why a key with every cell is still not judged.
NETWORK_DIFFERS = "network differs between budgets"
DATA_DIFFERS = "data differ between budgets"


def _seeds_word(seeds) -> str:
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def seeds_needed(key: str, budgets: list[dict], models: list[str]) -> dict[str, list[int]]:
    """Model -> the seeds ``key`` must hold at every budget: every seed that any budget's scale asks for (the union
    of the budgets' ``expected[key][model]`` lists; at least the multiple's scale's seeds, three for ``cpu_4x``), so
    that both budgets are compared on the same seeds and the same number of them."""
    out: dict[str, set[int]] = {m: set() for m in models}
    for b in budgets:
        want = (b.get("expected") or {}).get(key) or {}
        for m in models:
            out[m].update(int(k) for k in want.get(m) or [])
    return {m: sorted(s) for m, s in out.items()}


def _missing(key: str, b: dict, cells: list[dict], need: dict, models: list[str]) -> tuple[list[tuple], int]:
    """The pending ``(label, reason)`` of budget ``b`` for ``key`` (one per reason and set of missing seeds, naming its
    models; reason ``""``: not run yet) and the number of missing cells."""
    stale = {(c["model"], int(c["seed"])) for c in b.get("stale_cells") or [] if c["dataset_key"] == key}
    asked = (b.get("expected") or {}).get(key) if b.get("expected") is not None else None
    have = {m: {int(c["seed"]) for c in cells if c["model"] == m} for m in models}
    gaps: dict[tuple, list[str]] = {}  # (missing seeds, reason) -> the models missing them
    n = 0
    for m in models:
        why: dict[str, list[int]] = {}
        for k in need[m]:
            if k in have[m]:
                continue
            if (m, k) in stale:
                why.setdefault(STALE, []).append(k)
            elif asked is not None and k not in [int(s) for s in (asked or {}).get(m) or []]:
                why.setdefault(NOT_ASKED, []).append(k)
            else:
                why.setdefault("", []).append(k)
            n += 1
        for reason, seeds in why.items():
            gaps.setdefault((tuple(seeds), reason), []).append(m)
    labels = [
        (f"{key} at {b['label']} (scale {b['scale']}): {', '.join(ms)} ({_seeds_word(seeds)})", reason)
        for (seeds, reason), ms in gaps.items()
    ]
    return labels, n


def _networks(key: str, per_budget: dict, models: list[str]) -> list[tuple]:
    """``[(key, NETWORK_DIFFERS and why)]`` when a model's cells of ``key`` record more than one ``architecture``
    across the budgets (``per_budget``: label -> cells), else ``[]``."""
    differ_ = []
    for m in models:
        archs = {c.get("architecture") for cells in per_budget.values() for c in cells if c["model"] == m}
        if len(archs) > 1:
            differ_.append(m)
    if not differ_:
        return []
    return [
        (
            key,
            f"{NETWORK_DIFFERS} ({', '.join(differ_)}: the cells record another `architecture` at one budget; rerun "
            "the cells of the budget whose scale builds another network)",
        )
    ]


def _data(key: str, budgets: list[dict], per_budget: dict) -> list[tuple]:
    """``(key, DATA_DIFFERS and why)`` per digest definition (:data:`~dandelion.benchmarks.leaderboard.markdown.
    DIGEST_KEYS`) under which the budgets' cells of ``key`` name different data versions that no recorded equivalence
    (the budgets' ``equivalences[key]``, :func:`~dandelion.benchmarks.grid.cells.data_equivalences`) links."""
    eq = [e for b in budgets for e in (b.get("equivalences") or {}).get(key) or []]
    out = []
    for dk in DIGEST_KEYS:
        seen = {lab: sorted({c[dk] for c in cells if c.get(dk)}) for lab, cells in per_budget.items()}
        seen = {lab: v for lab, v in seen.items() if v}
        versions = sorted({x for v in seen.values() for x in v})
        if len({tuple(v) for v in seen.values()}) < 2 or equivalent(versions, [e for e in eq if e["definition"] == dk]):
            continue
        out.append(
            (
                key,
                f"{DATA_DIFFERS} (`{dk}` "
                + "; ".join(f"at {lab}: {', '.join(v)}" for lab, v in seen.items())
                + "; regenerate the dataset and rerun the cells of the budget scored on other data, or record an "
                "equivalence with `benchmarks/grid/verify_references.py --equivalent-within=TOL`)",
            )
        )
    return out


def _mean(values) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def judge_key(key: str, budgets: list[dict], models: list[str]) -> dict:
    """What dataset ``key`` holds at each budget: ``{"key", "dataset", "grid", "pending": [(label, reason), ...],
    "n_pending" (cells), "blocked": [(key, reason), ...], "cols": {budget label: {part: column}}, "cost": {label:
    {model: mean CPU-s per run or None}}, "gap": {label: {model: largest valid_over_train or None}}, "kept": {label:
    {model: (kept, needed)}}, "needed": {model: seeds}}``.

    ``budgets``: dicts ``label`` (e.g. ``"1x"``), ``scale`` (its name), ``cells`` (current cell records),
    ``expected`` (dataset key -> {model: seeds} its scale trains; None: no scale, every seed counts as asked), and
    optionally ``stale_cells`` (records left out as stale), ``references`` (dataset key -> reference name -> record)
    and ``equivalences`` (dataset key -> recorded data equivalences). ``cols`` holds a budget's columns
    (:func:`~dandelion.benchmarks.leaderboard.headline.columns` over ``models`` alone, complete only with every seed of
    :func:`seeds_needed`) when it has cells of the key; ``pending`` names every missing cell, ``"<key> at <label>
    (scale <scale>): <models> (seeds ...)"``, with the reason :data:`STALE` or :data:`NOT_ASKED` (``""``: not run
    yet); ``blocked`` the reasons a key with every cell is not judged (:data:`NETWORK_DIFFERS`, :data:`DATA_DIFFERS`);
    ``kept``: cells that failed in neither lead summary, and the seeds needed."""
    out = {"key": key, "dataset": None, "grid": None, "pending": [], "n_pending": 0, "blocked": []}
    out.update({"cols": {}, "cost": {}, "gap": {}, "kept": {}})
    need = out["needed"] = seeds_needed(key, budgets, models)
    per_budget = {}
    for b in budgets:
        cells = per_budget[b["label"]] = [c for c in b["cells"] if c["dataset_key"] == key and c["model"] in models]
        labels, n = _missing(key, b, cells, need, models)
        out["pending"] += labels
        out["n_pending"] += n
        if not cells:
            continue
        agg = aggregate(cells)
        for e in agg[key].values():
            e["references"] = (b.get("references") or {}).get(key) or {}
        e0 = next(iter(agg[key].values()))
        out["grid"], out["dataset"] = f"{e0['nlat']}x{e0['nlon']}", e0["dataset"]
        here = [m for m in models if m in agg[key]]
        cols = columns(agg, [key], here, expected={key: {m: need[m] for m in models if need[m]}})
        lab = b["label"]
        out["cols"][lab] = {p: cols[(key, p)] for p in PARTS}
        stats = [out["cols"][lab][p]["stats"] for p in PARTS]
        out["cost"][lab], out["gap"][lab], out["kept"][lab] = {}, {}, {}
        for m in here:
            cs = agg[key][m]["cells"]
            gaps = [g for g in map(cell_valid_over_train, cs) if g is not None]
            failed = {k for s in stats for k in (s.get(m) or {}).get("failed_seeds", [])}  # in either lead summary
            out["cost"][lab][m] = _mean(map(cell_cpu_seconds, cs))
            out["gap"][lab][m] = max(gaps) if gaps else None
            out["kept"][lab][m] = (len(cs) - len(failed), max(len(need[m]), len(cs)))
    out["blocked"] = _networks(key, per_budget, models) + _data(key, budgets, per_budget)
    return out


def is_judged(judged: dict, labels: list[str]) -> bool:
    """Whether a :func:`judge_key` result is judged: nothing pending or blocked, and cells at every budget."""
    return not judged["pending"] and not judged["blocked"] and all(lab in judged["cols"] for lab in labels)


def gap_flags(judged: dict) -> list[str]:
    """``"<model> at <label> (<valid/train>)"`` for every model and budget of a :func:`judge_key` result whose largest
    ``valid_over_train`` is over :data:`~dandelion.benchmarks.leaderboard.compute.GAP_FLAG`."""
    return [
        f"{m} at {lab} ({v:.2f})"
        for lab, per_model in judged["gap"].items()
        for m, v in per_model.items()
        if v is not None and v > GAP_FLAG
    ]


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
    and over 1:N, and why (:func:`ranking_change`); then, where a model's ``valid_over_train`` is over
    :data:`~dandelion.benchmarks.leaderboard.compute.GAP_FLAG` at a budget (:func:`gap_flags`), that caveat."""
    parts = []
    for p in PARTS:
        r = ranking_change(judged["cols"][labels[0]][p], judged["cols"][labels[1]][p], labels)
        verb = "is not ranked" if r["word"] == "not ranked" else r["word"]
        parts.append(f"{verb} {'at the next step' if p == 'next_step' else 'over 1:20'} ({r['text']})")
    name = f"{judged['dataset']} {judged['grid']}" if judged["dataset"] else judged["key"]
    text = f"{name}: the ranking " + " and ".join(parts) + "."
    flags = gap_flags(judged)
    if flags:
        text += (
            f" Caveat: valid/train over {GAP_FLAG:g} for {', '.join(flags)}: that model memorises its training "
            "trajectories there, so this key does not ask the question on data that generalises."
        )
    return text


def verdict_sentence(results: list[dict], labels: list[str], steps: dict, models: list[str]) -> str:
    """The budget axis in one sentence for the verdict paragraph: which model is best or tied in how many ranked
    columns at each budget, in which columns the ranking changes between the first two budgets, which judged keys
    have a valid/train over the flag; or that it is pending. ``results``: :func:`judge_key` per key; ``steps``: budget
    label -> optimiser steps per run."""
    head = (
        "Budget axis ("
        + ", ".join(f"{lab}: {steps[lab]:,} steps" for lab in labels)
        + f"; {', '.join(models)} on {len(results)} dataset key{'s' if len(results) != 1 else ''})"
    )
    done = [r for r in results if is_judged(r, labels)]
    n_pending = sum(r["n_pending"] for r in results)
    blocked = [r["key"] for r in results if r["blocked"]]
    why = f"{n_pending} cells pending" + (
        f"; {len(blocked)} key{'s' if len(blocked) != 1 else ''} with a network or data that differs between "
        f"budgets: {', '.join(blocked)}"
        if blocked
        else ""
    )
    if not done:
        return f"{head}: pending, no key has every cell at every budget yet ({why})."
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
    flagged = [f"{r['dataset']} {r['grid']} ({', '.join(gap_flags(r))})" for r in done if gap_flags(r)]
    if flagged:
        text += f"; valid/train over {GAP_FLAG:g} (not data that generalises) in {'; '.join(flagged)}"
    left = len(results) - len(done)
    return text + (f"; {left} key{'s' if left != 1 else ''} pending ({why})." if left else ".")
