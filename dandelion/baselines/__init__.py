"""Baselines on the same footing as Dandelion (docs/ARCHITECTURE.md §5).

Importing this package registers ``"sfno"`` (Bonev et al. 2023), ``"disco"`` (a DISCO U-Net),
``"flower2d"`` (planar Flower), ``"s2transformer"`` (neighbourhood attention on the sphere, Bonev et
al. 2025) and ``"fno"`` (planar FNO, Li et al. 2021) with :func:`dandelion.build_model`. Every model maps
``(B, in_channels, nlat, nlon)`` to ``(B, out_channels, nlat, nlon)``, has presets ``"paper"``,
``"small"``, ``"tiny"`` matched in parameter count to Dandelion's presets of the same name on every grid
(see :func:`parameter_table` and :func:`parameter_table_per_grid`), a boolean ``resolution_dependent``
and the resolution guard of :mod:`dandelion.grid_guard`.
"""

from . import disco, flower2d, fno, s2transformer, sfno
from .common import count_real_parameters

# The table's names are read from .table on first use (PEP 562) rather than imported here: `python -m
# dandelion.baselines.table` runs that module, and a package that imported it first makes runpy warn.
_TABLE_NAMES = (
    "LEADERBOARD_GRIDS",
    "PRESET_RESOLUTIONS",
    "format_parameter_table",
    "parameter_count",
    "parameter_table",
    "parameter_table_per_grid",
)


def __getattr__(name: str):
    if name in _TABLE_NAMES:
        from . import table

        return getattr(table, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "sfno",
    "disco",
    "flower2d",
    "s2transformer",
    "fno",
    "count_real_parameters",
    "parameter_count",
    "parameter_table",
    "parameter_table_per_grid",
    "format_parameter_table",
    "PRESET_RESOLUTIONS",
    "LEADERBOARD_GRIDS",
]
