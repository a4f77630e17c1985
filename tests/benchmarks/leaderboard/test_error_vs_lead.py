"""The leaderboard's error-versus-lead figure draws the references (persistence, linear AR, the oracle) beside the
models, so a rollout can be read against the exact transport at every lead (issue #67 item 5)."""

from __future__ import annotations

from dandelion.benchmarks.leaderboard import render


def test_reference_curves_are_drawn_with_their_labels(tmp_path, monkeypatch):
    saved = {}

    def keep(fig, path):
        saved["labels"] = [line.get_label() for line in fig.axes[0].get_lines()]
        saved["ys"] = {line.get_label(): list(line.get_ydata()) for line in fig.axes[0].get_lines()}
        return path

    monkeypatch.setattr(render, "save_figure", keep)
    model = {"curves": {"vrmse": {"mean": [0.01, 0.05, 0.2]}}, "lead_time_hours": None}
    oracle = {"curves": {"vrmse": {"mean": [0.02, 0.04, 0.06]}}}
    render.plot_error_vs_lead_log({"dandelion": model}, tmp_path / "f.png", "k", {"oracle": oracle})
    label = render.REFERENCES["oracle"]
    assert label in saved["labels"] and saved["ys"][label] == [0.02, 0.04, 0.06]
    render.plot_error_vs_lead_log({"dandelion": model}, tmp_path / "g.png", "k")
    assert label not in saved["labels"]  # none given, none drawn
