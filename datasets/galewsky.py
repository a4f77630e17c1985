"""``galewsky``: rotating shallow water with two Galewsky jets on tilted planets (docs/datasets/galewsky.md).

Physics and solver: :class:`dandelion.solvers.galewsky.GalewskySimulation` (two compact jets at
``+-phi_c``, a height bump with the widths of Galewsky, Vial & Polvani 2004, Tellus 56A, 429-440,
on the northern jet, hyperdiffusion, Coriolis about a tilted axis ``R z`` so no output is
interpolated).

Sweep (row-major, the seed fastest; 5 x 4 x 2 x 4 = 160 physics tuples x ``n_seeds`` = 960 by default):

* ``u_max`` in {60, 70, 80, 90, 100} m/s, jet maximum speed;
* ``phi_c`` in {30, 40, 50, 60} degrees (stored in rad), jet centre latitudes ``+-phi_c``;
* ``h_hat`` in {60, 240} m, bump amplitude;
* ``H`` in {8000, 10000, 12000, 14000} m, mean depth;
* ``seed`` in 0 .. n_seeds-1.

Seeded per trajectory, from its own generator (:func:`dandelion.datasets.scenario.trajectory_rng`),
in this order:

* the tilt, as in the reference (docs/datasets/galewsky.md): ``z = 2U - 1``, ``psi = 2 pi U``, ``alpha = 2 pi U``;
  axis ``e = (sqrt(1-z^2) cos psi, sqrt(1-z^2) sin psi, z)``, rotation angle ``alpha`` (``rot_axis_*``,
  ``rot_angle``; solver frame -> output frame, planet axis ``R z``);
* ``bump_lon = 2 pi U`` (a rotation about the planet's axis: not by itself a new simulation);
* ``bump_dlat``, the offset of the bump centre from the northern jet centre, drawn in stratum
  ``seed`` of ``n_seeds`` equal strata of ``(-d, d)``, ``d = bump_dlat_max_deg`` (5 degrees by
  default): ``bump_dlat = d (-1 + 2 (seed + U) / n_seeds)``. Different seeds of one physics tuple
  therefore always have different bump latitudes relative to the jet, which no rotation maps onto
  each other: every trajectory is a distinct physical simulation (the reference's six seeds were
  rotated copies of one run), and a random split by trajectory id never puts a
  simulation in two splits.

Output: the state at ``spinup_days + k * frame_hours`` (default 4 d + k * 4 h, k = 0..167, exactly),
stored time rebased to ``k * 14400 s``; fields ``h`` (m, departure from H) and ``velocity`` = (u
east, v north) in m/s, truncated to ``min(solver lmax, grid.lmax)`` and synthesised at the output
grid's nodes. The solver band limit defaults to 256 (degrees <= 255, as upstream); below
:data:`dandelion.solvers.galewsky.GALEWSKY_MIN_LMAX` the dataset is marked ``reduced``.
"""

from __future__ import annotations

import math

import numpy as np

from dandelion.solvers import galewsky as galewsky_solver
from dandelion.solvers.shallow_water import EARTH_RADIUS, GRAVITY, cfl_limits
from dandelion.solvers.time_stepping import enforce_limits

from .scenario import FieldSpec, Scenario, register_scenario

__all__ = ["GalewskyScenario"]

_DAY = 86400.0
_HOUR = 3600.0


