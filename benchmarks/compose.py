"""Compose a job's hydra configuration from Python (the packaged ``dandelion.configs``)."""

from __future__ import annotations

from hydra import compose as _compose
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra

__all__ = ["compose"]


def compose(name: str, overrides: list[str]):
    """The configuration ``configs/<name>.yaml`` with hydra ``overrides`` (works inside a running hydra app too)."""
    if GlobalHydra.instance().is_initialized():  # called from inside another hydra app or compose context
        return _compose(config_name=name, overrides=overrides)
    with initialize_config_module(config_module="dandelion.configs", version_base="1.3"):
        return _compose(config_name=name, overrides=overrides)
