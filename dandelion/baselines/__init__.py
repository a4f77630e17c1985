"""Baselines on the same footing as Dandelion (docs/ARCHITECTURE.md §5): SFNO, a DISCO U-Net and Flower2D.

Importing this package registers ``"sfno"``, ``"disco"`` and ``"flower2d"`` with
:func:`dandelion.build_model`. Every model maps ``(B, in_channels, nlat, nlon)`` to
``(B, out_channels, nlat, nlon)``, has presets ``"paper"``, ``"small"``, ``"tiny"`` matched in
parameter count to Dandelion's presets of the same name (see :func:`parameter_table`), a boolean
``resolution_dependent`` and the resolution guard of :mod:`dandelion.grid_guard`.
"""

from . import disco, flower2d, sfno
from .common import count_real_parameters
from .table import PRESET_RESOLUTIONS, parameter_count, parameter_table

__all__ = ["sfno", "disco", "flower2d", "count_real_parameters", "parameter_count", "parameter_table", "PRESET_RESOLUTIONS"]
