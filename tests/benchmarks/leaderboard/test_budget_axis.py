"""The budget axis of the leaderboard (benchmarks/leaderboard/budget_axis.py): the same keys at two step budgets,
whether the ranking changes between them, what is pending; on synthetic cells whose answers are known, and through
the leaderboard job of scale=cpu with scale=cpu_4x's cells beside it."""

import json

import pytest
from leaderboard_cells import full_cell, leaderboard_cell
from omegaconf import OmegaConf

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid import cells as C
from dandelion.benchmarks.leaderboard import budget_axis as BA
from dandelion.benchmarks.leaderboard import markdown as MD
from dandelion.benchmarks.leaderboard import render as LB
from dandelion.benchmarks.leaderboard.headline import columns

KEY = "fam_32x64"
SLOW = [0.01 * k for k in range(1, 21)]  # never past VRMSE 1: no column is saturated


def _cells(scores: dict, cost: float, key: str = KEY, seeds=(0, 1, 2), spread: float = 0.001) -> list[dict]:
    """Cells of ``key``: model -> (next step, 1:20) for seed 0, each further seed ``spread`` higher; ``cost``
    CPU-seconds per run."""
    out = []
    for m, (nxt, r20) in scores.items():
        for k in seeds:
            c = leaderboard_cell(key, m, k, nxt + spread * k, r20 + spread * k, SLOW)
            c["train_cpu_seconds"] = cost * (1 + 0.01 * k)
            out.append(c)
    return out


def _budget(label: str, steps: int, cells: list[dict], models, keys=(KEY,)) -> dict:
    return {
        "label": label,
        "scale": f"scale_{label}",
        "cells": cells,
        "references": {},
        "expected": {k: {m: [0, 1, 2] for m in models} for k in keys},
        "steps": steps,
    }


def _section(one: dict, four: dict, models, tmp_path, keys=(KEY,)):
    budgets = [
        _budget("1x", 1200, _cells(one, 100.0), models, keys),
        _budget("4x", 4800, _cells(four, 400.0), models, keys),
    ]
    return BA.budget_section(budgets, list(keys), list(models), tmp_path)


def test_a_best_model_that_swaps_between_budgets_changes_the_ranking(tmp_path):
    # next step: a ahead of b at 1x, b ahead of a at 4x (0.1 apart, seeds 0.001 apart); 1:20: a ahead at both
    out = _section({"a": (0.10, 0.50), "b": (0.20, 0.60)}, {"a": (0.20, 0.40), "b": (0.10, 0.55)}, "ab", tmp_path)
    text = "\n".join(out["lines"])
    sentence = next(line for line in out["lines"] if line.startswith("- fam 32x64:"))
    assert "changes at the next step (best at 1x: a; at 4x: b; a and b swap places" in sentence
    assert "holds over 1:20 (best at both: a)" in sentence
    assert "The ranking changes in 1 column (fam 32x64 next) and holds in 1." in out["verdict"]
    assert "at 1x, of 2 ranked columns, a is best or tied in 2" in out["verdict"]
    assert "at 4x, of 2 ranked columns, a is best or tied in 1, b is best or tied in 1" in out["verdict"]
    assert "Pending" not in text and "pending" not in out["verdict"]
    png = tmp_path / f"budget_axis_{KEY}.png"
    assert out["plots"] == {f"budget_axis_{KEY}": str(png)} and png.stat().st_size > 0
    # the table: both budgets' means with their intervals, bold at each budget for its own best, and the costs
    row = next(line for line in out["lines"] if line.startswith(f"| {KEY} | a |"))
    cols = [c.strip() for c in row.split("|")[3:-1]]
    assert cols[0].startswith("**0.1010 ±") and not cols[1].startswith("**")  # next step 1x, 4x
    assert cols[4:] == ["101", "404", "3 / 3"]  # mean CPU-s per run at 1x and 4x, seeds


