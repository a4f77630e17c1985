"""``transport``: a tracer carried by analytic flows on the sphere, with an exact solution (docs/datasets/transport.md).

Flows (:mod:`dandelion.solvers.transport_flows`): solid-body rotation and the four deformational flows of Nair &
Lauritzen (2010, J. Comput. Phys. 229, 8868-8887, cases 1-4), each tilted by a random rotation per trajectory. The
tracer at ``t = 0`` is a sum of three Gaussian hills ``a_i exp(-|x - c_i|^2 / (2 sigma_i^2))`` (chord distance on
the unit sphere); the exact solution of ``dh/dt + u . grad h = 0`` is ``h(x, t) = h0(d(x, t))``, ``d`` the departure
point at time 0 of the particle at ``x`` at time ``t``, integrated accurately (RK4 substeps of pseudo-time <= 0.01,
re-normalised to the sphere; closed form for solid body). No solver error enters a frame: each is the exact field
projected onto the stored band limit.

**Band limit.** Every stored field is the exact field truncated to the stored band limit ``L = min(lmax, grid
lmax)``: the exact tracer and velocity are evaluated on a Legendre-Gauss grid of ``L + 48`` rows (the hills'
spectra fall below 1e-16 of their peak by degree 48 at the narrowest width, 0.2 rad), analysed there and
synthesised at the stored grid's nodes. So the fields analyse exactly on the stored grid (the project's convention);
the narrow hills lose a little to the truncation at 32x64 (the card gives the numbers).

**Time.** Non-dimensional, period ``T = 5``; frame ``k`` is at flow time ``t_start + spinup + k dt_frame`` with a
per-trajectory ``t_start`` uniform in ``[0, T)``, so the windows see every phase of the deformation and its reversal.

**Flow capability.** The scenario declares its flow (:meth:`TransportScenario.departure_points`), which the
benchmark's exact semi-Lagrangian oracle uses (:mod:`dandelion.benchmarks.grid.oracle`).

Sweep: ``flow`` in {0 solid body, 1, 2, 3, 4 (Nair-Lauritzen cases)} x ``sigma`` (narrowest hill width, rad) in
{0.2, 0.3} x ``n_seeds`` (default 20); seeded: the tilt (axis uniform on the sphere, angle uniform in [0, 2 pi)),
``t_start``, and per hill the centre (uniform on the sphere), amplitude (uniform in [0.5, 1]) and width
(``sigma * (1, 1.5, 2)``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dandelion.solvers import transport_flows as flows
from dandelion.solvers.spectral_core import SpectralCore
from dandelion.sphere import SphereGrid

from .scenario import FieldSpec, Scenario, register_scenario

__all__ = ["TransportScenario", "TransportSimulation", "N_HILLS", "WIDTH_FACTORS"]

N_HILLS = 3
#: hill i has width sigma * WIDTH_FACTORS[i]
WIDTH_FACTORS = (1.0, 1.5, 2.0)
#: extra quadrature rows above the stored band limit (module docstring, "Band limit")
QUADRATURE_MARGIN = 64


def flow_parameters(params: dict[str, torch.Tensor], device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``(flow codes (B,) long, tilts (B, 3, 3) float64)`` from a trajectory parameter dict of ``(B,)`` tensors."""
    p = {k: torch.as_tensor(v, dtype=torch.float64, device=device) for k, v in params.items()}
    axis = torch.stack([p["tilt_axis_x"], p["tilt_axis_y"], p["tilt_axis_z"]], 1)
    return p["flow"].round().long(), flows.rotation_matrix(axis, p["tilt_angle"])


