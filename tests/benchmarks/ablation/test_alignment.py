"""Head alignment (issue #67 item 4): a head built to read upstream by -dt * u scores cosine 1 at every level, one
built to read downstream scores -1, whatever the rotation axis of each window."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dandelion.benchmarks.ablation.alignment import _cartesian, _tangent, head_alignment
from dandelion.spectral_pooling import SpectralResample
from dandelion.sphere import SphereGrid
from dandelion.warp import TangentWarpS2
from dandelion.warp.advection import UNIT, StateAdvection

DT = 0.05


class _Layout:
    vectors = ("velocity",)


class _Rotations:
    """A split of windows, each a solid-body rotation about its own random axis (velocity u = omega a x r)."""

    def __init__(self, grid, n=6, seed=0):
        rng = np.random.default_rng(seed)
        self.grid, self.n_in, self.layout = grid, 1, _Layout()
        self.metadata = {"dt_frame": DT}
        axes = rng.normal(size=(n, 3))
        self.axes = axes / np.linalg.norm(axes, axis=1, keepdims=True)
        self.omega = rng.uniform(0.5, 2.0, size=n)

    def __len__(self):
        return len(self.axes)

    def velocity_xyz(self, i) -> torch.Tensor:
        a = torch.as_tensor(self.axes[i], dtype=torch.float64)[:, None, None]
        return self.omega[i] * torch.linalg.cross(a.expand(3, *self.grid.shape), self.grid.xyz.double(), dim=0)

    def __getitem__(self, i):
        return {"x": self.velocity_xyz(i).float()}

    def window(self, i):
        return i, 0

    def read_frames(self, f, start, stop):
        uv = _tangent(self.grid, self.velocity_xyz(f)[None])[0]  # (2, nlat, nlon)
        return {"velocity": uv.permute(1, 2, 0)[None].numpy()}


class _TwoLevels(torch.nn.Module):
    """A warp layer on the data's grid and one on a coarser grid, each fed the velocity's Cartesian channels."""

    def __init__(self, fine, coarse, sign):
        super().__init__()
        self.fine = TangentWarpS2(fine, 3, 3, 4, 0.0, cartesian=True, kernel="eager")
        self.coarse = TangentWarpS2(coarse, 3, 3, 4, 0.0, cartesian=True, kernel="eager")
        self.down = SpectralResample(fine, coarse)
        for layer in (self.fine, self.coarse):
            with torch.no_grad():
                layer.offset[-1].weight.zero_()
                w = torch.zeros(9, 3)
                w[0:3] = -DT * torch.eye(3)  # head 0 reads upstream
                w[3:6] = sign * DT * torch.eye(3)  # head 1 downstream (sign +1) or upstream
                layer.cartesian.weight.copy_(w[:, :, None, None])  # head 2: only its static offset (bias)
                layer.offset[-1].bias.copy_(torch.tensor([0.0, 0.0, 0.0, 0.0, 0.02, -0.01]))

    def forward(self, x):
        return self.fine(x), self.coarse(self.down(x))


class _Forecaster:
    def __init__(self, model):
        self.model, self.device = model, torch.device("cpu")

    def __call__(self, x):
        return self.model(x)


@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
def test_upstream_head_scores_one_downstream_minus_one_at_both_levels(grid):
    fine, coarse = SphereGrid(16, 32, grid), SphereGrid(8, 16, grid)
    res = head_alignment(_Forecaster(_TwoLevels(fine, coarse, sign=+1.0)), _Rotations(fine), n_windows=6)
    assert [r["nlat"] for r in res["layers"]] == [16, 8]
    for r in res["layers"]:
        assert r["best_head"] == 0
        assert r["cos"][0] == pytest.approx(1.0, abs=2e-3)
        assert r["cos"][1] == pytest.approx(-1.0, abs=2e-3)
        assert r["best_rms_ratio"] == pytest.approx(1.0, abs=5e-3)  # the length of one upstream step
        assert abs(r["cos_flow"][2]) < 0.2 or math.isnan(r["cos_flow"][2])  # a static offset follows no flow


class _Advecting(torch.nn.Module):
    """Advected persistence whose displacement is ``sign * dt * u`` of the velocity channels it is fed."""

    def __init__(self, grid, sign):
        super().__init__()
        self.advection = StateAdvection(grid, 3, kernel="eager")
        with torch.no_grad():
            self.advection.vector.weight.copy_(sign * DT / UNIT * torch.eye(3)[:, :, None, None])

    def forward(self, x):
        return self.advection(x)


@pytest.mark.parametrize("sign", [-1.0, 1.0])
def test_the_advection_displacement_is_measured_first(sign):
    grid = SphereGrid(16, 32, "equiangular")
    res = head_alignment(_Forecaster(_Advecting(grid, sign)), _Rotations(grid), n_windows=6)
    (r,) = res["layers"]
    assert r["name"] == "advection" and r["heads"] == 1
    assert r["cos"][0] == pytest.approx(-sign, abs=1e-6)  # -dt u is upstream: cosine +1 for sign -1
    assert r["best_rms_ratio"] == pytest.approx(1.0, abs=1e-6)
    assert res["sample"]["name"] == "advection"


def test_cartesian_and_tangent_round_trip():
    g = SphereGrid(10, 20)
    en = torch.randn(2, 2, 10, 20, dtype=torch.float64)
    torch.testing.assert_close(_tangent(g, _cartesian(g, en)), en)


def test_refuses_a_field_that_is_not_a_vector():
    fine = SphereGrid(8, 16)
    with pytest.raises(ValueError, match="not a vector field"):
        head_alignment(_Forecaster(_TwoLevels(fine, SphereGrid(4, 8), 1.0)), _Rotations(fine), field="h")
