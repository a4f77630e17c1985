"""``shock_caps``: random-cap Riemann problems (dam breaks) of rotation-free shallow water on the unit sphere.

Physics (non-dimensional, unit sphere, ``g = 9.80616``, no rotation, flat bottom, no viscosity)::

    d_t h + div(h u) = 0,    d_t (h u) + div(h u (x) u + g h^2 / 2 I) = 0   (tangential part)

solved by the finite-volume :class:`dandelion.solvers.fv_shallow_water.FVShallowWaterSimulation`
(Calhoun-Helzel grid of ``ny x 2 ny`` cells, MUSCL-MC, HLL, SSP-RK3 at Courant number ``cfl``) and
conservatively remapped to the stored grid (:class:`dandelion.solvers.fv_remap.ConservativeRemap`).
Details, checks and costs: ``docs/datasets/shock_caps.md``.

Initial condition of seed ``s`` (generator :func:`dandelion.datasets.chained_turbulence.ic_generator`
of ``(dataset seed, s)``; for dataset seed 0 that is ``Generator(PCG64(s))``), drawn in this order:

1. background ``h_bg ~ U(0.5, 2)``, velocity ``(U - 1/2, U - 1/2)`` (east, north);
2. :data:`K_MAX` = 16 centres, each ``z = 2U - 1``, ``lon = 2 pi U``;
3. 16 radii ``U(0.3, 1.0)`` rad;
4. 16 cap states, each ``h ~ U(0.5, 2)`` and velocity ``(U - 1/2, U - 1/2)``.

A run with ``K`` caps and velocity scale ``delta`` paints the FIRST ``K`` caps (a point belongs to cap
``k`` if ``p . c_k >= cos r_k``; later caps overwrite earlier ones, the rest is background) with
velocities multiplied by ``delta``. So a seed fixes the background and the caps' geometry and
depths for every ``K`` and ``delta`` (the K = 1 cap is the first cap of every K = 16 run): the runs
of one seed are relatives, and the dataset is split BY SEED (every run of a seed lies in one split;
:meth:`ShockCapsScenario.make_splits`). Each cell gets the area-weighted mean of ``(h, u_east,
u_north)`` over ``subsamples x subsamples`` sub-cells; momentum is ``h u`` in Cartesian components
at the cell centre.

Sweep (row-major, the seed fastest; run id = 25 * iK + 5 * idelta + iseed for 5 seeds):
``K`` in {1, 2, 4, 8, 16} x ``delta`` in {0, 0.25, 0.5, 0.75, 1} x ``seeds`` (0..19), narrowed from the
command line (``dataset.K=[1,4] dataset.delta=[0,1] dataset.seeds=[0,1,2,3,4]``). Stored scalars:
``K``, ``delta``, ``seed`` (the seed's value, not its position in the list).

Output: 101 frames at exactly ``t = 0.015 k`` (t in [0, 1.5]); fields ``h`` and ``momentum`` (vector,
``h (u east, v north)``). The data is NOT band-limited (shocks): ``dataset.yaml`` has
``band_limited: false`` and ``lmax: null``, files carry no ``lmax`` attribute, and ``reduced`` means
a solver grid coarser than the card's 256 x 512 cells.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dandelion.solvers.fv_geometry import CalhounHelzelGrid
from dandelion.solvers.fv_shallow_water import CFL_MAX, FVShallowWaterSimulation, state_from_primitives

from .chained_turbulence import ic_generator
from .folder import make_splits
from .scenario import FieldSpec, Scenario, register_scenario

__all__ = ["ShockCapsScenario", "K_MAX", "FULL_NY", "cap_draws", "initial_state"]

#: Caps drawn per seed (the largest K of the sweep).
K_MAX = 16
#: Solver rows of the card's full resolution (256 x 512 cells); coarser runs are marked reduced.
FULL_NY = 256


def cap_draws(rng: np.random.Generator, k_max: int = K_MAX) -> dict[str, np.ndarray]:
    """The random draws of one seed in the card's order (module docstring), velocities unscaled.

    Returns ``bg`` (3,) = (h, u, v); ``centres`` (k_max, 3) unit vectors; ``radii`` (k_max,);
    ``states`` (k_max, 3) = (h, u, v) per cap.
    """
    bg = np.array([rng.uniform(0.5, 2.0), rng.random() - 0.5, rng.random() - 0.5])
    centres = np.empty((k_max, 3))
    for k in range(k_max):
        z = 2.0 * rng.random() - 1.0
        lon = 2.0 * math.pi * rng.random()
        r = math.sqrt(max(0.0, 1.0 - z * z))
        centres[k] = (r * math.cos(lon), r * math.sin(lon), z)
    radii = np.array([rng.uniform(0.3, 1.0) for _ in range(k_max)])
    states = np.array([[rng.uniform(0.5, 2.0), rng.random() - 0.5, rng.random() - 0.5] for _ in range(k_max)])
    return {"bg": bg, "centres": centres, "radii": radii, "states": states}


def initial_state(grid: CalhounHelzelGrid, draws: dict, K: int, delta: float, subsamples: int = 4) -> torch.Tensor:
    """Conserved initial state ``(4, ny, nx)`` of ``K`` caps with velocity scale ``delta`` (module docstring).

    Raises ``ValueError`` if ``K`` exceeds the caps drawn.
    """
    if not 0 <= int(K) <= len(draws["radii"]):
        raise ValueError(f"K={K} caps requested but {len(draws['radii'])} drawn per seed")
    p, w = grid.sub_points(int(subsamples))  # (ny, nx, m, m, 3), (ny, nx, m, m)
    opts = dict(dtype=torch.float64, device=p.device)
    bg = torch.tensor(draws["bg"], **opts)
    prim = bg.view(3, 1, 1, 1, 1).expand(3, *w.shape).clone()  # (3, ny, nx, m, m): h, u_east, u_north
    scale = torch.tensor([1.0, float(delta), float(delta)], **opts).view(3, 1, 1, 1, 1)
    for k in range(int(K)):
        c = torch.tensor(draws["centres"][k], **opts)
        inside = (p @ c) >= math.cos(float(draws["radii"][k]))
        prim = torch.where(inside, torch.tensor(draws["states"][k], **opts).view(3, 1, 1, 1, 1), prim)
    prim = prim * scale
    mean = (prim * w).sum((-2, -1))  # (3, ny, nx)
    return state_from_primitives(grid, mean[:1], mean[1:2], mean[2:3])[0]


@register_scenario("shock_caps")
class ShockCapsScenario(Scenario):
    """The shock-caps scenario (module docstring). Config keys besides the generic ones: ``K``,
    ``delta``, ``seeds`` (sweep lists), ``ny`` (solver rows, null = ``nlat`` rounded up to even),
    ``cfl``, ``dt_frame``, ``subsamples``. ``lmax`` and ``n_seeds`` do not apply (set ``ny`` and
    ``seeds``)."""

    time_units = "nondimensional"
    band_limited = False
    fields = {
        "h": FieldSpec("scalar", "1", "fluid depth", ("h",)),
        "momentum": FieldSpec("vector", "1", "momentum h (u eastward, v northward)", ("hu", "hv")),
    }
    parameter_units = {"K": "1", "delta": "1"}
    default_n_frames = 101
    distinct_note = (
        "split by seed: a seed fixes the background and the caps' geometry and depths for every K and "
        "delta, so every run of one seed lies in the same split and no geometry appears in two splits"
    )

    def __init__(self, cfg=None):
        cfg = dict(cfg or {})
        sweep = {"K": [1, 2, 4, 8, 16], "delta": [0.0, 0.25, 0.5, 0.75, 1.0], "seeds": list(range(20))}
        for key, default in sweep.items():
            v = cfg.get(key)
            v = list(default if v is None else (v if isinstance(v, (list, tuple)) else [v]))
            if not v or len(set(v)) != len(v):
                raise ValueError(f"dataset.{key}={v} must be a non-empty list without repeats")
            cfg[key] = [int(x) for x in v] if key != "delta" else [float(x) for x in v]
        if any(not 1 <= k <= K_MAX for k in cfg["K"]) or any(not 0 <= d for d in cfg["delta"]) or min(cfg["seeds"]) < 0:
            raise ValueError(
                f"dataset.K={cfg['K']} must lie in 1..{K_MAX}, delta={cfg['delta']} >= 0, seeds={cfg['seeds']} >= 0"
            )
        if cfg.get("n_seeds") is not None and int(cfg["n_seeds"]) != len(cfg["seeds"]):
            raise ValueError(
                f"dataset.n_seeds={cfg['n_seeds']} disagrees with dataset.seeds={cfg['seeds']}: set only seeds"
            )
        cfg["n_seeds"] = len(cfg["seeds"])
        super().__init__(cfg)
        self.cfg["lmax"] = None  # not band-limited (band_limited = False)
        ny = self.cfg.get("ny")
        ny = self.grid.nlat + self.grid.nlat % 2 if ny is None else int(ny)
        if ny < 4 or ny % 2:
            raise ValueError(
                f"dataset.ny={ny} must be an even integer >= 4 (finite-volume rows; the grid has ny x 2ny cells)"
            )
        self.cfg["ny"] = ny
        for key, default in (("cfl", 0.45), ("dt_frame", 0.015)):
            self.cfg[key] = float(default if self.cfg.get(key) is None else self.cfg[key])
        self.cfg["subsamples"] = int(self.cfg.get("subsamples") or 4)
        if not 0 < self.cfg["cfl"] <= CFL_MAX or self.cfg["dt_frame"] <= 0 or self.cfg["subsamples"] < 1:
            raise ValueError(
                f"dataset.cfl={self.cfg['cfl']} must lie in (0, {CFL_MAX}] (the solver's stable bound), "
                "dt_frame > 0, subsamples >= 1"
            )
        self._grids: dict = {}
        self._remaps: dict = {}

    # ------------------------------------------------------------------ sweep
    def axes(self):
        return {"K": [float(k) for k in self.cfg["K"]], "delta": list(self.cfg["delta"])}

    def sweep_index(self, trajectory_id):
        out = super().sweep_index(trajectory_id)
        out["seed"] = self.cfg["seeds"][int(out["seed"])]
        return out

    def dt_frame(self):
        return self.cfg["dt_frame"]

    # ------------------------------------------------------------------ no band limit
    @property
    def reduced(self) -> bool:
        """True when the solver grid is coarser than the card's 256 x 512 cells."""
        return self.cfg["ny"] < FULL_NY

    def describe(self) -> dict:
        d = super().describe()
        d["sweep"]["seed"] = [float(s) for s in self.cfg["seeds"]]
        return d

    def solver_settings(self) -> dict:
        return {
            "model": "rotation-free shallow water, finite volume (dandelion.solvers.fv_shallow_water)",
            "grid": "calhoun-helzel",
            "ny": self.cfg["ny"],
            "nx": 2 * self.cfg["ny"],
            "cfl": self.cfg["cfl"],
            "time_stepping": "ssp-rk3",
            "reconstruction": "muscl-mc",
            "riemann_solver": "hll-einfeldt",
            "remap": "conservative, second order (limited linear reconstruction)",
            "full_ny": FULL_NY,
        }

    # ------------------------------------------------------------------ splits
    def make_splits(self, seed: int = 42) -> dict:
        """A split of the SEEDS present among trajectory ids ``0..n-1`` (the rule of
        :func:`dandelion.datasets.folder.make_splits` applied to seeds, with ``dataset.split_ratios``, default
        80/10/10), every run of a seed in its seed's split."""
        seed_of = [int(self.sweep_index(i)["seed"]) for i in range(self.n_trajectories)]
        present = sorted(set(seed_of))
        by_seed = make_splits(len(present), seed=seed, ratios=self.split_ratios, note=self.distinct_note)
        where = {present[k]: s for s in ("train", "valid", "test") for k in by_seed[s]}
        parts = {s: [i for i, sd in enumerate(seed_of) if where[sd] == s] for s in ("train", "valid", "test")}
        return {
            **by_seed,
            **parts,
            "strategy": "grouped",
            "group_by": "seed",
            "counts": {k: len(v) for k, v in parts.items()},
            "seeds": {s: sorted(sd for sd in present if where[sd] == s) for s in ("train", "valid", "test")},
        }

    def split_problems(self, splits: dict) -> list[str]:
        """Seeds that appear in more than one split (empty when the split is by seed)."""
        owner, out = {}, []
        for s in ("train", "valid", "test"):
            for i in splits.get(s, []):
                sd = int(self.sweep_index(int(i))["seed"])
                if owner.setdefault(sd, s) != s:
                    out.append(f"seed {sd} lies in splits {owner[sd]} and {s} (trajectory {i})")
        return out

    # ------------------------------------------------------------------ simulation
    def fv_grid(self, device) -> CalhounHelzelGrid:
        key = str(torch.device(device))
        if key not in self._grids:
            self._grids[key] = CalhounHelzelGrid(self.cfg["ny"], device=device)
        return self._grids[key]

    def build_simulation(self, params, *, lmax, device):
        grid = self.fv_grid(device)
        cols = {k: params[k].detach().cpu().tolist() for k in ("K", "delta", "seed")}
        q0 = torch.stack(
            [
                initial_state(
                    grid, cap_draws(ic_generator(self.cfg["seed"], int(s))), int(K), d, self.cfg["subsamples"]
                )
                for K, d, s in zip(cols["K"], cols["delta"], cols["seed"])
            ]
        )
        return FVShallowWaterSimulation(grid, q0, cfl=self.cfg["cfl"], params=dict(params), remap_cache=self._remaps)
