"""What network a checkpoint holds: its model spec and every hyper-parameter the network was built with, and how they
compare with what its preset builds now (a preset changed since it was written).

A checkpoint written by ``dandelion-train`` records ``model_spec["hyperparameters"]``
(:func:`dandelion.registry.resolved_hyperparameters`); :func:`dandelion.checkpoint.model_from_checkpoint` rebuilds the
network from them. One written before that record (before 2026-12-07) is read as built from the preset as it is now,
with :data:`LEGACY_OVERRIDES` for what has changed in the presets since.
"""

from __future__ import annotations

import yaml

from .registry import complete_hyperparameters, execution_keys, resolved_hyperparameters

__all__ = [
    "LEGACY_OVERRIDES",
    "checkpoint_model_spec",
    "checkpoint_hyperparameters",
    "preset_changes",
    "network_differences",
]


def checkpoint_model_spec(ckpt: dict) -> dict:
    """The checkpoint's ``model_spec`` (``extra``), or one read from its stored job configuration (a checkpoint
    written before the trainer stored it). Raises ValueError if it lacks the model's name, preset or channels."""
    spec = ckpt.get("extra", {}).get("model_spec")
    if spec is None:
        cfg = yaml.safe_load(ckpt["config_yaml"]) or {}
        m = cfg.get("model", {})
        spec = {
            "name": m.get("name"),
            "preset": m.get("preset"),
            "in_channels": m.get("in_channels"),
            "out_channels": m.get("out_channels"),
            "overrides": dict(m.get("overrides") or {}),
        }
    missing = [k for k in ("name", "preset", "in_channels", "out_channels") if spec.get(k) is None]
    if missing:
        raise ValueError(f"checkpoint lacks the model's {missing}: it was not written by dandelion-train")
    return spec


#: What a checkpoint written before checkpoints recorded their hyper-parameters (before 2026-12-07) was built with,
#: where its model's presets have changed since: Dandelion's ``small``, ``paper`` and ``tiny`` took advected
#: persistence (``advect_state``) on that day (the value is also the default, so it holds for any preset).
LEGACY_OVERRIDES: dict[str, dict] = {"dandelion": {"advect_state": False}}


def checkpoint_hyperparameters(ckpt) -> dict | None:
    """The hyper-parameters the checkpoint's network was built with: those it records (``model_spec``'s
    ``hyperparameters``), completed with the model's network defaults
    (:func:`dandelion.registry.complete_hyperparameters`); for a checkpoint written before they were recorded, the
    preset as it is now with :data:`LEGACY_OVERRIDES` and the checkpoint's own overrides applied. None for a model
    without a preset table.

    Parameters
    ----------
    ckpt : a dict from :func:`dandelion.checkpoint.load_checkpoint`.

    Raises
    ------
    ValueError
        If the checkpoint lacks its model spec (not written by ``dandelion-train``), or its preset or an override is
        unknown to the registry.
    """
    spec = checkpoint_model_spec(ckpt)
    if spec.get("hyperparameters") is not None:
        return complete_hyperparameters(spec["name"], spec["hyperparameters"])
    legacy = {**LEGACY_OVERRIDES.get(spec["name"], {}), **dict(spec.get("overrides") or {})}
    return resolved_hyperparameters(spec["name"], spec["preset"], legacy)


def preset_changes(ckpt) -> dict:
    """``{hyper-parameter: (saved, now)}`` for each one the checkpoint's network was built with
    (:func:`checkpoint_hyperparameters`) that its model spec (name, preset, overrides) no longer gives, leaving out
    the keys that do not change the network (:func:`dandelion.registry.execution_keys`); empty when the preset is
    unchanged or the model has no preset table. ``ckpt``: a dict from :func:`dandelion.checkpoint.load_checkpoint`.
    Raises ValueError as :func:`checkpoint_hyperparameters` does."""
    spec, saved = checkpoint_model_spec(ckpt), checkpoint_hyperparameters(ckpt)
    now = resolved_hyperparameters(spec["name"], spec["preset"], dict(spec.get("overrides") or {}))
    return network_differences(spec["name"], saved, now)


def network_differences(name: str, saved: dict | None, now: dict | None) -> dict:
    """``{key: (saved, now)}`` where two hyper-parameter sets of model ``name`` build different networks (the
    execution-only keys left out); empty when either is None (a model without a preset table)."""
    if saved is None or now is None:
        return {}
    skip = set(execution_keys(name))
    keys = sorted((set(saved) | set(now)) - skip)
    return {k: (saved.get(k), now.get(k)) for k in keys if saved.get(k) != now.get(k)}
