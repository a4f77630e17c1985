"""Hydrostatic dry primitive equations in sigma coordinates, spectral in the horizontal.

Prognostic variables on ``N`` sigma levels (level 1 at the top): vorticity ``zeta``, divergence
``delta``, temperature ``T`` (stored as the anomaly ``T' = T - T_ref(k)`` about a reference
profile), a passive tracer stored as ``Q = ps * q`` (tracer mass per unit area per unit sigma,
so the mass-weighted global integral is conserved by construction), and ``ln ps``.

Equations: Hoskins & Simmons (1975, QJRMS 101, 637-655) vorticity-divergence form,

    d zeta/dt = k . curl F,        d delta/dt = div F - lap(K + Phi + R T_ref c ln ps)
    F = (-(zeta + f) k x V - sdot dV/dsigma - R T' c grad ln ps)
    dT/dt = -V . grad T - sdot dT/dsigma + kappa T (omega / p)
    d ln ps/dt = -sum_k dsigma_k (delta_k + V_k . grad ln ps)

with the vertical differencing of Simmons & Burridge (1981, MWR 109, 758-766), eqs. (2.12),
(3.3)-(3.13) specialised to pure sigma (A = 0, B = sigma): geopotential
``Phi_k = Phi_s + R alpha_k T_k + R sum_{j>k} ln(sigma_{j+1/2}/sigma_{j-1/2}) T_j`` with
``alpha_1 = ln 2``, ``alpha_k = 1 - sigma_{k-1/2}/dsigma_k ln(sigma_{k+1/2}/sigma_{k-1/2})``; the
energy-conserving ``omega/p`` and pressure-gradient term; centred vertical advection
``(sdot_{k+1/2}(X_{k+1}-X_k) + sdot_{k-1/2}(X_k-X_{k-1})) / (2 dsigma_k)``. The tracer uses the
flux form ``dQ/dt = -div(Q V) - [ps sdot q]_{k-1/2}^{k+1/2} / dsigma_k`` (centred interface values).

Time stepping: semi-implicit. The gravity-wave terms linearised about ``T_ref`` (Durran,
*Numerical Methods for Fluid Dynamics*, 2nd ed., §8.6.5; Hoskins & Simmons 1975 §3) are the
implicit terms; per total wavenumber ``l`` the implicit solve reduces to one ``N x N`` system for
the divergence (:meth:`PrimitiveEquations.implicit_inverse`). Everything else (advection,
forcing) is explicit. Any IMEX integrator of :mod:`dandelion.solvers.integrators` works (e.g.
ARS(2,2,2)); its :class:`~dandelion.solvers.integrators.SemiImplicitLeapfrog` (one explicit evaluation
per step, RAW filter) is the default of the Held-Suarez runs. Vertical operators and pressure-level
output: :mod:`dandelion.solvers.sigma_coordinates`; the Jablonowski-Williamson test state:
:mod:`dandelion.solvers.baroclinic_wave`. Scale-selective hyperdiffusion (del^8 by default) is applied as an
exact integrating factor after each step (:func:`hyperdiffusion_filter`).

State layout: one complex tensor ``(B, 4N + 1, lmax, mmax)`` holding
``[vorticity (N), divergence (N), temperature anomaly (N), tracer Q (N), ln ps (1)]``, so any
integrator that works on tensors applies. :class:`PEState` gives named views.

Units: SI (m, s, K, Pa). Everything float64, device-agnostic, batched over the ensemble axis B.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from .sigma_coordinates import SigmaCoordinates, Vertical, level_vector
from .spectral_core import SpectralCore

__all__ = ["PEState", "PrimitiveEquations", "hyperdiffusion_filter"]


# ---------------------------------------------------------------------------------------- state
class PEState:
    """Named views of the packed state tensor ``(B, 4N + 1, lmax, mmax)`` (no copies)."""

    def __init__(self, x: torch.Tensor, n_levels: int):
        n = n_levels
        if x.shape[-3] != 4 * n + 1:
            raise ValueError(f"state has {x.shape[-3]} channels; expected 4 * n_levels + 1 = {4 * n + 1}")
        self.x = x
        self.vorticity = x[..., 0:n, :, :]
        self.divergence = x[..., n : 2 * n, :, :]
        self.temperature = x[..., 2 * n : 3 * n, :, :]
        self.tracer = x[..., 3 * n : 4 * n, :, :]
        self.log_surface_pressure = x[..., 4 * n, :, :]

    @staticmethod
    def pack(vorticity, divergence, temperature, tracer, log_surface_pressure) -> torch.Tensor:
        return torch.cat([vorticity, divergence, temperature, tracer, log_surface_pressure.unsqueeze(-3)], dim=-3)


# ---------------------------------------------------------------------------------------- equations
class PrimitiveEquations:
    """Sigma-coordinate hydrostatic dry primitive equations (see module docstring).

    Parameters
    ----------
    core : SpectralCore
        Spectral transforms (radius in m).
    coords : SigmaCoordinates
        Vertical levels.
    reference_temperature : float or array of shape (N,)
        ``T_ref`` (K) of the semi-implicit linearisation; isothermal 300 K by default.
    omega : float or torch.Tensor of shape (B,)
        Rotation rate (rad/s) per trajectory.
    R, kappa : float
        Gas constant (J/(kg K)) and ``R / c_p``.
    surface_geopotential : torch.Tensor (lmax, mmax) or (B, lmax, mmax) spectrum, optional
        ``Phi_s`` (m^2/s^2); flat by default.
    forcing : callable, optional
        ``forcing(grid: dict) -> dict`` of explicit physics tendencies; see
        :meth:`explicit_terms`. Keys returned may include ``"temperature"`` (K/s, grid (B, N, nlat,
        nlon)), ``"tracer"`` (dq/dt, 1/s, grid), ``"drag"`` (per-level Rayleigh rate (N,), 1/s).

    Raises
    ------
    ValueError
        For a reference profile of the wrong length or non-positive temperatures.
    """

    def __init__(
        self,
        core: SpectralCore,
        coords: SigmaCoordinates,
        *,
        reference_temperature=300.0,
        omega=7.292e-5,
        R: float = 287.04,
        kappa: float = 287.04 / 1004.0,
        surface_geopotential: torch.Tensor | None = None,
        forcing: Callable | None = None,
    ):
        self.core = core
        self.coords = coords
        self.n = n = coords.n_levels
        dev = core.device
        tref = np.broadcast_to(np.asarray(reference_temperature, dtype=np.float64), (n,)).copy()
        if np.any(tref <= 0):
            raise ValueError(f"reference_temperature must be positive (K), got {tref}")
        self.R, self.kappa = float(R), float(kappa)
        self.vertical = Vertical(coords, dev)
        f64 = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float64, device=dev)  # noqa: E731
        self.T_ref = f64(tref)
        self.sigma = f64(coords.centers)
        self.dsig = f64(coords.thickness)
        self.c_pg = f64(coords.pressure_gradient_coefficient)
        self.G = f64(coords.geopotential_matrix(R))
        self.r = self.R * self.T_ref * self.c_pg  # (N,) linear pressure-gradient coefficient
        self.H = self._linear_temperature_matrix()
        self.omega = torch.as_tensor(omega, dtype=torch.float64, device=dev).reshape(-1)
        self.phis = surface_geopotential
        self.forcing = forcing
        self._inverse_cache: dict = {}

    # ------------------------------------------------------------------ linear operator pieces
    def _linear_temperature_matrix(self) -> torch.Tensor:
        """``H`` (N, N) with linear temperature tendency ``-H delta`` about ``T_ref`` (same code path
        as the full tendency, evaluated for unit divergences at rest)."""
        n = self.n
        eye = torch.eye(n, dtype=torch.float64, device=self.T_ref.device)  # batch j, level k
        zero = torch.zeros_like(eye)
        _, sdot, omega_p = self.vertical.column_terms(eye, zero)
        tref = self.T_ref.reshape(1, n).expand(n, n)
        dT = -self.vertical.advection(sdot, tref) + self.kappa * tref * omega_p  # [j, k]
        return -dT.T.contiguous()

    def implicit_terms(self, x: torch.Tensor) -> torch.Tensor:
        """Linear gravity-wave terms about ``T_ref`` (spectral): ``d delta/dt = -lap(G T' + r ln ps)``,
        ``dT'/dt = -H delta``, ``d ln ps/dt = -dsigma . delta``; zero for vorticity and tracer."""
        s = PEState(x, self.n)
        c = self.core
        phi = torch.einsum("kj,...jlm->...klm", self.G.to(x.dtype), s.temperature) + self.r.to(x.dtype).reshape(
            -1, 1, 1
        ) * s.log_surface_pressure.unsqueeze(-3)
        ddiv = -c.laplacian(phi)
        dtemp = -torch.einsum("kj,...jlm->...klm", self.H.to(x.dtype), s.divergence)
        dlnps = -torch.einsum("j,...jlm->...lm", self.dsig.to(x.dtype), s.divergence)
        z = torch.zeros_like(s.vorticity)
        return PEState.pack(z, ddiv, dtemp, z, dlnps)

    def _inverse_matrices(self, eta: float) -> torch.Tensor:
        key = round(float(eta), 9)
        if key not in self._inverse_cache:
            lam = (-self.core.lap[:, 0]).reshape(-1, 1, 1)  # l(l+1)/a^2, (L,1,1)
            A = self.G @ self.H + torch.outer(self.r, self.dsig)
            eye = torch.eye(self.n, dtype=torch.float64, device=A.device)
            M = eye + (eta**2) * lam * A
            self._inverse_cache[key] = torch.linalg.inv(M)
        return self._inverse_cache[key]

    def implicit_inverse(self, x: torch.Tensor, eta: float) -> torch.Tensor:
        """Solve ``(I - eta L) y = x`` for the linear operator :meth:`implicit_terms` (exact, per degree l).

        Eliminating ``T'`` and ``ln ps`` gives ``(I + eta^2 l(l+1)/a^2 (G H + r dsigma^T)) y_delta
        = x_delta + eta l(l+1)/a^2 (G x_T + r x_lnps)`` (Hoskins & Simmons 1975, §3).
        """
        s = PEState(x, self.n)
        lam = (-self.core.lap).to(x.dtype)  # (L, 1)
        rhs = s.divergence + eta * lam * (
            torch.einsum("kj,...jlm->...klm", self.G.to(x.dtype), s.temperature)
            + self.r.to(x.dtype).reshape(-1, 1, 1) * s.log_surface_pressure.unsqueeze(-3)
        )
        Minv = self._inverse_matrices(eta).to(x.dtype)
        div = torch.einsum("lkj,...jlm->...klm", Minv, rhs)
        temp = s.temperature - eta * torch.einsum("kj,...jlm->...klm", self.H.to(x.dtype), div)
        lnps = s.log_surface_pressure - eta * torch.einsum("j,...jlm->...lm", self.dsig.to(x.dtype), div)
        return PEState.pack(s.vorticity, div, temp, s.tracer, lnps)

    # ------------------------------------------------------------------ grid diagnostics
    def grid_state(self, x: torch.Tensor) -> dict:
        """Grid fields on the transform grid: u, v, vorticity, divergence, T (full, K), ps (Pa), q,
        grad ln ps, and the column terms. Shapes (B, N, nlat, nlon) / (B, nlat, nlon)."""
        c = self.core
        s = PEState(x, self.n)
        u, v = c.vrtdiv_to_uv(s.vorticity, s.divergence)
        lnps = c.to_grid(s.log_surface_pressure)
        ps = torch.exp(lnps)
        Q = c.to_grid(s.tracer)
        Tp = c.to_grid(s.temperature)
        return dict(
            u=u,
            v=v,
            temperature_anomaly=Tp,
            T=Tp + level_vector(self.T_ref, Tp),
            ps=ps,
            log_ps=lnps,
            Q=Q,
            q=Q / ps.unsqueeze(1),
        )

    def coriolis(self, dtype=torch.float64) -> torch.Tensor:
        """``f = 2 Omega sin(lat)`` (B or 1, 1, nlat, 1)."""
        return (2.0 * self.omega.reshape(-1, 1, 1, 1) * torch.sin(self.core.lat).reshape(1, 1, -1, 1)).to(dtype)

    # ------------------------------------------------------------------ explicit terms
    def explicit_terms(self, x: torch.Tensor) -> torch.Tensor:
        """All non-linear terms plus forcing, minus nothing linear (the linear gravity-wave part lives
        in :meth:`implicit_terms`). Returns the packed tendency (B, 4N+1, lmax, mmax)."""
        c, vert, n = self.core, self.vertical, self.n
        s = PEState(x, n)
        # transforms batched over fields (5 calls per evaluation)
        grid = c.to_grid(x)
        zeta, delta, Tp, Q = grid[:, :n], grid[:, n : 2 * n], grid[:, 2 * n : 3 * n], grid[:, 3 * n : 4 * n]
        ps = torch.exp(grid[:, 4 * n :])  # (B, 1, nlat, nlon)
        u, v = c.vrtdiv_to_uv(s.vorticity, s.divergence)
        gx, gy = c.gradient(x.index_select(1, self._grad_index(x)))
        Tx, Ty, gx, gy = gx[:, :n], gy[:, :n], gx[:, n:], gy[:, n:]

        ugl = u * gx + v * gy
        D = delta + ugl
        dlnps, sdot, omega_p = vert.column_terms(D, ugl)
        T = Tp + level_vector(self.T_ref, Tp)

        absvort = zeta + self.coriolis()
        rc = self.R * level_vector(self.c_pg, Tp) * Tp
        Fu = absvort * v - vert.advection(sdot, u) - rc * gx
        Fv = -absvort * u - vert.advection(sdot, v) - rc * gy

        dT = -(u * Tx + v * Ty) - vert.advection(sdot, T) + self.kappa * T * omega_p
        q = Q / ps
        dQ_grid = -vert.flux_divergence(sdot, ps * q)

        kv = None
        if self.forcing is not None:
            f = self.forcing(dict(T=T, ps=ps[:, 0], q=q, sigma=self.sigma, lat=c.lat[:, 0]))
            if "temperature" in f:
                dT = dT + f["temperature"]
            if "tracer" in f:
                dQ_grid = dQ_grid + ps * f["tracer"]
            if "drag" in f:
                kv = f["drag"].to(x.dtype).reshape(-1, 1, 1)

        vd = c.uv_to_vrtdiv(torch.cat([Fu, Q * u], 1), torch.cat([Fv, Q * v], 1))
        dvort, ddiv, divQ = vd[0][:, :n], vd[1][:, :n], vd[1][:, n:]
        sp = c.to_spec(torch.cat([0.5 * (u * u + v * v), dT, dQ_grid, dlnps.unsqueeze(1)], 1))
        energy, dT_s, dQ_s, dlnps_s = sp[:, :n], sp[:, n : 2 * n], sp[:, 2 * n : 3 * n], sp[:, 3 * n]
        if self.phis is not None:
            energy = energy + self.phis.unsqueeze(-3)
        ddiv = ddiv - c.laplacian(energy)
        if kv is not None:
            dvort = dvort - kv * s.vorticity
            ddiv = ddiv - kv * s.divergence

        # explicit = full - linear: add back the linear parts that the full grid tendency contains
        dtemp = dT_s + torch.einsum("kj,...jlm->...klm", self.H.to(x.dtype), s.divergence)
        dlnps_s = dlnps_s + torch.einsum("j,...jlm->...lm", self.dsig.to(x.dtype), s.divergence)
        dQ = dQ_s - divQ
        return PEState.pack(dvort, ddiv, dtemp, dQ, dlnps_s) * c.mask

    def _grad_index(self, x):
        """Channel indices of the temperature levels and ln ps in the packed state (cached)."""
        if getattr(self, "_gi", None) is None or self._gi.device != x.device:
            n = self.n
            self._gi = torch.cat([torch.arange(2 * n, 3 * n), torch.tensor([4 * n])]).to(x.device)
        return self._gi

    # ------------------------------------------------------------------ invariants
    def mean_surface_pressure(self, x: torch.Tensor) -> torch.Tensor:
        """Global area-mean surface pressure (Pa), shape (B,)."""
        ps = torch.exp(self.core.to_grid(PEState(x, self.n).log_surface_pressure))
        return self.core.integrate_grid(ps) / (4 * math.pi * self.core.radius**2)

    def tracer_mass(self, x: torch.Tensor) -> torch.Tensor:
        """Mass-weighted global-mean tracer ``sum_k dsigma_k mean(ps q_k)`` (Pa), shape (B,).

        Exact: computed from the l=0 coefficient.
        """
        m = self.core.mean(PEState(x, self.n).tracer)
        return (m * self.dsig).sum(-1)


def hyperdiffusion_filter(core: SpectralCore, dt: float, timescale: float, order: int = 4) -> torch.Tensor:
    """Integrating factor ``exp(-dt/timescale * (l(l+1) / (L(L+1)))^order)`` of shape (lmax, 1).

    ``order = 4`` is del^8; ``timescale`` is the e-folding time (s) at the truncation degree
    ``L = lmax - 1`` (docs/datasets/held_suarez.md: 0.1 day).
    """
    l = core.l
    L = core.lmax - 1
    return torch.exp(-(dt / timescale) * ((l * (l + 1)) / (L * (L + 1))) ** order)
