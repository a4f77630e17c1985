"""The resolution trend (verdicts against the seed spread) and the equal-compute answer of the leaderboard, on
synthetic aggregates whose answers are known."""

import pytest
from trend_entries import trend_entry as _entry

from dandelion.benchmarks.leaderboard import compute as C
from dandelion.benchmarks.leaderboard import trend as T


def _agg(d_coarse, d_fine, std=0.001, n=3):
    return {
        "fam_32x64": {"dandelion": _entry(32, d_coarse, std, n), "sfno": _entry(32, 0.10, std, n)},
        "fam_64x128": {"dandelion": _entry(64, d_fine, std, n), "sfno": _entry(64, 0.10, std, n)},
    }


@pytest.mark.parametrize(
    "coarse, fine, word",
    [(0.12, 0.08, "grows"), (0.08, 0.12, "shrinks"), (0.100, 0.1005, "holds")],
)
def test_verdict_against_the_seed_spread(coarse, fine, word):
    agg = _agg(coarse, fine)
    keys = T.families(agg)["fam"]
    assert keys == ["fam_32x64", "fam_64x128"]
    v = T.verdict(agg, keys, "dandelion", "rollout_mean")
    assert v["word"] == word
    assert v["coarse"] == pytest.approx(coarse / 0.10) and v["fine"] == pytest.approx(fine / 0.10)


def test_a_large_spread_makes_a_change_hold_and_one_seed_has_no_spread():
    agg = _agg(0.12, 0.08, std=0.05)  # the change is within twice the standard error of the ratios
    assert T.verdict(agg, T.families(agg)["fam"], "dandelion", "next_step")["word"] == "holds"
    agg = _agg(0.12, 0.08, n=1)
    assert T.verdict(agg, T.families(agg)["fam"], "dandelion", "next_step")["word"] == "no spread"


def test_trend_section_counts_each_dataset_once_per_model_and_lead():
    agg = _agg(0.09, 0.06)  # ahead of SFNO at both grids (ratios 0.9 -> 0.6)
    md = "\n".join(T.trend_section(agg))
    assert "## Resolution trend" in md and "its lead over SFNO grows (ahead of SFNO at both grids)" in md
    assert "| dandelion | 1:20 | 1 | 0 | 0 | 0 |" in md and "| dandelion | next step | 1 | 0 | 0 | 0 |" in md
    assert T.trend_section({"fam_32x64": agg["fam_32x64"]}) == []  # one grid: no trend
    # behind SFNO at both grids (ratios 1.5 -> 1.2): the same count, said as a gap that narrows
    md = "\n".join(T.trend_section(_agg(0.15, 0.12)))
    assert "its gap to SFNO narrows (behind SFNO at both grids)" in md and "| dandelion | 1:20 | 1 | 0 | 0 | 0 |" in md


@pytest.mark.parametrize(
    "coarse, fine, words, count",
    [
        (0.08, 0.12, "its lead over SFNO turned into a gap", "| dandelion | 1:20 | 0 | 0 | 1 | 0 |"),
        (0.12, 0.08, "its gap to SFNO turned into a lead", "| dandelion | 1:20 | 1 | 0 | 0 | 0 |"),
    ],
)
def test_a_ratio_that_crosses_one_is_said_as_a_change_of_side(coarse, fine, words, count):
    md = "\n".join(T.trend_section(_agg(coarse, fine)))
    assert words in md and count in md
    assert "grows (" not in md and "widens" not in md and "shrinks (" not in md


def test_trend_section_with_one_seed_claims_no_direction():
    # a 64x128 cell with one seed so far (a grid in progress): the section renders and counts it as no spread
    md = "\n".join(T.trend_section(_agg(0.12, 0.08, n=1)))
    assert "no verdict yet: one seed" in md and "its lead over SFNO grows" not in md
    assert "| dandelion | 1:20 | 0 | 0 | 0 | 1 |" in md


def _cost_cell(seconds, vals, pre=8, n_out=2):
    """A cell whose run validated after each step of ``vals`` (steps 1.., the last two in the fine-tune)."""
    curve = [
        {"step": i + 1, "val_loss": v, "phase": "pretrain" if i + 1 <= pre else "finetune"} for i, v in enumerate(vals)
    ]
    t = {"epochs": pre, "max_batches_per_epoch": 1, "finetune": {"epochs": len(vals) - pre, "n_out": n_out}}
    return {"train_cpu_seconds": seconds, "run": {"curve": curve}, "trainer_resolved": t}


