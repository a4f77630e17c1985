"""``held_suarez``: dry dynamical core with Held-Suarez (1994) forcing and a passive tracer.

Dataset card: docs/datasets/held_suarez.md (variant C).

Each trajectory is one run of the sigma-coordinate spectral primitive-equation core
(:mod:`dandelion.solvers.primitive_equations`) forced as in :mod:`dandelion.solvers.held_suarez`,
started from rest (each level at the global mean of its trajectory's ``T_eq``) plus seeded,
large-scale (degrees 1-21) 0.1 K temperature noise, with the tracer ``q = 0``. The spin-up
(``spinup_days``, 200 by default) is dropped; frames follow every ``frame_hours`` (6 h).

Stored fields, on the pressure levels 50, 100, 250, 500, 700, 850, 925, 1000 hPa (interpolated
linearly in ln p; temperature below the lowest model level with a 6.5 K/km lapse rate):

* ``T``        (1, T, level, nlat, nlon)     K, absolute temperature;
* ``velocity`` (1, T, level, nlat, nlon, 2)  m/s, (u east, v north);
* ``tracer``   (1, T, level, nlat, nlon)     1, passive mixing ratio;
* ``ps``       (1, T, nlat, nlon)            Pa, surface pressure (2-D field; see ``level_fields``).

The simulation's ``fields(grid)`` returns ``(B, level, nlat, nlon)`` for leveled components and
``(B, nlat, nlon)`` for ``ps``. The level coordinate is :attr:`HeldSuarezScenario.levels` (hPa);
storage writes it as ``dimensions/level`` with ``spatial_dims = ["level", "lat", "lon"]``.

Sweep (variant C): ``omega_factor`` in {0.5, 1, 2} x ``delta_T_y`` in {40, 60, 80} K x
``delta_theta_z`` in {5, 10, 20} K x ``n_seeds`` (6) = 162 trajectories. Seeded: ``noise_seed``
(the PCG64 seed of the initial noise, drawn from the trajectory's own generator).
What differs from the reference benchmark: ``docs/datasets/held_suarez.md``.
"""

from __future__ import annotations

import numpy as np

from dandelion.solvers.held_suarez import (
    HELD_SUAREZ_MIN_LMAX,
    PRESSURE_LEVELS_HPA,
    HeldSuarezSimulation,
    held_suarez_time_step_limits,
)
from dandelion.solvers.time_stepping import enforce_limits

from .scenario import FieldSpec, Scenario, register_scenario

__all__ = ["HeldSuarezScenario", "held_suarez_default_dt"]


def held_suarez_default_dt(lmax: int) -> float:
    """A stable time step (s) for the semi-implicit leapfrog at band limit ``lmax`` that divides 6 h:
    1800 s up to T31, 1200 s up to T63 (T42: the card's 1200 s), 600 s above (T95: the card's 600 s)."""
    if lmax <= 32:
        return 1800.0
    if lmax <= 64:
        return 1200.0
    return 600.0


