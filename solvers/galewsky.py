"""The batched Galewsky run, the shallow-water simulation it is built on, and Williamson case 2 runs.

The analytic initial states (Galewsky, Scott & Polvani 2004; Williamson et al. 1992, case 2), the
constants of the dataset card (docs/datasets/galewsky.md) and the tilted-planet geometry are in
:mod:`dandelion.solvers.galewsky_initial` and re-exported here. Trajectory ``b`` of a batch runs on a
planet tilted by ``R_b`` (solver frame -> output frame) with Coriolis ``f = 2 Omega (R_b z) . r``, from
the initial state evaluated at the back-rotated points, so the run is the canonical-frame physics seen
in the output frame, without interpolation.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from dandelion.sphere import SphereGrid

from .galewsky_initial import (
    BUMP_ALPHA,
    BUMP_BETA,
    FRAME_SECONDS,
    GALEWSKY_MIN_LMAX,
    GALEWSKY_PARAMS,
    JET_HALF_WIDTH,
    SPEED_FACTOR,
    balanced_height,
    bump_height,
    galewsky_default_dt,
    galewsky_fields,
    galewsky_reference_params,
    hyperviscosity,
    jet_wind,
    rotation_matrices,
    williamson2_fields,
    wrap_longitude,
)
from .integrators import make_stepper
from .shallow_water import EARTH_RADIUS, ShallowWater, SWState, cfl_limits, check_cfl
from .spectral_core import SpectralCore
from .time_stepping import Simulation, check_finite

__all__ = [
    "GALEWSKY_MIN_LMAX",
    "GALEWSKY_PARAMS",
    "galewsky_reference_params",
    "SPEED_FACTOR",
    "JET_HALF_WIDTH",
    "BUMP_ALPHA",
    "BUMP_BETA",
    "FRAME_SECONDS",
    "galewsky_default_dt",
    "hyperviscosity",
    "rotation_matrices",
    "jet_wind",
    "balanced_height",
    "bump_height",
    "wrap_longitude",
    "galewsky_fields",
    "williamson2_fields",
    "ShallowWaterSimulation",
    "GalewskySimulation",
    "canonical_galewsky",
    "williamson2_simulation",
]


# ---------------------------------------------------------------------------- simulations
class ShallowWaterSimulation(Simulation):
    """A batch of shallow-water trajectories advanced by the driver of :mod:`dandelion.solvers.time_stepping`.

    Attributes: ``time`` [s], ``state`` (:class:`SWState`); methods ``advance_to(t)``, ``fields(grid)``.
    Built by :class:`GalewskySimulation`, :func:`canonical_galewsky`, :func:`williamson2_simulation`.

    Parameters
    ----------
    equation : ShallowWater
    state : SWState
    dt : float
        Step [s]; ``advance_to`` lands exactly on any ``t`` (equal steps of ``dt`` where it divides the
        interval, else equal shorter ones); a ``dt`` longer than the interval is refused.
    scheme : str
        Integrator name (``"ars343"``, ``"ars222"``, ``"rk4"``).
    params : dict of (B,) tensors, quoted in error messages.
    expected_speed : float or tensor (B,)
        Largest wind expected [m/s]: the up-front Courant limit (:func:`cfl_limits`); during the run
        the measured winds are checked every ``check_every`` steps.
    check_every : int
        Steps between non-finite and stability checks (and always at the end of ``advance_to``).

    Raises
    ------
    ValueError
        For a step violating a stability limit (the message gives the largest safe dt).
    """

    name = "shallow water"

    def __init__(
        self,
        equation: ShallowWater,
        state: SWState,
        *,
        dt: float,
        scheme: str,
        params: dict | None = None,
        expected_speed=0.0,
        check_every: int = 64,
    ):
        self.equation = equation
        self.core = equation.core
        self.state = state
        self.dt = self.fixed_step = float(dt)
        self.scheme = scheme
        self.params = dict(params or {})
        self.time = 0.0
        self.check_every = int(check_every)
        self.n_steps = 0
        self._steppers: dict[float, Callable] = {}
        check_cfl(self.dt, **self._limit_args(expected_speed))

    def _limit_args(self, speed) -> dict:
        eq = self.equation
        return dict(
            lmax=self.core.lmax,
            radius=self.core.radius,
            max_speed=speed,
            scheme=self.scheme,
            gravity_wave_speed=torch.sqrt(eq.gravity * eq.H.reshape(-1)),
            diffusion=eq.nu.reshape(-1),
        )

    @property
    def batch_size(self) -> int:
        return self.state.h.shape[0]

    def stability_limits(self):
        """Courant limits on the measured winds of each trajectory (:func:`cfl_limits`)."""
        u, v = self.core.vrtdiv_to_uv(self.state.vrt, self.state.div)
        return cfl_limits(**self._limit_args(torch.sqrt(u * u + v * v).flatten(1).max(-1).values))

    def max_step(self) -> float:
        return self.dt

    def step(self, h, active=None) -> None:
        h = float(h)
        if h not in self._steppers:
            self._steppers[h] = make_stepper(self.scheme, self.equation, h)
        self.state = self._steppers[h](self.state)
        self.n_steps += 1

    def fields(self, grid: SphereGrid) -> dict[str, torch.Tensor]:
        """``{"h", "u", "v"}`` float64 (B, grid.nlat, grid.nlon): the state truncated to
        ``min(lmax, grid.lmax)`` and synthesised exactly at ``grid``'s nodes. ``h`` [m] is the
        departure from the mean depth, ``u`` eastward and ``v`` northward [m/s].

        Raises ``FloatingPointError`` naming the trajectory if a state is non-finite.
        """
        check_finite(self)
        s = self.state
        h = self.core.synthesise(s.h, grid)
        u, v = self.core.synthesise_uv(s.vrt, s.div, grid)
        return {"h": h, "u": u, "v": v}

    def vorticity(self, grid: SphereGrid) -> torch.Tensor:
        """Relative vorticity [1/s] (B, nlat, nlon) at ``grid``'s nodes (truncated as in :meth:`fields`)."""
        return self.core.synthesise(self.state.vrt, grid)

    def invariants(self) -> dict[str, torch.Tensor]:
        """Mass [m^3], energy [m^5/s^2], enstrophy, potential enstrophy, each (B,)."""
        eq, s = self.equation, self.state
        return {
            "mass": eq.mass(s),
            "energy": eq.energy(s),
            "enstrophy": eq.enstrophy(s),
            "potential_enstrophy": eq.potential_enstrophy(s),
        }


