"""The per-field RMSE tables of leaderboard.md: ours beside WeatherBench 2's, "—" for cells that do not carry it."""

from dandelion.benchmarks.leaderboard import field_rmse


def _cell(seed, ours, wb2=None):
    part = {"rmse": {"h": ours}, "vrmse": {"h": 0.1, "mean": 0.1}}
    if wb2 is not None:
        part["rmse_wb2"] = {"h": wb2}
    return {"seed": seed, "units": {"h": "m"}, "next_step": dict(part), "rollout_mean": dict(part)}


def test_wb2_rmse_beside_ours_and_a_dash_for_older_cells():
    agg = {
        "d": {
            "new": {"cells": [_cell(0, 1.0, 1.5), _cell(1, 3.0, 3.5)]},
            "old": {"cells": [_cell(0, 2.0)]},
            "mixed": {"cells": [_cell(0, 2.0, 2.5), _cell(1, 2.0)]},
        }
    }
    lines = field_rmse.field_rmse_table(agg, "d", ["new", "old", "mixed"])
    assert lines[0].startswith("| field | units | new next ours / WB2 |")
    row = lines[2].split(" | ")
    assert row[:2] == ["| h", "m"]
    assert row[2] == "2.000 ± 1.414 / 2.500 ± 1.414"  # mean ± sample std over seeds, both definitions
    assert row[3] == f"2.000 ± n/a / {field_rmse.MISSING}"  # one seed; the cell predates rmse_wb2
    assert row[4].endswith(f"/ {field_rmse.MISSING}")  # a seed without it: not shown as if all had it
    assert "WeatherBench 2" in field_rmse.NOTE and "square root of the mean" in field_rmse.NOTE
    assert field_rmse.field_rmse_table({"d": {"m": {"cells": [{"next_step": {}}]}}}, "d", ["m"]) == []
