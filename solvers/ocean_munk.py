"""Munk's (1950) western boundary layer: the width estimator of a wind-driven gyre and its exact reference.

Munk's no-slip boundary-layer solution with the Sverdrup interior (Munk 1950, *J. Meteorol.* 7, 80-93, eq. 26;
Pedlosky 1996, *Ocean Circulation Theory*, §2.5), ``x`` from the western wall, ``L`` the basin width::

    psi = C (x - L) b(x),   b = 1 - exp(-x / 2 delta) (cos(k x) + sin(k x) / sqrt(3)),   k = sqrt(3) / (2 delta)

has its meridional transport ``d psi / dx`` change sign at the ``x0`` where ``b + (x - L) b' = 0``
(:func:`munk_crossing`); :func:`munk_width_from_crossing` inverts it, giving the ``delta`` whose solution changes
sign at a measured ``x0``. That formula is the boundary-layer limit (``delta`` small against the basin and the wind's
meridional scale); :func:`munk_reference` applies the same estimator to the exact steady solution of Munk's
equation in a rectangular basin. :func:`sector_gyre` sets up the closed single-gyre sector basin the estimator is
measured in (15-45 N, walls on all sides, fast baroclinic modes, a single-gyre wind).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spl
import torch

from .ocean import RHO0, OceanModel, OceanParams, forced_stable_dt
from .ocean_grid import OceanGrid

__all__ = [
    "SECTOR_SOUTH",
    "SECTOR_NORTH",
    "munk_crossing",
    "munk_width_from_crossing",
    "munk_reference",
    "sector_wind",
    "SectorGyre",
    "sector_gyre",
]

#: Latitude bounds (degrees N) of the sector basin of :func:`sector_gyre`.
SECTOR_SOUTH, SECTOR_NORTH = 15.0, 45.0


def _bisect(f, a: float, b: float) -> float:
    """The root of ``f`` in ``[a, b]`` (``f(a)``, ``f(b)`` of opposite signs), by bisection to 1e-12 relative."""
    fa = f(a)
    if fa * f(b) >= 0:
        raise ValueError(f"no sign change of the function in [{a}, {b}]")
    for _ in range(200):
        c = 0.5 * (a + b)
        if fa * f(c) <= 0:
            b = c
        else:
            a, fa = c, f(c)
        if b - a < 1e-12 * b:
            break
    return 0.5 * (a + b)


def munk_crossing(delta: float, L: float) -> float:
    """First sign change (m from the western wall) of the transport of Munk's solution in a basin ``L`` (m) wide."""
    k = math.sqrt(3.0) / (2.0 * delta)

    def f(x):
        e = math.exp(-x / (2.0 * delta))
        b = 1.0 - e * (math.cos(k * x) + math.sin(k * x) / math.sqrt(3.0))
        return b + (x - L) * 2.0 / (math.sqrt(3.0) * delta) * e * math.sin(k * x)

    return _bisect(f, 0.3 * delta, 2.0 * math.pi / math.sqrt(3.0) * delta)


def munk_width_from_crossing(x0: float, L: float) -> float:
    """The Munk width ``delta`` (m) whose solution (with the Sverdrup interior) changes sign at ``x0`` (m)."""
    return _bisect(lambda d: munk_crossing(d, L) - x0, 0.3 * x0, 3.0 * x0)


