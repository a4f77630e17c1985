"""Dandelion: machine learning of PDEs on the sphere.

Subpackages: ``dandelion.solvers`` (numerical PDE solvers), ``dandelion.datasets`` (scenarios,
generation, storage, torch datasets), ``dandelion.benchmarks`` (training, rollout, export, reports)
and ``dandelion.configs`` (hydra configs). They live in the repository's top-level folders
``solvers/``, ``datasets/``, ``benchmarks/`` and ``configs/``.
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
