"""Dandelion: machine learning of PDEs on the sphere.

The core (this package's modules: geometry, warps, spectral pooling, models, forecasts, metrics, checkpoints)
and the jobs built on it: ``dandelion.training`` (training), ``dandelion.evaluation`` (rollouts scored per lead
time), ``dandelion.export`` (netCDF and Zarr), ``dandelion.reporting`` (figures), ``dandelion.cli`` (the
``dandelion-*`` entry points) and ``dandelion.api`` (the notebook facade). Installed beside them from the
repository's top-level folders ``solvers/``, ``datasets/``, ``benchmarks/`` and ``configs/``:
``dandelion.solvers`` (numerical PDE solvers), ``dandelion.datasets`` (scenarios, generation, storage, torch
datasets), ``dandelion.benchmarks`` (the benchmark protocol: cells, leaderboard, transfer, budget and speed
studies) and ``dandelion.configs`` (hydra configs). docs/ARCHITECTURE.md draws the layers.
"""

__version__ = "0.1.0"  # before the submodule imports: dandelion.runtime records it

from .registry import available_models, build_model, register_model  # noqa: E402
from .sphere import SphereGrid  # noqa: E402

__all__ = ["SphereGrid", "build_model", "register_model", "available_models", "__version__"]


def __getattr__(name):  # deferred: the model pulls in torch-harmonics and the warp; ``import dandelion`` stays light
    if name == "Dandelion":
        from .model import Dandelion

        return Dandelion
    raise AttributeError(f"module 'dandelion' has no attribute {name!r}")