def _check_params(params: dict) -> tuple[dict, int]:
    missing = [k for k in GALEWSKY_PARAMS if k not in params]
    if missing:
        raise ValueError(
            f"GalewskySimulation params lack {missing}; give every key of {GALEWSKY_PARAMS} as a (B,) tensor"
        )
    out = {k: torch.as_tensor(params[k], dtype=torch.float64).reshape(-1) for k in GALEWSKY_PARAMS}
    sizes = {k: v.numel() for k, v in out.items()}
    B = max(sizes.values())
    bad = {k: n for k, n in sizes.items() if n not in (1, B)}
    if bad:
        raise ValueError(f"GalewskySimulation params have inconsistent batch sizes {bad} (expected {B} or 1)")
    out = {k: v.expand(B).clone() for k, v in out.items()}
    if bool((out["H"] <= 0).any()):
        raise ValueError(f"mean depth H must be positive, got {out['H'].tolist()}")
    if bool((out["phi_c"] - JET_HALF_WIDTH <= 0).any() or (out["phi_c"] + JET_HALF_WIDTH >= math.pi / 2).any()):
        raise ValueError(
            f"jet centre phi_c={out['phi_c'].tolist()} rad must lie in (20, 70) degrees so the jets "
            "(half-width 20 degrees) stay inside one hemisphere"
        )
    return out, B


class GalewskySimulation(ShallowWaterSimulation):
    """Batched Galewsky two-jet runs (docs/datasets/galewsky.md) on tilted planets, simulation protocol.

    Parameters
    ----------
    params : dict of (B,) tensors with keys :data:`GALEWSKY_PARAMS`:
        ``u_max`` [m/s] jet maximum; ``phi_c`` [rad] jet centres at +-phi_c (half-width 20 deg);
        ``h_hat`` [m] bump amplitude; ``H`` [m] mean depth; ``bump_lon`` [rad] bump centre longitude
        and ``bump_dlat`` [rad] its offset from the northern jet centre (solver frame; the bump sits
        on the northern jet only, widths 1/3 rad zonal and 1/15 rad meridional);
        ``rot_axis_x/y/z``, ``rot_angle`` [rad]: rotation R (solver -> output frame); the planet's
        axis is ``R z`` and the fields come out in the output frame.
    lmax : int
        Solver band limit (number of degrees); :data:`GALEWSKY_MIN_LMAX` resolves the physics.
    dt : float
        Time step [s], e.g. :func:`galewsky_default_dt`; checked with :func:`check_cfl`.
    nu : float
        The card's ``nu0`` [m^2/s], the Laplacian-equivalent viscosity that sets the
        hyperviscosity ``nu4 = nu R^2/32^2 (256/lmax)^4`` [m^4/s] (:func:`hyperviscosity`; 1e5 is
        the card's value, 0 is inviscid). With ``viscosity="laplacian"`` it is a plain
        Laplacian viscosity ``nu`` [m^2/s] instead.
    device : str or torch.device
    scheme : str
        ``"ars343"`` (default: gravity waves implicit, explicit part stable to Courant 2.8 without
        diffusion), ``"ars222"`` (half the cost, needs the hyperviscosity) or ``"rk4"``.

    Raises
    ------
    ValueError
        For missing or inconsistent parameters, or a step violating the CFL limit.
    """

    def __init__(
        self,
        params: dict,
        *,
        lmax: int,
        dt: float,
        nu: float,
        device="cpu",
        scheme: str = "ars343",
        viscosity: str = "hyper",
    ):
        p, B = _check_params(params)
        if viscosity not in ("hyper", "laplacian"):
            raise ValueError(f"viscosity={viscosity!r}: use 'hyper' (card) or 'laplacian'")
        if not float(nu) >= 0:
            raise ValueError(f"nu={nu} must be >= 0 [m^2/s]")
        if not dt > 0:
            raise ValueError(f"time step dt={dt} must be positive")
        p = {k: v.to(device) for k, v in p.items()}
        core = SpectralCore(lmax, dealias=1.5, radius=EARTH_RADIUS).to(device)
        rot = rotation_matrices(torch.stack([p["rot_axis_x"], p["rot_axis_y"], p["rot_axis_z"]], -1), p["rot_angle"])
        if viscosity == "hyper":
            nu_eff, order = hyperviscosity(nu, lmax), 2
        else:
            nu_eff, order = float(nu), 1
        eq = ShallowWater(core, H=p["H"], axis=rot[:, :, 2], nu=nu_eff, diffusion_order=order)
        w = JET_HALF_WIDTH
        jets = [(p["u_max"], p["phi_c"] - w, p["phi_c"] + w), (p["u_max"], -p["phi_c"] - w, -p["phi_c"] + w)]
        bumps = [(p["h_hat"], p["phi_c"] + p["bump_dlat"], p["bump_lon"])]
        g = core.grid_spec
        u, v, h = galewsky_fields((g.xyz.to(device), g.east.to(device), g.north.to(device)), rot, jets, bumps)
        super().__init__(
            eq,
            eq.state_from_grid(u, v, h),
            dt=dt,
            scheme=scheme,
            params=p,
            expected_speed=SPEED_FACTOR * p["u_max"].abs(),
        )
        self.rotation = rot
        self.lmax = int(lmax)
        self.nu4 = nu_eff if viscosity == "hyper" else None


