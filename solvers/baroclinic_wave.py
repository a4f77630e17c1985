"""Balanced baroclinic-wave initial state of Jablonowski & Williamson (2006, QJRMS 132, 2943-2975),
the standard test of the primitive-equation core (:mod:`dandelion.solvers.primitive_equations`)."""

from __future__ import annotations

import math

import torch

from .primitive_equations import PEState, PrimitiveEquations

__all__ = ["jablonowski_williamson_state"]


def jablonowski_williamson_state(
    eq: PrimitiveEquations, *, perturbation: bool = True, u0: float = 35.0, up: float = 1.0, batch: int = 1
):
    """Balanced baroclinic-wave initial state of Jablonowski & Williamson (2006, QJRMS 132, 2943-2975).

    Evaluates eqs. (2)-(3) (zonal wind), (6)-(7) (temperature), (10) (surface geopotential) and
    (12) (the Gaussian zonal-wind perturbation of 1 m/s centred at 20E, 40N) at the model's full
    sigma levels, with ``eta = sigma`` (surface pressure uniformly ``p0 = 1000 hPa``). The
    reference uses a = 6.371229e6 m, Omega = 7.29212e-5 1/s, R = 287 J/(kg K); the equation object
    should be built with those constants for the balance to hold.

    Returns
    -------
    (x, phis) : packed state (batch, 4N+1, lmax, mmax) and surface geopotential spectrum (lmax, mmax).
    """
    c = eq.core
    a = c.radius
    omega = float(eq.omega.reshape(-1)[0])
    R = eq.R
    eta0, eta_t, T0, gamma, dT, g = 0.252, 0.2, 288.0, 0.005, 4.8e5, 9.80616
    lat = c.lat.reshape(1, -1, 1)
    lon = c.lon.reshape(1, 1, -1)
    eta = eq.sigma.reshape(-1, 1, 1)
    eta_v = (eta - eta0) * math.pi / 2
    sphi, cphi = torch.sin(lat), torch.cos(lat)
    u = u0 * torch.cos(eta_v) ** 1.5 * torch.sin(2 * lat) ** 2  # (N, nlat, 1)
    tbar = T0 * eta ** (R * gamma / g) + torch.where(eta < eta_t, dT * (eta_t - eta) ** 5, torch.zeros_like(eta))
    A = -2 * sphi**6 * (cphi**2 + 1.0 / 3.0) + 10.0 / 63.0
    Bf = (8.0 / 5.0) * cphi**3 * (sphi**2 + 2.0 / 3.0) - math.pi / 4
    T = tbar + 0.75 * (eta * math.pi * u0 / R) * torch.sin(eta_v) * torch.cos(eta_v) ** 0.5 * (
        A * 2 * u0 * torch.cos(eta_v) ** 1.5 + Bf * a * omega
    )
    ev_s = (1.0 - eta0) * math.pi / 2
    phis = u0 * math.cos(ev_s) ** 1.5 * (A * u0 * math.cos(ev_s) ** 1.5 + Bf * a * omega)  # (1, nlat, 1)
    u = u.expand(-1, -1, c.nlon).clone()
    if perturbation:
        lc, pc = math.pi / 9, 2 * math.pi / 9
        r = torch.arccos((math.sin(pc) * sphi + math.cos(pc) * cphi * torch.cos(lon - lc)).clamp(-1, 1))
        u = u + up * torch.exp(-((r / 0.1) ** 2))
    vort, div = c.uv_to_vrtdiv(u, torch.zeros_like(u))
    temp = c.to_spec(T.expand(-1, -1, c.nlon) - eq.T_ref.reshape(-1, 1, 1))
    lnps = c.to_spec(torch.full((c.nlat, c.nlon), math.log(1e5), dtype=torch.float64))
    x = PEState.pack(vort, div * 0, temp, torch.zeros_like(vort), lnps)
    phis_spec = c.to_spec(phis.expand(-1, -1, c.nlon))[0]
    return x.unsqueeze(0).expand(batch, -1, -1, -1).clone(), phis_spec
