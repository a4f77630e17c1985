"""Parameter-count table of Dandelion and the baselines (printed by ``dandelion-bench target=models``)."""

from __future__ import annotations

from ..registry import available_models, build_model
from .common import count_real_parameters

__all__ = ["BENCHMARK_MODELS", "PRESET_RESOLUTIONS", "parameter_count", "parameter_table"]

#: The models compared by the benchmark (plugins and test models registered elsewhere are not listed).
BENCHMARK_MODELS = ("dandelion", "sfno", "disco", "flower2d")

#: The resolution ``(nlat, nlon)`` at which each preset is defined and matched.
PRESET_RESOLUTIONS: dict[str, tuple[int, int]] = {"tiny": (32, 64), "small": (64, 128), "paper": (256, 512)}

# Cheap grid used first: a resolution-free model's count is the same on every grid.
_PROBE = (32, 64)


def parameter_count(
    name: str,
    preset: str,
    nlat: int,
    nlon: int,
    grid: str = "equiangular",
    in_channels: int = 16,
    out_channels: int = 4,
) -> dict:
    """Parameter count of one model and preset on one grid.

    The model is first built on a cheap 32x64 grid; if it is not ``resolution_dependent`` that
    count holds at every resolution (weight shapes do not depend on the grid), otherwise it is built
    again at ``(nlat, nlon)``. Complex parameters count as two real scalars.

    Returns
    -------
    dict with ``model``, ``preset``, ``nlat``, ``nlon``, ``grid``, ``n_parameters`` (real scalars),
    ``n_parameters_numel`` (``numel`` sum, complex counted once) and ``resolution_dependent``.
    """
    model = build_model(name, preset, in_channels, out_channels, *_PROBE, grid)
    if getattr(model, "resolution_dependent", True) and (nlat, nlon) != _PROBE:
        model = build_model(name, preset, in_channels, out_channels, nlat, nlon, grid)
    return {
        "model": name,
        "preset": preset,
        "nlat": int(nlat),
        "nlon": int(nlon),
        "grid": grid,
        "n_parameters": count_real_parameters(model),
        "n_parameters_numel": int(sum(p.numel() for p in model.parameters() if p.requires_grad)),
        "resolution_dependent": bool(getattr(model, "resolution_dependent", True)),
    }


def parameter_table(
    resolutions: dict[str, tuple[int, int]] | None = None,
    models: list[str] | None = None,
    grid: str = "equiangular",
    in_channels: int = 16,
    out_channels: int = 4,
) -> list[dict]:
    """Parameter counts of every model and preset, with the ratio to Dandelion's preset.

    Parameters
    ----------
    resolutions : dict preset -> (nlat, nlon), optional
        Where to count each preset; default :data:`PRESET_RESOLUTIONS` (each preset's own resolution).
    models : list of str, optional
        Registered model names; default :data:`BENCHMARK_MODELS` (those of them that are registered).
    grid, in_channels, out_channels :
        Grid type and channel layout (default Galewsky's: 16 in, 4 out).

    Returns
    -------
    list of dict, one row per (model, preset): the keys of :func:`parameter_count` plus
    ``ratio_to_dandelion`` (None when Dandelion is not registered).
    """
    resolutions = dict(PRESET_RESOLUTIONS if resolutions is None else resolutions)
    names = [n for n in BENCHMARK_MODELS if n in available_models()] if models is None else list(models)
    if "dandelion" in names:
        names = ["dandelion"] + [n for n in names if n != "dandelion"]
    rows = []
    for preset, (nlat, nlon) in resolutions.items():
        ref = None
        if "dandelion" in available_models():
            ref = parameter_count("dandelion", preset, nlat, nlon, grid, in_channels, out_channels)["n_parameters"]
        for name in names:
            row = parameter_count(name, preset, nlat, nlon, grid, in_channels, out_channels)
            row["ratio_to_dandelion"] = None if ref is None else row["n_parameters"] / ref
            rows.append(row)
    return rows
