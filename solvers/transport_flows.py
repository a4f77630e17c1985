"""Analytic transport flows on the unit sphere and their exact departure points.

Five prescribed flows, each a time factor times a steady field, ``u(x, t) = g(t) U(x)`` (in a frame rotating
about the flow's own z axis for case 4), non-dimensional (unit sphere, period ``T = 5``):

* ``0`` solid-body rotation about the flow's z axis, ``U = omega ez x x`` with ``omega = 2 pi / T`` (one turn per
  ``T``), ``g = 1``;
* ``1``-``4`` the deformational flows of Nair & Lauritzen (2010, J. Comput. Phys. 229, 8868-8887, section 2, cases
  1-4), with latitude ``phi``, longitude ``lam`` and ``g(t) = cos(pi t / T)``:

  - case 1 (non-divergent, ``k = 2.4``): ``u = k sin^2(lam/2) sin(2 phi) g``, ``v = (k/2) sin(lam) cos(phi) g``;
  - case 2 (non-divergent, ``k = 2``): ``u = k sin^2(lam) sin(2 phi) g``, ``v = k sin(2 lam) cos(phi) g``;
  - case 3 (divergent, ``k = 1``): ``u = -k sin^2(lam/2) sin(2 phi) cos^2(phi) g``, ``v = (k/2) sin(lam) cos^3(phi) g``;
  - case 4 (non-divergent, ``k = 2``, case 2 seen from a frame turning at ``omega = 2 pi / T``):
    ``u = k sin^2(lam') sin(2 phi) g + omega cos(phi)``, ``v = k sin(2 lam') cos(phi) g``, ``lam' = lam - omega t``.

Because the time factor is separable, a particle path solves the autonomous ODE ``dx/ds = U(x)`` in the pseudo-time
``s = G(t) = int_0^t g`` (``G = (T/pi) sin(pi t/T)`` for the deformational flows, ``G = t`` for solid body), so the
departure points over ``[t_from, t_to]`` are the flow map of ``U`` over ``G(t_to) - G(t_from)`` (Nair & Lauritzen's
reversal: ``G(T) = 0``, every particle is back at ``t = T``). Case 4 maps in and out of the rotating frame
(``y = Rz(-omega t) x``). Each flow is tilted per trajectory by a rotation ``Q``: ``u_Q(x) = Q u(Q^T x)``, whose
departure points are ``Q d(Q^T x)``. The map of ``U`` is integrated by RK4 in Cartesian coordinates with
re-normalisation onto the sphere after each step (solid body: Rodrigues' formula, exact).

All tensors are float64; points are ``(B, 3, ...)`` unit vectors, times ``(B,)``.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "PERIOD",
    "FLOWS",
    "DIVERGENT",
    "rotation_matrix",
    "pseudo_time",
    "steady_velocity",
    "velocity",
    "departure_points",
    "flow_map",
    "frame_rotation",
    "frame_rotation_angle",
]

#: Nair & Lauritzen's period T (non-dimensional; the deformational flows reverse at T)
PERIOD = 5.0
#: flow code -> name
FLOWS = {0: "solid body", 1: "Nair-Lauritzen case 1", 2: "Nair-Lauritzen case 2", 3: "Nair-Lauritzen case 3",
         4: "Nair-Lauritzen case 4"}  # fmt: skip
#: flow codes whose velocity has divergence
DIVERGENT = (3,)
_K = {1: 2.4, 2: 2.0, 3: 1.0, 4: 2.0}
_OMEGA = 2 * math.pi / PERIOD


def rotation_matrix(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``(B, 3, 3)`` by ``angle (B,)`` [rad] about unit ``axis (B, 3)`` (Rodrigues' formula)."""
    k = axis / axis.norm(dim=1, keepdim=True)
    zero = torch.zeros_like(k[:, 0])
    kx = torch.stack(
        [
            torch.stack([zero, -k[:, 2], k[:, 1]], -1),
            torch.stack([k[:, 2], zero, -k[:, 0]], -1),
            torch.stack([-k[:, 1], k[:, 0], zero], -1),
        ],
        -2,
    )
    c, s = torch.cos(angle)[:, None, None], torch.sin(angle)[:, None, None]
    eye = torch.eye(3, dtype=k.dtype, device=k.device).expand_as(kx)
    return eye + s * kx + (1 - c) * (kx @ kx)


