"""Scenarios: what a dataset simulates, and the protocol every dataset follows to plug into generation.

A **scenario** is a subclass of :class:`Scenario`, registered by name with :func:`register_scenario`,
plus a hydra config ``configs/dataset/<name>.yaml``. ``dandelion-generate dataset=<name>`` then finds
it: :func:`get_scenario` looks the name up in the registry and, if it is not there yet, imports the
module ``dandelion.datasets.<name>`` (or the module named by the config key ``module``), whose import
registers it. So a new dataset is one file in ``datasets/`` and one config file, nothing else.

What a scenario declares (class attributes):

* ``name`` -- registry name, also the dataset's ``dataset_name``;
* ``time_units`` -- ``"s"`` or ``"nondimensional"`` (the unit of the simulation's ``time``);
* ``fields`` -- ``{stored name: FieldSpec(kind, units, long_name, source)}`` in storage order; a
  ``"scalar"`` field is taken from one simulation component (``source=("h",)``), a ``"vector"`` field
  from two, eastward then northward (``source=("u", "v")``);
* ``parameter_units`` -- ``{parameter: units}`` for every sweep and seeded parameter (all stored in
  ``scalars/``), in storage order;
* ``min_lmax`` -- the documented minimum solver band limit that resolves the physics (a dataset
  made below it is marked ``reduced: true``); ``default_lmax`` -- the band limit used when the
  config leaves ``lmax`` empty.

What a scenario implements:

* :meth:`Scenario.axes` -- the sweep: an ordered ``{parameter: [values]}``. Trajectory ids run
  row-major over the axes in that order, then over ``n_seeds`` seeds (the last axis varies fastest),
  as in the dataset cards (docs/datasets/README.md);
* :meth:`Scenario.seeded_parameters` -- extra per-trajectory parameters drawn from the
  trajectory's own generator (:func:`trajectory_rng`, derived from ``(dataset seed, trajectory id)``
  only, so any trajectory regenerates alone, in any order, on any machine; docs/ARCHITECTURE.md §3);
* :meth:`Scenario.build_simulation` -- a batched simulation for B trajectories: an object with
  ``time`` (float, in ``time_units``), ``advance_to(t)`` (integrate B trajectories at once, landing
  exactly on ``t``) and ``fields(grid)`` (``{component: (B, nlat, nlon) float64 tensor}`` truncated to
  ``min(solver lmax, grid.lmax)`` and synthesised at the grid's nodes; raises ``FloatingPointError``
  naming the batch index of a non-finite trajectory);
* :meth:`Scenario.spinup` and :meth:`Scenario.dt_frame` -- output cadence in ``time_units``: stored
  frame ``k`` is the state at ``spinup + k * dt_frame`` (exactly; the spin-up is dropped), stored with
  time ``k * dt_frame`` (rebased);
* :meth:`Scenario.validate_time_step` -- refuses an unsafe solver step before anything is written
  (the solver's own stability limits for the trajectories to be generated, and a step longer than
  the frame interval), with the largest safe step in the message;
* :meth:`Scenario.sanity_bounds` -- physical bounds of the stored fields (``{field: (min, max)}``;
  for a vector field the bound is on its magnitude): the generator never marks a file complete whose
  frames leave them, and names the trajectory.

Config keys every scenario understands (``configs/dataset/<name>.yaml``): ``name``, ``path``,
``nlat``, ``nlon``, ``grid``, ``lmax`` (solver band limit; null = default), ``n_trajectories`` (null =
the whole sweep), ``n_frames``, ``seed`` (dataset seed), ``n_seeds``, ``split_seed``; scenarios add
their own (e.g. ``spinup_days``).
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import torch

from dandelion.sphere import SphereGrid

from .folder import DEFAULT_SPLIT_RATIOS, check_split_ratios
from .folder import make_splits as _random_splits

__all__ = [
    "FieldSpec",
    "SanityBoundError",
    "TruncatedGrid",
    "Scenario",
    "Simulation",
    "register_scenario",
    "get_scenario",
    "available_scenarios",
    "trajectory_rng",
]


@dataclass(frozen=True)
class TruncatedGrid(SphereGrid):
    """A :class:`~dandelion.sphere.SphereGrid` whose :attr:`lmax` is capped at ``band_limit`` (the
    simulations' ``fields(grid)`` truncate to ``min(solver lmax, grid.lmax)``, so synthesis on this
    grid keeps degrees ``< min(solver lmax, analysis band limit, band_limit)``)."""

    band_limit: int = 1

    @property
    def lmax(self) -> int:
        return min(super().lmax, int(self.band_limit))


@dataclass(frozen=True)
class FieldSpec:
    """A stored field.

    kind : ``"scalar"`` (t0_fields) or ``"vector"`` (t1_fields, components (u east, v north)).
    units, long_name : strings stored as HDF5 attributes.
    source : simulation component names: one for a scalar, (east, north) for a vector.
    """

    kind: str
    units: str
    long_name: str
    source: tuple[str, ...]

    def __post_init__(self):
        if self.kind not in ("scalar", "vector"):
            raise ValueError(f"FieldSpec kind {self.kind!r}: use 'scalar' or 'vector'")
        if len(self.source) != (1 if self.kind == "scalar" else 2):
            raise ValueError(
                f"a {self.kind} field needs {1 if self.kind == 'scalar' else 2} source components, got {self.source}"
            )

    def to_dict(self) -> dict:
        d = {"kind": self.kind, "units": self.units, "long_name": self.long_name}
        if self.kind == "vector":
            d["components"] = ["u", "v"]
        return d


class SanityBoundError(ValueError):
    """A stored field left a physical bound the scenario declares (the trajectory is named)."""


class Simulation(Protocol):
    """The batched simulation protocol (see the module docstring)."""

    time: float

    def advance_to(self, t: float) -> None: ...

    def fields(self, grid: SphereGrid) -> dict[str, torch.Tensor]: ...


def trajectory_rng(dataset_seed: int, trajectory_id: int) -> np.random.Generator:
    """The generator of one trajectory: PCG64 seeded by ``SeedSequence([dataset_seed, trajectory_id])``.

    Depends on nothing else (not on the batch, rank, device or order of generation).

    Raises
    ------
    ValueError
        For a negative seed or id.
    """
    if int(dataset_seed) < 0 or int(trajectory_id) < 0:
        raise ValueError(f"seed {dataset_seed} and trajectory id {trajectory_id} must be non-negative integers")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(dataset_seed), int(trajectory_id)])))


# ---------------------------------------------------------------------------------------------- base class
class Scenario:
    """Base class of dataset scenarios; see the module docstring for the protocol.

    Parameters
    ----------
    cfg : mapping
        The dataset config (``cfg.dataset`` of a hydra job, or a plain dict). Missing generic keys
        take the defaults in :attr:`DEFAULTS`.

    Raises
    ------
    ValueError
        For an impossible configuration (too many trajectories, non-positive sizes, unknown grid).
    """

    name: ClassVar[str] = ""
    time_units: ClassVar[str] = "s"
    fields: ClassVar[dict[str, FieldSpec]] = {}
    parameter_units: ClassVar[dict[str, str]] = {}
    min_lmax: ClassVar[int] = 1
    default_lmax: ClassVar[int] = 1
    default_n_seeds: ClassVar[int] = 1
    default_n_frames: ClassVar[int] = 1
    #: False for finite-volume data (shock caps, ocean): no solver band limit, no stored ``lmax``, conservatively
    #: remapped to the stored grid; such a scenario refuses ``dataset.lmax`` and defines :attr:`reduced` itself
    band_limited: ClassVar[bool] = True
    #: one line explaining why each trajectory is its own simulation (written to splits.json)
    distinct_note: ClassVar[str] = "every trajectory is its own simulation, so no simulation appears in two splits"

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "nlat": 32,
        "nlon": 64,
        "grid": "equiangular",
        "lmax": None,
        "n_trajectories": None,
        "n_frames": None,
        "seed": 0,
        "n_seeds": None,
        "split_seed": 42,
        "split_ratios": None,  # (train, valid, test) fractions (of the seeds: shock caps); None: 0.8/0.1/0.1
    }

    def __init__(self, cfg: Mapping[str, Any] | None = None):
        cfg = dict(cfg or {})
        if not self.band_limited and cfg.get("lmax") is not None:
            raise ValueError(
                f"dataset.lmax={cfg['lmax']!r} does not apply to {self.name!r} (finite volume, not band-limited): "
                "leave it null and set the solver resolution with the dataset's own keys"
            )
        if not self.band_limited and cfg.get("output_lmax") is not None:
            raise ValueError(
                f"dataset.output_lmax={cfg['output_lmax']!r} does not apply to {self.name!r} (finite volume, not "
                "band-limited)"
            )
        merged = dict(self.DEFAULTS)
        merged.update({k: v for k, v in cfg.items() if v is not None or k not in merged})
        if merged.get("lmax") is None:
            merged["lmax"] = self.default_lmax
        if merged.get("n_seeds") is None:
            merged["n_seeds"] = self.default_n_seeds
        if merged.get("n_frames") is None:
            merged["n_frames"] = self.default_n_frames
        for key in ("nlat", "nlon", "lmax", "n_seeds", "n_frames"):
            if int(merged[key]) != merged[key] or int(merged[key]) < 1:
                raise ValueError(f"dataset.{key}={merged[key]!r} must be a positive integer")
            merged[key] = int(merged[key])
        if merged.get("output_lmax") is None:
            merged.pop("output_lmax", None)  # absent unless set: fingerprints of datasets made without it are unchanged
        elif int(merged["output_lmax"]) != merged["output_lmax"] or int(merged["output_lmax"]) < 1:
            raise ValueError(f"dataset.output_lmax={merged['output_lmax']!r} must be a positive integer (or null)")
        else:
            merged["output_lmax"] = int(merged["output_lmax"])
        if merged.get("split_ratios") is None:
            merged.pop(
                "split_ratios", None
            )  # absent unless set: fingerprints of datasets made without it are unchanged
        else:
            merged["split_ratios"] = check_split_ratios(merged["split_ratios"])
        if int(merged["seed"]) < 0:
            raise ValueError(f"dataset.seed={merged['seed']} must be a non-negative integer")
        merged["seed"] = int(merged["seed"])
        self.cfg = merged
        self.grid = SphereGrid(merged["nlat"], merged["nlon"], merged["grid"])  # validates the grid
        n_max = self.n_sweep
        if merged.get("n_trajectories") is None:
            merged["n_trajectories"] = n_max
        n = int(merged["n_trajectories"])
        if n < 1 or n > n_max:
            raise ValueError(
                f"dataset.n_trajectories={n} is outside 1..{n_max} (the sweep of {self.name!r}: "
                f"{' x '.join(str(len(v)) for v in self.axes().values())} x {merged['n_seeds']} seeds); "
                "lower it or raise dataset.n_seeds"
            )
        merged["n_trajectories"] = n

    # ------------------------------------------------------------------ to implement
    def axes(self) -> dict[str, list[float]]:
        """Ordered sweep axes ``{parameter: values}`` (row-major; the seed axis comes last)."""
        return {}

    def seeded_parameters(self, rng: np.random.Generator, seed_index: int) -> dict[str, float]:
        """Extra parameters of one trajectory drawn from its generator ``rng`` (seed index given)."""
        return {}

    def spinup(self) -> float:
        """Time in ``time_units`` before the first stored frame (dropped)."""
        return 0.0

    def dt_frame(self) -> float:
        """Time in ``time_units`` between stored frames."""
        raise NotImplementedError

    def build_simulation(self, params: dict[str, torch.Tensor], *, lmax: int, device: str | torch.device) -> Simulation:
        """A batched simulation of ``B`` trajectories; ``params[name]`` has shape ``(B,)`` float64."""
        raise NotImplementedError

    def validate_time_step(self) -> None:
        """Refuse an unsafe solver step for the trajectories to be generated (``ValueError`` with the
        largest safe step); called by the generator before anything is written. Nothing by default."""

    def sanity_bounds(self) -> dict[str, tuple[float | None, float | None]]:
        """``{stored field: (min, max)}`` physical bounds (vector fields: bounds on the magnitude); none by default."""
        return {}

    # ------------------------------------------------------------------ provided
    @property
    def solver_lmax(self) -> int | None:
        """Solver band limit (config ``lmax``, or :attr:`default_lmax`); ``None`` when not :attr:`band_limited`."""
        return int(self.cfg["lmax"]) if self.band_limited else None

    @property
    def stored_lmax(self) -> int | None:
        """Band limit of the stored fields: ``min(solver lmax, grid.lmax)`` (docs/ARCHITECTURE.md §3); ``None`` when not
        :attr:`band_limited`."""
        return min(self.solver_lmax, self.output_grid.lmax) if self.band_limited else None

    @property
    def output_grid(self) -> SphereGrid:
        """The grid handed to ``fields(grid)``: :attr:`grid`, or with config ``output_lmax`` a
        :class:`TruncatedGrid` capping the stored band limit."""
        cap = self.cfg.get("output_lmax")
        if cap is None:
            return self.grid
        return TruncatedGrid(self.grid.nlat, self.grid.nlon, self.grid.grid, band_limit=int(cap))

    @property
    def reduced(self) -> bool:
        """True when the solver band limit is below the documented minimum :attr:`min_lmax`."""
        return self.solver_lmax < self.min_lmax

    @property
    def n_sweep(self) -> int:
        """Number of trajectories of the full sweep (axes x seeds)."""
        return math.prod(len(v) for v in self.axes().values()) * int(self.cfg["n_seeds"])

    @property
    def n_trajectories(self) -> int:
        return int(self.cfg["n_trajectories"])

    @property
    def n_frames(self) -> int:
        return int(self.cfg["n_frames"])

    def sweep_index(self, trajectory_id: int) -> dict[str, Any]:
        """Sweep values and seed index of a trajectory id (row-major, the seed fastest)."""
        tid = int(trajectory_id)
        if not 0 <= tid < self.n_sweep:
            raise ValueError(f"trajectory id {tid} is outside 0..{self.n_sweep - 1}")
        axes = list(self.axes().items()) + [("seed", list(range(int(self.cfg["n_seeds"]))))]
        out, rem = {}, tid
        for name, values in reversed(axes):
            rem, k = divmod(rem, len(values))
            out[name] = values[k]
        return {name: out[name] for name, _ in axes}

    def parameters(self, trajectory_id: int) -> dict[str, float]:
        """All parameters of one trajectory: sweep values, seed index, then seeded draws."""
        p = self.sweep_index(trajectory_id)
        rng = trajectory_rng(self.cfg["seed"], trajectory_id)
        p.update(self.seeded_parameters(rng, int(p["seed"])))
        return {k: float(v) for k, v in p.items()}

    def solver_times(self) -> np.ndarray:
        """Simulation times of the stored frames, ``spinup + k * dt_frame`` (float64, exact)."""
        return np.array([self.spinup() + k * self.dt_frame() for k in range(self.n_frames)], dtype=np.float64)

    def stored_times(self) -> np.ndarray:
        """Stored (rebased) times of the frames, ``k * dt_frame``."""
        return np.array([k * self.dt_frame() for k in range(self.n_frames)], dtype=np.float64)

    def units_of(self, parameter: str) -> str:
        if parameter == "seed":
            return "1"
        return self.parameter_units.get(parameter, "1")

    def stored_fields(self, components: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
        """Simulation components ``(B, nlat, nlon)`` -> stored fields: scalars ``(B, nlat, nlon)``,
        vectors ``(B, nlat, nlon, 2)`` (float64 numpy). Raises ``KeyError`` naming a missing component."""
        out = {}
        for name, spec in self.fields.items():
            missing = [c for c in spec.source if c not in components]
            if missing:
                raise KeyError(
                    f"simulation of {self.name!r} returned {sorted(components)}, lacks {missing} for field {name!r}"
                )
            if spec.kind == "scalar":
                out[name] = components[spec.source[0]].detach().cpu().double().numpy()
            else:
                out[name] = torch.stack([components[c] for c in spec.source], dim=-1).detach().cpu().double().numpy()
        return out

    def refuse_step_longer_than_frames(self, dt: float | None, key: str = "dt") -> None:
        """``ValueError`` if a configured solver step ``dt`` exceeds the frame interval (never shortened silently)."""
        if dt is not None and float(dt) > self.dt_frame() * (1.0 + 1e-9):
            raise ValueError(
                f"dataset.{key}={dt:g} {self.time_units} is longer than the frame interval {self.dt_frame():g} "
                f"{self.time_units}; a step is never shortened silently: choose dataset.{key} <= "
                f"{self.dt_frame():g} (a divisor of it)"
            )

    def sanity_violations(self, values: Mapping[str, np.ndarray]) -> list[tuple[int, str]]:
        """``(batch index, description)`` of every trajectory whose stored ``values`` (``(B, ...)`` per
        field, vectors with the component last) leave :meth:`sanity_bounds`."""
        out = []
        for name, (lo, hi) in self.sanity_bounds().items():
            if name not in values:
                continue
            a = values[name]
            if self.fields[name].kind == "vector":
                a = np.sqrt((a * a).sum(-1))
            a = a.reshape(a.shape[0], -1)
            what = "magnitude of " if self.fields[name].kind == "vector" else ""
            units = self.fields[name].units
            for j in range(a.shape[0]):
                if lo is not None and not a[j].min() >= lo:
                    out.append((j, f"min {what}{name} = {a[j].min():.4g} {units} < declared minimum {lo:g} {units}"))
                elif hi is not None and not a[j].max() <= hi:
                    out.append((j, f"max {what}{name} = {a[j].max():.4g} {units} > declared maximum {hi:g} {units}"))
        return out

    def describe(self) -> dict:
        """Plain-type description for dataset.yaml (without config/command/versions)."""
        return {
            "name": self.name,
            "grid": self.grid.grid,
            "nlat": self.grid.nlat,
            "nlon": self.grid.nlon,
            "lmax": self.stored_lmax,
            **({"solver_lmax": self.solver_lmax, "min_solver_lmax": int(self.min_lmax)} if self.band_limited else {}),
            **({"output_lmax": int(self.cfg["output_lmax"])} if self.cfg.get("output_lmax") is not None else {}),
            "reduced": bool(self.reduced),
            "band_limited": bool(self.band_limited),
            "dt_frame": float(self.dt_frame()),
            "spinup": float(self.spinup()),
            "time_units": self.time_units,
            "n_frames": self.n_frames,
            "n_trajectories": self.n_trajectories,
            "fields": {k: v.to_dict() for k, v in self.fields.items()},
            "parameters": list(self.sweep_index(0).keys()) + list(self.parameter_names_seeded()),
            "parameter_units": {
                k: self.units_of(k) for k in list(self.sweep_index(0)) + list(self.parameter_names_seeded())
            },
            "sweep": {k: [float(x) for x in v] for k, v in self.axes().items()},
            "n_seeds": int(self.cfg["n_seeds"]),
            "solver": self.solver_settings(),
            "sanity_bounds": {k: [None if v is None else float(v) for v in b] for k, b in self.sanity_bounds().items()},
        }

    def make_splits(self, seed: int = 42) -> dict:
        """The ``splits.json`` dict: by default a random 80/10/10 split of trajectory ids
        (:func:`dandelion.datasets.folder.make_splits`); scenarios whose trajectories share a
        simulation (or its geometry) override it to split by group."""
        return _random_splits(self.n_trajectories, seed=seed, ratios=self.split_ratios, note=self.distinct_note)

    @property
    def split_ratios(self) -> tuple[float, float, float]:
        """The (train, valid, test) fractions of ``dataset.split_ratios`` (default 0.8, 0.1, 0.1)."""
        return tuple(self.cfg.get("split_ratios") or DEFAULT_SPLIT_RATIOS)

    def split_problems(self, splits: dict) -> list[str]:
        """Violations of the scenario's split rule in a ``splits.json`` dict (none by default)."""
        return []

    def solver_settings(self) -> dict:
        """Plain-type solver settings recorded in dataset.yaml (time step, scheme, diffusion, ...)."""
        return {}

    def parameter_names_seeded(self) -> list[str]:
        """Names of the seeded parameters (drawn once for trajectory 0 to list them)."""
        return list(self.seeded_parameters(trajectory_rng(0, 0), 0).keys())


