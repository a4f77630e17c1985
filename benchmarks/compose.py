"""Compose a job's hydra configuration from Python (the packaged ``dandelion.configs``).

``compose(name, overrides)`` is :func:`dandelion.cli.compose_config` (one implementation for the jobs and
their command-line checks); it works inside a running hydra app too.
"""

from __future__ import annotations

from dandelion.cli import compose_config as compose

__all__ = ["compose"]