def test_the_same_best_at_both_budgets_holds(tmp_path):
    out = _section({"a": (0.10, 0.50), "b": (0.20, 0.60)}, {"a": (0.05, 0.30), "b": (0.15, 0.45)}, "ab", tmp_path)
    sentence = next(line for line in out["lines"] if line.startswith("- fam 32x64:"))
    assert "holds at the next step (best at both: a)" in sentence and "holds over 1:20 (best at both: a)" in sentence
    assert "The ranking changes in 0 columns and holds in 2." in out["verdict"]


def test_a_swap_within_the_seed_spread_is_a_tie_not_a_change():
    """b's mean passes a's at 4x, but the seeds spread (0.05 apart) leave the two tied there: the order of tied
    models is no change, and a is best or tied at both budgets."""
    one = MD.aggregate(_cells({"a": (0.10, 0.5), "b": (0.20, 0.6)}, 1.0))
    four = MD.aggregate(_cells({"a": (0.151, 0.5), "b": (0.150, 0.6)}, 1.0, spread=0.05))
    a = columns(one, [KEY], ["a", "b"])[(KEY, "next_step")]
    b = columns(four, [KEY], ["a", "b"])[(KEY, "next_step")]
    assert b["best"] == {"a", "b"}  # the headline's tie rule at 4x
    assert BA.ranking_change(a, b)["word"] == "holds"
    # the same means without the spread: b separated ahead of a, a swap of non-tied models and a new best
    tight = MD.aggregate(_cells({"a": (0.151, 0.5), "b": (0.150, 0.6)}, 1.0, spread=0.0001))
    c = columns(tight, [KEY], ["a", "b"])[(KEY, "next_step")]
    assert c["best"] == {"b"} and BA.ranking_change(a, c)["word"] == "changes"


def test_separated_models_that_swap_behind_the_same_best_change_the_ranking(tmp_path):
    out = _section(
        {"a": (0.10, 0.50), "b": (0.20, 0.60), "c": (0.30, 0.70)},
        {"a": (0.10, 0.50), "b": (0.30, 0.60), "c": (0.20, 0.70)},
        "abc",
        tmp_path,
    )
    sentence = next(line for line in out["lines"] if line.startswith("- fam 32x64:"))
    assert "changes at the next step (best at both: a; b and c swap places (separated at both budgets))" in sentence
    assert "holds over 1:20" in sentence


@pytest.mark.parametrize("missing", ["every 4x cell", "one 4x seed"])
def test_missing_4x_cells_are_pending_and_the_key_is_not_judged(tmp_path, missing):
    models = "ab"
    four = [] if missing == "every 4x cell" else [c for c in _cells({"a": (0.2, 0.4), "b": (0.1, 0.5)}, 400.0)]
    if missing == "one 4x seed":
        four = [c for c in four if not (c["model"] == "b" and c["seed"] == 2)]
    budgets = [
        _budget("1x", 1200, _cells({"a": (0.1, 0.5), "b": (0.2, 0.6)}, 100.0), models),
        _budget("4x", 4800, four, models),
    ]
    out = BA.budget_section(budgets, [KEY], list(models), tmp_path)
    text = "\n".join(out["lines"])
    label = "fam_32x64 at 4x (scale scale_4x): " + ("a, b (seeds 0, 1, 2)" if not four else "b (seed 2)")
    assert f"- `{label}`" in text
    assert not any(line.startswith("- fam 32x64:") for line in out["lines"])  # no sentence
    assert out["plots"] == {} and not (tmp_path / f"budget_axis_{KEY}.png").exists()  # no figure
    n = 6 if not four else 1
    assert out["verdict"].endswith(f"pending, no key has every cell at every budget yet ({n} cells pending).")
    assert "1x: 1,200 steps, 4x: 4,800 steps; a, b on 1 dataset key" in out["verdict"]


