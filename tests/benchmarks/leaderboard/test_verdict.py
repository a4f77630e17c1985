"""The first screen: the verdict paragraph and the headline marks it counts (linear-AR floor ‡, failed seeds ✗,
saturated columns' skill horizons), and the per-seed table, on synthetic cells whose answers are known."""

import pytest
from leaderboard_cells import leaderboard_cell

from dandelion.benchmarks.leaderboard import headline as H
from dandelion.benchmarks.leaderboard import markdown as MD
from dandelion.benchmarks.leaderboard.seeds import per_seed_table
from dandelion.benchmarks.leaderboard.stats import t_critical
from dandelion.benchmarks.leaderboard.verdict import verdict_paragraph

FAST = [0.6 + 0.1 * k for k in range(1, 21)]  # past VRMSE 1 at lead 5
SLOW = [0.01 * k for k in range(1, 21)]  # never past 1 nor persistence (1.3)


_cell = leaderboard_cell


def _refs(lin_next):
    return {
        "persistence": {
            "next_step": {"vrmse": {"mean": 0.5}},
            "rollout_mean": {"vrmse": {"mean": 1.3}},
            "curves": {"vrmse": {"mean": [1.3] * 20}},
        },
        "linear_ar": {"next_step": {"vrmse": {"mean": lin_next}}, "rollout_mean": {"vrmse": {"mean": 2.0}}},
    }


@pytest.fixture
def board():
    """``sat_64x128``: a (0.100, 0.101) ahead of b (0.200, 0.201) beyond t_0.975,1 = 12.7, both behind linear AR
    (0.05); every 1:20 curve past 1 at lead 5 (saturated). ``ok_32x64``: three seeds, b's seed 1 trained apart
    (0.60 against 0.20, 0.21), so the next-step column ranks medians and a (0.30) is behind b (0.21)."""
    cells = [_cell("sat_64x128", "a", k, 0.100 + 0.001 * k, 1.5, FAST) for k in range(2)]
    cells += [_cell("sat_64x128", "b", k, 0.200 + 0.001 * k, 1.6, FAST) for k in range(2)]
    cells += [_cell("ok_32x64", "a", k, 0.30 + 0.001 * k, 0.10 + 0.001 * k, SLOW) for k in range(3)]
    cells += [_cell("ok_32x64", "b", k, v, 0.30 + 0.001 * k, SLOW) for k, v in enumerate((0.20, 0.60, 0.21))]
    agg = MD.aggregate(cells)
    for d, lin in (("sat_64x128", 0.05), ("ok_32x64", 0.9)):
        for e in agg[d].values():
            e["references"] = _refs(lin)
    datasets = ["ok_32x64", "sat_64x128"]
    return agg, datasets, ["a", "b"], H.columns(agg, datasets, ["a", "b"])


def test_the_headline_marks_floors_failures_and_saturated_columns(board):
    agg, datasets, models, _ = board
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in MD.headline_table(agg, datasets, models)[2:]
    }
    # saturated 1:20: skill horizons (past persistence 1.3 at lead 8, past 1 at lead 5), nothing bold
    assert rows["sat_64x128"][:2] == ["**0.1005‡** / h 8,5", "0.2005‡ / h 8,5"]
    # a failed seed: b's kept seeds' mean (0.20, 0.21: 0.205) is shown and ranks first; a is separated from it
    assert rows["ok_32x64"][:2] == ["0.3010 / **0.1010**", "**0.2050 ✗1** / 0.3010"]


def test_the_verdict_counts_from_the_same_columns(board):
    agg, datasets, models, cols = board
    text = "\n".join(verdict_paragraph(agg, datasets, models, cols))
    assert text.index("At 64x128") < text.index("At 32x64")  # finest grid first
    t1, t2 = f"{t_critical(1):#.3g}", f"{t_critical(2):#.3g}"  # scipy's 12.7 and 4.30, not typed in
    assert (
        f"At 64x128 (1 dataset, 2 seeds per model, t_0.975,1 = {t1}), of 1 ranked column, a is best or tied in 1"
        in text
    )
    assert "1 saturated column is not ranked" in text and ": sat 1:20." in text
    assert "the best model does not beat linear AR (‡): sat next" in text
    assert "a is best or tied in 1 (alone: ok 1:20); b is best or tied in 1 (alone: ok next)" in text
    assert "Failed seeds (✗, left out of their model's mean and interval): ok_32x64 b next (seed 1)" in text
    assert f"{t1} with two seeds, {t2} with three), so no two-seed comparison is called a gain or a loss" in text


