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

__version__ = "0.1.0"  # dandelion.runtime records it

__all__ = ["SphereGrid", "build_model", "register_model", "available_models", "__version__"]

# Read on first use (PEP 562): ``import dandelion`` (and ``dandelion-* --help``, dandelion/cli/launch.py) stays free
# of torch until a model, a grid or the registry is asked for.
_LAZY = {
    "build_model": "registry",
    "register_model": "registry",
    "available_models": "registry",
    "SphereGrid": "sphere",
    "Dandelion": "model",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'dandelion' has no attribute {name!r}")
