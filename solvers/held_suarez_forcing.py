"""Held-Suarez (1994) forcing of a dry dynamical core, and the dataset's passive tracer.

Held, I. M. and Suarez, M. J. (1994), "A proposal for the intercomparison of the dynamical
cores of atmospheric general circulation models", Bull. Amer. Meteor. Soc. 75, 1825-1830,
equations (1)-(4)::

    dv/dt = ... - k_v(sigma) v
    dT/dt = ... - k_T(phi, sigma) (T - T_eq(phi, p))
    k_v   = k_f max(0, (sigma - sigma_b) / (1 - sigma_b))
    k_T   = k_a + (k_s - k_a) max(0, (sigma - sigma_b) / (1 - sigma_b)) cos^4(phi)
    T_eq  = max(T_min, [T_0 - dT_y sin^2(phi) - dtheta_z ln(p / p_0) cos^2(phi)] (p / p_0)^kappa)

with T_0 = 315 K, T_min = 200 K, sigma_b = 0.7, p_0 = 1000 hPa, k_a = 1/40 d^-1, k_s = 1/4 d^-1,
k_f = 1 d^-1 (docs/datasets/held_suarez.md). The sweep axes of the active variant (rotation-rate factor,
dT_y, dtheta_z) are per-trajectory tensors of shape ``(B,)``.

The tracer (docs/datasets/held_suarez.md, "Tracer"): a dimensionless mixing ratio q relaxed toward 1 with a
1-day time scale between 30 and 60 degrees N in the source layer (model levels with
sigma > 0.9, always including the lowest level) and toward 0 elsewhere in that layer, plus a
linear sink with a 20-day e-folding time everywhere.

All functions are pure torch, float64, device-agnostic. Time unit: seconds. The batched simulation
that applies this forcing is :class:`dandelion.solvers.held_suarez.HeldSuarezSimulation`; that module
re-exports every name of this one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = [
    "DAY",
    "HS_CONSTANTS",
    "equilibrium_temperature",
    "thermal_relaxation_rate",
    "rayleigh_drag_rate",
    "HeldSuarezForcing",
    "TracerForcing",
]

#: One day in seconds.
DAY = 86400.0

#: Planetary constants used by the reference (MITgcm values, docs/datasets/held_suarez.md).
HS_CONSTANTS = dict(
    radius=6.371e6,  # m
    omega=7.292e-5,  # rad/s
    gravity=9.80616,  # m/s^2
    cp=1004.0,  # J/(kg K)
    R=287.04,  # J/(kg K)
    p0=1.0e5,  # Pa
)
HS_CONSTANTS["kappa"] = HS_CONSTANTS["R"] / HS_CONSTANTS["cp"]


def equilibrium_temperature(
    lat: torch.Tensor,
    p: torch.Tensor,
    delta_T_y=60.0,
    delta_theta_z=10.0,
    T0: float = 315.0,
    T_min: float = 200.0,
    p0: float = HS_CONSTANTS["p0"],
    kappa: float = HS_CONSTANTS["kappa"],
) -> torch.Tensor:
    """Radiative-equilibrium temperature of Held & Suarez (1994), eq. (3), in K.

    Parameters
    ----------
    lat : torch.Tensor
        Latitude in radians, broadcastable against ``p``.
    p : torch.Tensor
        Pressure in Pa (``sigma * ps``).
    delta_T_y, delta_theta_z : float or torch.Tensor
        Equator-pole temperature difference (K) and static-stability parameter (K);
        tensors must broadcast against ``p`` (e.g. shape ``(B, 1, 1, 1)``).
    T0, T_min, p0, kappa
        Surface equatorial temperature (K), stratospheric floor (K), reference pressure (Pa),
        R / c_p.

    Returns
    -------
    torch.Tensor
        ``T_eq`` broadcast of the inputs, float64, K.

    Raises
    ------
    ValueError
        If any pressure is not positive (``ln p`` is undefined).
    """
    if bool((p <= 0).any()):
        raise ValueError("equilibrium_temperature needs p > 0 (Pa); pass sigma * ps with sigma > 0")
    sin2 = torch.sin(lat) ** 2
    cos2 = 1.0 - sin2
    ratio = p / p0
    teq = (T0 - delta_T_y * sin2 - delta_theta_z * torch.log(ratio) * cos2) * ratio**kappa
    return torch.clamp(teq, min=T_min)


def _sigma_ramp(sigma: torch.Tensor, sigma_b: float) -> torch.Tensor:
    return torch.clamp((sigma - sigma_b) / (1.0 - sigma_b), min=0.0)


def thermal_relaxation_rate(
    lat: torch.Tensor,
    sigma: torch.Tensor,
    k_a: float = 1.0 / (40 * DAY),
    k_s: float = 1.0 / (4 * DAY),
    sigma_b: float = 0.7,
) -> torch.Tensor:
    """Newtonian cooling rate ``k_T`` of Held & Suarez (1994), eq. (4), in 1/s.

    ``k_T = k_a + (k_s - k_a) max(0, (sigma - sigma_b)/(1 - sigma_b)) cos^4(lat)``; ``lat`` (rad)
    and ``sigma`` broadcast against each other.
    """
    return k_a + (k_s - k_a) * _sigma_ramp(sigma, sigma_b) * torch.cos(lat) ** 4


def rayleigh_drag_rate(sigma: torch.Tensor, k_f: float = 1.0 / DAY, sigma_b: float = 0.7) -> torch.Tensor:
    """Rayleigh friction rate ``k_v`` of Held & Suarez (1994), eq. (2), in 1/s; zero above ``sigma_b``."""
    return k_f * _sigma_ramp(sigma, sigma_b)


@dataclass
class HeldSuarezForcing:
    """Held-Suarez forcing with per-trajectory sweep parameters.

    Parameters
    ----------
    delta_T_y, delta_theta_z : torch.Tensor of shape (B,)
        Sweep axes (K). Defaults of the reference: 60 K and 10 K.
    k_a, k_s, k_f : float
        Rates in 1/s (defaults 1/40 d, 1/4 d, 1/1 d).
    sigma_b, T0, T_min : float
        Boundary-layer top, surface equatorial temperature (K), floor (K).

    The rotation-rate factor is a property of the dynamics (Coriolis), not of the forcing; it is
    passed to :class:`dandelion.solvers.primitive_equations.PrimitiveEquations`.
    """

    delta_T_y: torch.Tensor
    delta_theta_z: torch.Tensor
    k_a: float = 1.0 / (40 * DAY)
    k_s: float = 1.0 / (4 * DAY)
    k_f: float = 1.0 / DAY
    sigma_b: float = 0.7
    T0: float = 315.0
    T_min: float = 200.0
    p0: float = HS_CONSTANTS["p0"]
    kappa: float = HS_CONSTANTS["kappa"]

    def temperature_tendency(
        self, T: torch.Tensor, sigma: torch.Tensor, ps: torch.Tensor, lat: torch.Tensor
    ) -> torch.Tensor:
        """``-k_T (T - T_eq)`` in K/s.

        Parameters
        ----------
        T : (B, N, nlat, nlon) temperature on model levels, K.
        sigma : (N,) full-level sigma.
        ps : (B, nlat, nlon) surface pressure, Pa.
        lat : (nlat,) latitude, rad.
        """
        s = sigma.reshape(1, -1, 1, 1)
        la = lat.reshape(1, 1, -1, 1)
        p = s * ps[:, None]
        dty = self.delta_T_y.to(T).reshape(-1, 1, 1, 1)
        dtz = self.delta_theta_z.to(T).reshape(-1, 1, 1, 1)
        teq = equilibrium_temperature(la, p, dty, dtz, self.T0, self.T_min, self.p0, self.kappa)
        kt = thermal_relaxation_rate(la, s, self.k_a, self.k_s, self.sigma_b)
        return -kt * (T - teq)

    def drag_rate(self, sigma: torch.Tensor) -> torch.Tensor:
        """Per-level Rayleigh drag rate ``k_v`` of shape (N,), 1/s (constant on a sigma level)."""
        return rayleigh_drag_rate(sigma, self.k_f, self.sigma_b)


@dataclass
class TracerForcing:
    """Source and sink of the passive tracer q (dimensionless mixing ratio), docs/datasets/held_suarez.md.

    Parameters
    ----------
    source_time : float
        Relaxation time (s) of q in the source layer toward 1 in the band, 0 outside; ``inf``
        switches the source off.
    sink_time : float
        e-folding time (s) of the linear sink everywhere; ``inf`` switches it off.
    lat_south, lat_north : float
        Band edges in degrees north (30 and 60).
    sigma_source : float
        Levels with full-level sigma above this value form the source layer (the lowest level
        is always included).
    """

    source_time: float = 1.0 * DAY
    sink_time: float = 20.0 * DAY
    lat_south: float = 30.0
    lat_north: float = 60.0
    sigma_source: float = 0.9

    def tendency(self, q: torch.Tensor, sigma: torch.Tensor, lat: torch.Tensor) -> torch.Tensor:
        """dq/dt (1/s) for ``q`` of shape (B, N, nlat, nlon), ``sigma`` (N,), ``lat`` (nlat,) rad."""
        out = torch.zeros_like(q)
        if math.isfinite(self.sink_time):
            out = out - q / self.sink_time
        if math.isfinite(self.source_time):
            layer = sigma > self.sigma_source
            layer[-1] = True
            latd = torch.rad2deg(lat)
            band = ((latd >= self.lat_south) & (latd <= self.lat_north)).to(q.dtype).reshape(1, 1, -1, 1)
            relax = (band - q) / self.source_time
            out = out + relax * layer.to(q.dtype).reshape(1, -1, 1, 1)
        return out
