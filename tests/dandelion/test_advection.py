"""Advected persistence (``advect_state``, dandelion/warp/advection.py; issue #67): the forecast step moves the
newest frame along a Cartesian displacement, linear in the input, before adding the network's increment."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from dandelion.registry import build_model
from dandelion.sphere import SphereGrid
from dandelion.step import next_frame
from dandelion.warp.advection import UNIT


@pytest.mark.parametrize("name", ["dandelion", "dandelion_fast"])
def test_at_initialisation_the_step_is_the_stock_step_bit_for_bit(name):
    torch.manual_seed(5)
    stock = build_model(name, "tiny", 6, 2, 16, 32, advect_state=False)
    torch.manual_seed(5)
    new = build_model(name, "tiny", 6, 2, 16, 32, advect_state=True)
    old, grown = stock.state_dict(), new.state_dict()
    added = sorted(set(grown) - set(old))
    assert added and all(k.startswith("advection.") for k in added)
    assert all(torch.equal(old[k], grown[k]) for k in old if torch.is_tensor(old[k]))
    x, scale = torch.randn(2, 6, 16, 32), torch.tensor([0.3, 0.7])
    assert new(x).shape == (2, 5, 16, 32)  # the increment's 2 channels, then the displacement's 3
    assert torch.equal(next_frame(stock, x, 2, scale), next_frame(new, x, 2, scale))


def test_the_displacement_learns_from_zero():
    """At zero displacement the sampler still passes a gradient to it (one-sided, the cell's slope): the
    advection's weights get nonzero gradients from a loss against a moved field."""
    torch.manual_seed(0)
    model = build_model("dandelion", "tiny", 4, 4, 16, 32, advect_state=True)
    x = torch.randn(2, 4, 16, 32)
    target = torch.roll(x, 1, dims=-1)
    (next_frame(model, x, 4, torch.ones(4)) - target).square().mean().backward()
    assert model.advection.vector.weight.grad.abs().max() > 0


def _rotation_case(nlat: int, nlon: int, grid: str, alpha: float):
    """A smooth field, the Cartesian velocity of solid-body rotation about a tilted axis (unit angular speed), and
    the exact field after rotating by ``alpha`` (the value at the departure point ``R(-alpha) x``)."""
    g = SphereGrid(nlat, nlon, grid)
    xyz = g.xyz.to(torch.float64)
    axis = torch.tensor([0.3, -0.4, 0.866], dtype=torch.float64)
    axis = axis / axis.norm()
    centre = torch.tensor([0.8, 0.2, 0.3], dtype=torch.float64)
    centre = centre / centre.norm()

    def field(p):
        return torch.exp(2.0 * torch.einsum("k,kij->ij", centre, p))

    velocity = torch.cross(axis[:, None, None].expand_as(xyz), xyz, dim=0)  # (3, nlat, nlon), tangent
    # Rodrigues: departure point of the node after a rotation by alpha about the axis is R(-alpha) x
    c, s = math.cos(alpha), math.sin(alpha)
    a = axis[:, None, None]
    dot = (a * xyz).sum(0, keepdim=True)
    departure = xyz * c - torch.cross(a.expand_as(xyz), xyz, dim=0) * s + a * dot * (1 - c)
    return field(xyz), velocity, field(departure)


def _advected_error(nlat: int, grid: str, alpha: float) -> tuple[float, float]:
    """Relative RMS error of one advected-persistence step (increment zeroed, displacement -alpha * velocity set by
    hand) and of persistence, against the exact rotated field."""
    h, velocity, exact = _rotation_case(nlat, 2 * nlat, grid, alpha)
    model = build_model("dandelion", "tiny", 4, 4, nlat, 2 * nlat, grid=grid, advect_state=True).double()
    with torch.no_grad():
        for p in model.head[-1].parameters():
            p.zero_()  # no increment: the step is the advected frame alone
        w = torch.zeros(3, 4, 1, 1, dtype=torch.float64)
        w[0, 1], w[1, 2], w[2, 3] = (-alpha / UNIT,) * 3  # D = -alpha * (u_x, u_y, u_z): read upstream
        model.advection.vector.weight.copy_(w)
    x = torch.cat([h[None], velocity])[None]  # (1, 4, nlat, nlon): one frame of (h, u_x, u_y, u_z)
    with torch.no_grad():
        step = next_frame(model, x, 4, torch.ones(4, dtype=torch.float64))[0, 0]
    rms = exact.square().mean().sqrt()
    return float((step - exact).square().mean().sqrt() / rms), float((h - exact).square().mean().sqrt() / rms)


@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss"])
def test_a_step_by_minus_dt_velocity_is_the_semi_lagrangian_step_of_a_rotation(grid):
    """With the displacement ``-dt u`` the step reads the field at the departure point of solid-body rotation, up to
    the bilinear interpolation (second order in the grid spacing) and the great circle's departure from the small
    circle (second order in ``dt``): far below persistence's error, and about fourfold smaller when grid and step
    are refined twofold together (the same Courant number)."""
    alpha = 0.15  # radians per step: 1.5 grid spacings at 32 x 64
    coarse, persistence = _advected_error(32, grid, alpha)
    fine, _ = _advected_error(64, grid, alpha / 2)
    assert coarse < 0.15 * persistence
    assert fine < coarse / 3


class _Wrapper(nn.Module):  # a training wrapper exposing the model as ``.module`` (as DDP does)
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


def test_a_wrapped_model_advects_too_and_the_frame_target_is_refused():
    torch.manual_seed(1)
    model = build_model("dandelion", "tiny", 4, 4, 16, 32, advect_state=True)
    with torch.no_grad():
        model.advection.vector.bias.copy_(torch.tensor([0.0, 0.0, 0.2]))  # a displacement towards the north pole
    x, scale = torch.randn(2, 4, 16, 32), torch.ones(4)
    assert torch.equal(next_frame(_Wrapper(model), x, 4, scale), next_frame(model, x, 4, scale))
    with pytest.raises(ValueError, match="target=increment"):
        next_frame(model, x, 4, None)


def test_land_is_never_read_on_a_masked_dataset():
    """With a wet mask the frame is sampled from wet points only: however large the land values, the advected ocean
    is the same, and a node whose departure point lies among land cells keeps its own value."""
    torch.manual_seed(2)
    model = build_model("dandelion", "tiny", 5, 4, 16, 32, advect_state=True)
    with torch.no_grad():
        model.advection.vector.bias.copy_(torch.tensor([-0.4, 0.0, 0.4]))  # east, into the strip, at its west edge
        for p in model.head[-1].parameters():
            p.zero_()  # no increment (the network itself reads every input): the step is the advected frame
    wet = torch.ones(16, 32, dtype=torch.bool)
    wet[:, 10:16] = False  # a land strip from pole to pole
    x = torch.randn(2, 4, 16, 32)
    a, b = x.clone(), x.clone()
    a[..., ~wet], b[..., ~wet] = -35.0, 1e3  # normalised land values: far outliers, two different ones
    scale = torch.ones(4)
    step_a, step_b = next_frame(model, a, 4, scale, wet=wet), next_frame(model, b, 4, scale, wet=wet)
    torch.testing.assert_close(step_a[..., wet], step_b[..., wet], rtol=0, atol=1e-5)
    assert step_a[..., wet].abs().max() < 10  # no land value reached the ocean
    assert not torch.equal(step_a[..., wet], x[..., wet])  # and the ocean did move


def test_the_displacement_stays_float32_under_autocast():
    torch.manual_seed(3)
    model = build_model("dandelion", "tiny", 4, 4, 16, 32, advect_state=True)
    with torch.no_grad():
        model.advection.vector.weight.normal_()
    x = torch.randn(2, 4, 16, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out[:, -3:], model.advection(x), rtol=0, atol=0)


def test_the_memory_estimate_counts_the_advected_step():
    from dandelion.training.memory import saved_bytes_per_sample

    torch.manual_seed(0)
    stock = build_model("dandelion", "tiny", 4, 4, 8, 16, advect_state=False)
    torch.manual_seed(0)
    new = build_model("dandelion", "tiny", 4, 4, 8, 16, advect_state=True)
    one, two = saved_bytes_per_sample(new, (4, 8, 16), 1), saved_bytes_per_sample(new, (4, 8, 16), 2)  # n_in = 1
    assert one > saved_bytes_per_sample(stock, (4, 8, 16), 1)  # the frame's sampling is saved too
    assert 1.8 * one < two < 2.2 * one


def test_training_refuses_the_frame_target_before_any_step(make_tiny_dataset, tmp_path):
    from dandelion.training.options import TrainOptions
    from dandelion.training.trainer import Trainer

    path = make_tiny_dataset(tmp_path / "data", n_frames=8)
    spec = {"name": "dandelion", "preset": "tiny", "overrides": {"advect_state": True}}
    with pytest.raises(ValueError, match="target='increment'"):
        Trainer(spec, path, path, TrainOptions(target="frame", n_in=1, batch_size=2), run_dir=tmp_path / "run")
    assert not (tmp_path / "run" / "last.pt").exists()
