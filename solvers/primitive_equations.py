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
ARS(2,2,2)); :class:`SemiImplicitLeapfrog` (one explicit evaluation per step, RAW filter) is the
default of the Held-Suarez runs. Scale-selective hyperdiffusion (del^8 by default) is applied as an
exact integrating factor after each step (:func:`hyperdiffusion_filter`).

State layout: one complex tensor ``(B, 4N + 1, lmax, mmax)`` holding
``[vorticity (N), divergence (N), temperature anomaly (N), tracer Q (N), ln ps (1)]``, so any
integrator that works on tensors applies. :class:`PEState` gives named views.

Units: SI (m, s, K, Pa). Everything float64, device-agnostic, batched over the ensemble axis B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from dandelion.solvers.spectral import SpectralCore

__all__ = [
    "SigmaCoordinates",
    "PEState",
    "PrimitiveEquations",
    "SemiImplicitLeapfrog",
    "hyperdiffusion_filter",
    "interpolate_to_pressure",
    "jablonowski_williamson_state",
]


# ---------------------------------------------------------------------------------------- vertical
@dataclass(frozen=True)
class SigmaCoordinates:
    """Sigma levels: interfaces ``sigma_{k+1/2}`` from 0 (top) to 1 (surface).

    Parameters
    ----------
    boundaries : tuple of float
        ``N + 1`` strictly increasing values with ``boundaries[0] == 0`` and ``boundaries[-1] == 1``.

    Raises
    ------
    ValueError
        If the boundaries are not strictly increasing from 0 to 1 or ``N < 2``.
    """

    boundaries: tuple

    def __post_init__(self):
        b = np.asarray(self.boundaries, dtype=np.float64)
        if b.ndim != 1 or b.size < 3:
            raise ValueError(f"need at least 3 sigma interfaces (2 levels), got {b.size}")
        if abs(b[0]) > 0 or abs(b[-1] - 1.0) > 1e-14 or np.any(np.diff(b) <= 0):
            raise ValueError("sigma interfaces must increase strictly from 0 (model top) to 1 (surface); "
                             f"got {b.tolist()}")

    @classmethod
    def equally_spaced(cls, n_levels: int) -> "SigmaCoordinates":
        """``n_levels`` layers of equal thickness ``1/n_levels`` (Held & Suarez 1994 use 20)."""
        if int(n_levels) != n_levels or n_levels < 2:
            raise ValueError(f"n_levels={n_levels} must be an integer >= 2")
        return cls(tuple(np.linspace(0.0, 1.0, int(n_levels) + 1).tolist()))

    @property
    def n_levels(self) -> int:
        return len(self.boundaries) - 1

    @property
    def half(self) -> np.ndarray:
        return np.asarray(self.boundaries, dtype=np.float64)

    @property
    def thickness(self) -> np.ndarray:
        """``dsigma_k`` (N,)."""
        return np.diff(self.half)

    @property
    def centers(self) -> np.ndarray:
        """Full levels ``sigma_k`` (N,): layer midpoints (used by forcing and output interpolation)."""
        h = self.half
        return 0.5 * (h[1:] + h[:-1])

    @property
    def log_ratio(self) -> np.ndarray:
        """``ln(sigma_{k+1/2}/sigma_{k-1/2})`` (N,), with 0 for the top layer (where it multiplies empty sums)."""
        h = self.half
        out = np.zeros(self.n_levels)
        out[1:] = np.log(h[2:] / h[1:-1])
        return out

    @property
    def alpha(self) -> np.ndarray:
        """Simmons & Burridge (1981) eq. (3.8) ``alpha_k`` (N,); ``alpha_1 = ln 2``."""
        h = self.half
        a = np.empty(self.n_levels)
        a[0] = math.log(2.0)
        a[1:] = 1.0 - h[1:-1] / self.thickness[1:] * self.log_ratio[1:]
        return a

    def geopotential_matrix(self, R: float) -> np.ndarray:
        """``G`` (N, N) with ``Phi = Phi_s + G @ T`` (Simmons & Burridge 1981, eqs. 2.21-2.22), m^2/s^2 per K."""
        n = self.n_levels
        g = np.zeros((n, n))
        lr, a = self.log_ratio, self.alpha
        for k in range(n):
            g[k, k] = a[k]
            g[k, k + 1:] = lr[k + 1:]
        return R * g

    @property
    def pressure_gradient_coefficient(self) -> np.ndarray:
        """``c_k`` (N,) in the pressure-gradient term ``R T_k c_k grad ln ps``: 1 on every level.

        Energy conservation (Simmons & Burridge 1981, §3) pairs this term with the
        ``V_k . grad ln ps`` term of ``omega/p`` (coefficient 1) once the geopotential work is
        integrated by parts; the residual of the energy conversion on level k is proportional to
        ``1 - c_k``. For k > 1 SB81's eq. (3.13) gives 1 identically; at the top (``sigma_{1/2} = 0``)
        the limit of that expression is also 1, and the ``ln 2`` of ``alpha_1`` enters only the
        geopotential and ``omega/p`` (tests check the exact energy conversion numerically).
        """
        return np.ones(self.n_levels)


