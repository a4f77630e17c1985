"""``chained_turbulence``: actively driven vorticity on the unit sphere.

Dataset card: docs/datasets/chained_turbulence.md (variant mickelin_gns).

The generalised Navier-Stokes model of Mickelin et al. (2018, PRL 120, 164503), solved by
:class:`dandelion.solvers.chained_turbulence.ChainedTurbulenceSimulation` (spectral, ETDRK4, l = 0 held
at zero). Non-dimensional: R = 1, time unit tau = 1; the stored field is ``vorticity`` in 1/tau
(``-r_hat . curl(u)``, the card's sign).

Sweep (trajectory ids row-major, the seed fastest): ``r_over_lambda`` in {2, 4, 7, 10} x
``kappa_lambda`` in {0.4, 0.7, 1.0, 1.4, 1.8} x ``n_seeds`` (40), either axis narrowed from the command line
(``dataset.r_over_lambda=[2,4]``: the cells a band limit resolves), keeping only the cells whose
linear operator has at least ``min_unstable_degrees`` (2) unstable degrees
(:func:`dandelion.solvers.chained_turbulence.unstable_degrees`). Three cells have a single one,
(r, kappa*Lambda) = (2, 0.4), (2, 0.7) (degree 6) and (4, 0.4) (degree 12): a one-degree field is
untouched by advection, so it grows at 1/tau to an overshoot (RMS vorticity ~100/tau, max|u| ~40 R/tau
instead of ~18/tau) whose CFL steps are ~100 times shorter; they are dropped, and ids 0..679 run over
the 17 kept cells (unstable degrees: r = 2: {5, 6} at 1.0, {5, 6, 7} at 1.4 and 1.8; r = 4: 3 to 7
degrees within 9..15; r = 7: 2 to 12 within 16..27; r = 10: 4 to 18 within 22..39). Stored scalars:
r_over_lambda, kappa_lambda, seed and the derived R, tau, Lambda, kappa.

Initial condition: ``1e-3 * sum_{l=2..l_i} a_lm Y_lm`` with ``a_lm ~ N(0, 1)`` drawn in the card's
order from ``Generator(PCG64(seed))`` when the dataset seed is 0 -- the reference's generator, so the
coefficients are bit-equal to upstream and the same seed gives the same low degrees in every cell --
and from ``PCG64(SeedSequence([dataset seed, seed]))`` otherwise. Either way the generator depends only
on (dataset seed, trajectory id), so any trajectory regenerates alone.

Window: the first ``spinup`` = 15 tau (linear growth from 1e-3) are dropped; ``n_frames`` (200) frames
every ``dt_frame`` = 0.2 tau follow, stored with rebased times ``k * 0.2`` in tau (true units).
``legacy_units: true`` reproduces the reference's scaling instead (time ``3600 t - 30`` labelled "s",
vorticity ``omega / 3600``), for comparison with the published files only.

Cost. The spin-up dominates a short dataset: the field grows linearly at dt_max = 0.05 tau until
t ~ 9 tau (278 steps), then overshoots before it saturates, so the CFL step falls to ~1.5e-3 tau at
lmax 32 (4037 more steps to 15 tau; measured for cell (2, 1.0), 4 trajectories: 507 s on a loaded
2-core machine); steps scale with ``lmax`` and their cost with about ``lmax^2``. A CPU-sized run of the
first cell, ``dataset.nlat=32 dataset.nlon=64 dataset.n_trajectories=20 dataset.n_frames=20
dataset.lmax=16 batch_size=20`` (reduced; the truncation degree 15 is damped at sigma = -1516/tau in that
cell, far beyond the eddy turnover), took 98 s of CPU (6.9 min wall at a quarter of one core), three
quarters of it the spin-up; each further frame costs about 1 CPU s for the 20 trajectories.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from dandelion.solvers.chained_turbulence import (
    TURBULENCE_DEFAULT_LMAX,
    TURBULENCE_MIN_LMAX,
    ChainedTurbulenceSimulation,
    check_cfl_number,
    ic_max_degree,
    initial_vorticity,
    unstable_degrees,
)

from .scenario import FieldSpec, Scenario, register_scenario

__all__ = ["ChainedTurbulenceScenario", "ic_generator"]

R_OVER_LAMBDA = [2.0, 4.0, 7.0, 10.0]
KAPPA_LAMBDA = [0.4, 0.7, 1.0, 1.4, 1.8]
#: Cells whose operator has fewer unstable degrees are dropped (module docstring).
MIN_UNSTABLE_DEGREES = 2
_LEGACY_SECONDS = 3600.0


def ic_generator(dataset_seed: int, seed_index: int) -> np.random.Generator:
    """Generator of a trajectory's initial noise: ``PCG64(seed_index)`` for dataset seed 0 (the
    reference's own generator), else ``PCG64(SeedSequence([dataset_seed, seed_index]))``.

    Raises ``ValueError`` for negative seeds.
    """
    dataset_seed, seed_index = int(dataset_seed), int(seed_index)
    if dataset_seed < 0 or seed_index < 0:
        raise ValueError(f"seeds must be non-negative, got dataset seed {dataset_seed} and seed {seed_index}")
    if dataset_seed == 0:
        return np.random.Generator(np.random.PCG64(seed_index))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([dataset_seed, seed_index])))


@register_scenario("chained_turbulence")
class ChainedTurbulenceScenario(Scenario):
    """Chained turbulence scenario (module docstring). Scenario config keys: ``spinup_tau`` (15),
    ``dt_frame`` (0.2), ``cfl`` (0.2), ``dt_max`` (0.05), ``amplitude`` (1e-3), ``min_unstable_degrees`` (2),
    ``legacy_units`` (false), ``r_over_lambda`` and ``kappa_lambda`` (null: the card's axes; a list narrows the
    sweep), ``spinup_lmax`` (null: the whole spin-up at ``lmax``; else the band limit of a
    coarse-grid spin-up, :meth:`coarse_spinup`) and ``spinup_fine_tau`` (2: the last tau of spin-up at ``lmax``)."""

    time_units = "nondimensional"
    fields = {"vorticity": FieldSpec("scalar", "1/tau", "relative vorticity -r.curl(u) (tau = 1)", ("vorticity",))}
    parameter_units = {"r_over_lambda": "1", "kappa_lambda": "1", "R": "R", "tau": "tau", "Lambda": "R", "kappa": "1/R"}
    min_lmax = TURBULENCE_MIN_LMAX
    default_lmax = TURBULENCE_DEFAULT_LMAX
    default_n_seeds = 40
    default_n_frames = 200
    distinct_note = (
        "every trajectory is its own simulation (its own seed or operator), so no simulation appears in "
        "two splits; the cells with a single unstable degree (r, kappa*Lambda) = (2, 0.4), (2, 0.7), (4, 0.4) "
        "are excluded from the sweep"
    )

    def __init__(self, cfg=None):
        cfg = dict(cfg or {})
        k = cfg.get("min_unstable_degrees")
        self._min_unstable = MIN_UNSTABLE_DEGREES if k is None else int(k)
        if self._min_unstable < 1:
            raise ValueError(f"dataset.min_unstable_degrees={k} must be >= 1 (every cell has at least one)")
        self._axes: dict[str, list[float]] = {}
        self._cells: list[tuple[float, float]] | None = None
        for key, default in (("r_over_lambda", R_OVER_LAMBDA), ("kappa_lambda", KAPPA_LAMBDA)):
            v = cfg.get(key)
            if v is None:  # absent unless set: fingerprints of datasets made over the whole sweep are unchanged
                cfg.pop(key, None)
                self._axes[key] = list(default)
                continue
            v = list(v if isinstance(v, (list, tuple)) else [v])
            if not v or len(set(v)) != len(v) or any(not float(x) > 0 for x in v):
                raise ValueError(
                    f"dataset.{key}={v} must be a non-empty list of distinct positive values "
                    f"(null: the card's {default})"
                )
            cfg[key] = self._axes[key] = [float(x) for x in v]
        if not self.cells():
            raise ValueError(
                f"dataset.r_over_lambda={self._axes['r_over_lambda']} x kappa_lambda={self._axes['kappa_lambda']} "
                f"keeps no cell with >= {self._min_unstable} unstable degrees: add a wider band (larger "
                "kappa_lambda) or lower dataset.min_unstable_degrees"
            )
        super().__init__(cfg)
        for key, default in (
            ("spinup_tau", 15.0),
            ("dt_frame", 0.2),
            ("cfl", 0.2),
            ("dt_max", 0.05),
            ("amplitude", 1e-3),
        ):
            v = self.cfg.get(key)
            self.cfg[key] = float(default if v is None else v)
        for key in ("dt_frame", "cfl", "dt_max", "amplitude"):
            if not self.cfg[key] > 0:
                raise ValueError(f"dataset.{key}={self.cfg[key]} must be positive")
        if self.cfg["spinup_tau"] < 0:
            raise ValueError(
                f"dataset.spinup_tau={self.cfg['spinup_tau']} must be >= 0 (tau dropped before the first frame)"
            )
        self.cfg["min_unstable_degrees"] = self._min_unstable
        self.cfg["legacy_units"] = bool(self.cfg.get("legacy_units", False))
        if self.cfg["legacy_units"]:
            self.time_units = "s"
        self._check_coarse_spinup()

    # ------------------------------------------------------------------ sweep
    def axes(self):
        return {k: list(v) for k, v in self._axes.items()}

    def cells(self) -> list[tuple[float, float]]:
        """Kept (r_over_lambda, kappa_lambda) cells in row-major order: those with at least
        ``min_unstable_degrees`` unstable degrees of the linear operator (computed once: both are fixed at
        construction)."""
        if self._cells is None:
            self._cells = [
                (r, kl)
                for r, kl in itertools.product(self._axes["r_over_lambda"], self._axes["kappa_lambda"])
                if len(unstable_degrees(r, kl)) >= self._min_unstable
            ]
        return list(self._cells)

    @property
    def n_sweep(self) -> int:
        return len(self.cells()) * int(self.cfg["n_seeds"])

    def sweep_index(self, trajectory_id: int) -> dict:
        tid = int(trajectory_id)
        if not 0 <= tid < self.n_sweep:
            raise ValueError(f"trajectory id {tid} is outside 0..{self.n_sweep - 1}")
        cell, seed = divmod(tid, int(self.cfg["n_seeds"]))
        r, kl = self.cells()[cell]
        return {"r_over_lambda": r, "kappa_lambda": kl, "seed": seed}

    def parameters(self, trajectory_id: int) -> dict[str, float]:
        p = {k: float(v) for k, v in self.sweep_index(trajectory_id).items()}
        lam = 1.0 / p["r_over_lambda"]
        p.update({"R": 1.0, "tau": 1.0, "Lambda": lam, "kappa": p["kappa_lambda"] / lam})
        return p

    def parameter_names_seeded(self) -> list[str]:
        return ["R", "tau", "Lambda", "kappa"]

    # ------------------------------------------------------------------ cadence and output
    def spinup(self):
        return self.cfg["spinup_tau"]

    def dt_frame(self):
        return self.cfg["dt_frame"]

    def stored_times(self) -> np.ndarray:
        if self.cfg["legacy_units"]:
            return _LEGACY_SECONDS * self.solver_times() - 30.0
        return super().stored_times()

    def stored_fields(self, components):
        out = super().stored_fields(components)
        if self.cfg["legacy_units"]:
            out = {k: v / _LEGACY_SECONDS for k, v in out.items()}
        return out

    def validate_time_step(self) -> None:
        """Refuse a largest step ``dt_max`` longer than the frame interval, a CFL number beyond the
        solver's limit (:data:`dandelion.solvers.chained_turbulence.MAX_CFL`), and a coarse spin-up plan that
        cannot hold the trajectories' physics (:meth:`coarse_spinup`)."""
        self.refuse_step_longer_than_frames(self.cfg["dt_max"], key="dt_max")
        check_cfl_number(self.cfg["cfl"])
        self._check_coarse_spinup()  # also at construction; repeated here for a config changed since

    def coarse_spinup(self) -> tuple[int, float] | None:
        """``(spinup_lmax, handover time in tau)`` of a coarse-grid spin-up, or None (config ``spinup_lmax`` null).

        With ``spinup_lmax`` set, each batch grows from its initial noise at that band limit until
        ``spinup_tau - spinup_fine_tau``, then continues at ``lmax`` from the zero-padded vorticity spectrum
        (:meth:`ChainedTurbulenceSimulation.continue_from`) for the last ``spinup_fine_tau`` before the first
        frame. The initial noise and every unstable degree must lie below ``spinup_lmax`` (checked by
        :meth:`validate_time_step`), so the coarse run carries the whole forcing band; the degrees it lacks are
        damped by the operator and refill from the cascade (docs/datasets/chained_turbulence.md, "Coarse-grid
        spin-up", measures how fast).
        """
        lc = self.cfg.get("spinup_lmax")
        if lc is None:
            return None
        return int(lc), self.cfg["spinup_tau"] - self._fine_tau()

    def _fine_tau(self) -> float:
        fine = self.cfg.get("spinup_fine_tau")
        return 2.0 if fine is None else float(fine)

    def _check_coarse_spinup(self) -> None:
        plan = self.coarse_spinup()
        if plan is None:
            return
        lc, _ = plan
        if int(lc) != self.cfg.get("spinup_lmax") or not 4 <= lc < self.solver_lmax:
            raise ValueError(
                f"dataset.spinup_lmax={self.cfg.get('spinup_lmax')} must be an integer in [4, lmax={self.solver_lmax}) "
                "(the coarse spin-up's band limit), or null for a spin-up at lmax"
            )
        fine = self._fine_tau()
        if not 0 < fine <= self.cfg["spinup_tau"]:
            raise ValueError(
                f"dataset.spinup_fine_tau={fine} must be in (0, spinup_tau={self.cfg['spinup_tau']:g}]: the tau of "
                "spin-up at lmax after the coarse part"
            )
        for r, kl in sorted(
            {(p["r_over_lambda"], p["kappa_lambda"]) for p in map(self.parameters, range(self.n_trajectories))}
        ):
            top = max([ic_max_degree(r, kl), *unstable_degrees(r, kl)])
            if top >= lc:
                raise ValueError(
                    f"dataset.spinup_lmax={lc} cuts the physics of cell (r_over_lambda, kappa_lambda) = "
                    f"({r:g}, {kl:g}): its initial noise or unstable band reaches degree {top}; use spinup_lmax >= "
                    f"{top + 1} or null"
                )

    def sanity_bounds(self):
        """``|vorticity|`` under 1000/tau (saturated RMS ~18/tau)."""
        scale = 1.0 / _LEGACY_SECONDS if self.cfg["legacy_units"] else 1.0
        return {"vorticity": (-1000.0 * scale, 1000.0 * scale)}

    def build_simulation(self, params, *, lmax, device):
        r = params["r_over_lambda"].detach().cpu().numpy()
        kl = params["kappa_lambda"].detach().cpu().numpy()
        seeds = params["seed"].detach().cpu().numpy()
        omega0 = torch.stack(
            [
                initial_vorticity(
                    ic_generator(self.cfg["seed"], int(s)),
                    float(ri),
                    float(ki),
                    int(lmax),
                    amplitude=self.cfg["amplitude"],
                )
                for ri, ki, s in zip(r, kl, seeds)
            ]
        )
        return ChainedTurbulenceSimulation(
            {"r_over_lambda": params["r_over_lambda"], "kappa_lambda": params["kappa_lambda"]},
            omega0,
            lmax=int(lmax),
            cfl=self.cfg["cfl"],
            dt_max=self.cfg["dt_max"],
            device=device,
        )

    def describe(self) -> dict:
        d = super().describe()
        plan = self.coarse_spinup()
        if plan is not None:
            d["coarse_spinup"] = {"lmax": plan[0], "handover_tau": plan[1]}
        return d
