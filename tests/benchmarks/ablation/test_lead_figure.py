"""The ablation's error-against-lead figure reads every seed's curve, leaves other protocols' cells out and draws
the dataset's references (issue #67 item 5)."""

from __future__ import annotations

import json

import numpy as np

from dandelion.benchmarks.ablation.lead_figure import lead_curves, lead_figure


def _write(path, curve, **extra):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"curves": {"vrmse": {"mean": list(curve)}}, **extra}))


def test_curves_per_model_with_stale_cells_left_out_and_references(tmp_path):
    lead = np.arange(1, 6, dtype=float)
    _write(tmp_path / "k/dandelion/seed0.json", 0.1 * lead, protocol_hash="p")
    _write(tmp_path / "k/dandelion/seed1.json", 0.3 * lead, protocol_hash="p")
    _write(tmp_path / "k/dandelion/seed2.json", 9.0 * lead, protocol_hash="old")  # another protocol: left out
    _write(tmp_path / "ablation/advect/k/seed0.json", 0.05 * lead, base_protocol_hash="p")
    _write(tmp_path / "k/sfno/seed0.json", 0.2 * lead, protocol_hash="p")
    _write(tmp_path / "k/oracle.json", 0.01 * lead, label="oracle")
    c = lead_curves(tmp_path, "advect", "dandelion", "k", ("sfno",), protocol="p")
    assert c["dandelion"].shape == (2, 5)
    np.testing.assert_allclose(c["dandelion"].mean(0), 0.2 * lead)
    np.testing.assert_allclose(c["dandelion + advect"][0], 0.05 * lead)
    assert set(c["references"]) == {"oracle"}
    out = lead_figure(c, tmp_path / "fig.png", "k")
    assert out.stat().st_size > 1000
