"""The budget axis's section of leaderboard.md and its figure (benchmarks/leaderboard/budget_section.py), on synthetic
cells whose answers are known, and through the leaderboard job of scale=cpu with scale=cpu_4x's cells beside it."""

import json
import math

import numpy as np
import pytest
from leaderboard_cells import SLOW, budget, budget_cells, full_cell
from matplotlib.container import ErrorbarContainer
from omegaconf import OmegaConf
from scipy import stats as st

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid import cells as C
from dandelion.benchmarks.leaderboard import budget_axis as BA
from dandelion.benchmarks.leaderboard import budget_section as BS
from dandelion.benchmarks.leaderboard import markdown as MD
from dandelion.benchmarks.leaderboard import render as LB
from dandelion.benchmarks.leaderboard.compute import budget_steps

KEY = "fam_32x64"
SPREAD = 0.001  # budget_cells: seed k scores value + k * SPREAD


def _budgets(one: dict, four: dict, models, keys=(KEY,), one_cells=None, four_cells=None, **fields) -> list[dict]:
    return [
        budget("1x", 1200, one_cells or budget_cells(one, 100.0, KEY), models, keys, **fields),
        budget("4x", 4800, four_cells or budget_cells(four, 400.0, KEY), models, keys, **fields),
    ]


def _section(one: dict, four: dict, models, tmp_path, keys=(KEY,), **kw):
    return BS.budget_section(_budgets(one, four, models, keys, **kw), list(keys), list(models), tmp_path)


def _row(out: dict, model: str, key: str = KEY) -> list[str]:
    """The table row of ``model``: next 1x, next 4x, 1:20 1x, 1:20 4x, CPU-s 1x, 4x, valid/train 1x, 4x, seeds 1x,
    4x."""
    row = next(line for line in out["lines"] if line.startswith(f"| {key} | {model} |"))
    return [c.strip() for c in row.split("|")[3:-1]]


def _sentence(out: dict) -> str:
    return next(line for line in out["lines"] if line.startswith("- fam 32x64:"))


def test_a_best_model_that_swaps_between_budgets_changes_the_ranking(tmp_path):
    # next step: a ahead of b at 1x, b ahead of a at 4x (0.1 apart, seeds 0.001 apart); 1:20: a ahead at both
    out = _section({"a": (0.10, 0.50), "b": (0.20, 0.60)}, {"a": (0.20, 0.40), "b": (0.10, 0.55)}, "ab", tmp_path)
    text = "\n".join(out["lines"])
    sentence = _sentence(out)
    assert "changes at the next step (best at 1x: a; at 4x: b; a and b swap places" in sentence
    assert "holds over 1:20 (best at both: a)" in sentence and "Caveat" not in sentence
    assert "The ranking changes in 1 column (fam 32x64 next) and holds in 1." in out["verdict"]
    assert "at 1x, of 2 ranked columns, a is best or tied in 2" in out["verdict"]
    assert "at 4x, of 2 ranked columns, a is best or tied in 1, b is best or tied in 1" in out["verdict"]
    assert "Pending" not in text and "pending" not in out["verdict"]
    png = tmp_path / f"budget_axis_{KEY}.png"
    assert out["plots"] == {f"budget_axis_{KEY}": str(png)} and png.stat().st_size > 0
    # the table: bold at each budget for its own best; mean CPU-s per run (100 and 400 times 1, 1.01, 1.02), no
    # valid/train without curves, every seed kept
    cols = _row(out, "a")
    assert cols[0].startswith("**0.1010 ±") and not cols[1].startswith("**")  # next step 1x, 4x
    assert cols[4:] == [f"{100 * 1.01:,.0f}", f"{400 * 1.01:,.0f}", "–", "–", "3/3", "3/3"]
    assert out["provenance"] == (
        "the budget section's 4x numbers come from the cell files of scale `scale_4x` in `results/scale_4x` (made by "
        "`dandelion-benchmark scale=scale_4x`)"
    )


def test_the_same_best_at_both_budgets_holds(tmp_path):
    out = _section({"a": (0.10, 0.50), "b": (0.20, 0.60)}, {"a": (0.05, 0.30), "b": (0.15, 0.45)}, "ab", tmp_path)
    sentence = _sentence(out)
    assert "holds at the next step (best at both: a)" in sentence and "holds over 1:20 (best at both: a)" in sentence
    assert "The ranking changes in 0 columns and holds in 2." in out["verdict"]


