"""The resolution-trend qualification (benchmarks/leaderboard/qualify.py): the JSON of the measured content round
trips, the rule at and around its threshold on synthetic shares, and the trend's counts leave out a dataset whose
finer grid adds no resolved content while still showing its table."""

import math

import pytest
from trend_entries import trend_entry as _entry

from dandelion.benchmarks.leaderboard import qualify as Q
from dandelion.benchmarks.leaderboard import resolution as R
from dandelion.benchmarks.leaderboard import trend as T
from dandelion.benchmarks.leaderboard.verdict import _trend_sentence


def _agg(d_coarse, d_fine):
    return {
        "fam_32x64": {"dandelion": _entry(32, d_coarse), "sfno": _entry(32, 0.10)},
        "fam_64x128": {"dandelion": _entry(64, d_fine), "sfno": _entry(64, 0.10)},
    }


def _content(share, forcing_share=None):
    fields = {"h": {"state": 0.01, "increment": share, "variables": ["h"], "forcing": False}}
    if forcing_share is not None:
        fields["doy"] = {"state": 0.5, "increment": forcing_share, "variables": ["doy"], "forcing": True}
    return {"band": 16, "grid": "64x128", "split": "test", "n_files": 3, "fields": fields}


def test_the_json_round_trips_and_keeps_nan_and_the_command(tmp_path):
    rec = _content(0.0274)
    rec["fields"]["v"] = {"state": 0.2, "increment": math.nan, "variables": ["v_850hPa"], "forcing": False}
    path = R.write_json(tmp_path / "c.json", {"fam_64x128": rec}, "python -m x fam --json c.json")
    back = R.read_json(path)
    assert back["fam_64x128"]["command"] == "python -m x fam --json c.json"
    assert back["fam_64x128"]["fields"]["h"] == rec["fields"]["h"]
    assert math.isnan(back["fam_64x128"]["fields"]["v"]["increment"]) and back["fam_64x128"]["n_files"] == 3
    assert not list(tmp_path.glob("*.tmp*"))  # atomic: nothing left beside it
    (tmp_path / "bad.json").write_text('{"fam_64x128": {"grid": "64x128"}}')
    with pytest.raises(ValueError, match="expected dataset key -> "):
        R.read_json(tmp_path / "bad.json")


# persistence 0.2 at the fine grid, best coarse model 0.1: the forced error sqrt(s) * 0.2 reaches a quarter of 0.1
# (0.025) at s = (0.125)^2 = 0.015625
AT = (Q.QUALIFY_RATIO * 0.1 / 0.2) ** 2


@pytest.mark.parametrize(
    "share, ok",
    [(AT * 1.001, True), (AT * 0.999, False), (0.5, True), (0.0, False), (AT / 4, False)],
)
def test_the_rule_at_and_around_its_threshold(share, ok):
    forced = Q.forced_error(_content(share)["fields"], {"h": 0.2})
    assert forced == pytest.approx(math.sqrt(share) * 0.2)
    assert Q.qualifies(forced, 0.1) is ok


def test_forcing_fields_do_not_count_and_levels_are_averaged():
    fields = _content(0.0, forcing_share=0.9)["fields"]
    assert Q.forced_error(fields, {"h": 0.2, "doy": 1.0}) == 0.0
    lev = {"T": {"state": 0.0, "increment": 0.25, "variables": ["T_1", "T_2"], "forcing": False}}
    lev["h"] = {"state": 0.0, "increment": 0.0, "variables": ["h"], "forcing": False}
    # T: sqrt(0.25) * mean(0.1, 0.3) = 0.1 on two variables, h: 0 on one -> 0.2 / 3
    assert Q.forced_error(lev, {"T_1": 0.1, "T_2": 0.3, "h": 0.5}) == pytest.approx(0.2 / 3)
    with pytest.raises(ValueError, match="not a fraction"):
        Q.forced_error({"h": {"increment": 1.5, "variables": ["h"]}}, {"h": 0.2})


def _two_families(gains=True):
    """``fam`` (Dandelion 1.2 -> 0.8 of SFNO: a gain) and ``other`` (the same numbers), persistence 0.2 at 64x128,
    the best 32x64 model 0.10 (SFNO)."""
    agg = _agg(0.12, 0.08)
    for key in list(agg):
        agg[key.replace("fam", "other")] = {m: {**e, "dataset": "other"} for m, e in agg[key].items()}
    for models in agg.values():
        for e in models.values():
            e["references"] = {"persistence": {"next_step": {"vrmse": {"h": 0.2, "mean": 0.2}}}}
    return agg


def test_the_trend_counts_leave_out_a_dataset_without_resolution_test():
    agg = _two_families()
    content = {"fam_64x128": _content(0.5), "other_64x128": _content(AT * 0.5)}
    md = "\n".join(T.trend_section(agg, content=content))
    assert "| dandelion | 1:20 | 1 | 0 | 0 | 0 |" in md  # fam only
    assert "1 (fam) of the 2 datasets trained at two grids qualify" in md
    assert "### other" in md and "*no resolution test*: the coarse band limit forces an error of" in md
    assert "*resolution test*: the coarse band limit forces an error of 0.141 (VRMSE), 1.41 of" in md
    both = "\n".join(T.trend_section(agg))  # no content measured: both counted, and said so
    assert "| dandelion | 1:20 | 2 | 0 | 0 | 0 |" in both and "No resolution content was measured" in both
    text = _trend_sentence(agg, {}, content)
    assert (
        "dandelion 1:20: gains on SFNO 1 (fam), holds 0" in text
        and "no resolution test, not counted: 1 (other)" in text
    )


def test_a_dataset_not_measured_is_counted_and_flagged():
    agg = _two_families()
    content = {"fam_64x128": _content(0.5)}
    md = "\n".join(T.trend_section(agg, content=content))
    assert "| dandelion | 1:20 | 2 | 0 | 0 | 0 |" in md
    assert "*resolution content not measured*: counted below" in md
    text = _trend_sentence(agg, {}, content)
    assert "gains on SFNO 2 (fam, other (not measured))" in text
    assert "resolution content not measured, counted and flagged: 1 (other)" in text
