"""Dandelion: machine learning of PDEs on the sphere.

Subpackages: ``dandelion.solvers`` (numerical PDE solvers), ``dandelion.datasets`` (scenarios,
generation, storage, torch datasets), ``dandelion.benchmarks`` (training, rollout, export, reports)
and ``dandelion.configs`` (hydra configs). They live in the repository's top-level folders
``solvers/``, ``datasets/``, ``benchmarks/`` and ``configs/``.
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
