"""The budget axis's judgement (benchmarks/leaderboard/budget_axis.py): whether the ranking of a column changes
between two budgets, and what keeps a key from being judged (missing, stale or unasked seeds, a network or data that
differs between the budgets), on synthetic cells whose answers are known. The section and figures:
test_budget_section.py."""

import pytest
from leaderboard_cells import budget, budget_cells

from dandelion.benchmarks.leaderboard import budget_axis as BA
from dandelion.benchmarks.leaderboard import markdown as MD
from dandelion.benchmarks.leaderboard.compute import GAP_FLAG
from dandelion.benchmarks.leaderboard.headline import columns

KEY = "fam_32x64"
AB = {"a": (0.10, 0.50), "b": (0.20, 0.60)}


def _judge(one: list[dict], four: list[dict], models="ab", one_fields=None, four_fields=None) -> dict:
    budgets = [
        budget("1x", 1200, one, models, (KEY,), **(one_fields or {})),
        budget("4x", 4800, four, models, (KEY,), **(four_fields or {})),
    ]
    return BA.judge_key(KEY, budgets, list(models))


def _column(cells, models="ab", part="next_step", refs=None):
    agg = MD.aggregate(cells)
    for e in agg[KEY].values():
        e["references"] = refs or {}
    return columns(agg, [KEY], list(models))[(KEY, part)]


def test_a_swap_within_the_seed_spread_is_a_tie_not_a_change():
    """b's mean passes a's at 4x, but the seeds spread (0.05 apart) leave the two tied there: the order of tied
    models is no change, and a is best or tied at both budgets."""
    a = _column(budget_cells(AB, 1.0, KEY))
    b = _column(budget_cells({"a": (0.151, 0.5), "b": (0.150, 0.6)}, 1.0, KEY, spread=0.05))
    assert b["best"] == {"a", "b"}  # the headline's tie rule at 4x
    assert BA.ranking_change(a, b)["word"] == "holds"
    # the same means without the spread: b separated ahead of a, a swap of non-tied models and a new best
    c = _column(budget_cells({"a": (0.151, 0.5), "b": (0.150, 0.6)}, 1.0, KEY, spread=0.0001))
    assert c["best"] == {"b"} and BA.ranking_change(a, c)["word"] == "changes"


def test_a_column_where_every_model_is_worse_than_persistence_is_not_ranked():
    """The persistence floor: at 4x both models are worse than persistence (0.05), so no model is best there and
    the ranking is not judged, whatever the order of the means."""
    floor = {"persistence": {"next_step": {"vrmse": {"mean": 0.05}}, "rollout_mean": {"vrmse": {"mean": 9.0}}}}
    one = _column(budget_cells(AB, 1.0, KEY))
    four = _column(budget_cells({"a": (0.20, 0.5), "b": (0.10, 0.6)}, 1.0, KEY), refs=floor)
    assert four["best"] == set() and four["stats"]["b"]["mean"] < four["stats"]["a"]["mean"]
    r = BA.ranking_change(one, four)
    assert r["word"] == "not ranked" and "no model is best at 4x" in r["text"]


def test_a_saturated_column_is_not_ranked():
    """Every model past VRMSE 1 by lead 2 of 20 at 1x: its 1:20 column shows skill horizons, and the ranking over
    1:20 is not judged (the next step still is)."""
    fast = [0.5] + [2.0] * 19
    one = budget_cells(AB, 1.0, KEY, curve=fast)
    four = budget_cells({"a": (0.20, 0.5), "b": (0.10, 0.6)}, 1.0, KEY)
    sat = _column(one, part="rollout_mean")
    assert sat["horizons"] == {"a": (None, 2), "b": (None, 2)}
    r = BA.ranking_change(sat, _column(four, part="rollout_mean"))
    assert r["word"] == "not ranked" and r["text"].startswith("saturated at 1x")
    judged = _judge(one, four)
    assert BA.is_judged(judged, ["1x", "4x"])
    sentence = BA.key_sentence(judged, ("1x", "4x"))
    assert "changes at the next step" in sentence and "is not ranked over 1:20 (saturated at 1x" in sentence


@pytest.mark.parametrize("fewer", ["1x", "4x"])
def test_every_seed_any_budget_asks_for_is_needed_at_both(fewer):
    """A budget whose scale asks for two seeds where the other asks for three is pending the third: the key is never
    judged on two seeds at one budget and three at the other."""
    two = budget_cells(AB, 1.0, KEY, seeds=(0, 1))
    three = budget_cells({"a": (0.20, 0.5), "b": (0.10, 0.6)}, 4.0, KEY)
    fields = {"seeds": (0, 1)}
    judged = (
        _judge(two, three, one_fields=fields) if fewer == "1x" else _judge(three, two, four_fields=fields)
    )  # the budget with two seeds asks for two only
    assert judged["needed"] == {"a": [0, 1, 2], "b": [0, 1, 2]}
    assert judged["pending"] == [(f"{KEY} at {fewer} (scale scale_{fewer}): a, b (seed 2)", BA.NOT_ASKED)]
    assert judged["n_pending"] == 2 and not BA.is_judged(judged, ["1x", "4x"])
    assert judged["cols"][fewer]["next_step"]["incomplete"] == (0, 2)  # nothing ranked on two seeds
    assert judged["kept"][fewer] == {"a": (2, 3), "b": (2, 3)}