def test_loss_at_cost_weighs_fine_tune_steps_by_their_windows():
    cell = _cost_cell(120.0, [10, 9, 8, 7, 6, 5, 4, 3, 2, 1])  # 8 + 2 * 2 = 12 windows: 10 s each
    assert C.loss_at_cost(cell, 80.0) == 3  # 8 windows by step 8
    assert C.loss_at_cost(cell, 99.0) == 3  # step 9 ends at 100 s
    assert C.loss_at_cost(cell, 1e9) == 1
    assert C.loss_at_cost(cell, 5.0) is None  # nothing validated yet
    assert C.loss_at_cost({**cell, "train_cpu_seconds": None}, 80.0) is None


def test_best_at_the_cheapest_models_cost():
    cheap = [_cost_cell(60.0, [5.0] * 9 + [2.0])]  # cheap, final loss 2
    costly = [_cost_cell(600.0, [9.0] * 4 + [1.5] * 6)]  # by 60 s (step 1) it is at 9; finally 1.5
    models = {"sfno": {"cells": cheap}, "dandelion": {"cells": costly}}
    b = C.best_at_cheapest(models)
    assert b["cheapest"] == "sfno" and b["seconds"] == 60.0 and b["best"] == "sfno"
    assert b["losses"] == {"sfno": 2.0, "dandelion": 9.0}
    fast = [_cost_cell(120.0, [1.0] * 10)]  # at 60 s (step 5) already at 1.0
    b = C.best_at_cheapest({**models, "fno": {"cells": fast}})
    assert b["best"] == "fno"


def test_budget_line_says_whether_every_cell_shares_the_budget():
    t = {
        "epochs": 50,
        "max_batches_per_epoch": 20,
        "finetune": {"epochs": 10, "n_out": 2},
        "batch_size": 8,
        "warmup_fraction": 0.1,
    }
    one = C.budget_line([{"trainer_resolved": t}, {"trainer_resolved": dict(t)}])
    assert "1,000 pretraining steps + 200" in one and "10% of the steps" in one and "the same for every" in one
    two = C.budget_line([{"trainer_resolved": t}, {"trainer_resolved": {**t, "epochs": 60}}])
    assert "NOT the same" in two


def test_a_ratio_within_its_spread_of_one_is_level_with_sfno():
    # ratios 1.5 -> 1.02, std 0.005 on 3 seeds: the fine ratio's relative SE is sqrt((0.049^2 + 0.05^2) / 3) = 0.040,
    # its t band t_0.975,2 * 1.02 * 0.040 = 0.18 > 0.02, so the model is level with SFNO at the finer grid, not behind
    # it; the change (-0.48) is beyond its threshold (4.30 times about 0.065), so it still counts as a gain
    md = "\n".join(T.trend_section(_agg(0.15, 0.102, std=0.005)))
    assert "its gap to SFNO closed (behind at the coarser grid, level at the finer)" in md
    assert "behind SFNO at both grids" not in md and "| dandelion | 1:20 | 1 | 0 | 0 | 0 |" in md


def _mixed(coarse, fine, std, n_fine):
    agg = _agg(coarse, fine, std=std)
    for m in ("dandelion", "sfno"):
        agg["fam_64x128"][m] = _entry(64, fine if m == "dandelion" else 0.10, std, n=n_fine)
    return agg


@pytest.mark.parametrize("n_fine, word", [(3, "grows"), (2, "holds")])
def test_two_seeds_at_one_grid_judge_the_change_with_t_at_one_degree_of_freedom(n_fine, word):
    """Ratio 1.2 -> 1.0 (change -0.2), seed std 0.003: the combined standard error is 0.036 with three seeds at the
    finer grid (threshold t_0.975,2 * 0.036 = 0.157: a gain) and 0.040 with two (12.7 * 0.040 = 0.51: it holds,
    where twice the standard error, 0.08, would have called a gain)."""
    v = T.verdict(_mixed(0.12, 0.10, 0.003, n_fine), ["fam_32x64", "fam_64x128"], "dandelion", "next_step")
    assert v["word"] == word and v["change"] == pytest.approx(-0.2)
    assert v["threshold"] == pytest.approx({3: 0.157, 2: 0.51}[n_fine], rel=0.02)


def test_a_model_level_at_the_coarse_grid_falls_behind_or_moves_ahead():
    # coarse ratios 1.0 (level by construction: |1 - 1| is inside any band), fine 1.3 or 0.7 with small spread
    md = "\n".join(T.trend_section(_agg(0.10, 0.13)))
    assert "it fell behind SFNO (level at the coarser grid, behind at the finer)" in md and "widens" not in md
    md = "\n".join(T.trend_section(_agg(0.10, 0.07)))
    assert "it moved ahead of SFNO (level at the coarser grid, ahead at the finer)" in md and "its lead" not in md


