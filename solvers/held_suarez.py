"""The batched Held-Suarez (1994) run of the sigma-coordinate primitive equations, with its tracer.

Held, I. M. and Suarez, M. J. (1994), Bull. Amer. Meteor. Soc. 75, 1825-1830. The forcing (Newtonian
cooling toward ``T_eq``, Rayleigh drag in the boundary layer) and the dataset's passive tracer
(docs/datasets/held_suarez.md) are defined in :mod:`dandelion.solvers.held_suarez_forcing` and
re-exported here; this module holds the simulation, its step limits known up front
(:func:`held_suarez_time_step_limits`) and the pressure levels of the stored dataset. The sweep axes of
the active variant (rotation-rate factor, dT_y, dtheta_z) are per-trajectory tensors of shape ``(B,)``.

All functions are pure torch, float64, device-agnostic. Time unit: seconds.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .held_suarez_forcing import (
    DAY,
    HS_CONSTANTS,
    HeldSuarezForcing,
    TracerForcing,
    equilibrium_temperature,
    rayleigh_drag_rate,
    thermal_relaxation_rate,
)
from .integrators import SCHEMES, SemiImplicitLeapfrog, make_stepper
from .primitive_equations import PEState, PrimitiveEquations, hyperdiffusion_filter
from .shallow_water import CFL_LIMITS
from .sigma_coordinates import SigmaCoordinates, interpolate_to_pressure
from .spectral_core import SpectralCore, pad_spec
from .time_stepping import Simulation, StabilityLimit, check_finite, enforce_limits

__all__ = [
    "DAY",
    "HS_CONSTANTS",
    "equilibrium_temperature",
    "thermal_relaxation_rate",
    "rayleigh_drag_rate",
    "HeldSuarezForcing",
    "TracerForcing",
    "HeldSuarezSimulation",
    "held_suarez_time_step_limits",
    "explicit_frequency_bound",
    "PRESSURE_LEVELS_HPA",
    "HELD_SUAREZ_MIN_LMAX",
]


# ---------------------------------------------------------------------------------------- simulation
#: Pressure levels (hPa) of the stored dataset (docs/datasets/held_suarez.md).
PRESSURE_LEVELS_HPA = (50.0, 100.0, 250.0, 500.0, 700.0, 850.0, 925.0, 1000.0)

#: Documented minimum solver band limit (number of degrees) resolving the HS94 climate: T42.
HELD_SUAREZ_MIN_LMAX = 43


def explicit_frequency_bound(scheme: str) -> float:
    """Largest ``|omega| dt`` of an explicitly treated oscillation: 1 for the leapfrog (Durran,
    *Numerical Methods for Fluid Dynamics*, 2nd ed., §2.3.3), else the scheme's Courant limit
    (:data:`dandelion.solvers.shallow_water.CFL_LIMITS`)."""
    return 1.0 if scheme == "leapfrog" else CFL_LIMITS.get(scheme, 0.0)


def held_suarez_time_step_limits(
    omega_factor, *, scheme: str = "leapfrog", hyperdiffusion_time: float = 0.1 * DAY
) -> list[StabilityLimit]:
    """Step limits of a Held-Suarez run known before it starts, per trajectory.

    Coriolis is explicit: ``f_max dt <= bound`` with ``f_max = 2 Omega omega_factor`` and the bound of
    :func:`explicit_frequency_bound` (for the leapfrog ``dt <= 1 / (2 Omega omega_factor)``: 6857 s at
    ``omega_factor = 1``). ARS(2,2,2)'s explicit part amplifies every oscillation (``|R(iy)|^2 = 1 + y^4/4``),
    so it is refused without hyperdiffusion (infinite ``hyperdiffusion_time``).
    """
    bound = explicit_frequency_bound(scheme)
    f_max = (
        2.0
        * HS_CONSTANTS["omega"]
        * torch.as_tensor(omega_factor, dtype=torch.float64).detach().cpu().reshape(-1).abs()
    )
    where = (
        "leapfrog with explicit Coriolis: |f| dt <= 1"
        if scheme == "leapfrog"
        else f"explicit Coriolis in scheme {scheme!r}: |f| dt <= {bound}"
    )
    out = [
        StabilityLimit(
            "inertial f*dt",
            bound / f_max.clamp(min=1e-300),
            f"{where} with f_max = 2 Omega omega_factor = {float(f_max.max()):.4g} 1/s",
        )
    ]
    if scheme == "ars222" and not math.isfinite(hyperdiffusion_time):
        out.append(
            StabilityLimit(
                "use of ARS(2,2,2) without hyperdiffusion",
                0.0,
                "its explicit part amplifies every oscillation (|R(iy)|^2 = 1 + y^4/4); "
                "use the leapfrog or ars343, or a finite hyperdiffusion_time",
            )
        )
    return out


class HeldSuarezSimulation(Simulation):
    """Batched Held-Suarez run of the sigma-coordinate primitive equations (Simulation protocol).

    Parameters
    ----------
    params : dict of torch.Tensor of shape (B,)
        ``omega_factor`` (rotation rate / 7.292e-5 1/s), ``delta_T_y`` (K), ``delta_theta_z`` (K);
        optional ``seed`` (int-valued, the initial-noise seed of each trajectory; default 0..B-1).
    lmax : int
        Solver band limit (number of degrees; T42 = 43).
    n_levels : int
        Equally spaced sigma levels (20 as in HS94).
    dt : float
        Time step (s); the landing rule of :mod:`dandelion.solvers.time_stepping` (exactly ``dt``
        where it divides the interval, else equal shorter steps, the leapfrog restarting).
    hyperdiffusion_time : float
        e-folding time (s) of del^8 hyperdiffusion at the truncation degree (0.1 day).
    scheme : str
        ``"leapfrog"`` (semi-implicit leapfrog + RAW filter, one explicit evaluation per step) or
        an IMEX scheme of :data:`dandelion.solvers.integrators.SCHEMES` (e.g. ``"ars222"``).
    mass_fixer : bool
        Rescale the global mean surface pressure to its initial value after each step.
    tracer : bool or TracerForcing
        Tracer source/sink (True = the card's defaults, False = pure advection).
    forcing : bool
        Held-Suarez forcing on (default) or off (adiabatic, inviscid except hyperdiffusion).
    initial_temperature : float, optional
        If given, start isothermal at this temperature (K) instead of the default rest state
        (each level at the global mean of ``T_eq`` of its trajectory).
    noise_amplitude : float
        RMS (K) of the seeded large-scale noise added to the initial temperature (degrees 1..21).
    ps0 : float
        Initial uniform surface pressure (Pa).
    pressure_levels : sequence of float
        Output levels in hPa.
    device : str or torch.device

    Stability: :func:`held_suarez_time_step_limits` up front; the advective Courant number on the
    evolving winds during the run (:meth:`stability_limits`).

    Raises
    ------
    ValueError
        For missing parameters, a band limit < 4, a non-positive time step, or one violating a
        stability limit (the message gives the largest safe ``dt``).
    """

    name = "held_suarez"
    check_every = 72

    def __init__(
        self,
        params: dict,
        *,
        lmax: int = HELD_SUAREZ_MIN_LMAX,
        n_levels: int = 20,
        dt: float = 1200.0,
        hyperdiffusion_time: float = 0.1 * DAY,
        scheme: str = "leapfrog",
        mass_fixer: bool = True,
        tracer=True,
        forcing: bool = True,
        initial_temperature: float | None = None,
        noise_amplitude: float = 0.1,
        ps0: float = 1.0e5,
        pressure_levels=PRESSURE_LEVELS_HPA,
        reference_temperature: float = 300.0,
        device="cpu",
    ):
        missing = [k for k in ("omega_factor", "delta_T_y", "delta_theta_z") if k not in params]
        if missing:
            raise ValueError(
                f"HeldSuarezSimulation params lack {missing}; pass (B,) tensors for omega_factor, delta_T_y, "
                "delta_theta_z"
            )
        if int(lmax) != lmax or lmax < 4:
            raise ValueError(f"lmax={lmax} must be an integer >= 4 (T42 is lmax=43)")
        if not dt > 0:
            raise ValueError(f"dt={dt} must be positive (s)")
        if scheme != "leapfrog" and scheme not in SCHEMES:
            raise ValueError(f"unknown scheme {scheme!r}: use 'leapfrog' or one of {sorted(SCHEMES)}")
        p = {k: torch.as_tensor(v, dtype=torch.float64, device=device).reshape(-1) for k, v in params.items()}
        B = p["omega_factor"].numel()
        self.B, self.device, self.dt = B, torch.device(device), float(dt)
        self.fixed_step = self.dt
        self.params = p
        self.scheme = scheme
        self.hyperdiffusion_time = float(hyperdiffusion_time)
        C = HS_CONSTANTS
        self.core = SpectralCore(int(lmax), dealias=1.5, radius=C["radius"]).to(device)
        enforce_limits(self.dt, self.time_step_limits(), what="Held-Suarez")
        self.coords = SigmaCoordinates.equally_spaced(n_levels)
        self.n = n_levels
        self.hs = HeldSuarezForcing(p["delta_T_y"], p["delta_theta_z"], kappa=C["kappa"], p0=C["p0"])
        if tracer is True:
            self.tracer_forcing = TracerForcing()
        elif tracer is False or tracer is None:
            self.tracer_forcing = None
        else:
            self.tracer_forcing = tracer
        self.forcing_on = bool(forcing)
        self.eq = PrimitiveEquations(
            self.core,
            self.coords,
            reference_temperature=reference_temperature,
            omega=C["omega"] * p["omega_factor"],
            R=C["R"],
            kappa=C["kappa"],
            forcing=self._forcing,
        )
        filt = hyperdiffusion_filter(self.core, 1.0, hyperdiffusion_time, 4)  # rate per second: -log(filt)
        self._hd_rate = -torch.log(filt)  # (lmax, 1)
        n = self.n
        self._hd_mask = torch.ones(4 * n + 1, 1, 1, dtype=torch.float64, device=self.device)
        self._hd_mask[4 * n] = 0.0  # no hyperdiffusion on ln ps
        self.mass_fixer = bool(mass_fixer)
        self._steppers: dict = {}
        self.pressure_levels = torch.as_tensor(pressure_levels, dtype=torch.float64, device=self.device)
        self.state = self._initial_state(p, initial_temperature, noise_amplitude, ps0)
        self.ps_target = self.eq.mean_surface_pressure(self.state)
        self.time = 0.0
        self.n_steps = 0

    @property
    def x(self) -> torch.Tensor:
        """The packed spectral state (B, 4N + 1, lmax, mmax).

        See :class:`~dandelion.solvers.primitive_equations.PEState` for the layout.
        """
        return self.state

    # ------------------------------------------------------------------ stability
    def time_step_limits(self) -> list[StabilityLimit]:
        """Limits known before the run (:func:`held_suarez_time_step_limits`)."""
        return held_suarez_time_step_limits(
            self.params["omega_factor"], scheme=self.scheme, hyperdiffusion_time=self.hyperdiffusion_time
        )

    def stability_limits(self) -> list[StabilityLimit]:
        """The advective Courant limit ``max|u| sqrt(L(L+1))/a dt <= bound`` on the current winds, per trajectory."""
        c = self.core
        s = PEState(self.state, self.n)
        u, v = c.vrtdiv_to_uv(s.vorticity, s.divergence)
        speed = torch.sqrt(u * u + v * v).flatten(1).max(-1).values.cpu()
        L = c.lmax - 1
        k = math.sqrt(L * (L + 1)) / c.radius
        bound = explicit_frequency_bound(self.scheme)
        return [
            StabilityLimit(
                "advective Courant number",
                bound / (k * speed).clamp(min=1e-300),
                f"max|u| sqrt(L(L+1))/a dt <= {bound} (L = {L}; max|u| = {float(speed.max()):.1f} m/s)",
            )
        ]

    # ------------------------------------------------------------------ stepping
    def _stepper(self, h: float):
        st = self._steppers.get(h)
        if st is None:
            if len(self._steppers) >= 4:
                self._steppers.clear()
            if self.scheme == "leapfrog":
                st = SemiImplicitLeapfrog(self.eq, h, post=self._post).step
            else:
                base = make_stepper(self.scheme, self.eq, h)
                st = lambda x: self._post(base(x), h)  # noqa: E731
            self._steppers[h] = st
        return st

    def max_step(self) -> float:
        return self.dt  # fixed step; the landing rule shortens it only to land on a time

    def step(self, h, active=None) -> None:
        """One step of ``h`` s (the leapfrog restarts when ``h`` changes)."""
        h = float(h)
        if self.scheme == "leapfrog" and h not in self._steppers:
            self._steppers.clear()  # a new step size restarts the leapfrog (starter step)
        self.state = self._stepper(h)(self.state)
        self.n_steps += 1

    # ------------------------------------------------------------------ physics hooks
    def _forcing(self, g: dict) -> dict:
        out = {}
        if self.forcing_on:
            out["temperature"] = self.hs.temperature_tendency(g["T"], g["sigma"], g["ps"], g["lat"])
            out["drag"] = self.hs.drag_rate(g["sigma"])
        if self.tracer_forcing is not None:
            out["tracer"] = self.tracer_forcing.tendency(g["q"], g["sigma"], g["lat"])
        return out

    def _post(self, x: torch.Tensor, tau: float) -> torch.Tensor:
        x = x * torch.exp(-tau * self._hd_rate * self._hd_mask)
        if self.mass_fixer:
            mean_ps = self.eq.mean_surface_pressure(x)
            x = x.clone()
            x[:, 4 * self.n, 0, 0] += torch.log(self.ps_target / mean_ps) * math.sqrt(4 * math.pi)
        return x

    def _initial_state(self, p, initial_temperature, noise_amplitude, ps0) -> torch.Tensor:
        c, n, B = self.core, self.n, self.B
        sigma = self.eq.sigma
        if initial_temperature is None:
            lat = c.lat.reshape(1, 1, -1, 1)
            teq = equilibrium_temperature(
                lat,
                ps0 * sigma.reshape(1, -1, 1, 1),
                p["delta_T_y"].reshape(-1, 1, 1, 1),
                p["delta_theta_z"].reshape(-1, 1, 1, 1),
                kappa=HS_CONSTANTS["kappa"],
                p0=HS_CONSTANTS["p0"],
            )
            T = (
                (teq * c.weights).sum(-2, keepdim=True)
                / c.weights.sum()
                * torch.ones(1, 1, 1, c.nlon, dtype=torch.float64, device=self.device)
            )
            T = T.expand(B, n, c.nlat, c.nlon)
        else:
            T = torch.full((B, n, c.nlat, c.nlon), float(initial_temperature), dtype=torch.float64, device=self.device)
        temp = c.to_spec(T - self.eq.T_ref.reshape(1, -1, 1, 1))
        if noise_amplitude > 0:
            seeds = p.get("seed", torch.arange(B, dtype=torch.float64))
            noise = torch.zeros_like(temp)
            lsmooth = min(22, c.lmax)
            for b in range(B):
                rng = np.random.Generator(np.random.PCG64(int(seeds[b].item())))
                z = rng.standard_normal((n, lsmooth, lsmooth, 2))
                spec = torch.complex(torch.as_tensor(z[..., 0]), torch.as_tensor(z[..., 1])).to(self.device)
                spec[..., 0] = spec[..., 0].real + 0j  # m = 0 coefficients are real
                noise[b, :, :lsmooth, :lsmooth] = spec * c.mask[:lsmooth, :lsmooth]
            noise[..., 0, :] = 0  # no global-mean change
            g = c.to_grid(noise)
            rms = torch.sqrt((g**2 * c.weights).sum((-2, -1)) / (4 * math.pi))
            noise = noise * (noise_amplitude / rms.clamp_min(1e-300))[..., None, None]
            temp = temp + noise
        zero = torch.zeros_like(temp)
        lnps = c.to_spec(torch.full((B, c.nlat, c.nlon), math.log(ps0), dtype=torch.float64, device=self.device))
        return PEState.pack(zero, zero.clone(), temp, zero.clone(), lnps)

    def continue_from(self, coarse: HeldSuarezSimulation) -> None:
        """Take over the state of a run of the same trajectories at a lower band limit (a coarse-grid spin-up).

        The packed spectral state ``(B, 4N + 1, lmax_c, mmax_c)`` of ``coarse`` is zero-padded to this run's
        ``(lmax, mmax)``: the same band-limited fields (orthonormal spherical harmonics, so a coefficient does not
        depend on the band limit), with nothing yet in the degrees the coarse run did not have; they fill in by the
        forward cascade once this run steps. The time, the step count and the mass fixer's target surface pressure
        are taken over too; the leapfrog restarts with its starter step. Spinning up on the coarse grid and
        continuing on the fine one reaches the forced, statistically steady state for a fraction of a fine spin-up's
        cost; docs/datasets/held_suarez.md says how long the fine continuation must be.

        Raises
        ------
        ValueError
            If ``coarse`` has another batch, level count or parameters, or a band limit above this run's.
        """
        if not isinstance(coarse, HeldSuarezSimulation):
            raise ValueError(f"continue_from takes a HeldSuarezSimulation, not {type(coarse).__name__}")
        if coarse.B != self.B or coarse.n != self.n:
            raise ValueError(
                f"continue_from: the coarse run has batch {coarse.B} and {coarse.n} levels, this one {self.B} and "
                f"{self.n}: build both from the same trajectories and n_levels"
            )
        for k, v in self.params.items():
            if k not in coarse.params or not torch.equal(coarse.params[k].to(v.device), v):
                raise ValueError(f"continue_from: parameter {k!r} differs between the coarse run and this one")
        L1, M1 = coarse.state.shape[-2:]
        L2, M2 = self.state.shape[-2:]
        if L1 > L2 or M1 > M2:
            raise ValueError(
                f"continue_from: the coarse run's band limit ({L1}, {M1}) exceeds this run's ({L2}, {M2}); "
                "spin up at a LOWER lmax"
            )
        self.state = pad_spec(coarse.state.to(self.device), L2)
        self.ps_target = coarse.ps_target.to(self.device)
        self.time, self.n_steps = float(coarse.time), int(coarse.n_steps)
        self._steppers.clear()

    def model_level_fields(self) -> dict:
        """Transform-grid fields on model levels (see :meth:`PrimitiveEquations.grid_state`)."""
        return self.eq.grid_state(self.x)

    def fields(self, grid) -> dict:
        """Fields on pressure levels at ``grid``'s nodes.

        Returns ``{"T": (B, P, nlat, nlon) K, "u", "v": (B, P, nlat, nlon) m/s, "ps": (B, nlat, nlon) Pa,
        "tracer": (B, P, nlat, nlon) 1}`` with ``P`` = len(pressure_levels). Model levels are
        interpolated to pressure linearly in ln p on the solver's transform grid (temperature below
        the lowest full level with a 6.5 K/km lapse rate, other fields held constant), then the
        result is truncated to ``min(lmax, grid.lmax)`` and synthesised exactly at the grid's nodes.

        Raises
        ------
        FloatingPointError
            Naming the batch index of a non-finite trajectory.
        """
        check_finite(self)
        c = self.core
        g = self.eq.grid_state(self.x)
        pl = self.pressure_levels * 100.0
        sig = self.eq.sigma
        T = interpolate_to_pressure(
            g["T"], sig, g["ps"], pl, lapse_rate=6.5e-3, R=HS_CONSTANTS["R"], gravity=HS_CONSTANTS["gravity"]
        )
        u = interpolate_to_pressure(g["u"], sig, g["ps"], pl)
        v = interpolate_to_pressure(g["v"], sig, g["ps"], pl)
        q = interpolate_to_pressure(g["q"], sig, g["ps"], pl)
        vort, div = c.uv_to_vrtdiv(u, v)
        uo, vo = c.synthesise_uv(vort, div, grid)
        out = {
            "T": c.synthesise(c.to_spec(T), grid),
            "u": uo,
            "v": vo,
            "ps": c.synthesise(c.to_spec(g["ps"]), grid),
            "tracer": c.synthesise(c.to_spec(q), grid),
        }
        for k, f in out.items():
            bad = ~torch.isfinite(f).flatten(1).all(1)
            if bool(bad.any()):
                raise FloatingPointError(
                    f"non-finite {k} in Held-Suarez trajectory {int(bad.nonzero()[0])} at t={self.time} s"
                )
        return out
