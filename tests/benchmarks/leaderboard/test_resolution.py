"""Resolution content (the variance above a coarser grid's band limit) on synthetic fields whose split is known:
sums of two spherical harmonics (scipy's, not torch-harmonics'), one below and one above degree 16."""

import math

import numpy as np
import pytest
import torch
from scipy.special import sph_harm_y
from tiny_dataset import DT, folder_meta, write_folder_files, write_frames

from dandelion.benchmarks.leaderboard import resolution as R
from dandelion.datasets import statistics
from dandelion.sphere import SphereGrid

GRID = SphereGrid(64, 128, "equiangular")  # analysis band limit 32; the 32x64 grid's is 16


def _y(grid: SphereGrid, l: int, m: int) -> np.ndarray:
    """Re Y_l^m (orthonormal complex harmonic): its mean square over the sphere is 1 / (4 pi) for m = 0 and
    1 / (8 pi) for m > 0."""
    theta = grid.colat.numpy()[:, None]
    phi = grid.lon.numpy()[None, :]
    return np.real(sph_harm_y(l, m, theta, phi))


def _power(l, m, amp):
    return amp**2 / (4 * math.pi if m == 0 else 8 * math.pi)


@pytest.mark.parametrize(
    "low, high",
    [
        ((5, 3, 1.0), (20, 7, 0.5)),  # 0.25 / 8pi over 1.25 / 8pi: 20 % above
        ((2, 0, 2.0), (16, 16, 1.0)),  # degree 16 is the first above the coarse band (0..15)
        ((15, 4, 1.0), (31, 1, 3.0)),  # both at the edges of their bands
    ],
)
def test_the_variance_split_of_two_harmonics(low, high):
    field = low[2] * _y(GRID, low[0], low[1]) + high[2] * _y(GRID, high[0], high[1])
    above, total = R.variance_split(torch.from_numpy(field)[None], GRID, band=16)
    expected = _power(*high) / (_power(*low) + _power(*high))
    assert total == pytest.approx(_power(*low) + _power(*high), rel=1e-9)  # area-weighted variance (zero mean)
    assert above / total == pytest.approx(expected, abs=1e-9)


def test_a_mean_offset_is_not_variance_and_a_bad_band_is_refused():
    field = 7.0 + _y(GRID, 3, 1)
    above, total = R.variance_split(torch.from_numpy(field)[None], GRID, band=16)
    assert total == pytest.approx(_power(3, 1, 1.0), rel=1e-9) and above == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="band=40 must be in 2..32"):
        R.variance_split(torch.from_numpy(field)[None], GRID, band=40)


def test_content_of_a_dataset_folder_splits_states_and_increments(tmp_path):
    """States ``Y_5^3 + 0.1 t Y_20^7``: the increments are all ``0.1 Y_20^7`` (everything above the band), the
    states' share above grows with t as ``(0.1 t)^2 / (1 + (0.1 t)^2)`` summed over the frames. The vector's u is the
    low harmonic alone, its v the high one alone."""
    g = SphereGrid(32, 64, "equiangular")  # band limit 16; its half-rows grid (16x32) keeps degrees 0..7
    lo, hi = _y(g, 5, 3), _y(g, 12, 7)
    t = np.arange(6)
    h = np.stack([lo + 0.1 * k * hi for k in t]).astype(np.float32)
    uv = np.stack([np.stack([lo, 2.0 * hi], axis=-1)] * len(t)).astype(np.float32)
    fields = {
        "h": {"kind": "scalar", "units": "m", "long_name": "h"},
        "velocity": {"kind": "vector", "units": "m s-1", "long_name": "velocity", "components": ["u", "v"]},
    }
    splits = {"train": [0], "valid": [1], "test": [2]}
    for split, ids in splits.items():
        (tmp_path / split).mkdir()
        for i in ids:
            file = tmp_path / split / f"traj_{i:06d}.h5"
            write_frames(file, g, i, "two", DT, {"h": h, "velocity": uv}, scalars={}, fields=fields)
    stats = statistics.compute_stats([tmp_path / "train" / "traj_000000.h5"], fields)
    meta = {**folder_meta("two", g, len(t), DT, splits, fields), "parameters": [], "config": {}, "versions": {}}
    write_folder_files(tmp_path, meta, stats, splits)

    out = R.content(tmp_path, split="test")
    assert out["band"] == 8 and out["grid"] == "32x64"
    f = out["fields"]
    share = sum((0.1 * k) ** 2 for k in t) / sum(1 + (0.1 * k) ** 2 for k in t)
    assert f["h"]["state"] == pytest.approx(share, rel=1e-4)  # float32 storage
    assert f["h"]["increment"] == pytest.approx(1.0, rel=1e-4)
    assert f["velocity.u"]["state"] == pytest.approx(0.0, abs=1e-6) and math.isnan(f["velocity.u"]["increment"])
    assert f["velocity.v"]["state"] == pytest.approx(1.0, rel=1e-4)
    lines = R.main([str(tmp_path), "--out", str(tmp_path / "table.md")])
    assert (tmp_path / "table.md").read_text().splitlines() == lines and len(lines) == 2 + 3  # header, rule, h, u, v