def test_a_caveat_is_printed_under_its_dataset_and_named_under_the_counts():
    agg = _agg(0.15, 0.12)
    md = "\n".join(T.trend_section(agg, notes={"fam": "the two grids simulate different flows."}))
    verdicts, rest = md.split("*Caveat (fam)*: the two grids simulate different flows.")
    assert "**fam** (32x64 to 64x128)" in verdicts and "| warp model |" in rest
    assert "Read the counts with the caveats above (fam)." in rest
    assert "Caveat" not in "\n".join(T.trend_section(agg, notes={"other": "x"}))


def _v(coarse, fine, word, band=0.05):
    return {"coarse": coarse, "fine": fine, "word": word, "coarse_band": band, "fine_band": band}


@pytest.mark.parametrize(
    "coarse, fine, word, words",
    [
        # one side at both grids: a lead, a gap or a level standing that grows, shrinks or holds
        (0.9, 0.7, "grows", "its lead over SFNO grows (ahead of SFNO at both grids)"),
        (1.3, 1.5, "shrinks", "its gap to SFNO widens (behind SFNO at both grids)"),
        (1.2, 1.2, "holds", "its gap holds (behind SFNO at both grids)"),
        (0.98, 1.02, "holds", "its standing holds (level with SFNO within the seed spread at both grids)"),
        # a change of side within the spread of the change: no change, both sides named, no lead or gap implied
        (0.9, 0.97, "holds", "no change beyond the seed spread (ahead at the coarser grid, level at the finer)"),
        (1.0, 0.9, "holds", "no change beyond the seed spread (level at the coarser grid, ahead at the finer)"),
        (1.0, 1.1, "holds", "no change beyond the seed spread (level at the coarser grid, behind at the finer)"),
        # a change of side beyond it
        (0.9, 1.0, "shrinks", "its lead over SFNO is gone (ahead at the coarser grid, level at the finer)"),
        (1.2, 1.0, "grows", "its gap to SFNO closed (behind at the coarser grid, level at the finer)"),
        # one seed: the side of 1 only, exactly 1 is level
        (1.2, 1.0, "no spread", "no verdict yet: one seed, so the seed spread is unknown (level with SFNO at the"),
    ],
)
def test_the_words_name_each_grids_standing(coarse, fine, word, words):
    band = float("nan") if word == "no spread" else 0.05
    assert T._standing(_v(coarse, fine, word, band)).startswith(words)


def test_a_saturated_summary_is_not_judged():
    """Every model past VRMSE 1 at lead 5 at the finer grid: its 1:20 ratio is not judged (the next step still is)."""
    fast = [{"curves": {"vrmse": {"mean": [0.6 + 0.1 * k for k in range(1, 21)]}}, "evaluation": {"n_steps": 20}}]
    pers = {"persistence": {"curves": {"vrmse": {"mean": [1.3] * 20}}}}
    agg = _agg(0.12, 0.08)
    for m in ("dandelion", "sfno"):
        agg["fam_64x128"][m] = {**agg["fam_64x128"][m], "cells": fast, "references": pers}
    assert T.saturated(agg, "fam_64x128") and not T.saturated(agg, "fam_32x64")
    keys = T.families(agg)["fam"]
    assert T.verdict(agg, keys, "dandelion", "rollout_mean")["word"] == "saturated"
    assert T.verdict(agg, keys, "dandelion", "next_step")["word"] == "grows"
    md = "\n".join(T.trend_section(agg))
    assert "dandelion 1:20: ratio to SFNO 1.200 -> 0.800" in md and "not judged: the summary is saturated" in md
    assert "| dandelion | 1:20 | 0 | 0 | 0 | 0 | 1 |" in md


def test_the_compute_section_counts_each_sweep_once():
    """Two models, each swept on seed 0 (2 h, its selected run included) and rerun on seed 1 (0.5 h): 4 h of sweeps
    and 1 h of reruns, whatever an older cell copied into its seed-1 record."""

    def cell(seed, sweep):
        return {
            "seed": seed,
            "train_cpu_seconds": 1800.0,
            "sweep_cpu_seconds": sweep,
            "lr_selection": {"sweep_seed": 0},
        }

    agg = {"d": {m: {"cells": [cell(0, 7200.0), cell(1, 7200.0 if m == "old" else None)]} for m in ("new", "old")}}
    text = "\n".join(C.compute_section(agg, ["d"]))
    assert "4.0 CPU-hours of sweeps (2 sweeps, each counted once" in text
    assert "1.0 CPU-hours of the 2 runs of the seeds that reused a sweep's rate: 5.0 CPU-hours of training" in text
