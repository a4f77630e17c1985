"""The trend, the spread tables and the verdict read the headline's column statistics: one seed that trained apart
is left out (✗) everywhere, and every table prints the numbers its bold and its verdicts are judged on."""

import math

import numpy as np
import pytest
from leaderboard_cells import leaderboard_cell

from dandelion.benchmarks.leaderboard import headline as H
from dandelion.benchmarks.leaderboard import markdown as MD
from dandelion.benchmarks.leaderboard import trend as T
from dandelion.benchmarks.leaderboard.stats import half_width
from dandelion.benchmarks.leaderboard.verdict import verdict_paragraph
from dandelion.reporting.numbers import fmt_mean_std

CURVE = [0.01 * k for k in range(1, 21)]  # never past 1 nor persistence: no saturation, no blow-up
# chained turbulence 32x64 next step in v2: Dandelion's seed 1 trained apart (78 % above the others' median)
APART = (0.1856, 0.3359, 0.1912)


def _cell(key, model, seed, nxt, r20):
    return leaderboard_cell(key, model, seed, nxt, r20, CURVE)


@pytest.fixture
def family():
    """``fam`` at 32x64 (Dandelion with a seed apart) and 64x128 (Dandelion 0.60 of SFNO at 1:20, three tight
    seeds each: a gain far beyond the t interval)."""
    cells = [_cell("fam_32x64", "dandelion", k, v, 0.30 + 0.001 * k) for k, v in enumerate(APART)]
    cells += [_cell("fam_32x64", "sfno", k, 0.25 + 0.005 * k, 0.30 + 0.001 * k) for k in range(3)]
    cells += [_cell("fam_64x128", "dandelion", k, 0.20 + 0.001 * k, 0.18 + 0.001 * k) for k in range(3)]
    cells += [_cell("fam_64x128", "sfno", k, 0.25 + 0.001 * k, 0.30 + 0.001 * k) for k in range(3)]
    agg = MD.aggregate(cells)
    refs = {"persistence": {p: {"vrmse": {"mean": 5.0}} for p in ("next_step", "rollout_mean")}}
    refs["persistence"]["curves"] = {"vrmse": {"mean": [5.0] * 20}}
    for models in agg.values():
        for e in models.values():
            e["references"] = refs
    return agg


def _rows(lines, first):
    return {
        tuple(c.strip() for c in ln.split("|")[1:first]): [c.strip() for c in ln.split("|")[first:-1]] for ln in lines
    }


def test_the_trend_table_prints_the_headlines_statistics_and_marks_the_failed_seed(family):
    cols = H.columns(family, ["fam_32x64"], ["dandelion", "sfno"])
    s = cols[("fam_32x64", "next_step")]["stats"]["dandelion"]
    assert s["failed"] == 1 and s["mean"] == pytest.approx(np.mean([APART[0], APART[2]]))
    row = _rows(T.trend_table(family, T.families(family)["fam"])[2:], 3)[("dandelion", "32x64")]
    assert row[1] == fmt_mean_std(s["mean"], half_width(s["std"], s["n"])) + " ✗1"
    assert row[2] == f"{s['mean'] / cols[('fam_32x64', 'next_step')]['stats']['sfno']['mean']:.3f}"
    # the all-seed mean (0.2376) is nowhere: the failed seed is out of the ratio and its error too
    assert f"{np.mean(APART):.4f}" not in "\n".join(T.trend_table(family, T.families(family)["fam"]))


def test_the_trend_verdict_uses_the_kept_seeds_count(family):
    v = T.verdict(family, T.families(family)["fam"], "dandelion", "next_step")
    ratio = T._ratio(family, "fam_32x64", "dandelion", "next_step")
    assert ratio[2] == 2  # two kept seeds of Dandelion, three of SFNO
    assert v["coarse_band"] == pytest.approx(12.706204736 * ratio[0] * ratio[1])  # t_0.975,1 of a t table


def test_the_spread_table_prints_what_its_bold_ranks(family):
    cols = H.columns(family, ["fam_32x64"], ["dandelion", "sfno"])
    rows = _rows(MD._table(family, "vrmse", ["fam_32x64"], ["dandelion", "sfno"])[2:], 2)
    for m in ("dandelion", "sfno"):
        s = cols[("fam_32x64", "next_step")]["stats"][m]
        want = fmt_mean_std(s["mean"], half_width(s["std"], s["n"])) + (f" ✗{s['failed']}" if s["failed"] else "")
        assert rows[(m,)][0].strip("*") == want
        assert rows[(m,)][0].startswith("**") == (m in cols[("fam_32x64", "next_step")]["best"])


def test_the_verdict_names_the_dataset_behind_each_gain_and_flags_its_caveat(family):
    datasets, models = sorted(family), ["dandelion", "sfno"]
    cols = H.columns(family, datasets, models)
    text = "\n".join(verdict_paragraph(family, datasets, models, cols, {"fam": "two flows, not one resolved finer"}))
    assert T.verdict(family, T.families(family)["fam"], "dandelion", "rollout_mean")["word"] == "grows"
    assert "dandelion 1:20: gains on SFNO 1 (fam (caveat)), holds 0, loses ground 0" in text
    plain = "\n".join(verdict_paragraph(family, datasets, models, cols))
    assert "gains on SFNO 1 (fam), holds 0" in plain and "caveat" not in plain
    assert math.isfinite(cols[("fam_64x128", "rollout_mean")]["stats"]["dandelion"]["mean"])


def test_the_trend_plots_error_bars_are_the_tables_t_half_widths(family, tmp_path, monkeypatch):
    bars = {}
    plt = T.pyplot()
    real = plt.Axes.errorbar

    def spy(ax, x, y, yerr=None, **kw):
        bars.setdefault(kw.get("label"), []).append((list(y), list(yerr)))
        return real(ax, x, y, yerr=yerr, **kw)

    monkeypatch.setattr(plt.Axes, "errorbar", spy)
    T.plot_trend(family, T.families(family)["fam"], tmp_path / "trend.png", "fam")
    s = H.columns(family, ["fam_32x64"], ["dandelion"])[("fam_32x64", "next_step")]["stats"]["dandelion"]
    y, e = bars["dandelion"][0]  # next step: 32x64 first
    assert y[0] == pytest.approx(s["mean"]) and e[0] == pytest.approx(half_width(s["std"], s["n"]))