def munk_reference(delta: float, L: float, Ly: float, beta: float, tau0: float = 0.05, n: int = 120) -> float:
    """The estimator's ratio for the exact steady solution of Munk's equation in an ``L`` x ``Ly`` (m) basin.

    Solves ``beta psi_x = curl tau / rho0 + A lap^2 psi`` (``A = beta delta^3``, ``psi`` the transport streamfunction,
    ``V = psi_x``) on a Cartesian beta-plane with the sector basin's wind ``tau = -tau0 cos(pi y / Ly)`` and no-slip
    walls ``psi = d psi / dn = 0`` (ghost points mirrored), second-order differences on ``n x n`` points, and returns
    the Munk width fitted to the first sign change of ``V`` at ``y = Ly / 2`` over ``delta``."""
    hx, hy = L / n, Ly / n
    d1 = sp.diags([-np.ones(n - 2), np.ones(n - 2)], [-1, 1]) / (2.0 * hx)

    def d2(h):
        return sp.diags([np.ones(n - 2), -2.0 * np.ones(n - 1), np.ones(n - 2)], [-1, 0, 1]) / h**2

    def d4(h):  # clamped ends: the ghost psi_{-1} = psi_1 turns the first diagonal 6 into 7
        main = 6.0 * np.ones(n - 1)
        main[[0, -1]] = 7.0
        return (
            sp.diags(
                [np.ones(n - 3), -4.0 * np.ones(n - 2), main, -4.0 * np.ones(n - 2), np.ones(n - 3)], [-2, -1, 0, 1, 2]
            )
            / h**4
        )

    eye = sp.identity(n - 1)
    bih = sp.kron(eye, d4(hx)) + 2.0 * sp.kron(d2(hy), d2(hx)) + sp.kron(d4(hy), eye)  # x fastest
    y = np.arange(1, n) * hy
    rhs = np.repeat(-tau0 * math.pi / Ly * np.sin(math.pi * y / Ly) / RHO0, n - 1)
    psi = spl.spsolve((beta * sp.kron(eye, d1) - beta * delta**3 * bih).tocsc(), rhs).reshape(n - 1, n - 1)
    row = np.concatenate([[0.0], psi[n // 2 - 1], [0.0]])  # y = Ly / 2 (n even), walls included
    V = (row[2:] - row[:-2]) / (2.0 * hx)  # at x = hx .. (n - 1) hx
    ic = int(np.nonzero(V < 0)[0][0])
    x0 = (ic + V[ic - 1] / (V[ic - 1] - V[ic])) * hx
    return munk_width_from_crossing(x0, L) / delta


def sector_wind(lat, t, tau0):
    """The single-gyre wind of the sector basin: ``tau_x = -tau0 cos(pi (phi - 15 deg) / 30 deg)`` (N/m^2)."""
    return -tau0 * torch.cos(math.pi * (torch.rad2deg(lat) - SECTOR_SOUTH) / (SECTOR_NORTH - SECTOR_SOUTH))


@dataclass
class SectorGyre:
    """The sector basin of :func:`sector_gyre`: its grid, parameters and one-trajectory model (step ``dt`` [s]),
    the v-face row ``j`` nearest 30 N (latitude ``phi`` [rad], ``beta`` [1/(m s)], cell width ``dxv`` [m]), the
    Munk width ``munk`` [m] and the ``nx`` x ``ny`` wet cells."""

    grid: OceanGrid
    params: OceanParams
    model: OceanModel
    dt: float
    j: int
    phi: float
    beta: float
    dxv: float
    munk: float
    nx: int
    ny: int

    def transport(self, state) -> torch.Tensor:
        """Meridional volume transport of both layers per column at row ``j`` (m^3/s), ``nx`` values from the
        western wall."""
        g, j, nx = self.grid, self.j, self.nx
        return (state.v[0, :, j, :nx] * g.to_v_rows(state.h)[0, :, j, :nx]).sum(0) * self.dxv

    def crossing(self, V: torch.Tensor) -> float:
        """Distance (m) from the western wall to the first sign change of the transport ``V``, linearly
        interpolated between the last northward column of the boundary current and the next."""
        ic = int(torch.nonzero(V[1:] < 0)[0])
        return (ic + 0.5 + float(V[ic] / (V[ic] - V[ic + 1]))) * self.dxv


def sector_gyre(res_deg: float = 1.0, width_deg: float = 30.0, munk_cells: float = 3.0) -> SectorGyre:
    """The closed single-gyre sector basin (15-45 N, ``width_deg`` wide, ``res_deg`` cells) of the two-layer ocean:
    uniform upper-layer T and S (no restoring), interface diffusion and diapycnal flux off, layers 250 and 1000 m
    with reduced gravities 0.5 and ~2 m/s^2 (fast baroclinic modes), :func:`sector_wind` with ``tau0`` = 0.05
    N/m^2, and the viscosity ``A = beta delta^3`` giving a Munk width ``delta`` of ``munk_cells`` meridional
    cells at 30 N; the step is the stable one dividing a day."""
    nx, ny = round(width_deg / res_deg), round((SECTOR_NORTH - SECTOR_SOUTH) / res_deg)
    wet = torch.ones(ny, nx + 1, dtype=torch.bool)
    wet[:, -1] = False  # closes the sector
    g = OceanGrid(ny, nx + 1, wet=wet, lat_bounds=(SECTOR_SOUTH, SECTOR_NORTH), lon_bounds=(0.0, width_deg + res_deg))
    j = int(torch.argmin((g.lat_edges - math.radians(30.0)).abs()))
    phi = float(g.lat_edges[j])
    beta = 2.0 * g.omega * math.cos(phi) / g.radius
    munk = munk_cells * g.dy  # Munk width set to munk_cells meridional cells (the larger cell side)
    const = lambda v: lambda lat, t: torch.full_like(lat, v)  # noqa: E731
    p = OceanParams(
        n_layers=2,
        H=(250.0, 1000.0),
        g2=0.5,
        alpha=0.02,
        beta_S=0.0,
        T2=-5.0,
        visc=beta * munk**3,
        kappa_gm=0.0,
        kappa_d=0.0,
        kappa_T=0.0,
        tau_T=math.inf,
        tau_S=math.inf,
        tau0=0.05,
        wind=sector_wind,
        t_star=const(5.0),
        s_star=const(35.0),
    )
    dt = 86400.0 / math.ceil(86400.0 / forced_stable_dt(g, p)[0])
    model = OceanModel(g, p, 1, dt)
    return SectorGyre(g, p, model, dt, j, phi, beta, float(g.dx_v[j, 0]), munk, nx, ny)
