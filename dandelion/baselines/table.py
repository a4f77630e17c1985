"""Parameter-count tables of Dandelion and the baselines.

:func:`parameter_table` counts each preset at one resolution (``dandelion-bench target=models``);
:func:`parameter_table_per_grid` counts every preset on every grid of the leaderboard
(:data:`LEADERBOARD_GRIDS`), and ``python -m dandelion.baselines.table`` prints it with the ``paper`` presets
at 256x512 (:func:`all_presets_table`, :func:`format_parameter_table`). Counts are trainable real scalars,
complex parameters counted twice (:func:`dandelion.registry.count_parameters`).
"""

from __future__ import annotations

from ..registry import available_models, build_model
from .common import count_real_parameters

__all__ = [
    "BENCHMARK_MODELS",
    "PRESET_RESOLUTIONS",
    "LEADERBOARD_GRIDS",
    "parameter_count",
    "parameter_table",
    "parameter_table_per_grid",
    "format_parameter_table",
    "all_presets_table",
]

#: The models compared by the benchmark (plugins and test models registered elsewhere are not listed).
BENCHMARK_MODELS = ("dandelion", "dandelion_fast", "sfno", "disco", "flower2d", "s2transformer", "fno")

#: The resolution ``(nlat, nlon)`` at which each preset is defined and matched.
PRESET_RESOLUTIONS: dict[str, tuple[int, int]] = {"tiny": (32, 64), "small": (64, 128), "paper": (256, 512)}

#: The grids ``(nlat, nlon)`` of the leaderboard: every baseline preset is matched to Dandelion's on each.
LEADERBOARD_GRIDS: tuple[tuple[int, int], ...] = ((32, 64), (64, 128))

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


def parameter_table_per_grid(
    presets=("tiny", "small"),
    grids=LEADERBOARD_GRIDS,
    models: list[str] | None = None,
    grid: str = "equiangular",
    in_channels: int = 16,
    out_channels: int = 4,
) -> list[dict]:
    """:func:`parameter_table` rows of every preset on every grid (default: tiny and small on the leaderboard grids).

    Returns
    -------
    list of dict, grid by grid, then preset by preset: the keys of :func:`parameter_count` and
    ``ratio_to_dandelion`` (Dandelion's count of the same preset on the same grid).
    """
    rows = []
    for nlat, nlon in grids:
        for preset in presets:
            rows += parameter_table({preset: (int(nlat), int(nlon))}, models, grid, in_channels, out_channels)
    return rows


def format_parameter_table(rows: list[dict]) -> str:
    """Plain-text table of :func:`parameter_table` rows: grid, preset, model, count, ratio to Dandelion."""
    lines = [f"{'grid':>9}  {'preset':<7} {'model':<14} {'parameters':>12}  {'/ dandelion':>11}"]
    for r in rows:
        ratio = "" if r.get("ratio_to_dandelion") is None else f"{r['ratio_to_dandelion']:.3f}"
        grid = f"{r['nlat']}x{r['nlon']}"
        lines.append(f"{grid:>9}  {r['preset']:<7} {r['model']:<14} {r['n_parameters']:>12,}  {ratio:>11}")
    return "\n".join(lines)


def all_presets_table() -> list[dict]:
    """Rows of every preset: ``tiny`` and ``small`` on each leaderboard grid, ``paper`` at its own 256x512."""
    paper = {"paper": PRESET_RESOLUTIONS["paper"]}
    return parameter_table_per_grid() + parameter_table(paper)


if __name__ == "__main__":  # python -m dandelion.baselines.table
    print(format_parameter_table(all_presets_table()))
