"""The headline table's marks: ties within the Student-t interval, models worse than persistence (†) or not better
than linear AR (‡), reference columns."""

import math

import pytest

from dandelion.benchmarks.leaderboard import markdown as MD


def _s(mean, std=0.1, n=4):
    return {"mean": mean, "std": std, "n": n}


@pytest.mark.parametrize(
    "stats, best",
    [
        # t_0.975,3 = 3.182 (a table value): 0.22 < 3.182 * sqrt(0.1^2/4 + 0.1^2/4) = 0.225 is a tie, 0.23 is not
        ({"a": _s(1.0), "b": _s(1.22), "c": _s(1.23)}, {"a", "b"}),
        # sixteen seeds: t_0.975,15 = 2.131 and half the standard error, so 0.12 > 0.075 is beyond it
        ({"a": _s(1.0, n=16), "b": _s(1.12, n=16)}, {"a"}),
        # two seeds: t_0.975,1 = 12.71, so even 1.0 against 1.5 with a spread of 0.05 is a tie (0.5 < 0.635)
        ({"a": _s(1.0, 0.05, 2), "b": _s(1.5, 0.05, 2)}, {"a", "b"}),
        ({"a": _s(1.0, 0.05, 2), "b": _s(1.7, 0.05, 2)}, {"a"}),
        # one seed has no spread: it ties only on an equal mean
        ({"a": _s(1.0, math.nan, 1), "b": _s(1.01)}, {"a"}),
        ({"a": _s(1.0, math.nan, 1), "b": _s(1.0, math.nan, 1)}, {"a", "b"}),
        ({"a": _s(math.nan, math.nan, 0), "b": _s(2.0)}, {"b"}),
    ],
)
def test_best_within_spread(stats, best):
    assert MD.best_within_spread(stats) == best


def _entry(nxt, r20, refs):
    return {
        "next_step": {"vrmse": {"mean": nxt}},
        "rollout_mean": {"vrmse": {"mean": r20}},
        "references": refs,
    }


def test_headline_marks_ties_and_models_worse_than_persistence():
    refs = {
        "persistence": {"next_step": {"vrmse": {"mean": 0.5}}, "rollout_mean": {"vrmse": {"mean": 1.0}}},
        "linear_ar": {"next_step": {"vrmse": {"mean": 0.2}}, "rollout_mean": {"vrmse": {"mean": 1.5}}},
    }
    agg = {
        "d_32x64": {
            "m1": _entry(_s(0.10, 0.01), _s(1.2, 0.01), refs),  # 1:20 worse than persistence (1.0)
            "m2": _entry(_s(0.105, 0.01), _s(0.8, 0.01), refs),  # next step tied with m1 (0.005 < 0.014)
            "m3": _entry(_s(0.3, 0.01), _s(0.9, 0.01), refs),  # next step not better than linear AR (0.2)
        }
    }
    lines = MD.headline_table(agg, ["d_32x64"], ["m1", "m2", "m3"])
    assert lines[0] == "| dataset | m1 | m2 | m3 | *persistence* | *linear AR* |"
    row = [c.strip() for c in lines[2].split("|")[2:-1]]
    assert row == [
        "**0.1000** / 1.2000†",
        "**0.1050** / **0.8000**",
        "0.3000‡ / 0.9000",
        "*0.5000* / *1.0000*",
        "*0.2000* / *1.5000*",
    ]
    # without any linear AR reference the column is left out
    only = {k: {**e, "references": {"persistence": refs["persistence"]}} for k, e in agg["d_32x64"].items()}
    assert MD.headline_table({"d_32x64": only}, ["d_32x64"], ["m1"])[0] == "| dataset | m1 | *persistence* |"


def test_headline_never_bolds_a_model_worse_than_persistence():
    """A wide seed spread ties a model with the best (:func:`best_within_spread`), but one whose mean is worse than
    persistence stays unmarked: 0.8 + 2 sqrt(0.01^2/4 + 3^2/4) > 3.0 is a tie, 3.0 > 1.0 is worse than persistence."""
    refs = {"persistence": {"next_step": {"vrmse": {"mean": 0.5}}, "rollout_mean": {"vrmse": {"mean": 1.0}}}}
    agg = {
        "d_32x64": {
            "good": _entry(_s(0.10, 0.01), _s(0.8, 0.01), refs),
            "wild": _entry(_s(0.11, 0.01), _s(3.0, 3.0), refs),
        }
    }
    assert MD.best_within_spread({"good": _s(0.8, 0.01), "wild": _s(3.0, 3.0)}) == {"good", "wild"}
    assert MD.best_within_spread({"good": _s(0.8, 0.01), "wild": _s(3.0, 3.0)}, floor=1.0) == {"good"}
    assert MD.best_within_spread({"good": _s(1.2, 0.01)}, floor=1.0) == set()  # even the lowest mean
    row = [c.strip() for c in MD.headline_table(agg, ["d_32x64"], ["good", "wild"])[2].split("|")[2:-1]]
    assert row[:2] == ["**0.1000** / **0.8000**", "**0.1100** / 3.0000†"]


def test_the_spread_tables_never_bold_a_model_worse_than_persistence_either():
    refs = {"persistence": {"next_step": {"vrmse": {"mean": 0.5}}, "rollout_mean": {"vrmse": {"mean": 1.0}}}}
    agg = {
        "d_32x64": {
            "good": _entry(_s(0.10, 0.01), _s(0.8, 0.01), refs),
            "wild": _entry(_s(0.11, 0.01), _s(3.0, 3.0), refs),
        }
    }
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in MD._table(agg, "vrmse", ["d_32x64"], ["good", "wild"])
        if line.startswith("| good") or line.startswith("| wild")
    }
    assert rows["wild"][0].startswith("**") and not rows["wild"][1].startswith("**")  # tied next step; 1:20 worse
    assert rows["good"][1].startswith("**")


def test_the_per_field_tables_use_each_fields_persistence_as_the_floor():
    """Field ``h``: "wild" ties "good" within its spread but is worse than persistence's ``h`` (never bold); field
    ``u``: the same two scores sit below persistence's ``u``, so both are bold. A non-finite floor is no floor."""

    def entry(h, u, refs):
        return {p: {"vrmse": {"h": h, "u": u, "mean": h}} for p in ("next_step", "rollout_mean")} | {"references": refs}

    pers = {p: {"vrmse": {"h": 1.0, "u": 5.0, "mean": 1.0}} for p in ("next_step", "rollout_mean")}
    agg = {"d_32x64": {"good": entry(_s(0.8, 0.01), _s(0.8, 0.01), {"persistence": pers})}}
    agg["d_32x64"]["wild"] = entry(_s(3.0, 3.0), _s(3.0, 3.0), {"persistence": pers})
    rows = {
        line.split("|")[1].strip(): line.split("|")[2:-1] for line in MD._field_table(agg, "d_32x64", ["good", "wild"])
    }
    assert [c.strip().startswith("**") for c in rows["h"]] == [True, False, True, False]
    assert all(c.strip().startswith("**") for c in rows["u"])
    assert (
        MD._persistence({"persistence": {"next_step": {"vrmse": {"mean": math.nan}}}}, "next_step", "vrmse") == math.inf
    )
