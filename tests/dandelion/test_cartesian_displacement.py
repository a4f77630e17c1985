"""The warp heads' Cartesian displacement term (issue #67 item 1): zero at initialisation, and linear in the
Cartesian vector channels, so "read upstream by -dt * velocity" is one linear map of the inputs."""

from __future__ import annotations

import math

import pytest
import torch

from dandelion.registry import build_model
from dandelion.sphere import SphereGrid
from dandelion.warp import TangentWarpS2, sample_sphere


@pytest.mark.parametrize("name", ["dandelion", "dandelion_fast"])
def test_the_term_starts_at_zero_and_leaves_the_stock_model_unchanged(name):
    torch.manual_seed(3)
    stock = build_model(name, "tiny", 6, 2, 16, 32)
    torch.manual_seed(3)
    new = build_model(name, "tiny", 6, 2, 16, 32, cartesian_displacement=True)
    old, grown = stock.state_dict(), new.state_dict()
    added = sorted(set(grown) - set(old))
    assert added and all(".cartesian." in k for k in added)
    assert all(torch.equal(old[k], grown[k]) for k in old if torch.is_tensor(old[k]))
    x = torch.randn(2, 6, 16, 32)
    assert torch.equal(stock(x), new(x))
    new(x).square().mean().backward()  # and it learns: its parameters get gradients
    assert all(p.grad is not None and p.grad.abs().max() > 0 for n, p in new.named_parameters() if ".cartesian." in n)


@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
def test_upstream_displacement_of_solid_body_rotation_is_linear_in_the_cartesian_velocity(grid):
    """Features = the Cartesian components of the rotation about the z axis, u = omega z x r; with D = -dt u the
    head's displacement is (d_e, d_n) = (-dt omega sin(colatitude), 0), and sampling a field there equals sampling
    it at the exponential map of the node by that displacement (independent of the layer's frame buffers)."""
    nlat, nlon, omega, dt = 12, 24, 1.3, 0.2
    g = SphereGrid(nlat, nlon, grid)
    xyz = g.xyz.to(torch.float64)
    velocity = omega * torch.stack([-xyz[1], xyz[0], torch.zeros_like(xyz[0])])  # (3, nlat, nlon), tangent
    layer = TangentWarpS2(g, channels=3, heads=1, hidden=4, init_radius=0.0, cartesian=True, kernel="eager").double()
    with torch.no_grad():
        layer.offset[-1].weight.zero_()  # the local MLP contributes nothing
        layer.offset[-1].bias.zero_()
        layer.cartesian.weight.copy_(-dt * torch.eye(3, dtype=torch.float64)[:, :, None, None])
    d = layer.displacements(velocity[None])[0]  # (2, nlat, nlon)
    colat = g.colat.to(torch.float64)[:, None].expand(nlat, nlon)
    torch.testing.assert_close(d[0], -dt * omega * torch.sin(colat), atol=1e-6, rtol=0)
    torch.testing.assert_close(d[1], torch.zeros_like(d[1]), atol=1e-6, rtol=0)
    # the warp reads a smooth field at the upstream point of the great circle: compare with exp_map + point sampling
    f = (xyz[0] + 0.5 * xyz[1] * xyz[2])[None, None]
    with torch.no_grad():
        layer.value.weight.copy_(torch.eye(3, dtype=torch.float64)[:, :, None, None])
        layer.value.bias.zero_()
    feats = torch.cat([f, f, f], dim=1)
    warped = layer._warp(feats, layer.displacements(velocity[None]))
    r = d.norm(dim=0)
    y = torch.cos(r) * xyz + torch.sinc(r / math.pi) * (d[0] * g.east.double() + d[1] * g.north.double())
    colat_y = torch.arccos(y[2].clamp(-1, 1))
    lon_y = torch.remainder(torch.atan2(y[1], y[0]), 2 * math.pi)
    expected = sample_sphere(f, colat_y[None], lon_y[None], g)
    torch.testing.assert_close(warped[:, :1], expected, atol=1e-6, rtol=1e-6)
