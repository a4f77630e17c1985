"""The hand-written caveats of the resolution trend, read from ``trend_notes.yaml`` beside the results."""

import pytest

from dandelion.benchmarks.leaderboard import render as LB


def test_trend_notes_read_a_mapping_and_default_to_empty(tmp_path):
    assert LB.trend_notes(tmp_path) == {}
    (tmp_path / LB.TREND_NOTES).write_text("held_suarez: the two grids simulate different flows.\n")
    assert LB.trend_notes(tmp_path) == {"held_suarez": "the two grids simulate different flows."}


@pytest.mark.parametrize("text", ["- held_suarez\n- galewsky\n", "held_suarez:\n  a: 1\n"])
def test_a_malformed_trend_notes_file_is_named(tmp_path, text):
    (tmp_path / LB.TREND_NOTES).write_text(text)
    with pytest.raises(ValueError, match="trend_notes.yaml: expected a mapping of dataset names"):
        LB.trend_notes(tmp_path)


def test_a_note_for_an_unknown_dataset_is_refused(tmp_path):
    agg = {"held_suarez_32x64": {"sfno": {"dataset": "held_suarez"}}}
    assert LB._checked_notes({"held_suarez": "x"}, agg, tmp_path) == {"held_suarez": "x"}
    with pytest.raises(ValueError, match=r"names \['held_suarez_32x64'\], not datasets of these results"):
        LB._checked_notes({"held_suarez_32x64": "x"}, agg, tmp_path)