def _apply(m: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``m (B, 3, 3)`` applied to points ``x (B, 3, ...)``."""
    return torch.einsum("bij,bj...->bi...", m, x)


def _rot_z(angle: torch.Tensor) -> torch.Tensor:
    ez = torch.zeros(angle.shape[0], 3, dtype=angle.dtype, device=angle.device)
    ez[:, 2] = 1.0
    return rotation_matrix(ez, angle)


def pseudo_time(flow: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``G(t) = int_0^t g``: ``t`` for solid body (flow 0), ``(T/pi) sin(pi t / T)`` for the deformational flows."""
    return torch.where(flow == 0, t, (PERIOD / math.pi) * torch.sin(math.pi * t / PERIOD))


def _time_factor(flow: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return torch.where(flow == 0, torch.ones_like(t), torch.cos(math.pi * t / PERIOD))


def _steady(code: int, y: torch.Tensor) -> torch.Tensor:
    """The steady field ``U(y)`` (Cartesian, ``(b, 3, ...)``) of flow ``code`` at points ``y (b, 3, ...)`` in the
    flow's own frame (module docstring; case 4 in its rotating frame). With ``rho = cos(phi)``, ``cos(lam) = x/rho``,
    ``sin(lam) = y/rho``, ``sin(phi) = z``, the (east, north) components of the module docstring are rational in
    ``(x, y, z, rho)`` and ``U = u e + v n`` with ``e = (-y, x, 0)/rho``, ``n = (-z x/rho, -z y/rho, rho)`` (no
    trigonometry; every case vanishes at the poles, where ``rho`` is floored at 1e-300)."""
    x0, x1, x2 = y[:, 0], y[:, 1], y[:, 2]
    if code == 0:
        return _OMEGA * torch.stack([-x1, x0, torch.zeros_like(x2)], 1)
    if code in (2, 4):  # u = k sin^2(lam) sin(2 phi), v = k sin(2 lam) cos(phi): U = 2k y (-z, 0, x)
        k2 = 2 * _K[code] * x1
        return torch.stack([-k2 * x2, torch.zeros_like(x2), k2 * x0], 1)
    rho = torch.sqrt(x0 * x0 + x1 * x1).clamp_min(1e-300)
    k = _K[code]
    if code == 1:  # u = k z (rho - x), v = (k/2) y
        u, v = k * x2 * (rho - x0), 0.5 * k * x1
    elif code == 3:  # u = -k z (rho - x) rho^2, v = (k/2) y rho^2
        u, v = -k * x2 * (rho - x0) * rho * rho, 0.5 * k * x1 * rho * rho
    else:
        raise ValueError(f"flow code {code} is not one of {sorted(FLOWS)}")
    a, b = u / rho, v / rho  # U = a (-y, x, 0) + b (-z x, -z y, rho^2)
    return torch.stack([-a * x1 - b * x2 * x0, a * x0 - b * x2 * x1, b * rho * rho], 1)


def steady_velocity(flow: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The steady field ``U(y)`` (Cartesian, ``(B, 3, ...)``) of each trajectory's flow (codes ``(B,)``) at points
    ``y (B, 3, ...)`` in the flow's own frame (untilted; case 4 in its rotating frame)."""
    codes = torch.unique(flow).tolist()
    if len(codes) == 1:
        return _steady(int(codes[0]), y)
    out = torch.empty_like(y)
    for code in codes:
        idx = (flow == code).nonzero()[:, 0]
        out[idx] = _steady(int(code), y[idx])
    return out


def velocity(flow: torch.Tensor, tilt: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The velocity ``(B, 3, ...)`` (Cartesian, tangent) of each trajectory's tilted flow at points ``x (B, 3, ...)``
    and times ``t (B,)``: ``Q [g(t) Rz(omega t) U(Rz(-omega t) Q^T x) + omega ez x (Q^T x)]`` (the bracket's rotations
    and last term for case 4 only)."""
    z = _apply(tilt.transpose(1, 2), x)
    four = (flow == 4).to(t.dtype)
    spin = _rot_z(_OMEGA * t * four)
    u = _apply(spin, steady_velocity(flow, _apply(spin.transpose(1, 2), z)))
    shape = (-1,) + (1,) * (x.ndim - 1)
    u = _time_factor(flow, t).reshape(shape) * u
    ez = torch.zeros_like(z)
    ez[:, 2] = 1.0
    u = u + (_OMEGA * four).reshape(shape) * torch.cross(ez, z, dim=1)
    return _apply(tilt, u)


def flow_map(flow: torch.Tensor, y: torch.Tensor, ds: torch.Tensor, max_step: float) -> torch.Tensor:
    """Points ``y`` moved along ``dy/ds = U(y)`` for pseudo-time ``ds (B,)`` (RK4 with at most ``max_step`` per
    substep, re-normalised to the sphere; solid body exactly)."""
    shape = (-1,) + (1,) * (y.ndim - 1)
    out = y.clone()
    solid = flow == 0
    if solid.any():
        idx = solid.nonzero()[:, 0]
        out[idx] = _apply(_rot_z(_OMEGA * ds[idx]), y[idx])
    for code in torch.unique(flow[~solid]).tolist():
        idx = (flow == code).nonzero()[:, 0]
        z, d = y[idx], ds[idx]
        n = max(1, math.ceil(float(d.abs().max()) / max_step))
        h = (d / n).reshape(shape)
        for _ in range(n):
            k1 = _steady(int(code), z)
            k2 = _steady(int(code), z + 0.5 * h * k1)
            k3 = _steady(int(code), z + 0.5 * h * k2)
            k4 = _steady(int(code), z + h * k3)
            z = z + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
            z = z / z.norm(dim=1, keepdim=True)
        out[idx] = z
    return out


def frame_rotation_angle(flow: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``omega t`` for case 4 (the angle of its rotating frame at flow time ``t (B,)``), 0 otherwise; ``(B,)``."""
    return _OMEGA * t * (flow == 4).to(t.dtype)


def frame_rotation(flow: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``Rz(omega t)`` for case 4 (its rotating frame at flow time ``t (B,)``), else the identity; ``(B, 3, 3)``."""
    return _rot_z(frame_rotation_angle(flow, t))


def departure_points(
    flow: torch.Tensor,
    tilt: torch.Tensor,
    x: torch.Tensor,
    t_from: torch.Tensor,
    t_to: torch.Tensor,
    max_step: float = 0.01,
) -> torch.Tensor:
    """Where the particles at points ``x (B, 3, ...)`` at times ``t_from (B,)`` are at times ``t_to (B,)``.

    ``flow`` : (B,) flow codes (:data:`FLOWS`); ``tilt`` : (B, 3, 3) rotations ``Q``. With ``t_to < t_from``
    these are the departure points of an exact semi-Lagrangian step, and ``h0(departure_points(x, t, 0))`` is the
    exact solution at ``t`` of ``dh/dt + u . grad h = 0`` from ``h0``. ``max_step`` bounds the RK4 substep in
    pseudo-time (0.01: positions within 4e-8 of a 0.001-step solution over ``|ds| <= T/pi``, measured on
    a 16x32 grid of points for every flow). Returns ``(B, 3, ...)``.
    """
    y = _apply((tilt @ frame_rotation(flow, t_from)).transpose(1, 2), x)
    y = flow_map(flow, y, pseudo_time(flow, t_to) - pseudo_time(flow, t_from), max_step)
    return _apply(tilt @ frame_rotation(flow, t_to), y)
