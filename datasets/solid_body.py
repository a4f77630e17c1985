"""``solid_body``: an analytic dataset, a scalar carried by solid-body rotation (exact, no solver).

A tracer ``h0(x) = a . x + (b . x)^2`` (x the unit position vector) is advected by the solid-body
rotation ``u(x) = omega * k x x`` about a per-trajectory axis ``k``, so at time t
``h(x, t) = h0(R(-omega t, k) x)`` (R the rotation by an angle about an axis, Rodrigues' formula)
and ``u`` is steady (the advection equation ``dh/dt + u . grad h = 0`` holds exactly). Both fields
have spherical-harmonic degree <= 2, so they are exact on any grid whose band limit is >= 3.

It is a pipeline test dataset: it makes a complete dataset folder in a fraction of a second on any
grid, with exact values to check storage, statistics and loaders against. Non-dimensional time.
Sweep: ``omega in {0.5, 1.0}`` x ``n_seeds`` (default 4); seeded: the axis ``k`` (uniform on the
sphere) and the coefficients ``a``, ``b`` (standard normal).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dandelion.sphere import SphereGrid

from .scenario import FieldSpec, Scenario, register_scenario

__all__ = ["SolidBodyScenario", "SolidBodySimulation"]


def rotate(x: torch.Tensor, axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotate vectors by ``angle`` about unit ``axis`` (Rodrigues' rotation formula).

    x : (B, 3, ...) ; axis : (B, 3) ; angle : (B,). Returns (B, 3, ...).
    """
    shape = (x.shape[0], 3) + (1,) * (x.ndim - 2)
    k = axis.reshape(shape)
    c = torch.cos(angle).reshape((-1,) + (1,) * (x.ndim - 1))
    s = torch.sin(angle).reshape((-1,) + (1,) * (x.ndim - 1))
    kx = torch.cross(k.expand_as(x), x, dim=1)
    kdx = (k * x).sum(1, keepdim=True)
    return x * c + kx * s + k * kdx * (1 - c)


class SolidBodySimulation:
    """Exact solid-body advection for B trajectories (follows the Simulation protocol).

    params : dict of (B,) float64 tensors: omega, axis_x, axis_y, axis_z, a_x, a_y, a_z, b_x, b_y, b_z.
    """

    def __init__(self, params: dict[str, torch.Tensor], *, device="cpu"):
        p = {k: torch.as_tensor(v, dtype=torch.float64, device=device) for k, v in params.items()}
        self.omega = p["omega"]
        axis = torch.stack([p["axis_x"], p["axis_y"], p["axis_z"]], 1)
        self.axis = axis / axis.norm(dim=1, keepdim=True)
        self.a = torch.stack([p["a_x"], p["a_y"], p["a_z"]], 1)
        self.b = torch.stack([p["b_x"], p["b_y"], p["b_z"]], 1)
        self.device = device
        self.time = 0.0

    def advance_to(self, t: float) -> None:
        if t < self.time:
            raise ValueError(f"cannot advance backwards from {self.time} to {t}")
        self.time = float(t)

    def fields(self, grid: SphereGrid) -> dict[str, torch.Tensor]:
        B = self.omega.shape[0]
        x = grid.xyz.to(self.device).unsqueeze(0).expand(B, -1, -1, -1)
        angle = -self.omega * self.time
        y = rotate(x, self.axis, angle)
        h = (self.a[:, :, None, None] * y).sum(1) + ((self.b[:, :, None, None] * y).sum(1)) ** 2
        vel = self.omega[:, None, None, None] * torch.cross(self.axis[:, :, None, None].expand_as(x), x, dim=1)
        u = (vel * grid.east.to(self.device)).sum(1)
        v = (vel * grid.north.to(self.device)).sum(1)
        for name, f in (("h", h), ("u", u), ("v", v)):
            bad = ~torch.isfinite(f).flatten(1).all(1)
            if bad.any():
                raise FloatingPointError(
                    f"non-finite {name} in trajectory {int(bad.nonzero()[0])} of the batch at t={self.time}"
                )
        return {"h": h, "u": u, "v": v}


@register_scenario("solid_body")
class SolidBodyScenario(Scenario):
    """Analytic pipeline-test scenario (module docstring). Config keys: ``dt_frame``, ``spinup``."""

    time_units = "nondimensional"
    fields = {
        "h": FieldSpec("scalar", "1", "tracer", ("h",)),
        "velocity": FieldSpec("vector", "1", "solid-body rotation velocity", ("u", "v")),
    }
    parameter_units = {"omega": "1", **{f"{c}_{x}": "1" for c in ("axis", "a", "b") for x in "xyz"}}
    min_lmax = 3
    default_lmax = 3
    default_n_seeds = 4
    default_n_frames = 8

    def __init__(self, cfg=None):
        super().__init__(cfg)
        if self.solver_lmax < 3:
            raise ValueError(f"dataset.lmax={self.solver_lmax}: solid_body fields have degree 2, use lmax >= 3")
        if self.grid.lmax < 3:
            raise ValueError(f"grid {self.grid.to_dict()} resolves only degrees < {self.grid.lmax}: use nlat >= 5")

    def axes(self):
        return {"omega": [0.5, 1.0]}

    def seeded_parameters(self, rng: np.random.Generator, seed_index: int):
        z, psi = 2 * rng.random() - 1, 2 * math.pi * rng.random()
        r = math.sqrt(max(0.0, 1 - z * z))
        a, b = rng.standard_normal(3), rng.standard_normal(3)
        return {
            "axis_x": r * math.cos(psi),
            "axis_y": r * math.sin(psi),
            "axis_z": z,
            **{f"a_{c}": float(v) for c, v in zip("xyz", a)},
            **{f"b_{c}": float(v) for c, v in zip("xyz", b)},
        }

    def spinup(self):
        return float(self.cfg.get("spinup", 0.5))

    def dt_frame(self):
        return float(self.cfg.get("dt_frame", 0.125))

    def build_simulation(self, params, *, lmax, device):
        return SolidBodySimulation(params, device=device)