def initial_tracer(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``h0`` at points ``x (B, 3, ...)``: the sum of the trajectory's Gaussian hills; returns ``(B, ...)``."""
    shape = (-1, 3) + (1,) * (x.ndim - 2)
    out = torch.zeros_like(x[:, 0])
    for i in range(N_HILLS):
        c = torch.stack([torch.as_tensor(params[f"hill{i}_{a}"], dtype=x.dtype, device=x.device) for a in "xyz"], 1)
        a = torch.as_tensor(params[f"hill{i}_amplitude"], dtype=x.dtype, device=x.device)
        s = torch.as_tensor(params["sigma"], dtype=x.dtype, device=x.device) * WIDTH_FACTORS[i]
        d2 = ((x - c.reshape(shape)) ** 2).sum(1)
        out = out + a.reshape(shape[:1] + shape[2:]) * torch.exp(-d2 / (2 * s.reshape(shape[:1] + shape[2:]) ** 2))
    return out


class TransportSimulation:
    """The exact transport of B trajectories (follows the Simulation protocol).

    params : dict of (B,) float64 tensors (the scenario's parameters); spinup : flow time of stored frame 0 minus
    ``t_start``; lmax : band limit of the stored fields (capped by each output grid's); max_step : RK4 substep.
    """

    def __init__(
        self, params: dict[str, torch.Tensor], *, lmax: int, device="cpu", max_step: float = 0.01, margin: int = 0
    ):
        self.params = {k: torch.as_tensor(v, dtype=torch.float64, device=device) for k, v in params.items()}
        self.flow, self.tilt = flow_parameters(self.params, device)
        self.lmax, self.device, self.max_step = int(lmax), device, float(max_step)
        self.margin = int(margin or QUADRATURE_MARGIN)
        self.time = 0.0
        self._cores: dict[int, SpectralCore] = {}
        self._state: dict[int, tuple] = {}  # band limit -> (pseudo-time, flow-mapped quadrature nodes)

    def advance_to(self, t: float) -> None:
        if t < self.time:
            raise ValueError(f"cannot advance backwards from {self.time} to {t}")
        self.time = float(t)

    def _core(self, L: int) -> SpectralCore:
        if L not in self._cores:
            n = L + self.margin
            self._cores[L] = SpectralCore(L, nlat=n, nlon=2 * n, grid="legendre-gauss").to(self.device)
        return self._cores[L]

    def flow_time(self) -> torch.Tensor:
        """Flow time ``t_start + self.time`` of each trajectory, ``(B,)``."""
        return self.params["t_start"] + self.time

    def _tracer_spectrum(self, core: SpectralCore) -> torch.Tensor:
        """Spectrum ``(B, L, L)`` of the tracer at the current time, by quadrature on ``core``'s grid.

        The quadrature nodes ``x`` are mapped to the flow's frame at t = 0 (``Q^T x``), then by the flow map
        ``Phi_{-G(t)}`` of the steady field in pseudo-time, carried from the previous call (a flow is a group:
        ``Phi_{s'} = Phi_{s' - s} o Phi_s``), so each frame integrates only its own increment. That gives ``h0`` at the
        departure points for cases 0-3. Case 4 turns about the pole (its tilt is a rotation about z,
        :meth:`TransportScenario.parameters`), so its tracer is the same function turned by ``omega t`` in longitude:
        a phase ``exp(-i m omega t)`` on order ``m``."""
        target = -flows.pseudo_time(self.flow, self.flow_time())
        s, pos = self._state.get(core.lmax, (None, None))
        if pos is None:
            x = core.xyz.to(self.device).unsqueeze(0).expand(target.shape[0], -1, -1, -1)
            s, pos = torch.zeros_like(target), torch.einsum("bji,bj...->bi...", self.tilt, x)
        pos = flows.flow_map(self.flow, pos, target - s, self.max_step)
        self._state[core.lmax] = (target, pos)
        spec = core.to_spec(initial_tracer(self.params, torch.einsum("bij,bj...->bi...", self.tilt, pos)))
        turn = flows.frame_rotation_angle(self.flow, self.flow_time())  # (B,) omega t for case 4, else 0
        m = torch.arange(spec.shape[-1], device=spec.device, dtype=torch.float64)
        return spec * torch.exp(-1j * m[None, None, :] * turn[:, None, None])

    def fields(self, grid: SphereGrid) -> dict[str, torch.Tensor]:
        """Tracer ``h`` and velocity ``u, v`` (east, north), each ``(B, nlat, nlon)``, truncated to
        ``min(lmax, grid.lmax)`` and synthesised at ``grid``'s nodes (module docstring): both analysed from their
        exact values on the Legendre-Gauss quadrature grid."""
        L = max(2, min(self.lmax, grid.lmax))
        core = self._core(L)
        B = self.flow.shape[0]
        t = self.flow_time()
        h = core.synthesise(self._tracer_spectrum(core), grid)
        x = core.xyz.to(self.device).unsqueeze(0).expand(B, -1, -1, -1)
        vel = flows.velocity(self.flow, self.tilt, x, t)
        east, north = core.grid_spec.east.to(self.device), core.grid_spec.north.to(self.device)
        vrt, div = core.uv_to_vrtdiv((vel * east).sum(1), (vel * north).sum(1))
        u, v = core.synthesise_uv(vrt, div, grid)
        out = {"h": h, "u": u, "v": v}
        for name, f in out.items():
            bad = ~torch.isfinite(f).flatten(1).all(1)
            if bad.any():
                raise FloatingPointError(
                    f"non-finite {name} in trajectory {int(bad.nonzero()[0])} of the batch at t={self.time}"
                )
        return out


@register_scenario("transport")
class TransportScenario(Scenario):
    """Exact transport by analytic flows (module docstring). Config keys: ``dt_frame``, ``spinup``, ``max_step``."""

    time_units = "nondimensional"
    fields = {
        "h": FieldSpec("scalar", "1", "tracer (mixing ratio)", ("h",)),
        "velocity": FieldSpec("vector", "1", "prescribed flow velocity (unit sphere, per unit time)", ("u", "v")),
    }
    #: the velocity is prescribed, not predicted: models get it from the truth at every step and it is not scored
    forcing_fields = ("velocity",)
    parameter_units = {
        "flow": "1",
        "sigma": "rad",
        "t_start": "1",
        "tilt_axis_x": "1",
        "tilt_axis_y": "1",
        "tilt_axis_z": "1",
        "tilt_angle": "rad",
        **{f"hill{i}_{a}": "1" for i in range(N_HILLS) for a in ("x", "y", "z", "amplitude")},
    }
    min_lmax = 1
    default_lmax = 1024  # analytic: the stored grid's band limit decides
    default_n_seeds = 20
    default_n_frames = 40

    def axes(self):
        return {"flow": [0, 1, 2, 3, 4], "sigma": [0.2, 0.3]}

    def seeded_parameters(self, rng: np.random.Generator, seed_index: int):
        def unit():
            z, psi = 2 * rng.random() - 1, 2 * math.pi * rng.random()
            r = math.sqrt(max(0.0, 1 - z * z))
            return r * math.cos(psi), r * math.sin(psi), z

        ax = unit()
        p = {"tilt_axis_x": ax[0], "tilt_axis_y": ax[1], "tilt_axis_z": ax[2], "tilt_angle": 2 * math.pi * rng.random()}
        p["t_start"] = flows.PERIOD * rng.random()
        for i in range(N_HILLS):
            c = unit()
            p.update({f"hill{i}_x": c[0], f"hill{i}_y": c[1], f"hill{i}_z": c[2]})
            p[f"hill{i}_amplitude"] = 0.5 + 0.5 * rng.random()
        return p

    def spinup(self):
        return float(self.cfg.get("spinup", 0.0))

    def dt_frame(self):
        return float(self.cfg.get("dt_frame", flows.PERIOD / 100))

    def solver_settings(self) -> dict:
        return {
            "method": "exact: departure points by RK4 in pseudo-time, re-normalised to the sphere (solid body: "
            "closed form); fields projected on the stored band limit by Legendre-Gauss quadrature",
            "max_step": float(self.cfg.get("max_step", 0.01)),
            "quadrature_rows": f"stored lmax + {QUADRATURE_MARGIN}",
            "period": flows.PERIOD,
            "flows": {str(k): v for k, v in flows.FLOWS.items()},
        }

    def describe(self) -> dict:
        d = super().describe()
        d["forcing_fields"] = list(self.forcing_fields)
        return d

    def build_simulation(self, params, *, lmax, device):
        return TransportSimulation(params, lmax=lmax, device=device, max_step=float(self.cfg.get("max_step", 0.01)))

    # ------------------------------------------------------------------ the flow capability (oracle)
    def departure_points(
        self, params: dict[str, torch.Tensor], xyz: torch.Tensor, t_from: torch.Tensor, t_to: torch.Tensor
    ) -> torch.Tensor:
        """Where the particles at points ``xyz (B, 3, ...)`` at STORED times ``t_from (B,)`` are at stored times
        ``t_to (B,)`` (the flow time adds ``t_start + spinup``); ``params``: dict of ``(B,)`` trajectory parameters
        (:meth:`parameters`). Exact up to the RK4 substep (:func:`dandelion.solvers.transport_flows.departure_points`).
        """
        flow, tilt = flow_parameters(params, xyz.device)
        t0 = torch.as_tensor(params["t_start"], dtype=torch.float64, device=xyz.device) + self.spinup()
        return flows.departure_points(flow, tilt, xyz, t0 + t_from, t0 + t_to, float(self.cfg.get("max_step", 0.01)))

    def parameters(self, trajectory_id: int) -> dict[str, float]:
        """The trajectory's parameters (:meth:`Scenario.parameters`); case 4 (flow 4) keeps its axis at the pole: its
        tilt is turned onto z (a rotation by ``tilt_angle`` in longitude), so that its band-limited tracer is a phase
        per order (:meth:`TransportSimulation._tracer_spectrum`)."""
        p = super().parameters(trajectory_id)
        if int(round(p["flow"])) == 4:
            p.update({"tilt_axis_x": 0.0, "tilt_axis_y": 0.0, "tilt_axis_z": 1.0})
        return p
