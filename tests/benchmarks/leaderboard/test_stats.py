"""The leaderboard's statistics: Student-t intervals (cross-checked against scipy's own interval and t-test),
failed seeds (blow-ups, outliers) and the median they switch a column to, skill horizons and saturated columns."""

import math

import numpy as np
import pytest
from scipy import stats as st

from dandelion.benchmarks.leaderboard import stats as S


@pytest.mark.parametrize("df, value", [(1, 12.706), (2, 4.303), (3, 3.182), (30, 2.042)])
def test_t_critical_matches_the_table(df, value):
    assert S.t_critical(df) == pytest.approx(value, abs=1e-3)  # two-sided 95 % values of any t table


@pytest.mark.parametrize("values", [[0.186, 0.191], [0.04309, 0.04, 0.046], [1.0, 1.2, 0.9, 1.1, 1.05]])
def test_half_width_is_scipys_t_interval(values):
    v = np.asarray(values)
    lo, hi = st.t.interval(0.95, df=v.size - 1, loc=v.mean(), scale=st.sem(v))
    assert S.half_width(v.std(ddof=1), v.size) == pytest.approx((hi - lo) / 2, rel=1e-12)


@pytest.mark.parametrize(
    "a, b",
    [
        ([1.0, 1.1, 0.95], [1.3, 1.25, 1.4]),  # separated at three seeds
        ([1.0, 1.1, 0.95], [1.1, 1.05, 1.2]),  # not separated
        ([0.03397 - 0.00314, 0.03397 + 0.00314], [0.03980 - 0.0011, 0.03980 + 0.0011]),  # two seeds: t = 12.7
        ([0.5, 0.51], [0.9, 0.91]),  # two seeds, a gap far beyond the spread
    ],
)
def test_differ_agrees_with_scipys_t_statistic_at_n_minus_1_degrees_of_freedom(a, b):
    """Equal seed counts: the statistic of scipy's two-sample t-test is the gap over the standard error of the
    difference, and the decision is that statistic against t_0.975,n-1 (scipy's distribution, not our helper)."""
    t = st.ttest_ind(a, b, equal_var=False).statistic
    stat = {"mean": float(np.mean(a)), "std": float(np.std(a, ddof=1)), "n": len(a)}
    other = {"mean": float(np.mean(b)), "std": float(np.std(b, ddof=1)), "n": len(b)}
    assert S.differ(stat, other) == (abs(t) > st.t.ppf(0.975, len(a) - 1))


def test_differ_without_spread_is_unknown():
    assert S.differ({"mean": 1.0, "std": math.nan, "n": 1}, {"mean": 2.0, "std": 0.1, "n": 3}) is None


@pytest.mark.parametrize(
    "values, out",
    [
        ([0.1856, 0.3359, 0.1912], [1]),  # v2 chained turbulence 32x64 Dandelion, next step: a seed trained apart
        ([0.04028, 0.04434, 0.04464], []),  # 10 % off two close seeds: beyond their interval, not a failure
        ([1.4405, 1.8030, 1.6387], []),  # a wide column: 30 % is its ordinary spread
        ([0.2, 0.9], []),  # two seeds: no spread of "the others", no outlier
        ([0.2, math.inf, 0.21], [1]),  # not finite: always one
    ],
)
def test_outliers(values, out):
    assert S.outliers(values) == out


def _cell(seed, nxt, r20, curve=None, stability=None):
    c = {
        "seed": seed,
        "next_step": {"vrmse": {"mean": nxt}},
        "rollout_mean": {"vrmse": {"mean": r20}},
        "curves": {"vrmse": {"mean": curve or [r20] * 20}},
    }
    if stability is not None:
        c["stability"] = stability
    return c


def test_blown_up_reads_the_recorded_count_or_the_curve():
    by_lead = [0] * 12 + [2] * 8
    assert S.blown_up(_cell(0, 0.1, 0.5, stability={"unstable_by_lead": by_lead}), 20) == 2
    assert S.blown_up(_cell(0, 0.1, 0.5, stability={"unstable_by_lead": by_lead}), 10) == 0
    assert S.blown_up(_cell(0, 0.1, 0.5, curve=[0.5] * 15 + [30.0] * 5), 20) == 1  # older cell: the mean curve
    assert S.blown_up(_cell(0, 0.1, 0.5, curve=[0.5] * 15 + [30.0] * 5), 15) == 0
    assert S.blown_up({"seed": 0}, 20) is None


def _entry(cells):
    def summ(part):
        v = [c[part]["vrmse"]["mean"] for c in cells]
        return {"vrmse": {"mean": {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)), "n": len(v)}}}

    return {"cells": cells, "next_step": summ("next_step"), "rollout_mean": summ("rollout_mean")}


def test_a_failed_seed_switches_the_column_to_medians():
    a = _entry([_cell(0, 0.1856, 1.0), _cell(1, 0.3359, 1.0), _cell(2, 0.1912, 1.0)])
    b = _entry([_cell(0, 0.26, 1.0), _cell(1, 0.27, 1.0), _cell(2, 0.25, 1.0)])
    col = S.column_stats({"a": a, "b": b}, "next_step")
    assert col["a"]["failed"] == 1 and col["a"]["failed_seeds"] == [1]
    assert col["a"]["mean"] == pytest.approx(0.1912)  # the median of the three seeds
    assert col["a"]["n"] == 2 and col["a"]["std"] == pytest.approx(np.std([0.1856, 0.1912], ddof=1))
    assert col["b"]["mean"] == pytest.approx(0.26) and col["b"]["n"] == 3  # every model of the column: medians
    plain = S.column_stats({"b": b}, "next_step")
    assert plain["b"]["mean"] == pytest.approx(0.26) and "by_median" not in plain["b"]


def test_a_blow_up_fails_a_seed_only_in_the_rollout_column():
    blown = _cell(1, 0.1, 4.0, curve=[0.5] * 10 + [40.0] * 10)
    e = _entry([_cell(0, 0.1, 0.5), blown, _cell(2, 0.11, 0.52)])
    assert S.column_stats({"m": e}, "rollout_mean")["m"]["failed_seeds"] == [1]
    assert S.column_stats({"m": e}, "next_step")["m"]["failed"] == 0


@pytest.mark.parametrize(
    "curve, pers, horizon",
    [
        ([0.2, 0.5, 0.9, 1.1, 1.3], [0.3, 0.6, 0.8, 1.2, 1.4], (3, 4)),
        ([0.2, 0.3], [0.3, 0.6], (None, None)),
        ([0.2, math.nan, 0.3], [0.3, 0.6, 0.9], (2, 2)),  # a non-finite value is past both
        ([0.2, 1.5], None, (None, 2)),
    ],
)
def test_skill_horizon(curve, pers, horizon):
    assert S.skill_horizon(curve, pers) == horizon


def test_a_column_is_saturated_only_when_every_model_loses_skill_by_mid_window():
    ramp = [0.4 + 0.1 * k for k in range(1, 21)]  # lead k: 0.4 + 0.1 k, past 1 at lead 7, past 1.3 at lead 10
    slow = list(np.linspace(0.1, 0.95, 20))  # never past 1
    pers = [1.3] * 20
    fast = {"a": _entry([_cell(k, 0.1, 1.0, curve=ramp) for k in range(2)])}
    h = S.saturation(fast, pers, 20)
    assert h == {"a": (10, 7)}
    both = {**fast, "b": _entry([_cell(k, 0.1, 0.5, curve=slow) for k in range(2)])}
    assert S.saturation(both, pers, 20) is None  # one model keeps its skill: the column is ranked