# ---------------------------------------------------------------------------------------------- registry
_SCENARIOS: dict[str, type[Scenario]] = {}


def register_scenario(name: str):
    """Class decorator registering a :class:`Scenario` subclass under ``name`` (sets ``cls.name``)."""

    def deco(cls):
        if not (isinstance(cls, type) and issubclass(cls, Scenario)):
            raise TypeError(f"register_scenario({name!r}) decorates a Scenario subclass, got {cls!r}")
        cls.name = name
        _SCENARIOS[name] = cls
        return cls

    return deco


def get_scenario(name: str, module: str | None = None) -> type[Scenario]:
    """The scenario class registered as ``name``, importing ``module`` (default
    ``dandelion.datasets.<name>``) first if needed.

    Raises
    ------
    ValueError
        If no such scenario exists; the message lists the available ones.
    """
    if name not in _SCENARIOS:
        mod = module or f"dandelion.datasets.{name}"
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
    if name not in _SCENARIOS:
        raise ValueError(
            f"unknown dataset scenario {name!r}: available {available_scenarios()}; "
            f"add datasets/{name}.py registering it with @register_scenario({name!r})"
        )
    return _SCENARIOS[name]


#: Modules of the datasets package that define no scenario (skipped when the built-in scenarios are imported).
_NOT_SCENARIOS = ("scenario", "storage", "folder", "statistics", "generate", "verify", "torch_dataset")


def available_scenarios() -> list[str]:
    """Names of the registered scenarios (after importing the built-in ones)."""
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name not in _NOT_SCENARIOS and not info.name.startswith("_"):
            try:
                importlib.import_module(f"dandelion.datasets.{info.name}")
            except ImportError:
                pass
    return sorted(_SCENARIOS)
