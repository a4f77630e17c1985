"""``cahn_hilliard``: phase separation on spheres of three radii (docs/datasets/cahn_hilliard.md, cahn_hilliard_sphere).

Solved by :class:`dandelion.solvers.cahn_hilliard.CahnHilliardSimulation` (spectral, 2x dealiased
cubic term, linearly stabilised IMEX Runge-Kutta (ARS222), the reference's step schedule clipped to land on frames).
Non-dimensional (D = a = 1); the stored field is ``phi`` (dimensionless).

Sweep (trajectory ids row-major, the seed fastest; 4 x 3 x 4 x 3 x 4 = 576): ``epsilon`` in
{0.5, 1, 1.5, 2} x ``mean_init`` in {0.35, 0.5, 0.65} x ``variance`` in {0.001, 0.005, 0.01, 0.05} x
``radius`` in {5, 7.5, 10} x ``n_seeds`` (4). Stored scalars: those plus ``seed``, ``D`` and ``a``.

Initial condition: spectral noise matched in power per unit area to the reference's per-cell white
noise (:func:`dandelion.solvers.cahn_hilliard.initial_phi`), independent of the grid; its generator is
:func:`dandelion.datasets.chained_turbulence.ic_generator` (dataset seed, seed index), so a seed gives
the same standard-normal draws in every cell (scaled by each cell's variance and radius) and any
trajectory regenerates alone.

Window: frames every ``dt_frame`` = 10 from t = 0 to 630 (64 frames, t = 0 included), exact times; no
burn-in removed (ε = 2 on R = 5 barely evolves: a property of the sweep, kept; docs/datasets/cahn_hilliard.md).
"""

from __future__ import annotations

import torch

from dandelion.solvers.cahn_hilliard import CH_DEFAULT_LMAX, CH_MIN_LMAX, SCHEMES, CahnHilliardSimulation, initial_phi

from .chained_turbulence import ic_generator
from .scenario import FieldSpec, Scenario, register_scenario

__all__ = ["CahnHilliardScenario"]


@register_scenario("cahn_hilliard")
class CahnHilliardScenario(Scenario):
    """Cahn-Hilliard scenario (module docstring).

    Scenario config keys: ``dt_frame`` (10), ``stabilizer`` (2), ``scheme`` ("ars222" or "imex_euler"),
    ``dt`` (null = the reference schedule), ``cell_area`` (0.039), ``cell_edge`` (0.3).
    """

    time_units = "nondimensional"
    fields = {"phi": FieldSpec("scalar", "1", "phase field (order parameter)", ("phi",))}
    parameter_units = {"epsilon": "1", "mean_init": "1", "variance": "1", "radius": "1", "D": "1", "a": "1"}
    min_lmax = CH_MIN_LMAX
    default_lmax = CH_DEFAULT_LMAX
    default_n_seeds = 4
    default_n_frames = 64

    def __init__(self, cfg=None):
        super().__init__(cfg)
        for key, default in (("dt_frame", 10.0), ("stabilizer", 2.0), ("cell_area", 0.039), ("cell_edge", 0.3)):
            v = self.cfg.get(key)
            self.cfg[key] = float(default if v is None else v)
        for key in ("dt_frame", "cell_area", "cell_edge"):
            if not self.cfg[key] > 0:
                raise ValueError(f"dataset.{key}={self.cfg[key]} must be positive")
        self.cfg["scheme"] = str(self.cfg.get("scheme") or "ars222")
        if self.cfg["scheme"] not in SCHEMES:
            raise ValueError(f"dataset.scheme={self.cfg['scheme']!r}: use one of {sorted(SCHEMES)}")
        if self.cfg["stabilizer"] < 0:
            raise ValueError(
                f"dataset.stabilizer={self.cfg['stabilizer']} must be >= 0 (2 keeps the free energy non-increasing)"
            )
        dt = self.cfg.get("dt")
        if dt is not None and not float(dt) > 0:
            raise ValueError(f"dataset.dt={dt} must be positive, or null for the reference schedule")
        self.cfg["dt"] = None if dt is None else float(dt)

    def axes(self):
        return {
            "epsilon": [0.5, 1.0, 1.5, 2.0],
            "mean_init": [0.35, 0.5, 0.65],
            "variance": [0.001, 0.005, 0.01, 0.05],
            "radius": [5.0, 7.5, 10.0],
        }

    def seeded_parameters(self, rng, seed_index):
        return {"D": 1.0, "a": 1.0}

    def dt_frame(self):
        return self.cfg["dt_frame"]

    def validate_time_step(self) -> None:
        """A fixed ``dt`` longer than the frame interval is refused.

        The scheme's own limit depends on the state and is checked by the solver
        (:meth:`~dandelion.solvers.cahn_hilliard.CahnHilliard.largest_stable_step`).
        """
        self.refuse_step_longer_than_frames(self.cfg["dt"])

    def sanity_bounds(self):
        """``phi`` in -1..2 (the phases are 0 and 1)."""
        return {"phi": (-1.0, 2.0)}

    def build_simulation(self, params, *, lmax, device):
        cols = {k: params[k].detach().cpu().tolist() for k in ("mean_init", "variance", "radius", "seed")}
        phi0 = torch.stack(
            [
                initial_phi(
                    ic_generator(self.cfg["seed"], int(s)),
                    mean=m,
                    variance=v,
                    radius=R,
                    lmax=int(lmax),
                    cell_area=self.cfg["cell_area"],
                    cell_edge=self.cfg["cell_edge"],
                )
                for m, v, R, s in zip(cols["mean_init"], cols["variance"], cols["radius"], cols["seed"])
            ]
        )
        return CahnHilliardSimulation(
            {k: params[k] for k in ("epsilon", "radius", "D", "a")},
            phi0,
            lmax=int(lmax),
            stabilizer=self.cfg["stabilizer"],
            scheme=self.cfg["scheme"],
            dt=self.cfg["dt"],
            device=device,
        )
