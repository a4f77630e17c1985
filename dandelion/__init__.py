"""Dandelion: machine learning of PDEs on the sphere.

Subpackages: ``dandelion.solvers`` (numerical PDE solvers), ``dandelion.datasets`` (scenarios,
generation, storage, torch datasets), ``dandelion.benchmarks`` (training, rollout, export, reports)
and ``dandelion.configs`` (hydra configs). They live in the repository's top-level folders
``solvers/``, ``datasets/``, ``benchmarks/`` and ``configs/``.
"""

from .registry import available_models, build_model, register_model
from .sphere import SphereGrid

__version__ = "0.1.0"

__all__ = ["SphereGrid", "build_model", "register_model", "available_models", "__version__"]


def __getattr__(name):  # lazy, so importing dandelion stays light
    if name == "Dandelion":
        from .model import Dandelion

        return Dandelion
    raise AttributeError(f"module 'dandelion' has no attribute {name!r}")