def test_separated_models_that_swap_behind_the_same_best_change_the_ranking(tmp_path):
    out = _section(
        {"a": (0.10, 0.50), "b": (0.20, 0.60), "c": (0.30, 0.70)},
        {"a": (0.10, 0.50), "b": (0.30, 0.60), "c": (0.20, 0.70)},
        "abc",
        tmp_path,
    )
    sentence = _sentence(out)
    assert "changes at the next step (best at both: a; b and c swap places (separated at both budgets))" in sentence
    assert "holds over 1:20" in sentence


def test_each_entry_is_the_mean_and_the_half_width_of_the_t_interval(tmp_path):
    """The ± of an entry is the 95 % Student-t half-width, t_0.975,n-1 s / sqrt(n), recomputed here from the seeds'
    values with scipy (not the std, nor the standard error)."""
    out = _section({"a": (0.10, 0.50), "b": (0.20, 0.60)}, {"a": (0.20, 0.40), "b": (0.10, 0.55)}, "ab", tmp_path)
    values = np.array([0.10 + SPREAD * k for k in range(3)])  # model a, next step, 1x
    hw = st.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    mean_txt, hw_txt = _row(out, "a")[0].strip("*").split(" ± ")
    assert float(mean_txt) == pytest.approx(values.mean(), abs=0.5 * 10 ** -len(mean_txt.split(".")[1]))
    assert float(hw_txt) == pytest.approx(hw, abs=0.5 * 10 ** -len(hw_txt.split(".")[1]))
    assert abs(float(hw_txt) - values.std(ddof=1)) > 1e-3 and abs(float(hw_txt) - hw / st.t.ppf(0.975, 2)) > 1e-3


def test_the_entries_carry_the_headline_marks(tmp_path):
    """† worse than persistence, ‡ not better than linear AR, ✗k failed seeds, h P,V in a saturated column: the
    headline's marks, with the interval."""
    refs = {
        KEY: {
            "persistence": {"next_step": {"vrmse": {"mean": 0.15}}, "rollout_mean": {"vrmse": {"mean": 9.0}}},
            "linear_ar": {"next_step": {"vrmse": {"mean": 0.12}}, "rollout_mean": {"vrmse": {"mean": 9.0}}},
        }
    }
    scores = {"a": (0.10, 0.5), "b": (0.13, 0.6), "c": (0.20, 0.7)}
    one = budget_cells(scores, 100.0, KEY, curve=[0.5] + [2.0] * 19)  # past VRMSE 1 at lead 2: saturated 1:20
    blown = next(c for c in one if c["model"] == "a" and c["seed"] == 2)
    blown["stability"] = {"unstable_by_lead": [0] + [1] * 19}  # a blow-up by lead 2: a failed 1:20 seed
    out = BS.budget_section(
        _budgets(scores, scores, "abc", one_cells=one, references=refs), [KEY], list("abc"), tmp_path
    )
    a, b, c = (_row(out, m) for m in "abc")
    assert "†" not in a[0] and "‡" not in a[0] and a[0].startswith("**")
    assert b[0].endswith("‡") and " ± " in b[0]
    assert c[0].endswith("†") and not c[0].startswith("**")
    # 1:20 at 1x: skill horizons only (past VRMSE 1 at lead 2, never past persistence, which has no curve here)
    assert [x[2] for x in (a, b, c)] == ["h >20,2"] * 3
    assert a[-2:] == ["2/3", "3/3"] and b[-2:] == ["3/3", "3/3"]  # a's seed 2 failed 1:20 at 1x: 2 of 3 cells kept


def test_the_figure_plots_cost_on_a_log_axis_with_t_interval_error_bars(tmp_path):
    budgets = _budgets({"a": (0.10, 0.50), "b": (0.20, 0.60)}, {"a": (0.20, 0.40), "b": (0.10, 0.55)}, "ab")
    judged = BA.judge_key(KEY, budgets, ["a", "b"])
    fig = BS.budget_figure(judged, ["1x", "4x"])
    try:
        hw = st.t.ppf(0.975, 2) * np.std([SPREAD * k for k in range(3)], ddof=1) / math.sqrt(3)
        for ax in fig.axes:
            assert ax.get_xscale() == "log"
            bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
            assert len(bars) == 2 and all(c.has_yerr for c in bars)  # one line per model
            (x1, lo), (_, hi) = bars[0].lines[2][0].get_segments()[0]  # model a at 1x
            assert x1 == pytest.approx(100.0 * 1.01) and (hi - lo) / 2 == pytest.approx(hw)
            assert ax.xaxis.get_major_formatter()(200.0, 0) == "200"  # plain numbers, not 2x10^2
    finally:
        BS.pyplot().close(fig)