@register_scenario("held_suarez")
class HeldSuarezScenario(Scenario):
    """Held-Suarez dry dynamical core on pressure levels (module docstring).

    Config keys beyond the generic ones: ``spinup_days`` (200), ``frame_hours`` (6), ``n_levels``
    (20 sigma levels), ``spinup_lmax`` (null: spin up at ``lmax``; else the band limit of a coarse-grid spin-up,
    :meth:`coarse_spinup`), ``spinup_fine_days`` (10: the last days of spin-up at ``lmax``), ``dt`` (s; null =
    :func:`held_suarez_default_dt`), ``scheme`` (``leapfrog`` or an IMEX scheme name), ``hyperdiffusion_days``
    (0.1), ``mass_fixer`` (true), ``noise_K`` (0.1).

    Raises
    ------
    ValueError
        If ``dt`` does not divide the frame interval or the spin-up, or for non-positive settings; if
        ``spinup_lmax`` is not below ``lmax`` or a spin-up part is not a whole number of its steps.
    """

    time_units = "s"
    fields = {
        "T": FieldSpec("scalar", "K", "air temperature", ("T",)),
        "ps": FieldSpec("scalar", "Pa", "surface pressure", ("ps",)),
        "velocity": FieldSpec("vector", "m/s", "horizontal wind", ("u", "v")),
        "tracer": FieldSpec("scalar", "1", "passive tracer mixing ratio", ("tracer",)),
    }
    #: pressure levels (hPa) of the leveled fields, top to bottom
    levels = tuple(float(p) for p in PRESSURE_LEVELS_HPA)
    level_units = "hPa"
    #: stored fields that carry the level axis (``ps`` is 2-D)
    level_fields = ("T", "velocity", "tracer")
    parameter_units = {"omega_factor": "1", "delta_T_y": "K", "delta_theta_z": "K", "noise_seed": "1"}
    min_lmax = HELD_SUAREZ_MIN_LMAX
    default_lmax = HELD_SUAREZ_MIN_LMAX
    default_n_seeds = 6
    default_n_frames = 1460  # 365 days at 6 h
    DEFAULTS = {**Scenario.DEFAULTS, "nlat": 64, "nlon": 128}

    def __init__(self, cfg=None):
        super().__init__(cfg)
        c = self.cfg
        self.n_levels = int(c.get("n_levels", 20))
        if self.n_levels < 2:
            raise ValueError(f"dataset.n_levels={self.n_levels} must be >= 2")
        if self.solver_lmax < 4:
            raise ValueError(f"dataset.lmax={self.solver_lmax} must be >= 4 (T42 is 43)")
        for key, default in (("spinup_days", 200.0), ("frame_hours", 6.0)):
            if float(c.get(key, default)) < 0 or (key == "frame_hours" and float(c.get(key, default)) <= 0):
                raise ValueError(
                    f"dataset.{key}={c.get(key)} must be {'positive' if key == 'frame_hours' else 'non-negative'}"
                )
        dt = self.dt
        self._check_coarse_spinup()
        self.refuse_step_longer_than_frames(dt)
        for what, interval in (("frame interval", self.dt_frame()), ("spin-up", self.spinup())):
            k = interval / dt
            if abs(k - round(k)) > 1e-9:
                raise ValueError(
                    f"dataset.dt={dt} s does not divide the {what} ({interval} s); pick a divisor, e.g. 1200 or 1800"
                )

    @property
    def dt(self) -> float:
        dt = self.dt_at(self.solver_lmax)
        if not dt > 0:
            raise ValueError(f"dataset.dt={dt} must be positive (s)")
        return dt

    def coarse_spinup(self) -> tuple[int, float] | None:
        """``(spinup_lmax, handover time in s)`` of a coarse-grid spin-up, or None (config ``spinup_lmax`` null).

        With ``spinup_lmax`` set, each batch is spun up at that band limit (its own default time step) until
        ``spinup - spinup_fine_days``, then continued at ``lmax`` from the zero-padded state
        (:meth:`HeldSuarezSimulation.continue_from`) for the last ``spinup_fine_days`` before the first frame.
        """
        lc = self.cfg.get("spinup_lmax")
        if lc is None:
            return None
        fine = self.cfg.get("spinup_fine_days")
        return int(lc), self.spinup() - float(10.0 if fine is None else fine) * 86400.0

    def _check_coarse_spinup(self) -> None:
        plan = self.coarse_spinup()
        if plan is None:
            return
        lc, t_hand = plan
        fine_days = (self.spinup() - t_hand) / 86400.0
        if int(lc) != self.cfg.get("spinup_lmax") or not 4 <= lc < self.solver_lmax:
            raise ValueError(
                f"dataset.spinup_lmax={self.cfg.get('spinup_lmax')} must be an integer in [4, lmax={self.solver_lmax}) "
                "(the coarse spin-up's band limit), or null for a spin-up at lmax"
            )
        if not 0 < fine_days * 86400.0 <= self.spinup():
            raise ValueError(
                f"dataset.spinup_fine_days={fine_days} must be in (0, spinup_days={self.spinup() / 86400.0:g}]: the "
                "days of spin-up at lmax after the coarse part"
            )
        for what, span, step in (
            ("coarse spin-up", t_hand, self.dt_at(lc)),
            ("spin-up at lmax", self.spinup() - t_hand, self.dt),
        ):
            k = span / step
            if abs(k - round(k)) > 1e-9:
                raise ValueError(
                    f"the {what} ({span:g} s) is not a whole number of its time steps ({step:g} s): pick "
                    "spinup_fine_days in whole hours that both steps divide (whole days always do)"
                )

    def dt_at(self, lmax: int) -> float:
        """The time step (s) at band limit ``lmax``: config ``dt`` if set, else :func:`held_suarez_default_dt`."""
        dt = self.cfg.get("dt")
        return held_suarez_default_dt(int(lmax)) if dt is None else float(dt)

    def axes(self):
        return {"omega_factor": [0.5, 1.0, 2.0], "delta_T_y": [40.0, 60.0, 80.0], "delta_theta_z": [5.0, 10.0, 20.0]}

    def seeded_parameters(self, rng: np.random.Generator, seed_index: int):
        return {"noise_seed": float(rng.integers(0, 2**31 - 1))}

    def spinup(self):
        return float(self.cfg.get("spinup_days", 200.0)) * 86400.0

    def dt_frame(self):
        return float(self.cfg.get("frame_hours", 6.0)) * 3600.0

    def validate_time_step(self) -> None:
        """Refuse a step longer than the frame interval, or one beyond the inertial limit of the
        trajectories to be made (:func:`dandelion.solvers.held_suarez.held_suarez_time_step_limits`)."""
        self.refuse_step_longer_than_frames(self.dt)
        omega_factor = [self.parameters(i)["omega_factor"] for i in range(self.n_trajectories)]
        enforce_limits(
            self.dt,
            held_suarez_time_step_limits(
                omega_factor,
                scheme=str(self.cfg.get("scheme", "leapfrog")),
                hyperdiffusion_time=float(self.cfg.get("hyperdiffusion_days", 0.1)) * 86400.0,
            ),
            what="held_suarez",
            ids=range(self.n_trajectories),
        )

    def sanity_bounds(self):
        """Winds under 150 m/s (Held & Suarez 1994 jets: ~30 m/s), temperatures in 150..350 K, surface
        pressure in 500..1500 hPa, tracer mixing ratio in -1..2."""
        return {"velocity": (None, 150.0), "T": (150.0, 350.0), "ps": (5.0e4, 1.5e5), "tracer": (-1.0, 2.0)}

    def build_simulation(self, params, *, lmax, device):
        c = self.cfg
        p = {
            "omega_factor": params["omega_factor"],
            "delta_T_y": params["delta_T_y"],
            "delta_theta_z": params["delta_theta_z"],
            "seed": params["noise_seed"],
        }
        return HeldSuarezSimulation(
            p,
            lmax=int(lmax),
            n_levels=self.n_levels,
            dt=self.dt_at(lmax),
            scheme=str(c.get("scheme", "leapfrog")),
            hyperdiffusion_time=float(c.get("hyperdiffusion_days", 0.1)) * 86400.0,
            mass_fixer=bool(c.get("mass_fixer", True)),
            noise_amplitude=float(c.get("noise_K", 0.1)),
            pressure_levels=self.levels,
            device=device,
        )

    def describe(self) -> dict:
        d = super().describe()
        d["levels"] = {
            "name": "level",
            "units": self.level_units,
            "values": list(self.levels),
            "fields": list(self.level_fields),
        }
        d["n_model_levels"] = self.n_levels
        plan = self.coarse_spinup()
        if plan is not None:
            d["coarse_spinup"] = {"lmax": plan[0], "handover_s": plan[1], "dt_s": self.dt_at(plan[0])}
        return d
