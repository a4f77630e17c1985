"""Analytic seasonal forcing of the layered ocean (:mod:`dandelion.solvers.ocean`).

Time ``t`` is in seconds from 1 January 00:00 of a 365-day year; ``doy = (t / 86400) mod 365``. The
seasonal cycle moves the wind belts and restoring fields meridionally with the sun, by
``phi_s(t) = 6 deg * sin(2 pi (doy - 80) / 365)`` (northernmost in northern summer), and strengthens the
winter hemisphere's winds.

* Zonal wind stress (N/m^2): ``tau_x = tau0 * (-cos(3 (phi - phi_s))) * (1 + 0.2 sin(phi) cos(2 pi doy / 365))``
  poleward of the equator: easterly trades within +-30 degrees, westerlies 30-90 degrees (the classic
  three-cell profile, idealised).
* Restoring SST (degC): ``T* = -1.5 + 29.5 cos^2(phi - phi_s)``, from 28 degC at the thermal equator
  to about -1 degC at 80 degrees.
* Restoring SSS (psu):
  ``S* = 34.2 + 1.5 exp(-((|phi - phi_s| - 25 deg) / 12 deg)^2) - 0.5 exp(-((phi - phi_s) / 6 deg)^2)``,
  salty subtropics, fresher equator and high latitudes.

All functions take latitudes ``lat`` (radians, a tensor of any shape) and return a tensor of that shape.
"""

from __future__ import annotations

import math

import torch

__all__ = ["YEAR", "DAY", "day_of_year", "solar_shift", "wind_stress", "restoring_temperature", "restoring_salinity"]

DAY = 86400.0
YEAR = 365.0 * DAY


def day_of_year(t: float) -> float:
    """Day of year in [0, 365) of time ``t`` (s)."""
    return (float(t) / DAY) % 365.0


def solar_shift(t: float) -> float:
    """Meridional shift of the forcing belts (radians) at time ``t`` (s)."""
    return math.radians(6.0) * math.sin(2.0 * math.pi * (day_of_year(t) - 80.0) / 365.0)


def wind_stress(lat: torch.Tensor, t: float, tau0: float = 0.1) -> torch.Tensor:
    """Zonal wind stress (N/m^2) at latitudes ``lat`` (rad) and time ``t`` (s) (module docstring)."""
    season = math.cos(2.0 * math.pi * day_of_year(t) / 365.0)
    return tau0 * (-torch.cos(3.0 * (lat - solar_shift(t)))) * (1.0 + 0.2 * torch.sin(lat) * season)


def restoring_temperature(lat: torch.Tensor, t: float) -> torch.Tensor:
    """Restoring sea-surface temperature T* (degC) at ``lat`` (rad), time ``t`` (s)."""
    return -1.5 + 29.5 * torch.cos(lat - solar_shift(t)) ** 2


def restoring_salinity(lat: torch.Tensor, t: float) -> torch.Tensor:
    """Restoring sea-surface salinity S* (psu) at ``lat`` (rad), time ``t`` (s)."""
    x = torch.rad2deg(lat - solar_shift(t))
    return 34.2 + 1.5 * torch.exp(-(((x.abs() - 25.0) / 12.0) ** 2)) - 0.5 * torch.exp(-((x / 6.0) ** 2))