def test_a_judged_key_beside_a_pending_one(tmp_path):
    models = "ab"
    other = "other_64x128"
    one = _cells({"a": (0.1, 0.5), "b": (0.2, 0.6)}, 100.0) + _cells({"a": (0.1, 0.5), "b": (0.2, 0.6)}, 1.0, other)
    budgets = [
        _budget("1x", 1200, one, models, (KEY, other)),
        _budget("4x", 4800, _cells({"a": (0.1, 0.5), "b": (0.2, 0.6)}, 400.0), models, (KEY, other)),
    ]
    out = BA.budget_section(budgets, [KEY, other], list(models), tmp_path)
    assert "over the 1 keys with every cell at every budget" in out["verdict"]
    assert out["verdict"].endswith("; 1 key pending (6 cells).")
    assert list(out["plots"]) == [f"budget_axis_{KEY}"]


def test_the_cpu_leaderboard_sets_the_4x_cells_beside_its_own(tmp_path, monkeypatch):
    """Through ``dandelion-report target=leaderboard`` of scale=cpu (results in a temporary folder, the scale's own):
    the 4x cells come from scale=cpu_4x's folder, only those made under its protocol count, and the section, the
    verdict's sentence and the figure appear."""
    one = B.compose("benchmark", ["scale=cpu", f"scale.results_dir={tmp_path / 'cpu'}"])
    four = B.compose("benchmark", ["scale=cpu_4x", f"scale.results_dir={tmp_path / 'cpu_4x'}"])
    real = LB.compose
    monkeypatch.setattr(LB, "compose", lambda name, over: four if over == ["scale=cpu_4x"] else real(name, over))
    key = "transport_32x64"
    scores = {  # next step: dandelion best at 1x, sfno at 4x; 1:20: dandelion at both
        "1x": {"dandelion": (0.10, 0.40), "flower2d": (0.20, 0.50), "sfno": (0.30, 0.60)},
        "4x": {"dandelion": (0.30, 0.40), "flower2d": (0.20, 0.50), "sfno": (0.10, 0.60)},
    }
    for label, cfg, cost in (("1x", one, 100.0), ("4x", four, 400.0)):
        stamp = {"protocol_hash": C.protocol_hash(cfg, key), "trainer_resolved": C.resolved_trainer(cfg)}
        for c in _cells(scores[label], cost, key):
            nxt, r20 = c["next_step"]["vrmse"]["mean"], c["rollout_mean"]["vrmse"]["mean"]
            rec = full_cell(
                key, c["model"], c["seed"], nxt, r20, SLOW, train_cpu_seconds=c["train_cpu_seconds"], **stamp
            )
            path = C.cell_path(cfg.scale.results_dir, key, c["model"], c["seed"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(rec))
    # a 4x cell of an earlier protocol is not a 4x cell: held_suarez_32x64 stays pending
    old = full_cell("held_suarez_32x64", "sfno", 0, 0.1, 0.2, SLOW, protocol_hash="old", train_cpu_seconds=1.0)
    path = C.cell_path(four.scale.results_dir, "held_suarez_32x64", "sfno", 0)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old))
    LB.leaderboard(OmegaConf.create({"scale": OmegaConf.to_container(one.scale), "plots": True}))
    md = (tmp_path / "cpu" / "leaderboard.md").read_text()
    steps = [BA.budget_steps(OmegaConf.to_container(c.scale.trainer, resolve=True)) for c in (one, four)]
    verdict = md.split(MD.HEADLINE)[0]
    assert f"Budget axis (1x: {steps[0]:,} steps, 4x: {steps[1]:,} steps; dandelion, flower2d, sfno" in verdict
    assert "over the 1 keys with every cell at every budget" in verdict
    section = md.split(BA.HEADING)[1].split("\n## ")[0]
    assert "- transport 32x64: the ranking changes at the next step (best at 1x: dandelion; at 4x: sfno" in section
    assert "- `held_suarez_32x64 at 4x (scale cpu_4x): dandelion, flower2d, sfno (seeds 0, 1, 2)`" in section
    assert (tmp_path / "cpu" / f"budget_axis_{key}.png").exists()
    assert f"![{key}: score against training cost](budget_axis_{key}.png)" in section
