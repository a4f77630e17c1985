"""The command-line jobs: each ``dandelion-*`` entry point is a thin hydra wrapper in this package.

:mod:`dandelion.cli.common` holds what every job shares (composing and checking overrides before any work,
one-line errors with exit status 2, each job's own ``--help``); the job modules (``train``, ``rollout``,
``export``, ``report``, ``generate``, ``verify``, ``well_resample``, ``quickstart``) build the Python API's
objects from a composed configuration and call them. Nothing below this package imports it.
"""

from .common import *  # noqa: F403
from .common import __all__  # noqa: F401
