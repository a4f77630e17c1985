"""A reduced-gravity layered shallow-water ocean with land, wind and restoring, batched over trajectories.

Equations (``L = 2`` active isopycnal layers above a motionless, infinitely deep abyss, the "2.5-layer"
reduced-gravity model; ``L = 1`` gives the 1.5-layer model), per layer ``k`` with thickness ``h_k``
and velocity ``u_k = (u, v)`` (u east, v north), in vector-invariant form
(Sadourny 1975, *J. Atmos. Sci.* 32, 680-689; Arakawa & Lamb 1981, *Mon. Weather Rev.* 109, 18-36)::

    d u_k/dt + q_k k x (h_k u_k) + grad(M_k + |u_k|^2 / 2) = R_k + A lap(u_k) + F_k
    d h_k/dt + div(h_k u_k - kappa_gm grad h_k) = +-e          (e: diapycnal volume flux, layer 2 -> 1)
    d(h_1 T)/dt + div(h_1 u_1 T - kappa_T h_1 grad T) = h_1 (T*(phi, t) - T) / tau_T + e T_in
    (same for S with S*, tau_S)

with ``q_k = (f + zeta_k)/h_k``, the Montgomery potentials ``M_2 = g'_2 (h_1 + h_2)`` and
``M_1 = M_2 + b_1 h_1``, and the upper layer's buoyancy ``b_1 = g (alpha (T - T_2) - beta_S (S - S_2))``
from a linear equation of state relative to the (fixed) lower layer ``(T_2, S_2)``, floored at
``b_min`` (a statically unstable column would otherwise give imaginary wave speeds). Because ``b_1``
varies in space, the upper layer feels the depth-averaged pressure gradient of an inhomogeneous
layer, ``R_1 = (h_1 / 2) grad b_1`` (Ripa 1993, *Geophys. Astrophys. Fluid Dyn.* 70, 85-111, eq. 2.1);
``R_2 = 0``; an optional linear drag ``-r u_k`` (``OceanParams.drag``) acts on both layers. The wind stress
``tau_x`` enters layer 1 as ``F_1 = tau_x / (rho_0 max(h_1, h_wind))``.

* Interface-thickness diffusion ``kappa_gm`` is the layered form of Gent & McWilliams (1990): diffusing
  each interface height diffuses each layer's thickness (Gent et al. 1995, *J. Phys. Oceanogr.* 25,
  463-474, §2).
* Diapycnal flux ``e = e_loc - <e_loc>`` (``<.>``: wet-area mean per trajectory), the local part minus its
  basin mean, as the diapycnal mixing velocities of the NRL layered ocean model (Hurlburt & Hogan 2000,
  *Dyn. Atmos. Oceans* 32, 283-329, §2, eqs. 1-3): the net exchange is zero, so each layer keeps its volume and
  the mean upper-layer thickness stays at ``H_1``. ``e_loc`` has two parts:

  - interface relaxation ``kappa_d (1/h_1 - H_2 / (H_1 h_2))``: zero at the rest thicknesses, upwelling
    ``~ kappa_d / h_1`` where the upper layer thins (Munk 1966's ``w ~ kappa / h``); linearised, it relaxes the
    interface with the time ``H_1^2 H_2 / (kappa_d (H_1 + H_2))`` (19 years for 3e-5 m^2/s and 150/600 m);
  - thin-layer entrainment ``(h_entrain - h_1)^+ / t_entrain`` (:meth:`OceanModel.entrainment`; off when
    ``h_entrain = 0``): where wind-driven Ekman suction would thin the upper layer below ``h_entrain``, lower-layer
    water is mixed up within ``t_entrain``, the entrainment of reduced-gravity upper-ocean models (McCreary &
    Kundu 1988, *J. Mar. Res.* 46, 25-58). With ``t_entrain`` (1 day) much shorter than the wind's thinning
    time the layer is held near ``h_entrain`` and the flux equals the Ekman suction there: its size is set by
    the wind, not by ``t_entrain``.

  Entrained water carries ``(T_2, S_2)``, detrained water the upper layer's own properties.
* Viscosity: ``A lap u = A (grad div u - k x grad zeta)``; land faces carry ``u = 0`` (no normal flow). The
  coast is no-slip: the viscous stress uses the vorticity ``circ / area_c_wet``, the circulation over the wet
  part of each dual cell (:class:`dandelion.solvers.ocean_grid.OceanGrid`), which at a straight wall is
  ``2 v / dx``, the tangential velocity vanishing at the wall itself (the ghost velocity ``-v``; Adcroft &
  Marshall 1998, *Tellus* 50A, 95-108). The potential vorticity of the Coriolis term keeps the dual-cell
  vorticity ``circ / area_c``.
* Tracer (Redi 1982, *J. Phys. Oceanogr.* 12, 1154-1158) diffusivity ``kappa_T``: by default equal to the GM
  thickness diffusivity ``kappa_gm`` of each trajectory (Griffies 1998, *J. Phys. Oceanogr.* 28, 831-841, who
  uses one diffusivity for both), along the layer, which is the isopycnal.
* Minimum thickness: a conservative flux limiter. Each cell's outgoing volume in a forward-Euler stage
  is capped at ``(h - h_min) * area`` by scaling its outgoing face fluxes (Zalesak 1979-style, one
  sided); fluxes stay antisymmetric, so every layer's volume is conserved to round-off and, with
  SSP-RK3 (Shu & Osher 1988, *J. Comput. Phys.* 77, 439-471, eq. 2.18, a convex combination of Euler
  stages), ``h >= h_min`` holds at every stage.

Time stepping: SSP-RK3 with a fixed step; :func:`stable_dt` gives the largest safe step and
:class:`OceanModel` refuses any larger one. Forcing (:mod:`dandelion.solvers.ocean_forcing`) is analytic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from .ocean_forcing import restoring_salinity, restoring_temperature, wind_stress
from .ocean_grid import OceanGrid

__all__ = ["OceanParams", "OceanState", "OceanModel", "stable_dt", "forced_stable_dt", "GRAVITY", "RHO0"]

GRAVITY = 9.81  # m/s^2
RHO0 = 1025.0  # kg/m^3
_C_IMAG = math.sqrt(3.0)  # SSP-RK3 stability limit on the imaginary axis
_C_REAL = 2.51  # ... and on the negative real axis
_SAFETY = 0.8


@dataclass
class OceanParams:
    """Settings of the layered ocean. Per-trajectory values may be floats or ``(B,)`` tensors
    (``visc``, ``kappa_gm``, ``kappa_d``, ``kappa_T``, ``tau_T``, ``tau_S``).

    n_layers : 1 or 2 active layers. H : rest thicknesses (m), top first. g2 : reduced gravity
    ``g'_2`` under the lowest active layer (m/s^2; for ``n_layers = 1`` the only one, and ``b_1`` is then
    ``g2 + b_1``'s anomaly: see :meth:`OceanModel.buoyancy`). alpha (1/K), beta_S (1/psu), T2 (degC),
    S2 (psu): linear equation of state and lower-layer water. b_min : floor of ``b_1`` (m/s^2).
    visc : Laplacian viscosity A (m^2/s). kappa_gm : interface-thickness diffusivity (m^2/s).
    kappa_d : diapycnal diffusivity (m^2/s; 0 switches the relaxation off). kappa_T : isopycnal (Redi) tracer
    diffusivity (m^2/s, float or (B,)); None (default): ``kappa_gm`` (Redi = GM). tau_T, tau_S : restoring
    times (s; ``inf`` switches restoring off). tau0 : wind stress amplitude (N/m^2). drag : linear (Rayleigh)
    drag rate on both layers' velocities (1/s; the interfacial friction of reduced-gravity models, which bounds
    the wind-driven equatorial jets before the basin-crossing waves have set up their pressure gradient).
    h_entrain, t_entrain : entrainment thickness (m; 0 = off) and time (s) of the upper layer (module
    docstring). h_min : minimum thickness (m). h_wind : minimum depth the wind stress is spread over (m).
    wind, restoring : callables overriding the analytic forcing (``f(lat, t) -> tensor``), optional.
    advect_tracers : False freezes tracer advection (for tests).
    """

    n_layers: int = 2
    H: tuple = (150.0, 600.0)
    g2: float = 0.01
    alpha: float = 2.0e-4
    beta_S: float = 7.6e-4
    T2: float = 2.0
    S2: float = 34.7
    b_min: float = 2.0e-3
    visc: object = 1.5e5
    kappa_gm: object = 1000.0
    kappa_d: object = 3.0e-5
    kappa_T: object = None
    tau_T: object = 60.0 * 86400.0
    tau_S: object = 180.0 * 86400.0
    tau0: float = 0.1
    h_min: float = 10.0
    h_wind: float = 20.0
    drag: float = 0.0
    h_entrain: float = 0.0
    t_entrain: float = 86400.0
    wind: object = None
    t_star: object = None
    s_star: object = None
    advect_tracers: bool = True


@dataclass
class OceanState:
    """Prognostic state. h, u: (B, L, nlat, nlon); v: (B, L, nlat + 1, nlon); hT, hS: (B, nlat, nlon)
    (upper-layer thickness times temperature in m degC, times salinity in m psu)."""

    h: torch.Tensor
    u: torch.Tensor
    v: torch.Tensor
    hT: torch.Tensor
    hS: torch.Tensor

    def combine(self, a: float, other: OceanState, b: float) -> OceanState:
        return OceanState(*(a * x + b * y for x, y in zip(self.astuple(), other.astuple())))

    def astuple(self):
        return (self.h, self.u, self.v, self.hT, self.hS)


def _per_traj(x, B: int, device) -> torch.Tensor:
    """A float or (B,) tensor -> (B, 1, 1, 1) float64."""
    t = torch.as_tensor(x, dtype=torch.float64, device=device).reshape(-1)
    if t.numel() == 1:
        t = t.expand(B)
    if t.numel() != B:
        raise ValueError(f"a per-trajectory parameter has {t.numel()} values for a batch of {B} trajectories")
    return t.reshape(B, 1, 1, 1)


def stable_dt(
    grid: OceanGrid, params: OceanParams, state: OceanState | None = None, b1_max: float | None = None
) -> tuple[float, str]:
    """Largest safe SSP-RK3 step (s) for this grid and these settings, and the limiting process.

    Gravity waves, advection and rotation are imaginary-axis eigenvalues of size
    ``2 (c + |u|) sqrt(dx^-2 + dy^-2) + |f|`` with the fastest wave ``c^2 <= b_1 h_1 + g'_2 (h_1 + h_2)``
    (row-sum bound of the layer coupling); viscosity and diffusion give real ones of size
    ``4 A (dx^-2 + dy^-2)`` (vector Laplacian: divergent and rotational modes separately) and
    ``4 kappa (dx^-2 + dy^-2)``. The bound is
    ``1 / dt = safety (lam_imag / sqrt(3) + lam_real / 2.51)`` with ``safety = 1/0.8`` over the
    narrowest wet row. ``state`` (optional) supplies the current thicknesses and speeds; ``b1_max``
    (m/s^2) bounds the upper layer's reduced gravity (default: the equation of state at T - T_2 = 40 K).
    """
    wet_rows = grid.wet.sum(-1) > 0
    dx = grid.dx.reshape(-1)[wet_rows].min().item()
    k2 = 1.0 / dx**2 + 1.0 / grid.dy**2
    H = [float(x) for x in params.H[: params.n_layers]]
    if b1_max is None:
        b1_max = GRAVITY * (params.alpha * 40.0 + params.beta_S * 5.0) + params.g2  # generous: T - T2 <= 40 K
    umax = 0.0
    if state is not None:
        hmax = state.h.amax(dim=(0, 2, 3)).tolist()
        H = [max(a, b) for a, b in zip(H, hmax)]
        umax = max(state.u.abs().max().item(), state.v.abs().max().item())
    c2 = params.g2 * sum(H) + (b1_max * H[0] if params.n_layers == 2 else 0.0)
    f_max = 2.0 * grid.omega
    lam_imag = 2.0 * (math.sqrt(c2) + umax) * math.sqrt(k2) + f_max
    visc = float(torch.as_tensor(params.visc).max())
    kappa_T = params.kappa_gm if params.kappa_T is None else params.kappa_T
    kap = max(float(torch.as_tensor(params.kappa_gm).max()), float(torch.as_tensor(kappa_T).max()))
    lam_visc, lam_diff = 4.0 * visc * k2, 4.0 * kap * k2
    lam_real = lam_visc + lam_diff + params.drag
    dt = _SAFETY / (lam_imag / _C_IMAG + lam_real / _C_REAL)
    parts = {
        "gravity waves/advection/rotation": lam_imag / _C_IMAG,
        "viscosity": lam_visc / _C_REAL,
        "thickness/tracer diffusion": lam_diff / _C_REAL,
    }
    return dt, max(parts, key=parts.get)


def _buoyancy(p: OceanParams, T: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    b = GRAVITY * (p.alpha * (T - p.T2) - p.beta_S * (S - p.S2))
    if p.n_layers == 1:
        b = b + p.g2
    return b.clamp_min(p.b_min)


def forced_stable_dt(grid: OceanGrid, params: OceanParams) -> tuple[float, str]:
    """:func:`stable_dt` with ``b1_max`` 1.5 times the largest upper-layer reduced gravity of the
    restoring targets at t = 0 over the wet cells (the step :class:`OceanModel` accepts)."""
    T = (params.t_star or restoring_temperature)(grid.lat, 0.0)[:, None].expand(grid.nlat, grid.nlon)
    S = (params.s_star or restoring_salinity)(grid.lat, 0.0)[:, None].expand(grid.nlat, grid.nlon)
    return stable_dt(grid, params, b1_max=1.5 * float(_buoyancy(params, T, S)[grid.wet.bool()].max()))


class OceanModel:
    """Tendencies and SSP-RK3 steps of the layered ocean on ``grid`` for a batch of ``B`` trajectories.

    Parameters
    ----------
    grid : OceanGrid
    params : OceanParams
    batch : int
        Number of trajectories B.
    dt : float
        Time step (s).

    Raises
    ------
    ValueError
        If ``dt`` exceeds :func:`stable_dt` (the message gives the largest safe step), or for bad settings.
    """

    def __init__(self, grid: OceanGrid, params: OceanParams, batch: int, dt: float):
        if params.n_layers not in (1, 2) or len(params.H) < params.n_layers:
            raise ValueError(f"n_layers={params.n_layers} must be 1 or 2 with as many rest thicknesses H={params.H}")
        if min(params.H[: params.n_layers]) <= params.h_min:
            raise ValueError(f"rest thicknesses H={params.H} must exceed h_min={params.h_min} m")
        self.grid, self.p, self.B, self.dt = grid, params, int(batch), float(dt)
        self.H = torch.tensor(params.H[: params.n_layers], dtype=torch.float64, device=grid.device).reshape(1, -1, 1, 1)
        safe, why = forced_stable_dt(grid, params)
        if not 0.0 < self.dt <= safe:
            raise ValueError(
                f"dt={self.dt:g} s is above the stability limit of this ocean configuration: the largest "
                f"safe step is {safe:.0f} s (limited by {why}); pass dt <= {math.floor(safe)}"
            )
        dev = grid.device
        self.visc = _per_traj(params.visc, self.B, dev)
        self.kappa_gm = _per_traj(params.kappa_gm, self.B, dev)
        self.kappa_d = _per_traj(params.kappa_d, self.B, dev)[:, :, 0]  # (B, 1, 1)
        kappa_T = params.kappa_gm if params.kappa_T is None else params.kappa_T  # Redi = GM by default
        self.kappa_T = _per_traj(kappa_T, self.B, dev)[:, :, 0]  # (B, 1, 1)
        self.inv_tau_T = 1.0 / _per_traj(params.tau_T, self.B, dev)[:, :, 0]
        self.inv_tau_S = 1.0 / _per_traj(params.tau_S, self.B, dev)[:, :, 0]

    # ------------------------------------------------------------------ state
    def rest_state(self, t: float = 0.0, T: torch.Tensor | None = None, S: torch.Tensor | None = None) -> OceanState:
        """Ocean at rest with the rest thicknesses and ``T``, ``S`` (default: the restoring targets at ``t``)."""
        g, B, L = self.grid, self.B, self.p.n_layers
        h = self.H.expand(B, L, g.nlat, g.nlon).clone()
        T = self.t_star(t).expand(B, g.nlat, g.nlon) if T is None else T.expand(B, g.nlat, g.nlon)
        S = self.s_star(t).expand(B, g.nlat, g.nlon) if S is None else S.expand(B, g.nlat, g.nlon)
        u = torch.zeros(B, L, g.nlat, g.nlon, dtype=torch.float64, device=g.device)
        v = torch.zeros(B, L, g.nlat + 1, g.nlon, dtype=torch.float64, device=g.device)
        return OceanState(h, u, v, h[:, 0] * T, h[:, 0] * S)

    def t_star(self, t: float) -> torch.Tensor:
        f = self.p.t_star or restoring_temperature
        return f(self.grid.lat, t)[:, None].expand(self.grid.nlat, self.grid.nlon)

    def s_star(self, t: float) -> torch.Tensor:
        f = self.p.s_star or restoring_salinity
        return f(self.grid.lat, t)[:, None].expand(self.grid.nlat, self.grid.nlon)

    def buoyancy(self, T: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
        """Upper-layer reduced gravity ``b_1`` (m/s^2), (B, nlat, nlon): the linear equation of state
        relative to the lower layer, floored at ``b_min``; for one layer ``g'_2`` plus that anomaly."""
        return _buoyancy(self.p, T, S)

    def montgomery(self, h: torch.Tensor, b1: torch.Tensor) -> torch.Tensor:
        """Montgomery potentials M_k (B, L, nlat, nlon) in m^2/s^2 (module docstring)."""
        if self.p.n_layers == 1:
            return (b1 * h[:, 0])[:, None]
        m2 = self.p.g2 * (h[:, 0] + h[:, 1])
        return torch.stack([m2 + b1 * h[:, 0], m2], dim=1)

    def sea_surface_height(self, s: OceanState) -> torch.Tensor:
        """Sea-surface height ``M_1 / g`` (m), (B, nlat, nlon), relative to its wet-area mean."""
        T, S = self.tracers(s)
        eta = self.montgomery(s.h, self.buoyancy(T, S))[:, 0] / GRAVITY
        return (eta - self.grid.wet_mean(eta)[:, None, None]) * self.grid.wet

    def tracers(self, s: OceanState) -> tuple[torch.Tensor, torch.Tensor]:
        """Upper-layer temperature (degC) and salinity (psu), (B, nlat, nlon)."""
        return s.hT / s.h[:, 0], s.hS / s.h[:, 0]

    # ------------------------------------------------------------------ tendencies
    def _momentum(self, s: OceanState, b1: torch.Tensor, t: float):
        g, p = self.grid, self.p
        h, u, v = s.h, s.u, s.v
        h_u = 0.5 * (h + g.west(h))
        h_v = g.to_v_rows(h)
        # relative vorticity at corners from the circulation around each dual cell
        udx = g.pad_rows(u * g.dx)
        circ = (v - g.west(v)) * g.dy - (udx[..., 1:, :] - udx[..., :-1, :])
        zeta = circ / g.area_c
        # no-slip vorticity for the viscous stress: the circulation over the wet part of the dual cell (the wall's
        # tangential velocity is zero), so a wall corner gets 2 v / dx (Adcroft & Marshall 1998); equal to zeta
        # wherever the four cells around the corner are wet
        zeta_ns = torch.where(g.area_c_wet > 0, circ / g.area_c_wet.clamp_min(1e-300), torch.zeros_like(circ))
        h_c = 0.5 * (h_v + g.west(h_v))
        q = (g.f_corner + zeta) / h_c
        V = v * h_v
        Vx = 0.5 * (V + g.west(V))  # at corners
        qV = q * Vx
        U = u * h_u
        Uy = 0.5 * (g.pad_rows(U)[..., 1:, :] + g.pad_rows(U)[..., :-1, :])  # at corners
        qU = q * Uy
        ke = 0.25 * (u**2 + g.east(u) ** 2 + v[..., :-1, :] ** 2 + v[..., 1:, :] ** 2)
        bern = self.montgomery(h, b1) + ke
        div = ((g.east(u) - u) * g.dy + v[..., 1:, :] * g.dx_v[1:] - v[..., :-1, :] * g.dx_v[:-1]) / g.area
        du = 0.5 * (qV[..., :-1, :] + qV[..., 1:, :]) - (bern - g.west(bern)) / g.dx
        du = du + self.visc * ((div - g.west(div)) / g.dx - (zeta_ns[..., 1:, :] - zeta_ns[..., :-1, :]) / g.dy)
        dv = torch.zeros_like(v)
        dv[..., 1:-1, :] = (
            -0.5 * (qU + g.east(qU))[..., 1:-1, :]
            - (bern[..., 1:, :] - bern[..., :-1, :]) / g.dy
            + self.visc
            * ((div[..., 1:, :] - div[..., :-1, :]) / g.dy + (g.east(zeta_ns) - zeta_ns)[..., 1:-1, :] / g.dx_v[1:-1])
        )
        # inhomogeneous upper layer (Ripa): + (h1/2) grad b1 ; wind stress on the upper layer
        du[:, 0] += 0.5 * h_u[:, 0] * (b1 - g.west(b1)) / g.dx
        dv[:, 0, 1:-1] += 0.5 * h_v[:, 0, 1:-1] * (b1[:, 1:] - b1[:, :-1]) / g.dy
        tau = (p.wind or wind_stress)(g.lat, t, p.tau0)[:, None]  # (nlat, 1) N/m^2 at u faces
        du[:, 0] += tau / (RHO0 * h_u[:, 0].clamp_min(p.h_wind))
        if p.drag > 0:
            du, dv = du - p.drag * u, dv - p.drag * v
        return du * g.mask_u, dv * g.mask_v

    def _volume_fluxes(self, s: OceanState):
        """Face volume fluxes (m^3/s) of every layer: advection plus interface-thickness diffusion."""
        g = self.grid
        h = s.h
        h_u = 0.5 * (h + g.west(h))
        h_v = g.to_v_rows(h)
        fx = (s.u * h_u - self.kappa_gm * (h - g.west(h)) / g.dx) * g.dy * g.mask_u
        dh_y = torch.zeros_like(s.v)
        dh_y[..., 1:-1, :] = (h[..., 1:, :] - h[..., :-1, :]) / g.dy
        fy = (s.v * h_v - self.kappa_gm * dh_y) * g.dx_v * g.mask_v
        return fx, fy

    def entrainment(self, h: torch.Tensor) -> torch.Tensor:
        """Thin-layer entrainment velocity (m/s), (B, nlat, nlon), before the compensating detrainment:
        ``(h_entrain - h_1)^+ / t_entrain`` on wet cells (module docstring); zeros when ``h_entrain = 0``."""
        if self.p.n_layers == 1 or self.p.h_entrain <= 0:
            return torch.zeros_like(h[:, 0])
        return (self.p.h_entrain - h[:, 0]).clamp_min(0.0) / self.p.t_entrain * self.grid.wet

    def _diapycnal(self, h: torch.Tensor) -> torch.Tensor:
        """Volume flux per area e (m/s), layer 2 -> layer 1, (B, nlat, nlon); zero on land. The interface
        relaxation plus the thin-layer entrainment, minus their wet-area mean (the basin-uniform compensating
        detrainment), so its wet-area integral is zero and each layer keeps its volume."""
        if self.p.n_layers == 1:
            return torch.zeros_like(h[:, 0])
        H1, H2 = self.p.H[0], self.p.H[1]
        e = self.kappa_d * (1.0 / h[:, 0] - H2 / (H1 * h[:, 1])) * self.grid.wet + self.entrainment(h)
        return (e - self.grid.wet_mean(e)[:, None, None]) * self.grid.wet

    def euler(self, s: OceanState, t: float, dt: float) -> OceanState:
        """One forward-Euler stage of size ``dt`` with the conservative thickness limiter."""
        g, p = self.grid, self.p
        T, S = self.tracers(s)
        b1 = self.buoyancy(T, S)
        du, dv = self._momentum(s, b1, t)
        fx, fy = self._volume_fluxes(s)
        e = self._diapycnal(s.h)
        # outgoing volume of each cell and layer over dt, and the fraction it may lose
        out = (
            fx.clamp_min(0.0).roll(-1, -1)
            + (-fx).clamp_min(0.0)
            + fy[..., 1:, :].clamp_min(0.0)
            + (-fy[..., :-1, :]).clamp_min(0.0)
        )
        if p.n_layers == 2:
            out = out + torch.stack([(-e).clamp_min(0.0), e.clamp_min(0.0)], dim=1) * g.area
        avail = (s.h - p.h_min).clamp_min(0.0) * g.area
        r = torch.where(out * dt > avail, avail / (out * dt).clamp_min(1e-300), torch.ones_like(out))
        fx = torch.where(fx > 0, fx * g.west(r), fx * r)
        fy_r = torch.ones_like(fy)
        fy_r[..., 1:-1, :] = torch.where(fy[..., 1:-1, :] > 0, r[..., :-1, :], r[..., 1:, :])
        fy = fy * fy_r
        if p.n_layers == 2:
            e = torch.where(e > 0, e * r[:, 1], e * r[:, 0])
        conv = (fx - fx.roll(-1, -1) + fy[..., :-1, :] - fy[..., 1:, :]) / g.area
        dh = conv.clone()
        if p.n_layers == 2:
            dh[:, 0] += e
            dh[:, 1] -= e
        # upper-layer tracers: upwind advection with the limited fluxes, diffusion, restoring, entrainment
        dq = []
        for c, star, inv_tau, c2 in (
            (T, self.t_star(t), self.inv_tau_T, p.T2),
            (S, self.s_star(t), self.inv_tau_S, p.S2),
        ):
            fcx = torch.zeros_like(c)
            fcy = torch.zeros_like(fy[:, 0])
            if p.advect_tracers:
                fcx = fx[:, 0] * torch.where(fx[:, 0] > 0, g.west(c), c)
                cv = torch.cat([c[..., :1, :], c, c[..., -1:, :]], dim=-2)
                fcy = fy[:, 0] * torch.where(fy[:, 0] > 0, cv[..., :-1, :], cv[..., 1:, :])
            if bool((self.kappa_T > 0).any()):
                hu = 0.5 * (s.h[:, 0] + g.west(s.h[:, 0]))
                fcx = fcx - self.kappa_T * hu * (c - g.west(c)) / g.dx * g.dy * g.mask_u
                gy = torch.zeros_like(fcy)
                gy[..., 1:-1, :] = (c[..., 1:, :] - c[..., :-1, :]) / g.dy
                fcy = fcy - self.kappa_T * g.to_v_rows(s.h[:, 0]) * gy * g.dx_v * g.mask_v
            tend = (fcx - fcx.roll(-1, -1) + fcy[..., :-1, :] - fcy[..., 1:, :]) / g.area
            tend = tend + s.h[:, 0] * (star - c) * inv_tau * g.wet
            if p.n_layers == 2:
                tend = tend + torch.where(e > 0, e * c2, e * c)
            dq.append(tend)
        return OceanState(s.h + dt * dh, s.u + dt * du, s.v + dt * dv, s.hT + dt * dq[0], s.hS + dt * dq[1])

    def step(self, s: OceanState, t: float, dt: float | None = None) -> OceanState:
        """One SSP-RK3 step (Shu & Osher 1988, eq. 2.18) from time ``t`` (s)."""
        dt = self.dt if dt is None else float(dt)
        s1 = self.euler(s, t, dt)
        s2 = s.combine(0.75, self.euler(s1, t + dt, dt), 0.25)
        return s.combine(1.0 / 3.0, self.euler(s2, t + 0.5 * dt, dt), 2.0 / 3.0)

    def check_finite(self, s: OceanState, t: float) -> None:
        """Raise ``FloatingPointError`` naming the first trajectory (batch index) with a non-finite value."""
        bad = torch.zeros(self.B, dtype=torch.bool, device=s.h.device)
        for x in s.astuple():
            bad |= ~torch.isfinite(x.reshape(self.B, -1)).all(-1)
        if bad.any():
            b = int(torch.nonzero(bad)[0])
            raise FloatingPointError(
                f"ocean trajectory {b} (batch index) became non-finite before t={t:.0f} s "
                f"({int(bad.sum())} of {self.B} trajectories); lower dt or raise the viscosity"
            )

    def with_params(self, **changes) -> OceanModel:
        """A copy with changed settings (same grid, batch and step)."""
        return OceanModel(self.grid, replace(self.p, **changes), self.B, self.dt)