def _lv(x: np.ndarray | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Per-level vector (N,) shaped to broadcast on dim 1 of ``like`` (B, N, ...)."""
    t = torch.as_tensor(x, dtype=torch.float64, device=like.device)
    return t.reshape((1, -1) + (1,) * (like.ndim - 2))


class _Vertical:
    """Vertical operators on tensors ``(B, N, ...)`` (level axis 1), float64."""

    def __init__(self, coords: SigmaCoordinates, device):
        f = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float64, device=device)  # noqa: E731
        self.n = coords.n_levels
        self.dsig = f(coords.thickness)
        self.half_inner = f(coords.half[1:-1])
        self.log_ratio = f(coords.log_ratio)
        self.alpha = f(coords.alpha)

    def column_terms(self, D: torch.Tensor, ugl: torch.Tensor):
        """Given ``D_k = delta_k + V_k.grad ln ps`` and ``ugl = V.grad ln ps`` (B, N, ...), return
        ``(dlnps_dt (B, ...), sdot at interior interfaces (B, N-1, ...), omega/p (B, N, ...))``."""
        ds = _lv(self.dsig, D)
        flux = ds * D
        S = torch.cumsum(flux, dim=1)
        total = S[:, -1:]
        sdot = _lv(self.half_inner, D[:, 1:]) * total - S[:, :-1]
        S_prev = S - flux
        omega_p = ugl - (_lv(self.log_ratio, D) * S_prev + _lv(self.alpha, D) * flux) / ds
        return -total[:, 0], sdot, omega_p

    def advection(self, sdot: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """Simmons-Burridge centred ``(sdot dX/dsigma)_k`` (B, N, ...)."""
        prod = sdot * (X[:, 1:] - X[:, :-1])
        zero = torch.zeros_like(X[:, :1])
        return (torch.cat([prod, zero], 1) + torch.cat([zero, prod], 1)) / (2.0 * _lv(self.dsig, X))

    def flux_divergence(self, sdot: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """``([sdot X]_{k+1/2} - [sdot X]_{k-1/2}) / dsigma_k`` with centred interface values (B, N, ...)."""
        w = sdot * 0.5 * (X[:, 1:] + X[:, :-1])
        zero = torch.zeros_like(X[:, :1])
        return (torch.cat([w, zero], 1) - torch.cat([zero, w], 1)) / _lv(self.dsig, X)


# ---------------------------------------------------------------------------------------- state
class PEState:
    """Named views of the packed state tensor ``(B, 4N + 1, lmax, mmax)`` (no copies)."""

    def __init__(self, x: torch.Tensor, n_levels: int):
        n = n_levels
        if x.shape[-3] != 4 * n + 1:
            raise ValueError(f"state has {x.shape[-3]} channels; expected 4 * n_levels + 1 = {4 * n + 1}")
        self.x = x
        self.vorticity = x[..., 0:n, :, :]
        self.divergence = x[..., n:2 * n, :, :]
        self.temperature = x[..., 2 * n:3 * n, :, :]
        self.tracer = x[..., 3 * n:4 * n, :, :]
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

    def __init__(self, core: SpectralCore, coords: SigmaCoordinates, *, reference_temperature=300.0,
                 omega=7.292e-5, R: float = 287.04, kappa: float = 287.04 / 1004.0,
                 surface_geopotential: torch.Tensor | None = None, forcing: Callable | None = None):
        self.core = core
        self.coords = coords
        self.n = n = coords.n_levels
        dev = core.device
        tref = np.broadcast_to(np.asarray(reference_temperature, dtype=np.float64), (n,)).copy()
        if np.any(tref <= 0):
            raise ValueError(f"reference_temperature must be positive (K), got {tref}")
        self.R, self.kappa = float(R), float(kappa)
        self.vertical = _Vertical(coords, dev)
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
        phi = torch.einsum("kj,...jlm->...klm", self.G.to(x.dtype), s.temperature) \
            + self.r.to(x.dtype).reshape(-1, 1, 1) * s.log_surface_pressure.unsqueeze(-3)
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
            + self.r.to(x.dtype).reshape(-1, 1, 1) * s.log_surface_pressure.unsqueeze(-3))
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
        return dict(u=u, v=v, temperature_anomaly=Tp, T=Tp + _lv(self.T_ref, Tp), ps=ps, log_ps=lnps,
                    Q=Q, q=Q / ps.unsqueeze(1))

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
        zeta, delta, Tp, Q = grid[:, :n], grid[:, n:2 * n], grid[:, 2 * n:3 * n], grid[:, 3 * n:4 * n]
        ps = torch.exp(grid[:, 4 * n:])  # (B, 1, nlat, nlon)
        u, v = c.vrtdiv_to_uv(s.vorticity, s.divergence)
        gx, gy = c.gradient(x.index_select(1, self._grad_index(x)))
        Tx, Ty, gx, gy = gx[:, :n], gy[:, :n], gx[:, n:], gy[:, n:]

        ugl = u * gx + v * gy
        D = delta + ugl
        dlnps, sdot, omega_p = vert.column_terms(D, ugl)
        T = Tp + _lv(self.T_ref, Tp)

        absvort = zeta + self.coriolis()
        rc = self.R * _lv(self.c_pg, Tp) * Tp
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
        energy, dT_s, dQ_s, dlnps_s = sp[:, :n], sp[:, n:2 * n], sp[:, 2 * n:3 * n], sp[:, 3 * n]
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
        """Mass-weighted global-mean tracer ``sum_k dsigma_k mean(ps q_k)`` (Pa), shape (B,) (exact: the l=0 coefficient)."""
        m = self.core.mean(PEState(x, self.n).tracer)
        return (m * self.dsig).sum(-1)


def hyperdiffusion_filter(core: SpectralCore, dt: float, timescale: float, order: int = 4) -> torch.Tensor:
    """Integrating factor ``exp(-dt/timescale * (l(l+1) / (L(L+1)))^order)`` of shape (lmax, 1).

    ``order = 4`` is del^8; ``timescale`` is the e-folding time (s) at the truncation degree
    ``L = lmax - 1`` (DATASETS.md §5: 0.1 day).
    """
    l = core.l
    L = core.lmax - 1
    return torch.exp(-(dt / timescale) * ((l * (l + 1)) / (L * (L + 1))) ** order)


class SemiImplicitLeapfrog:
    """Semi-implicit leapfrog with the Robert-Asselin-Williams (RAW) filter, for the Dinosaur-style
    equation interface (``explicit_terms``, ``implicit_terms``, ``implicit_inverse``).

    ``x_{n+1} = (I - dt L)^{-1} [x_{n-1} + 2 dt N(x_n) + dt L x_{n-1}]`` (Hoskins & Simmons 1975;
    Durran 2nd ed. §8.6.5), then the RAW filter (Williams 2009, MWR 137, 2538-2546, eqs. 6-8)
    ``d = nu/2 (x_{n-1} - 2 x_n + x_{n+1})``, ``x_n += alpha d``, ``x_{n+1} -= (1 - alpha) d``.
    One explicit evaluation per step. The first step after a (re)start is one IMEX RK step
    (``starter``, default ARS(2,2,2) from :mod:`dandelion.solvers.integrators`). ``post(x, tau)``
    (optional) is applied to every new state with the time interval it spans (``2 dt`` for a
    leapfrog step, ``dt`` for the starter), e.g. an exact hyperdiffusion factor.

    The generic integrators module has no leapfrog; this class lives here and is generic.
    """

    def __init__(self, equation, dt: float, *, nu: float = 0.05, alpha: float = 0.53, post: Callable | None = None):
        from dandelion.solvers.integrators import ARS222, imex_runge_kutta

        if not dt > 0:
            raise ValueError(f"dt={dt} must be positive (s)")
        self.eq, self.dt, self.nu, self.alpha = equation, float(dt), float(nu), float(alpha)
        self.post = post
        self._starter = imex_runge_kutta(ARS222, equation, self.dt)
        self._rk = lambda h: imex_runge_kutta(ARS222, equation, h)  # noqa: E731
        self.prev = None

    def restart(self) -> None:
        """Forget the previous time level (next step is a starter step)."""
        self.prev = None

    def rk_step(self, x: torch.Tensor, h: float) -> torch.Tensor:
        """One ARS(2,2,2) step of size ``h`` (used for the start and for partial steps); restarts the leapfrog."""
        y = (self._starter if h == self.dt else self._rk(h))(x)
        if self.post is not None:
            y = self.post(y, h)
        self.prev = x if h == self.dt else None
        return y

    def step(self, x: torch.Tensor) -> torch.Tensor:
        """Advance the current state ``x`` by ``dt`` and return the new (filtered) state."""
        if self.prev is None:
            return self.rk_step(x, self.dt)
        dt, eq = self.dt, self.eq
        rhs = self.prev + 2 * dt * eq.explicit_terms(x) + dt * eq.implicit_terms(self.prev)
        new = eq.implicit_inverse(rhs, dt)
        if self.post is not None:
            new = self.post(new, 2 * dt)
        d = 0.5 * self.nu * (self.prev - 2 * x + new)
        self.prev = x + self.alpha * d
        return new - (1.0 - self.alpha) * d


# ---------------------------------------------------------------------------------------- output
def interpolate_to_pressure(values: torch.Tensor, sigma: torch.Tensor, ps: torch.Tensor, p_out: torch.Tensor,
                            *, lapse_rate: float | None = None, R: float = 287.04, gravity: float = 9.80616) -> torch.Tensor:
    """Interpolate model-level fields to pressure levels, linearly in ``ln p``.

    Parameters
    ----------
    values : (B, N, nlat, nlon) on full levels ``p_k = sigma_k ps``.
    sigma : (N,) increasing full-level sigma.
    ps : (B, nlat, nlon) surface pressure (Pa).
    p_out : (P,) target pressures (Pa).
    lapse_rate : float, optional
        For temperature: below the lowest full level use ``T_N (p/p_N)^(R lapse/g)`` (constant lapse
        rate, e.g. 6.5e-3 K/m, DATASETS.md §5); otherwise values are held constant below it.
        Above the top full level values are held constant.

    Returns
    -------
    (B, P, nlat, nlon) float64.
    """
    ls = torch.log(sigma)  # (N,)
    s = torch.log(p_out.reshape(1, -1, 1, 1) / ps.unsqueeze(1))  # (B, P, nlat, nlon): ln(p/ps)
    n = ls.numel()
    idx = torch.searchsorted(ls.contiguous(), s.contiguous().reshape(-1)).reshape(s.shape)
    hi = idx.clamp(1, n - 1)
    lo = hi - 1
    l_lo, l_hi = ls[lo], ls[hi]
    w = ((s - l_lo) / (l_hi - l_lo)).clamp(0.0, 1.0)
    B, P = s.shape[:2]
    vlo = torch.gather(values, 1, lo)
    vhi = torch.gather(values, 1, hi)
    out = vlo + w * (vhi - vlo)
    below = s > ls[-1]
    if lapse_rate is not None:
        bottom = values[:, -1:].expand_as(out)
        ext = bottom * torch.exp((R * lapse_rate / gravity) * (s - ls[-1]))
        out = torch.where(below, ext, out)
    return out


# ---------------------------------------------------------------------------------------- test case
def jablonowski_williamson_state(eq: PrimitiveEquations, *, perturbation: bool = True, u0: float = 35.0,
                                 up: float = 1.0, batch: int = 1):
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
        A * 2 * u0 * torch.cos(eta_v) ** 1.5 + Bf * a * omega)
    ev_s = (1.0 - eta0) * math.pi / 2
    phis = u0 * math.cos(ev_s) ** 1.5 * (A * u0 * math.cos(ev_s) ** 1.5 + Bf * a * omega)  # (1, nlat, 1)
    u = u.expand(-1, -1, c.nlon).clone()
    if perturbation:
        lc, pc = math.pi / 9, 2 * math.pi / 9
        r = torch.arccos((math.sin(pc) * sphi + math.cos(pc) * cphi * torch.cos(lon - lc)).clamp(-1, 1))
        u = u + up * torch.exp(-(r / 0.1) ** 2)
    vort, div = c.uv_to_vrtdiv(u, torch.zeros_like(u))
    temp = c.to_spec(T.expand(-1, -1, c.nlon) - eq.T_ref.reshape(-1, 1, 1))
    lnps = c.to_spec(torch.full((c.nlat, c.nlon), math.log(1e5), dtype=torch.float64))
    x = PEState.pack(vort, div * 0, temp, torch.zeros_like(vort), lnps)
    phis_spec = c.to_spec(phis.expand(-1, -1, c.nlon))[0]
    return x.unsqueeze(0).expand(batch, -1, -1, -1).clone(), phis_spec