def test_the_sweep_is_not_counted_in_the_cpu_seconds(tmp_path):
    scores = {"a": (0.10, 0.50), "b": (0.20, 0.60)}
    plain = _section(scores, scores, "ab", tmp_path)
    one = budget_cells(scores, 100.0, KEY)
    one[0].update(sweep_cpu_seconds=1e6, lr_selection={"sweep_seed": one[0]["seed"]})  # a's seed 0 ran the sweep
    swept = BS.budget_section(_budgets(scores, scores, "ab", one_cells=one), [KEY], ["a", "b"], tmp_path)
    assert _row(swept, "a")[4:6] == _row(plain, "a")[4:6]


def test_valid_over_train_is_shown_per_budget_and_flagged(tmp_path):
    scores = {"a": (0.10, 0.50), "b": (0.20, 0.60)}
    four = budget_cells(scores, 400.0, KEY)
    for c in four:
        c["valid_over_train"] = {0: 1.1, 1: 1.7, 2: 1.3}[c["seed"]] if c["model"] == "b" else 1.2
    out = BS.budget_section(_budgets(scores, scores, "ab", four_cells=four), [KEY], ["a", "b"], tmp_path)
    assert _row(out, "a")[6:8] == ["–", "1.20"] and _row(out, "b")[6:8] == ["–", "1.70 (over 1.5)"]
    assert "Caveat: valid/train over 1.5 for b at 4x (1.70)" in _sentence(out)


@pytest.mark.parametrize("missing", ["every 4x cell", "one 4x seed"])
def test_missing_4x_cells_are_pending_and_the_key_is_not_judged(tmp_path, missing):
    models = "ab"
    four = [] if missing == "every 4x cell" else budget_cells({"a": (0.2, 0.4), "b": (0.1, 0.5)}, 400.0, KEY)
    four = [c for c in four if not (c["model"] == "b" and c["seed"] == 2)]
    budgets = _budgets({"a": (0.1, 0.5), "b": (0.2, 0.6)}, {}, models)
    budgets[1]["cells"] = four
    out = BS.budget_section(budgets, [KEY], list(models), tmp_path)
    text = "\n".join(out["lines"])
    label = "fam_32x64 at 4x (scale scale_4x): " + ("a, b (seeds 0, 1, 2)" if not four else "b (seed 2)")
    assert f"- `{label}`" in text
    assert not any(line.startswith("- fam 32x64:") for line in out["lines"])  # no sentence
    assert out["plots"] == {} and not (tmp_path / f"budget_axis_{KEY}.png").exists()  # no figure
    n = 6 if not four else 1
    assert out["verdict"].endswith(f"pending, no key has every cell at every budget yet ({n} cells pending).")
    assert "1x: 1,200 steps, 4x: 4,800 steps; a, b on 1 dataset key" in out["verdict"]


def test_a_judged_key_beside_a_pending_one(tmp_path):
    models, other = "ab", "other_64x128"
    scores = {"a": (0.1, 0.5), "b": (0.2, 0.6)}
    one = budget_cells(scores, 100.0, KEY) + budget_cells(scores, 1.0, other)
    out = _section(scores, scores, models, tmp_path, keys=(KEY, other), one_cells=one)
    assert "over the 1 keys with every cell at every budget" in out["verdict"]
    assert out["verdict"].endswith("; 1 key pending (6 cells pending).")
    assert list(out["plots"]) == [f"budget_axis_{KEY}"]


SCORES = {  # next step: dandelion best at 1x, sfno at 4x; 1:20: dandelion at both
    "1x": {"dandelion": (0.10, 0.40), "flower2d": (0.20, 0.50), "sfno": (0.30, 0.60)},
    "4x": {"dandelion": (0.30, 0.40), "flower2d": (0.20, 0.50), "sfno": (0.10, 0.60)},
}


