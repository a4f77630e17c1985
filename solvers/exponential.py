"""Exponential time differencing for ``du/dt = L u + N(u)`` with a diagonal, real linear operator ``L``.

:class:`ETDRK2` and :class:`ETDRK4` (Cox & Matthews 2002, *J. Comput. Phys.* 176, 430-455, eqs. 22 and
26-29) integrate ``L`` exactly through the phi-functions ``phi_0(z) = exp(z)``,
``phi_{k+1}(z) = (phi_k(z) - 1/k!)/z`` (:func:`phi_functions`: the Taylor series for ``|z| < 1``, where
the recursion cancels (Kassam & Trefethen 2005, *SIAM J. Sci. Comput.* 26, 1214), the closed forms
elsewhere). Re-exported by :mod:`dandelion.solvers.integrators` with the other schemes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

__all__ = ["phi_functions", "ETDRK2", "ETDRK4"]

#: Taylor terms and radius of the series branch of :func:`phi_functions` (``|z| < 1``).
_SERIES_TERMS = 30
_SERIES_RADIUS = 1.0


def phi_functions(z: torch.Tensor, kmax: int = 3) -> list[torch.Tensor]:
    """``[phi_0(z), ..., phi_kmax(z)]`` for real ``z`` of any shape (float64).

    Parameters
    ----------
    z : torch.Tensor
        Real arguments (e.g. ``sigma * dt``); cast to float64. Large negative values (stiff
        decay, ``z = -1e9``) are fine; ``exp`` overflows above ``z ~ 709``.
    kmax : int
        Highest phi-function wanted (>= 0).

    Returns
    -------
    list of torch.Tensor, each the shape of ``z``, float64.

    Raises
    ------
    ValueError
        If ``kmax < 0`` or ``z`` is complex.
    """
    if kmax < 0:
        raise ValueError(f"kmax={kmax} must be >= 0")
    if torch.is_complex(z):
        raise ValueError("phi_functions takes real z (diagonal real rates)")
    z = z.to(torch.float64)
    small = z.abs() < _SERIES_RADIUS
    zs = torch.where(small, z, torch.zeros_like(z))  # series argument (masked)
    zl = torch.where(small, torch.ones_like(z), z)  # closed-form argument (masked, never 0)
    out = [torch.exp(z)]
    phi_large = torch.expm1(zl) / zl
    for k in range(1, kmax + 1):
        # series: phi_k(z) = sum_j z^j / (j + k)!  (Horner, highest term first)
        acc = torch.zeros_like(zs)
        for j in range(_SERIES_TERMS - 1, -1, -1):
            acc = acc * zs + 1.0 / math.factorial(j + k)
        if k > 1:
            phi_large = (phi_large - 1.0 / math.factorial(k - 1)) / zl
        out.append(torch.where(small, acc, phi_large))
    return out


def _step(dt, linear: torch.Tensor):
    """``dt`` as a float, or as a float64 tensor broadcastable against ``linear`` (one step per trajectory)."""
    if isinstance(dt, torch.Tensor):
        if not bool((dt > 0).all()):
            raise ValueError(f"every dt must be positive, got {dt.reshape(-1).tolist()}")
        return dt.to(dtype=torch.float64, device=linear.device)
    if not dt > 0:
        raise ValueError(f"dt={dt} must be positive")
    return float(dt)


class ETDRK2:
    """Cox-Matthews ETDRK2 (2002, eq. 22) for ``du/dt = L u + N(u)`` with diagonal real ``L``.

    Parameters
    ----------
    linear : torch.Tensor
        Real rates ``L``, broadcastable against the state (e.g. ``(B, lmax, 1)``), units 1/time.
    dt : float or torch.Tensor
        Step, same time unit; a tensor broadcastable against ``linear`` (e.g. ``(B, 1, 1)``) gives each
        trajectory its own step.

    ``step(u, nonlinear, nu=None)`` returns ``u(t + dt)``; ``nonlinear(u)`` must return ``N(u)`` with
    the state's shape. Two evaluations of ``N`` per step; exact when ``N = 0``.
    """

    def __init__(self, linear: torch.Tensor, dt):
        self.dt = h = _step(dt, linear)
        e, p1, p2 = phi_functions(linear.to(torch.float64) * h, kmax=2)
        self.e, self.hp1, self.hp2 = e, h * p1, h * p2

    def step(
        self, u: torch.Tensor, nonlinear: Callable[[torch.Tensor], torch.Tensor], nu: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``u(t + dt)``; ``nu = N(u)`` may be passed if already computed."""
        nu = nonlinear(u) if nu is None else nu
        a = self.e * u + self.hp1 * nu
        return a + self.hp2 * (nonlinear(a) - nu)


class ETDRK4:
    """Cox-Matthews ETDRK4 (2002, eqs. 26-29) for ``du/dt = L u + N(u)`` with diagonal real ``L``.

    Coefficients (``z = L dt``): half-step ``exp(z/2)`` and ``dt/2 * phi_1(z/2)``; final
    ``f1 = phi_1 - 3 phi_2 + 4 phi_3``, ``f2 = phi_2 - 2 phi_3`` (weighting ``N(a) + N(b)`` twice),
    ``f3 = -phi_2 + 4 phi_3`` (Kassam & Trefethen 2005, eq. 2.5 written in phi-functions). Four evaluations of ``N`` per
    step; fourth order; exact for ``N = 0``; reduces to a classical 4-stage RK scheme for ``L = 0``.

    Parameters
    ----------
    linear : torch.Tensor
        Real rates ``L`` broadcastable against the state, 1/time.
    dt : float or torch.Tensor
        Step, same time unit (a tensor: one step per trajectory, broadcastable against ``linear``).
    """

    def __init__(self, linear: torch.Tensor, dt):
        self.dt = h = _step(dt, linear)
        z = linear.to(torch.float64) * h
        e2, q1 = phi_functions(0.5 * z, kmax=1)
        e, p1, p2, p3 = phi_functions(z, kmax=3)
        self.e, self.e2, self.q = e, e2, 0.5 * h * q1
        self.f1 = h * (p1 - 3.0 * p2 + 4.0 * p3)
        self.f2 = 2.0 * h * (p2 - 2.0 * p3)  # the weight of N(a) + N(b), i.e. 2 f2 of Cox-Matthews
        self.f3 = h * (-p2 + 4.0 * p3)

    def step(
        self, u: torch.Tensor, nonlinear: Callable[[torch.Tensor], torch.Tensor], nu: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``u(t + dt)``; ``nu = N(u)`` may be passed if already computed."""
        nu = nonlinear(u) if nu is None else nu
        a = self.e2 * u + self.q * nu
        na = nonlinear(a)
        b = self.e2 * u + self.q * na
        nb = nonlinear(b)
        c = self.e2 * a + self.q * (2.0 * nb - nu)
        nc = nonlinear(c)
        return self.e * u + self.f1 * nu + self.f2 * (na + nb) + self.f3 * nc
