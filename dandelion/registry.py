"""Model registry: one factory for Dandelion and every baseline.

A model module registers a builder with :func:`register_model`; jobs and configs build every model
through :func:`build_model`, so all models share one signature and one interface:
input ``(B, in_channels, nlat, nlon)``, output ``(B, out_channels, nlat, nlon)``.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable

import torch.nn as nn

__all__ = [
    "register_model",
    "register_preset_model",
    "resolve_preset",
    "did_you_mean",
    "preset_keys",
    "resolved_hyperparameters",
    "execution_keys",
    "complete_hyperparameters",
    "build_model",
    "available_models",
    "unwrap_model",
    "unwrap_state_dict",
    "count_parameters",
    "import_plugins",
]

_REGISTRY: dict[str, Callable[..., nn.Module]] = {}
# name -> (preset table, extra keys) of the models registered by register_preset_model
_PRESET_TABLES: dict[str, tuple[dict[str, dict], tuple[str, ...]]] = {}
# name -> (network defaults, execution keys) of the models registered by register_preset_model
_RECORDING: dict[str, tuple[dict, tuple[str, ...]]] = {}

# Modules that register models when imported (imported lazily: build_model stops at the one registering its name).
_MODEL_MODULES = ("dandelion.model", "dandelion.baselines")


def register_model(name: str):
    """Decorator registering ``builder(preset, in_channels, out_channels, nlat, nlon, grid, **overrides)``."""

    def deco(builder):
        if name in _REGISTRY and _REGISTRY[name] is not builder:
            raise ValueError(f"model name {name!r} is registered twice")
        _REGISTRY[name] = builder
        return builder

    return deco


def did_you_mean(unknown, known) -> str:
    """`` (did you mean 'KNOWN' for 'UNKNOWN'?)`` for each name of ``unknown`` with a close name in ``known``
    (:func:`difflib.get_close_matches`), joined; ``""`` when none is close."""
    close = {u: difflib.get_close_matches(u, sorted(known), n=1) for u in unknown}
    return "".join(f" (did you mean {c[0]!r} for {u!r}?)" for u, c in close.items() if c)


def resolve_preset(name: str, presets: dict[str, dict], preset: str, overrides: dict, extra=()) -> dict:
    """The hyper-parameters of ``presets[preset]`` with ``overrides`` applied.

    ``extra`` names hyper-parameters a preset leaves at the model's default but an override may set.

    Raises
    ------
    ValueError
        For an unknown preset, or an override naming no hyper-parameter of the preset nor of ``extra``
        (a typo would otherwise be silently ignored).
    """
    if preset not in presets:
        raise ValueError(f"{name}: unknown preset {preset!r}; choose one of {sorted(presets)}")
    cfg = dict(presets[preset])
    allowed = set(cfg) | set(extra)
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        hint = did_you_mean(unknown, allowed)
        raise ValueError(f"{name}: unknown override(s) {unknown}{hint}; the {preset!r} preset has {sorted(allowed)}")
    cfg.update(overrides)
    return cfg


def register_preset_model(
    name: str, model_cls, presets: dict[str, dict], *, prepare=None, extra=(), defaults=None, execution=()
):
    """Register the builder of ``model_cls`` from a preset table and return it.

    The builder resolves ``presets[preset]`` with the overrides (:func:`resolve_preset`), lets
    ``prepare(cfg, in_channels, out_channels, nlat, nlon, grid)`` turn the preset's entries into
    constructor arguments when given (e.g. a width matched to the grid), and returns
    ``model_cls(in_channels, out_channels, nlat, nlon, grid, **cfg)``.

    ``defaults`` maps the network-shaping ``extra`` keys to the constructor's defaults, and ``execution`` names the
    keys that do not change the network (kernels, checkpointing): :func:`resolved_hyperparameters` records the first
    (so a preset that later sets one is noticed) and :func:`execution_keys` lets comparisons of two networks leave the
    second out.
    """

    def build(preset="small", in_channels=16, out_channels=4, nlat=32, nlon=64, grid="equiangular", **overrides):
        cfg = resolve_preset(name, presets, preset, overrides, extra)
        if prepare is not None:
            cfg = prepare(cfg, in_channels, out_channels, nlat, nlon, grid)
        return model_cls(in_channels, out_channels, nlat, nlon, grid, **cfg)

    _PRESET_TABLES[name] = (presets, tuple(extra))
    _RECORDING[name] = (dict(defaults or {}), tuple(execution))
    build.__name__ = build.__qualname__ = f"build_{name}"
    build.__module__ = model_cls.__module__
    build.__doc__ = (
        f"Build :class:`{model_cls.__name__}` ({name!r}) from a preset and overrides of its keys.\n\n"
        "Raises ValueError for an unknown preset or override, and the errors of the model's constructor."
    )
    return register_model(name)(build)


def preset_keys(name: str) -> tuple[list[str], list[str]]:
    """The hyper-parameters a model's overrides may set: ``(keys its presets set, extra keys)``, each sorted.

    The first list is the union over the presets of ``name`` (what ``configs/model/<name>.yaml`` lists, a test
    keeps the two equal); the second the keys the presets leave at the constructor's default.

    Raises
    ------
    ValueError
        For a name not registered through :func:`register_preset_model`.
    """
    _load_all()
    if name not in _PRESET_TABLES:
        raise ValueError(f"{name!r} has no preset table; models with one: {sorted(_PRESET_TABLES)}")
    presets, extra = _PRESET_TABLES[name]
    keys = sorted({k for table in presets.values() for k in table})
    return keys, sorted(set(extra) - set(keys))


def _sequences_as_lists(cfg: dict) -> dict:
    """``cfg`` with tuple (or list) values as lists: the form a checkpoint stores and compares."""
    return {k: list(v) if isinstance(v, (tuple, list)) else v for k, v in cfg.items()}


def resolved_hyperparameters(name: str, preset: str, overrides: dict | None = None) -> dict | None:
    """The hyper-parameters ``build_model(name, preset, **overrides)`` builds with: the network defaults the model was
    registered with, then ``presets[preset]`` with the overrides applied (:func:`resolve_preset`), sequences as
    lists. A checkpoint records them
    (:func:`dandelion.training.inputs.model_spec`), so that a later change of a preset does not change the network it
    rebuilds (:func:`dandelion.checkpoint.model_from_checkpoint`). None for a model registered without a preset table
    (:func:`register_model` alone), whose builder takes what it is given.

    Raises
    ------
    ValueError
        For an unknown preset or override (:func:`resolve_preset`).
    """
    _load_for(name)
    if name not in _PRESET_TABLES:
        return None
    presets, extra = _PRESET_TABLES[name]
    cfg = {**_RECORDING[name][0], **resolve_preset(name, presets, preset, dict(overrides or {}), extra)}
    return _sequences_as_lists(cfg)


def complete_hyperparameters(name: str, recorded: dict) -> dict:
    """``recorded`` (hyper-parameters a checkpoint holds) completed with ``name``'s network defaults for the keys it
    lacks (a record written before a default was listed), sequences as lists; ``recorded`` as it is for a model
    without a preset table."""
    _load_for(name)
    cfg = {**_RECORDING.get(name, ({}, ()))[0], **dict(recorded)}
    return _sequences_as_lists(cfg)


def execution_keys(name: str) -> tuple[str, ...]:
    """The keys of ``name``'s hyper-parameters that do not change its network (kernel choices, checkpointing), as
    registered (:func:`register_preset_model`); empty for a model without a preset table."""
    _load_for(name)
    return _RECORDING.get(name, ({}, ()))[1]


def _load_all():
    for mod in _MODEL_MODULES:
        _import(mod)


def _load_for(name: str) -> None:
    """Import the model modules in order until ``name`` is registered (all of them for a name none registers):
    building Dandelion imports no baseline, whose torch-harmonics example models import torch's compiler stack
    (``torch._dynamo``, ``torch._inductor``: about 170 MB resident, docs/jobs/export.md)."""
    for mod in _MODEL_MODULES:
        if name in _REGISTRY:
            return
        _import(mod)


def _import(mod: str) -> None:
    try:
        importlib.import_module(mod)
    except ModuleNotFoundError as err:  # a module of the list not written yet
        if err.name != mod:
            raise


def available_models() -> list[str]:
    """Names accepted by :func:`build_model`."""
    _load_all()
    return sorted(_REGISTRY)


def build_model(
    name: str,
    preset: str = "small",
    in_channels: int = 16,
    out_channels: int = 4,
    nlat: int = 32,
    nlon: int = 64,
    grid: str = "equiangular",
    **overrides,
) -> nn.Module:
    """Build a registered model.

    Parameters
    ----------
    name : str
        ``"dandelion"``, ``"sfno"``, ``"disco"``, ``"flower2d"`` (see :func:`available_models`).
    preset : str
        ``"paper"``, ``"small"`` or ``"tiny"``.
    in_channels, out_channels : int
        Channels of the input ``(B, in_channels, nlat, nlon)`` (frames folded into channels) and output.
    nlat, nlon, grid :
        The data grid (torch-harmonics grid name).
    **overrides :
        Preset hyper-parameters to replace.

    Raises
    ------
    ValueError
        For an unknown model name or preset.
    """
    _load_for(name)
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}: choose one of {sorted(_REGISTRY)}")
    return _REGISTRY[name](
        preset=preset, in_channels=in_channels, out_channels=out_channels, nlat=nlat, nlon=nlon, grid=grid, **overrides
    )


def count_parameters(model: nn.Module) -> int:
    """Number of trainable REAL scalars of ``model``: a complex parameter counts twice.

    The one parameter count of the package (speed tables, training results, parameter-matched
    presets): SFNO's spectral weights are complex, and counting them once (``numel``) would
    understate its size by almost half next to real-valued models.
    """
    return int(sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters() if p.requires_grad))


def unwrap_model(model: nn.Module) -> nn.Module:
    """The bare model inside training wrappers, for saving and loading state_dicts.

    Strips, repeatedly and in any order: ``DistributedDataParallel`` / ``DataParallel`` (and any
    wrapper exposing the wrapped model as ``.module``), ``torch.compile``'s ``OptimizedModule``
    (``._orig_mod``) and an ``nn.Sequential`` holding exactly one module. The returned module shares
    its parameters with ``model``, so ``unwrap_model(m).state_dict()`` has the bare keys (no
    ``module.``, ``_orig_mod.`` or ``0.`` prefixes) and ``unwrap_model(m).load_state_dict(sd)`` loads
    into the wrapped model too.
    """
    while True:
        if isinstance(getattr(model, "_orig_mod", None), nn.Module):
            model = model._orig_mod
        elif isinstance(getattr(model, "module", None), nn.Module):
            model = model.module
        elif isinstance(model, nn.Sequential) and len(model) == 1:
            model = model[0]
        else:
            return model


def unwrap_state_dict(state_dict: dict) -> dict:
    """A state_dict with the wrapper prefixes ``module.`` and ``_orig_mod.`` removed from every key.

    For state_dicts saved from a wrapped model (DDP, ``torch.compile``) without :func:`unwrap_model`.
    """
    out = {}
    for key, value in state_dict.items():
        changed = True
        while changed:
            changed = False
            for prefix in ("module.", "_orig_mod."):
                if key.startswith(prefix):
                    key, changed = key[len(prefix) :], True
        out[key] = value
    return out


def import_plugins(plugins) -> None:
    """Import modules that register more models (the ``plugins=[module, ...]`` option of the jobs).

    Raises
    ------
    ModuleNotFoundError
        If a module cannot be found (check its name and that its folder is on ``PYTHONPATH``).
    """
    for mod in plugins or []:
        importlib.import_module(str(mod))