def test_a_model_missing_only_at_1x_is_pending_there():
    """c is trained at 4x only (the 1x scale does not ask for it): the key waits for c's 1x cells."""
    one = budget_cells(AB, 1.0, KEY)
    four = budget_cells({**AB, "c": (0.3, 0.7)}, 4.0, KEY)
    fields = {"expected": {KEY: {"a": [0, 1, 2], "b": [0, 1, 2]}}}
    judged = _judge(one, four, models="abc", one_fields=fields)
    assert judged["pending"] == [(f"{KEY} at 1x (scale scale_1x): c (seeds 0, 1, 2)", BA.NOT_ASKED)]
    assert "c" not in judged["cols"]["1x"]["next_step"]["stats"] and "c" in judged["cols"]["4x"]["next_step"]["stats"]
    assert judged["cols"]["1x"]["next_step"]["incomplete"] == (2, 3)


def test_a_stale_cell_in_place_of_a_missing_one_is_a_pending_rerun():
    four = budget_cells(AB, 4.0, KEY)
    gone = next(c for c in four if c["model"] == "b" and c["seed"] == 1)
    judged = _judge(budget_cells(AB, 1.0, KEY), [c for c in four if c is not gone], four_fields={"stale_cells": [gone]})
    assert judged["pending"] == [(f"{KEY} at 4x (scale scale_4x): b (seed 1)", BA.STALE)]


@pytest.mark.parametrize("archs, judged", [(("n1", "n1"), True), (("n1", "n2"), False)])
def test_one_network_per_model_across_the_budgets(archs, judged):
    one, four = budget_cells(AB, 1.0, KEY), budget_cells(AB, 4.0, KEY)
    for arch, cells in zip(archs, (one, four)):
        for c in cells:
            c["architecture"] = arch if c["model"] == "b" else "n0"
    out = _judge(one, four)
    assert BA.is_judged(out, ["1x", "4x"]) is judged
    if not judged:
        assert out["pending"] == [] and len(out["blocked"]) == 1
        key, why = out["blocked"][0]
        assert key == KEY and why.startswith(f"{BA.NETWORK_DIFFERS} (b:")


@pytest.mark.parametrize("case", ["same", "differ", "differ, recorded as equivalent", "one side unrecorded"])
def test_the_same_data_at_both_budgets(case):
    one, four = budget_cells(AB, 1.0, KEY), budget_cells(AB, 4.0, KEY)
    digests = {"same": ("d1", "d1"), "one side unrecorded": ("d1", None)}.get(case, ("d1", "d2"))
    for digest, cells in zip(digests, (one, four)):
        for c in cells:
            c["data_files_sha256"] = digest
    eq = [{"definition": "data_files_sha256", "versions": ["d1", "d2"], "max_relative_difference": {"x": 0.0}}]
    fields = {"equivalences": {KEY: eq}} if "equivalent" in case else {}
    out = _judge(one, four, four_fields=fields)
    assert BA.is_judged(out, ["1x", "4x"]) is (case != "differ")
    if case == "differ":
        (key, why), *more = out["blocked"]
        assert not more and key == KEY
        assert why.startswith(f"{BA.DATA_DIFFERS} (`data_files_sha256` at 1x: d1; at 4x: d2")


def test_valid_over_train_is_the_largest_over_the_cells_and_flagged_in_the_sentence():
    one, four = budget_cells(AB, 1.0, KEY), budget_cells({"a": (0.20, 0.5), "b": (0.10, 0.6)}, 4.0, KEY)
    ratios = {("b", 0): 1.2, ("b", 1): GAP_FLAG + 0.2, ("b", 2): 1.1, ("a", 0): GAP_FLAG - 0.1}
    for c in four:
        c["valid_over_train"] = ratios.get((c["model"], c["seed"]), 1.0)
    judged = _judge(one, four)
    assert judged["gap"]["4x"] == {"a": GAP_FLAG - 0.1, "b": GAP_FLAG + 0.2}
    assert judged["gap"]["1x"] == {"a": None, "b": None}  # no curve, no recorded ratio
    assert BA.gap_flags(judged) == [f"b at 4x ({GAP_FLAG + 0.2:.2f})"]
    sentence = BA.key_sentence(judged, ("1x", "4x"))
    assert f"Caveat: valid/train over {GAP_FLAG:g} for b at 4x ({GAP_FLAG + 0.2:.2f})" in sentence
    verdict = BA.verdict_sentence([judged], ["1x", "4x"], {"1x": 1200, "4x": 4800}, ["a", "b"])
    assert f"valid/train over {GAP_FLAG:g} (not data that generalises) in fam 32x64 (b at 4x" in verdict