@register_scenario("galewsky")
class GalewskyScenario(Scenario):
    """The Galewsky dataset scenario (module docstring). Config keys besides the generic ones:
    ``spinup_days``, ``frame_hours``, ``nu`` (m^2/s), ``dt`` (s, null = solver default),
    ``scheme`` (``"ars343"``, ``"ars222"`` or ``"rk4"``), ``nu_reference_lmax`` (see :meth:`solver_nu`),
    ``bump_dlat_max_deg``."""

    time_units = "s"
    fields = {
        "h": FieldSpec("scalar", "m", "height departure from the mean depth H", ("h",)),
        "velocity": FieldSpec("vector", "m/s", "horizontal velocity (u eastward, v northward)", ("u", "v")),
    }
    parameter_units = {
        "u_max": "m/s",
        "phi_c": "rad",
        "h_hat": "m",
        "H": "m",
        "rot_axis_x": "1",
        "rot_axis_y": "1",
        "rot_axis_z": "1",
        "rot_angle": "rad",
        "bump_lon": "rad",
        "bump_dlat": "rad",
    }
    default_lmax = 256
    default_n_seeds = 6
    default_n_frames = 168
    distinct_note = (
        "every trajectory is its own simulation: the seed varies the bump's latitude offset inside the "
        "jet (bump_dlat, one stratum per seed), not only rotations, so no simulation appears in two splits"
    )

    def __init__(self, cfg=None):
        super().__init__(cfg)
        for key, default in (("spinup_days", 4.0), ("frame_hours", 4.0), ("nu", 1.0e5), ("bump_dlat_max_deg", 5.0)):
            if self.cfg.get(key) is None:
                self.cfg[key] = default
            self.cfg[key] = float(self.cfg[key])
        self.cfg.setdefault("dt", None)
        self.cfg["scheme"] = str(self.cfg.get("scheme") or "ars343")
        ref = self.cfg.get("nu_reference_lmax")
        self.cfg["nu_reference_lmax"] = None if ref is None else int(ref)
        if ref is not None and int(ref) < 2:
            raise ValueError(f"dataset.nu_reference_lmax={ref} must be null or a band limit >= 2 (e.g. 256)")
        if self.cfg["frame_hours"] <= 0 or self.cfg["spinup_days"] < 0:
            raise ValueError(
                f"frame_hours={self.cfg['frame_hours']} must be > 0 and spinup_days={self.cfg['spinup_days']} >= 0"
            )
        if not 0 < self.cfg["bump_dlat_max_deg"] < 20:
            raise ValueError(
                f"bump_dlat_max_deg={self.cfg['bump_dlat_max_deg']} must lie in (0, 20): the jet is 40 degrees wide"
            )

    @property
    def min_lmax(self) -> int:  # documented by the solver
        return int(galewsky_solver.GALEWSKY_MIN_LMAX)

    def axes(self):
        return {
            "u_max": [60.0, 70.0, 80.0, 90.0, 100.0],
            "phi_c": [math.radians(d) for d in (30.0, 40.0, 50.0, 60.0)],
            "h_hat": [60.0, 240.0],
            "H": [8000.0, 10000.0, 12000.0, 14000.0],
        }

    def seeded_parameters(self, rng: np.random.Generator, seed_index: int):
        z = 2.0 * rng.random() - 1.0
        psi = 2.0 * math.pi * rng.random()
        alpha = 2.0 * math.pi * rng.random()
        bump_lon = 2.0 * math.pi * rng.random()
        n = int(self.cfg["n_seeds"])
        d = math.radians(self.cfg["bump_dlat_max_deg"])
        bump_dlat = d * (-1.0 + 2.0 * (seed_index + rng.random()) / n)
        r = math.sqrt(max(0.0, 1.0 - z * z))
        return {
            "rot_axis_x": r * math.cos(psi),
            "rot_axis_y": r * math.sin(psi),
            "rot_axis_z": z,
            "rot_angle": alpha,
            "bump_lon": bump_lon,
            "bump_dlat": bump_dlat,
        }

    def spinup(self):
        return self.cfg["spinup_days"] * _DAY

    def dt_frame(self):
        return self.cfg["frame_hours"] * _HOUR

    def time_step(self) -> float:
        """Solver step in s: config ``dt`` or :func:`dandelion.solvers.galewsky.galewsky_default_dt`."""
        if self.cfg.get("dt") is not None:
            return float(self.cfg["dt"])
        return float(galewsky_solver.galewsky_default_dt(self.solver_lmax))

    def solver_nu(self) -> float:
        """The ``nu`` handed to the solver [m^2/s]. The solver scales its hyperviscosity as
        ``(256 / lmax)^4`` (the card's rule: fixed damping time at the grid scale). With
        ``nu_reference_lmax = L`` the config's ``nu`` is multiplied by ``(lmax / L)^4``, so the run
        gets the hyperviscosity the rule gives at band limit L (e.g. 256: the full-resolution value),
        which keeps the jets alive in reduced runs; null (default) applies the rule at ``lmax``."""
        ref = self.cfg.get("nu_reference_lmax")
        nu = float(self.cfg["nu"])
        return nu if ref is None else nu * (self.solver_lmax / float(ref)) ** 4

    def solver_settings(self):
        solver = galewsky_solver
        out = {
            "model": "rotating shallow water, vorticity-divergence, spectral (dandelion.solvers.galewsky)",
            "scheme": self.cfg["scheme"],
            "dt": self.time_step(),
            "nu": self.solver_nu(),
        }
        if hasattr(solver, "hyperviscosity"):
            out["hyperviscosity_m4_per_s"] = float(solver.hyperviscosity(self.solver_nu(), self.solver_lmax))
        return out

    def validate_time_step(self) -> None:
        """Refuse a step longer than the frame interval, or one violating the solver's Courant limits
        (:func:`dandelion.solvers.shallow_water.cfl_limits`) for the jets of the trajectories to be made."""
        dt = self.time_step()
        self.refuse_step_longer_than_frames(dt)
        p = [self.parameters(i) for i in range(self.n_trajectories)]
        speed = [galewsky_solver.SPEED_FACTOR * q["u_max"] for q in p]
        gravity = [math.sqrt(GRAVITY * q["H"]) for q in p]
        enforce_limits(
            dt,
            cfl_limits(
                lmax=self.solver_lmax,
                radius=EARTH_RADIUS,
                max_speed=speed,
                gravity_wave_speed=gravity,
                scheme=self.cfg["scheme"],
                diffusion=self.solver_nu(),
            ),
            what="galewsky",
            ids=range(self.n_trajectories),
        )

    def sanity_bounds(self):
        """Winds under 250 m/s (the jets start at <= 100 m/s)."""
        return {"velocity": (None, 250.0)}

    def build_simulation(self, params, *, lmax, device):
        solver = galewsky_solver
        p = {k: v for k, v in params.items() if k != "seed"}
        return solver.GalewskySimulation(
            p, lmax=int(lmax), dt=self.time_step(), nu=self.solver_nu(), device=device, scheme=self.cfg["scheme"]
        )
