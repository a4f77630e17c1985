"""Rotating shallow-water equations on the sphere, vorticity-divergence form, ensemble-batched.

Equations (Williamson et al. 1992, *J. Comput. Phys.* 102, 211, eqs. (2)-(4) in vorticity-divergence
form; Hack & Jakob 1992, NCAR/TN-343, §2), with ``h`` the departure from the mean depth ``H``:

    d zeta/dt = - div((zeta + f) u)                                     - nu (-lap)^p zeta
    d delta/dt = k . curl((zeta + f) u) - lap(|u|^2/2) - g lap(h)       - nu (-lap)^p delta
    d h/dt    = - div(h u) - H delta                                    - nu (-lap)^p h

``f = 2 Omega (a . r)`` is the Coriolis parameter of a planet rotating about the unit axis ``a``
(one axis per trajectory; ``a = z`` gives ``2 Omega sin(lat)``). The split used by the generic
integrators (:mod:`dandelion.solvers.integrators`):

* explicit ``N``: advection and Coriolis (the first two columns above, without ``- g lap h``,
  ``- H delta``);
* implicit ``L``: the gravity-wave pair ``(-g lap h, -H delta)``, a 2x2 solve per degree ``l``
  (``H`` may differ per trajectory);
* integrating factor ``D``: diffusion ``-nu (l(l+1)/R^2)^p`` applied alike to all three fields
  (``p = 1`` Laplacian, ``p = 2`` hyperdiffusion), exact and commuting with ``L``.

Everything is float64 on the device of the :class:`~dandelion.solvers.spectral_core.SpectralCore`.
The leading dimension of every state tensor is the ensemble (batch) ``B``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .integrators import SCHEMES, IMEXTableau
from .spectral_core import SpectralCore
from .time_stepping import StabilityLimit, enforce_limits

__all__ = [
    "SWState",
    "ShallowWater",
    "check_cfl",
    "cfl_limits",
    "CFL_LIMITS",
    "courant_number",
    "EARTH_RADIUS",
    "EARTH_OMEGA",
    "GRAVITY",
]

#: Constants of docs/datasets/galewsky.md (Galewsky et al. 2004): radius [m], rotation rate [1/s], gravity [m/s^2].
EARTH_RADIUS = 6.37122e6
EARTH_OMEGA = 7.292e-5
GRAVITY = 9.80616

#: Largest Courant number ``dt * speed * sqrt(L(L+1)) / R`` (``L = lmax - 1``) accepted per scheme.
#: ``rk4``: the classical RK4 is stable on the imaginary axis up to 2*sqrt(2); we keep 2.5 and count
#: gravity waves in the speed (they are explicit). IMEX schemes: gravity waves are implicit, only
#: the advective speed counts. ARS(3,4,3)'s explicit part is stable on the imaginary axis up to
#: 2*sqrt(2) as RK4 (its stability polynomial, see tests); ARS(2,2,2)'s explicit part has |R(iy)|^2 = 1 + y^4/4, i.e. it
#: relies on the (hyper)diffusion to remove the weak growth at the grid scale, so its limit 1.5
#: is the measured stable value with the Galewsky hyperviscosity rule, not a linear bound.
CFL_LIMITS = {"rk4": 2.5, "ars343": 2.5, "ars222": 1.5, "euler": 0.0, "imex_euler": 0.0}


def courant_number(dt: float, *, lmax: int, radius: float, speed: float) -> float:
    """Spectral Courant number ``dt * speed * sqrt(L(L+1)) / radius`` with ``L = lmax - 1``."""
    L = int(lmax) - 1
    return float(dt) * float(speed) * math.sqrt(L * (L + 1)) / float(radius)


def cfl_limits(
    *, lmax: int, radius: float, max_speed, gravity_wave_speed=0.0, scheme: str = "ars222", diffusion=None
) -> list[StabilityLimit]:
    """Stability limits of a shallow-water step (:mod:`dandelion.solvers.time_stepping`).

    The Courant number ``dt * speed * sqrt(L(L+1)) / radius`` (``L = lmax - 1``) must stay within
    :data:`CFL_LIMITS` of ``scheme``, with ``speed`` the advective wind, plus the gravity-wave speed
    ``sqrt(g H)`` for fully explicit schemes. ARS(2,2,2) is admitted only with diffusion: its
    explicit part amplifies every advected mode (``|R(iy)|^2 = 1 + y^4/4``).

    Parameters
    ----------
    lmax : int, band limit; radius : float [m].
    max_speed : float or tensor (B,)
        Largest advecting wind [m/s] per trajectory (expected, e.g. 1.2x the jet maximum, or measured).
    gravity_wave_speed : float or tensor (B,)
        ``sqrt(g H)`` [m/s]; counted only for explicit schemes.
    scheme : str, a key of :data:`CFL_LIMITS`.
    diffusion : float or tensor (B,), optional
        Diffusion coefficient per trajectory; zero refuses ARS(2,2,2).

    Raises
    ------
    ValueError
        For an unknown scheme.
    """
    if scheme not in CFL_LIMITS:
        raise ValueError(f"unknown scheme {scheme!r} for the CFL check; use one of {sorted(CFL_LIMITS)}")
    implicit = isinstance(SCHEMES[scheme], IMEXTableau)
    speed = torch.as_tensor(max_speed, dtype=torch.float64).detach().cpu().reshape(-1)
    if not implicit:
        speed = speed + torch.as_tensor(gravity_wave_speed, dtype=torch.float64).detach().cpu().reshape(-1)
    limit = CFL_LIMITS[scheme]
    L = int(lmax) - 1
    k = math.sqrt(L * (L + 1)) / float(radius)
    what = "advective speed" if implicit else "advective + gravity-wave speed"
    out = [
        StabilityLimit(
            f"Courant number of scheme {scheme!r}",
            limit / (k * speed).clamp(min=1e-300),
            f"dt*speed*sqrt(L(L+1))/R <= {limit} (speed {float(speed.max()):.1f} m/s = {what}, lmax={lmax})",
        )
    ]
    if scheme == "ars222" and diffusion is not None:
        nu = torch.as_tensor(diffusion, dtype=torch.float64).detach().cpu().reshape(-1)
        if bool((nu <= 0).any()):
            out.append(
                StabilityLimit(
                    "use of ARS(2,2,2) without diffusion",
                    torch.where(nu > 0, math.inf, 0.0),
                    "its explicit part amplifies every advected mode (|R(iy)|^2 = 1 + y^4/4), "
                    "so it needs (hyper)diffusion: use ars343 or rk4, or nu > 0",
                )
            )
    return out


def check_cfl(
    dt: float,
    *,
    lmax: int,
    radius: float,
    max_speed: float,
    gravity_wave_speed: float = 0.0,
    scheme: str = "ars222",
    diffusion=None,
) -> float:
    """Refuse a time step violating :func:`cfl_limits`; return the Courant number of the fastest trajectory.

    Raises
    ------
    ValueError
        If ``dt`` is not positive, the scheme is unknown, or a limit is violated; the message names
        the limit and the largest safe ``dt``.
    """
    if not dt > 0:
        raise ValueError(f"time step dt={dt} must be positive")
    limits = cfl_limits(
        lmax=lmax,
        radius=radius,
        max_speed=max_speed,
        gravity_wave_speed=gravity_wave_speed,
        scheme=scheme,
        diffusion=diffusion,
    )
    enforce_limits(dt, limits, what="shallow water")
    return float(CFL_LIMITS[scheme] * dt / limits[0].per_trajectory().min()) if CFL_LIMITS[scheme] > 0 else 0.0


@dataclass(frozen=True)
class SWState:
    """Spectral shallow-water state; each field ``(B, lmax, mmax)`` complex128.

    ``vrt``: relative vorticity [1/s]; ``div``: divergence [1/s]; ``h``: departure of the fluid
    depth from the mean depth ``H`` [m].
    """

    vrt: torch.Tensor
    div: torch.Tensor
    h: torch.Tensor


class ShallowWater:
    """Equation object of the rotating shallow-water system (see the module docstring).

    Parameters
    ----------
    core : SpectralCore
        Transforms (``radius`` in m). Use ``dealias=1.5`` (the nonlinearity is quadratic in the
        tendencies; the energy diagnostic is cubic and exact with ``dealias >= 1.5`` on Gauss grids).
    H : float or tensor (B,)
        Mean depth [m], per trajectory.
    gravity, omega : float
        [m/s^2], [1/s].
    axis : tensor (3,) or (B, 3), optional
        Rotation axis (normalised here) in the solver frame; default ``z``.
    nu : float or tensor (B,)
        Diffusion coefficient [m^(2p)/s]; 0 for inviscid.
    diffusion_order : int
        ``p`` in ``nu (-lap)^p``: 1 (Laplacian, m^2/s) or 2 (hyperdiffusion, m^4/s).

    Raises
    ------
    ValueError
        For non-positive depths, a zero axis, a negative ``nu`` or an unknown diffusion order.
    """

    def __init__(
        self,
        core: SpectralCore,
        *,
        H,
        gravity: float = GRAVITY,
        omega: float = EARTH_OMEGA,
        axis=None,
        nu=0.0,
        diffusion_order: int = 2,
    ):
        self.core = core
        dev = core.device
        f64 = dict(dtype=torch.float64, device=dev)
        H = torch.as_tensor(H, **f64).reshape(-1)
        if not bool((H > 0).all()):
            raise ValueError(f"mean depth H={H.tolist()} must be positive [m]")
        self.H = H.reshape(-1, 1, 1)
        self.gravity = float(gravity)
        self.omega = float(omega)
        a = torch.tensor([0.0, 0.0, 1.0], **f64) if axis is None else torch.as_tensor(axis, **f64)
        a = a.reshape(-1, 3)
        n = a.norm(dim=-1, keepdim=True)
        if not bool((n > 0).all()):
            raise ValueError("rotation axis must be a non-zero 3-vector")
        self.axis = a / n
        # Coriolis parameter on the transform grid, (B or 1, nlat, nlon)
        self.f = 2.0 * self.omega * torch.einsum("bc,cij->bij", self.axis, core.xyz)
        if diffusion_order not in (1, 2):
            raise ValueError(f"diffusion_order={diffusion_order}: use 1 (Laplacian) or 2 (hyperdiffusion)")
        nu = torch.as_tensor(nu, **f64).reshape(-1)
        if not bool((nu >= 0).all()):
            raise ValueError(f"diffusion coefficient nu={nu.tolist()} must be >= 0")
        self.nu = nu.reshape(-1, 1, 1)
        self.diffusion_order = int(diffusion_order)
        # diffusion rate per degree, (B or 1, lmax, 1), [1/s]
        self._rate = self.nu * (-core.lap) ** self.diffusion_order
        self._has_diffusion = bool((self.nu > 0).any())
        self._exp_cache: dict = {}

    # ------------------------------------------------------------------ generic-integrator interface
    def grid_fields(self, s: SWState):
        """Transform-grid fields ``(vrt, h, u, v)``, each ``(B, nlat, nlon)``."""
        c = self.core
        vh = c.to_grid(torch.stack((s.vrt, s.h), dim=1))
        u, v = c.vrtdiv_to_uv(s.vrt, s.div)
        return vh[:, 0], vh[:, 1], u, v

    def explicit_terms(self, s: SWState) -> SWState:
        """Advection + Coriolis tendencies ``N(s)`` (module docstring), spectral."""
        c = self.core
        vrt, h, u, v = self.grid_fields(s)
        eta = vrt + self.f
        fu = torch.stack((eta * u, h * u), dim=1)
        fv = torch.stack((eta * v, h * v), dim=1)
        curl, div = c.uv_to_vrtdiv(fu, fv)
        ke = c.to_spec(0.5 * (u * u + v * v))
        return SWState(vrt=-div[:, 0], div=curl[:, 0] - c.lap * ke, h=-div[:, 1])

    def implicit_terms(self, s: SWState) -> SWState:
        """Gravity-wave tendencies ``L s = (0, -g lap h, -H delta)``."""
        return SWState(vrt=torch.zeros_like(s.vrt), div=-self.gravity * self.core.lap * s.h, h=-self.H * s.div)

    def implicit_inverse(self, s: SWState, eta: float) -> SWState:
        """Solve ``(I - eta L) x = s`` exactly, a 2x2 system per degree (and per trajectory's H)."""
        gl = eta * self.gravity * self.core.lap  # (lmax, 1), <= 0
        div = (s.div - gl * s.h) / (1.0 - eta * gl * self.H)
        return SWState(vrt=s.vrt, div=div, h=s.h - eta * self.H * div)

    def linear_exponential(self, s: SWState, tau: float) -> SWState:
        """``exp(-tau nu (l(l+1)/R^2)^p)`` applied to every field (exact diffusion)."""
        if not self._has_diffusion or tau == 0.0:
            return s
        key = float(tau)
        e = self._exp_cache.get(key)
        if e is None:
            e = torch.exp(-tau * self._rate)
            if len(self._exp_cache) < 64:
                self._exp_cache[key] = e
        return SWState(vrt=s.vrt * e, div=s.div * e, h=s.h * e)

    # ------------------------------------------------------------------ conversions
    def state_from_grid(self, u: torch.Tensor, v: torch.Tensor, h: torch.Tensor) -> SWState:
        """State from transform-grid ``u, v`` [m/s] and ``h`` [m], each ``(B, nlat, nlon)``."""
        vrt, div = self.core.uv_to_vrtdiv(u, v)
        return SWState(vrt=vrt, div=div, h=self.core.to_spec(h))

    # ------------------------------------------------------------------ invariants
    def mass(self, s: SWState) -> torch.Tensor:
        """``int (H + h) dA`` [m^3], shape ``(B,)`` (exact: from the l = 0 coefficient)."""
        R2 = self.core.radius**2
        return 4.0 * math.pi * R2 * self.H.reshape(-1) + R2 * math.sqrt(4.0 * math.pi) * s.h[:, 0, 0].real

    def energy(self, s: SWState) -> torch.Tensor:
        """``E = 1/2 int [(H + h)|u|^2 + g h^2] dA`` [m^5/s^2] (docs/datasets/galewsky.md), shape ``(B,)``.

        Exact quadrature on the dealiased Gauss grid for band-limited states (cubic integrand).
        """
        _, h, u, v = self.grid_fields(s)
        H = self.H
        return 0.5 * self.core.integrate_grid((H + h) * (u * u + v * v) + self.gravity * h * h)

    def enstrophy(self, s: SWState) -> torch.Tensor:
        """``1/2 int zeta^2 dA`` [m^2/s^2], shape ``(B,)``."""
        vrt = self.core.to_grid(s.vrt)
        return 0.5 * self.core.integrate_grid(vrt * vrt)

    def potential_enstrophy(self, s: SWState) -> torch.Tensor:
        """``1/2 int (zeta + f)^2 / (H + h) dA`` [m/s^2], shape ``(B,)`` (conserved inviscid)."""
        vrt, h, _, _ = self.grid_fields(s)
        return 0.5 * self.core.integrate_grid((vrt + self.f) ** 2 / (self.H + h))
