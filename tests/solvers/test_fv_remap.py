"""Conservative remap from the finite-volume cells to latitude-longitude grids: conservation, constants,
second-order accuracy without blocks next to the poles or on Gaussian rows, one value per pole, and
momentum projected after the Cartesian remap."""

import math

import pytest
import torch

from dandelion.solvers.fv_geometry import CalhounHelzelGrid
from dandelion.solvers.fv_remap import ConservativeRemap
from dandelion.solvers.fv_shallow_water import FVShallowWaterSimulation, state_from_primitives
from dandelion.sphere import SphereGrid

CASES = [
    (16, 16, 32, "equiangular"),
    (16, 17, 32, "equiangular"),
    (16, 16, 32, "legendre-gauss"),
    (8, 24, 48, "legendre-gauss"),
]


def _smooth_state(g, m=4):
    """Cell means of h = 1 + 0.3 x + 0.2 y z and of the momentum of a tilted solid-body rotation."""
    p, w = g.sub_points(m)
    h = 1.0 + 0.3 * p[..., 0] + 0.2 * p[..., 1] * p[..., 2]
    axis = torch.tensor([0.3, 0.1, 1.0], dtype=torch.float64)
    mom = h.unsqueeze(-1) * torch.linalg.cross(axis.expand_as(p), p, dim=-1)
    return torch.cat(
        [(h * w).sum((-2, -1))[None, None], (mom * w.unsqueeze(-1)).sum((-3, -2)).permute(2, 0, 1)[None]], 1
    )


def _exact(go):
    p = go.xyz
    h = 1.0 + 0.3 * p[0] + 0.2 * p[1] * p[2]
    axis = torch.tensor([0.3, 0.1, 1.0], dtype=torch.float64).view(3, 1, 1)
    m = h * torch.linalg.cross(axis.expand_as(p), p, dim=0)
    return h, (m * go.east).sum(0), (m * go.north).sum(0)


@pytest.mark.parametrize("ny,nlat,nlon,grid", CASES)
def test_remap_conserves_mass_with_its_cells_and_with_quadrature(ny, nlat, nlon, grid):
    g, go = CalhounHelzelGrid(ny), SphereGrid(nlat, nlon, grid)
    remap = ConservativeRemap(g, go)
    assert abs(float(remap.area_out.sum()) - 4 * math.pi) < 1e-12
    h = torch.full((1,) + g.shape, 1.0, dtype=torch.float64)
    h[0, : ny // 2, :ny] = 2.0  # a sharp block
    sim = FVShallowWaterSimulation(g, state_from_primitives(g, h, 0.3 * h, -0.2 * h))
    sim.advance_to(0.05)
    out = remap(sim.q)
    mass = float(sim.op.mass(sim.q)[0])
    assert abs(float(remap.integral(out["h"])[0]) - mass) < 1e-12 * mass
    assert abs(float((out["h"] * go.weights).sum()) - mass) < 2e-3 * mass
    assert float(out["h"].min()) > 0
    # constants are kept exactly (rows of the weights sum to one)
    ones = remap(
        torch.cat(
            [torch.ones(1, 1, *g.shape, dtype=torch.float64), torch.zeros(1, 3, *g.shape, dtype=torch.float64)], 1
        )
    )
    assert float((ones["h"] - 1).abs().max()) < 1e-13


@pytest.mark.parametrize("ny,nlat,nlon,grid", CASES)
def test_smooth_fields_second_order_no_blocks_one_pole_value(ny, nlat, nlon, grid):
    g, go = CalhounHelzelGrid(ny), SphereGrid(nlat, nlon, grid)
    out = ConservativeRemap(g, go)(_smooth_state(g))
    h, hu, hv = _exact(go)
    rows = list(range(1, nlat - 1)) if go.has_poles else list(range(nlat))
    # better than sampling the nearest solver cell (a piecewise-constant remap, which makes blocks)
    nearest = (go.xyz.reshape(3, -1).T @ g.centre.reshape(-1, 3).T).argmax(1)
    q = _smooth_state(g)[0].reshape(4, -1)[:, nearest].reshape(4, nlat, nlon)
    blocky = {"h": q[0], "hu": (q[1:] * go.east).sum(0), "hv": (q[1:] * go.north).sum(0)}
    for name, exact in (("h", h), ("hu", hu), ("hv", hv)):
        err = (out[name][0] - exact)[rows].abs().max()
        assert err < 0.5 * (blocky[name] - exact)[rows].abs().max(), name
    # no blocks of equal values next to the poles and on every Gaussian row
    check = [1, nlat - 2] if go.has_poles else list(range(nlat))
    for r in check:
        row = out["h"][0, r]
        assert bool((row != row.roll(1)).all()), f"row {r} has equal neighbours"
    if go.has_poles:  # a pole is one point: one depth, one Cartesian momentum vector
        for r in (0, nlat - 1):
            assert torch.unique(out["h"][0, r]).numel() == 1
            m = out["hu"][0, r] * go.east[:, r] + out["hv"][0, r] * go.north[:, r]
            assert float((m - m[:, :1]).abs().max()) < 1e-14