@pytest.fixture
def cpu_scales(tmp_path, monkeypatch):
    """scale=cpu and scale=cpu_4x with their results in temporary folders (each the scale's own), the leaderboard
    job composing that cpu_4x; transport_32x64's cells written at both budgets under each scale's protocol and with
    the network its preset builds (``write(label, model, seed, **fields)`` writes one more)."""
    one = B.compose("benchmark", ["scale=cpu", f"scale.results_dir={tmp_path / 'cpu'}"])
    four = B.compose("benchmark", ["scale=cpu_4x", f"scale.results_dir={tmp_path / 'cpu_4x'}"])
    real = LB.compose
    monkeypatch.setattr(LB, "compose", lambda name, over: four if over == ["scale=cpu_4x"] else real(name, over))
    cfgs, costs = {"1x": one, "4x": four}, {"1x": 100.0, "4x": 400.0}

    def write(label, key, model, seed, nxt=0.1, r20=0.2, **fields):
        cfg = cfgs[label]
        stamp = {
            "protocol_hash": C.protocol_hash(cfg, key),
            "trainer_resolved": C.resolved_trainer(cfg),
            "architecture": C.model_architecture(model, str(cfg.scale.preset)),
            "train_cpu_seconds": costs[label] * (1 + 0.01 * seed),
        }
        path = C.cell_path(cfg.scale.results_dir, key, model, seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(full_cell(key, model, seed, nxt, r20, SLOW, **{**stamp, **fields})))

    for label in cfgs:
        for c in budget_cells(SCORES[label], 1.0, "transport_32x64"):
            nxt, r20 = c["next_step"]["vrmse"]["mean"], c["rollout_mean"]["vrmse"]["mean"]
            write(label, "transport_32x64", c["model"], c["seed"], nxt, r20)
    return {"cfgs": cfgs, "write": write, "dir": tmp_path}


def _render(scales) -> tuple[dict, str]:
    one = scales["cfgs"]["1x"]
    res = LB.leaderboard(OmegaConf.create({"scale": OmegaConf.to_container(one.scale), "plots": True}))
    return res, (scales["dir"] / "cpu" / "leaderboard.md").read_text()


def test_the_cpu_leaderboard_sets_the_4x_cells_beside_its_own(cpu_scales):
    """Through ``dandelion-report target=leaderboard`` of scale=cpu: the 4x cells come from scale=cpu_4x's folder,
    only those made under its protocol count (a stale one is a pending rerun), and the section, the verdict's
    sentence, the figure and the provenance appear."""
    key = "transport_32x64"
    cpu_scales["write"]("4x", "held_suarez_32x64", "sfno", 0, protocol_hash="old")  # an earlier protocol's cell
    _, md = _render(cpu_scales)
    steps = [budget_steps(OmegaConf.to_container(c.scale.trainer, resolve=True)) for c in cpu_scales["cfgs"].values()]
    verdict = md.split(MD.HEADLINE)[0]
    assert f"Budget axis (1x: {steps[0]:,} steps, 4x: {steps[1]:,} steps; dandelion, flower2d, sfno" in verdict
    assert "over the 1 keys with every cell at every budget" in verdict
    section = md.split(BS.HEADING)[1].split("\n## ")[0]
    assert "- transport 32x64: the ranking changes at the next step (best at 1x: dandelion; at 4x: sfno" in section
    assert "- `held_suarez_32x64 at 4x (scale cpu_4x): dandelion, flower2d (seeds 0, 1, 2)`\n" in section
    assert f"- `held_suarez_32x64 at 4x (scale cpu_4x): sfno (seed 0)`: {BA.STALE}\n" in section
    assert "- `held_suarez_32x64 at 4x (scale cpu_4x): sfno (seeds 1, 2)`\n" in section
    assert (cpu_scales["dir"] / "cpu" / f"budget_axis_{key}.png").exists()
    assert f"![{key}: score against training cost](budget_axis_{key}.png)" in section
    provenance = md.split(MD.PROVENANCE)[1]
    assert f"4x numbers come from the cell files of scale `cpu_4x` in `{cpu_scales['dir'] / 'cpu_4x'}`" in provenance


@pytest.mark.parametrize("label", ["1x", "4x"])
def test_a_cell_of_another_network_is_stale(cpu_scales, label):
    """A cell made under the scale's protocol but with another network than its model's preset builds now is left
    out of the tables (it is not the scale's cell) and listed as stale, in the section as a pending rerun."""
    cpu_scales["write"](label, "transport_32x64", "sfno", 1, architecture="0" * 12)
    res, md = _render(cpu_scales)
    assert res["n_cells"] == (8 if label == "1x" else 9)
    section = md.split(BS.HEADING)[1].split("\n## ")[0]
    scale = "cpu" if label == "1x" else "cpu_4x"
    assert f"- `transport_32x64 at {label} (scale {scale}): sfno (seed 1)`: {BA.STALE}" in section
    assert "- transport 32x64:" not in section  # the key is not judged
    row = next(line for line in section.splitlines() if line.startswith("| transport_32x64 | sfno |"))
    assert [c.strip() for c in row.split("|")[-3:-1]] == (["2/3", "3/3"] if label == "1x" else ["3/3", "2/3"])
    if label == "1x":  # the headline's own list: stale, and its seed a pending rerun
        assert "- `transport_32x64: 1 stale cell (sfno) of another network`: made with another network" in md
        assert "- `transport_32x64: sfno (seed 1)`: rerun pending" in md