def canonical_galewsky(
    lmax: int,
    *,
    dt: float,
    nu: float = 1e5,
    h_hat: float = 120.0,
    scheme: str = "rk4",
    bump_lon: float = 0.0,
    rotation: torch.Tensor | None = None,
    device="cpu",
) -> ShallowWaterSimulation:
    """The canonical case of Galewsky et al. (2004): one jet on ``pi/7 < phi < 5pi/14``, u_max = 80 m/s,
    H = 10 km, bump ``h_hat`` = 120 m at ``phi_2 = pi/4`` and longitude ``bump_lon``, Laplacian
    viscosity ``nu`` [m^2/s] on all fields (their §3.3 uses 1e5). ``rotation`` (3, 3) optionally
    tilts the planet (solver -> output frame). Batch size 1.
    """
    rot = (
        torch.eye(3, dtype=torch.float64)[None]
        if rotation is None
        else torch.as_tensor(rotation, dtype=torch.float64).reshape(1, 3, 3)
    )
    rot = rot.to(device)
    if not dt > 0:
        raise ValueError(f"time step dt={dt} must be positive")
    core = SpectralCore(lmax, dealias=1.5, radius=EARTH_RADIUS).to(device)
    eq = ShallowWater(core, H=1e4, axis=rot[:, :, 2], nu=nu, diffusion_order=1)

    def one(x):
        return torch.tensor([x], dtype=torch.float64, device=device)

    jets = [(one(80.0), one(math.pi / 7), one(5 * math.pi / 14))]
    bumps = [(one(h_hat), one(math.pi / 4), one(bump_lon))] if h_hat != 0 else []
    g = core.grid_spec
    u, v, h = galewsky_fields((g.xyz.to(device), g.east.to(device), g.north.to(device)), rot, jets, bumps)
    params = {"u_max": one(80.0), "h_hat": one(h_hat), "H": one(1e4)}
    return ShallowWaterSimulation(
        eq, eq.state_from_grid(u, v, h), dt=dt, scheme=scheme, params=params, expected_speed=SPEED_FACTOR * 80.0
    )


def williamson2_simulation(
    lmax: int, alpha, *, dt: float, scheme: str = "rk4", nlat: int | None = None, device="cpu"
) -> tuple[ShallowWaterSimulation, dict]:
    """Williamson case 2 for tilt angles ``alpha`` (B,) [rad] (axis ``(-sin a, 0, cos a)``), inviscid.

    Returns the simulation and the exact (steady) transform-grid fields ``{"u", "v", "h"}``.
    """
    alpha = torch.as_tensor(alpha, dtype=torch.float64).reshape(-1)
    axis = torch.stack([-torch.sin(alpha), torch.zeros_like(alpha), torch.cos(alpha)], -1).to(device)
    core = SpectralCore(lmax, dealias=1.5, radius=EARTH_RADIUS, nlat=nlat, nlon=None if nlat is None else 2 * nlat).to(
        device
    )
    g = core.grid_spec
    u, v, h, H = williamson2_fields((g.xyz, g.east, g.north), axis)
    u0 = 2.0 * math.pi * EARTH_RADIUS / (12.0 * 86400.0)
    eq = ShallowWater(core, H=torch.full_like(alpha, H), axis=axis)
    sim = ShallowWaterSimulation(
        eq, eq.state_from_grid(u, v, h), dt=dt, scheme=scheme, params={"alpha": alpha}, expected_speed=u0
    )
    return sim, {"u": u, "v": v, "h": h, "H": H}