def test_a_grid_without_a_ranked_column_says_so(board):
    """A model the scale asks for without cells (c) leaves every dataset incomplete: nothing is ranked, and no claim
    about persistence is made."""
    agg, datasets, models, _ = board
    expected = {d: {m: [0, 1] for m in ("a", "b", "c")} for d in datasets}
    text = "\n".join(verdict_paragraph(agg, datasets, models, H.columns(agg, datasets, models, expected=expected)))
    assert "of 0 ranked columns, none is ranked yet." in text and "worse than persistence" not in text


def test_per_seed_table_lists_every_seed_and_marks_the_failed_one(board):
    agg, datasets, models, cols = board
    rows = {
        tuple(c.strip() for c in line.split("|")[1:3]): line for line in per_seed_table(agg, datasets, models, cols)
    }
    assert "s0: 0.2000, s1: 0.6000✗, s2: 0.2100" in rows[("ok_32x64", "b")]
    assert "s0: 0.1000, s1: 0.1010" in rows[("sat_64x128", "a")]


def test_saturated_columns_get_their_own_horizon_table(board):
    agg, _, _, cols = board
    lines = H.horizon_table(agg, cols)
    assert lines[2] == "| dataset | a | b |"
    assert lines[4] == "| sat_64x128 | 8 / 5 (1.5000) | 8 / 5 (1.6000) |"


def _incomplete_board():
    """Both keys at 32x64. ``full_32x64``: a, b, c with three seeds each (b best). ``part_32x64``: a with three seeds,
    far ahead, and b with one seed; c never ran there (as transport_32x64 with Dandelion's three seeds and SFNO's
    one)."""
    cells = [
        _cell("full_32x64", m, k, v + 0.001 * k, v + 0.001 * k, SLOW)
        for m, v in (("a", 0.30), ("b", 0.20), ("c", 0.25))
        for k in range(3)
    ]
    cells += [_cell("part_32x64", "a", k, 0.10 + 0.001 * k, 0.10 + 0.001 * k, SLOW) for k in range(3)]
    cells += [_cell("part_32x64", "b", 0, 0.50, 0.50, SLOW)]
    agg = MD.aggregate(cells)
    for d in agg:
        for e in agg[d].values():
            e["references"] = _refs(0.01)
    return agg, ["full_32x64", "part_32x64"], ["a", "b", "c"]


@pytest.mark.parametrize(
    "expected, ranked",
    [
        (None, False),  # what the results hold at 32x64: a, b and c with seeds 0-2
        ({"part_32x64": {"a": [0, 1, 2], "b": [0, 1, 2], "c": [0, 1, 2]}}, False),  # the scale's lists
        ({"part_32x64": {"a": [0, 1, 2], "b": [0]}}, True),  # a scale that trains only these there
    ],
)
def test_a_key_missing_a_models_cells_is_neither_ranked_nor_bold(expected, ranked):
    agg, datasets, models = _incomplete_board()
    kw = {} if expected is None else {"expected": expected}
    cols = H.columns(agg, datasets, models, **kw)
    text = "\n".join(verdict_paragraph(agg, datasets, models, cols))
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:5]]
        for line in H.headline_table(agg, datasets, models, **kw)[2:]
    }
    assert rows["full_32x64"][1] == "**0.2010‡** / **0.2010**"  # the complete key is ranked either way
    if ranked:
        assert "a is best or tied in 2 (alone: part next, part 1:20)" in text and rows["part_32x64"][0].startswith("**")
        return
    assert "of 2 ranked columns" in text and "part next" not in text and "part 1:20" not in text
    assert "1 dataset is not ranked, incomplete (models of the scale with a cell for every seed): part " in text
    assert "(incomplete: 1 of 3 models)" in text
    assert rows["part_32x64 (incomplete: 1 of 3 models)"] == ["0.1010‡ / 0.1010", "0.5000‡ / 0.5000", "–"]
