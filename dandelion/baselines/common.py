"""Pieces shared by the baselines: preset tables, grid checks, the common model interface, position channels, norms."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ..grid_guard import GridGuard
from ..registry import count_parameters as count_real_parameters  # the package's one count (real scalars)
from ..registry import resolve_preset
from ..sphere import GRIDS, SphereGrid

__all__ = [
    "resolve_preset",
    "preset_table",
    "count_real_parameters",
    "check_grid_args",
    "BaselineModel",
    "PositionChannels",
    "group_norm",
]


def preset_table(shared: dict, **presets: dict) -> dict[str, dict]:
    """A preset table: every preset holds the ``shared`` hyper-parameters and its own entries.

    ``preset_table(dict(a=1), tiny=dict(b=2))`` is ``{"tiny": {"a": 1, "b": 2}}``; a preset's own entry
    replaces a shared one of the same name.
    """
    return {name: {**shared, **own} for name, own in presets.items()}


def check_grid_args(
    name: str,
    in_channels: int,
    out_channels: int,
    nlat: int,
    nlon: int,
    grid: str,
    nlon_divisor: int = 1,
    nlat_min: int = 4,
    nlon_reason: str | None = None,
) -> None:
    """Validate the common builder arguments; ValueError naming the bad value and the fix. ``nlon_reason`` says
    where ``nlon_divisor`` comes from and how to change it (``"2**(levels-1) for 3 levels: use fewer levels or
    another nlon"``); without it the message asks for another nlon."""
    if grid not in GRIDS:
        raise ValueError(f"{name}: unknown grid {grid!r}; use one of {GRIDS}")
    if int(in_channels) < 1 or int(out_channels) < 1:
        raise ValueError(f"{name}: in_channels={in_channels} and out_channels={out_channels} must be >= 1")
    if int(nlat) < nlat_min:
        raise ValueError(
            f"{name}: nlat={nlat} is too small: this preset needs nlat >= {nlat_min} (fewer levels, or a finer grid)"
        )
    if int(nlon) < 1 or nlon % nlon_divisor != 0:
        raise ValueError(
            f"{name}: nlon={nlon} must be a positive multiple of {nlon_divisor} ({nlon_reason or 'use another nlon'})"
        )


class PositionChannels(nn.Module):
    """Appends the unit position vector ``(x, y, z)`` of every grid node as 3 input channels.

    The same coordinates Dandelion's lift uses (docs/ARCHITECTURE.md §5), so no model has to infer latitude
    (Coriolis) from the data. A non-persistent float32 buffer of shape ``(1, 3, nlat, nlon)``.

    Forward: ``(B, C, nlat, nlon) -> (B, C + 3, nlat, nlon)``; raises ValueError for another grid shape.
    """

    def __init__(self, nlat: int, nlon: int, grid: str):
        super().__init__()
        xyz = SphereGrid(nlat, nlon, grid).xyz.to(torch.float32)[None]
        self.register_buffer("xyz", xyz, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape[-2:]) != tuple(self.xyz.shape[-2:]):
            raise ValueError(
                f"input grid {tuple(x.shape[-2:])} differs from the model's (nlat, nlon) = "
                f"{tuple(self.xyz.shape[-2:])}: "
                "build the model at the data's resolution"
            )
        return torch.cat([x, self.xyz.to(x.dtype).expand(x.shape[0], -1, -1, -1)], dim=1)


class BaselineModel(GridGuard, nn.Module):
    """The common interface of the baselines: ``(B, in_channels, nlat, nlon) -> (B, out_channels, nlat, nlon)``.

    A subclass sets ``model_name`` (the registry name, prefixed to its error messages), calls
    :meth:`init_interface` first in ``__init__`` and :meth:`prepare_input` first in ``forward``.
    """

    model_name = "baseline"

    def init_interface(
        self, in_channels: int, out_channels: int, nlat: int, nlon: int, grid: str, position_channels: bool, **limits
    ) -> int:
        """Check the grid arguments (``limits``: ``nlon_divisor``, ``nlat_min``, ``nlon_reason`` of
        :func:`check_grid_args`), record the grid (:mod:`dandelion.grid_guard`) and the channels, and add the
        :class:`PositionChannels` module as ``self.position`` (None without ``position_channels``).

        Returns the channel count the network receives: ``in_channels`` plus 3 with position channels.
        """
        check_grid_args(self.model_name, in_channels, out_channels, nlat, nlon, grid, **limits)
        self.init_grid_guard(nlat, nlon, grid)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.position = PositionChannels(nlat, nlon, grid) if position_channels else None
        return self.in_channels + (3 if position_channels else 0)

    def prepare_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` checked against ``(B, in_channels, nlat, nlon)`` (ValueError otherwise), position channels appended."""
        nlat, nlon = self.grid_spec["nlat"], self.grid_spec["nlon"]
        if x.dim() != 4 or x.shape[1] != self.in_channels or tuple(x.shape[-2:]) != (nlat, nlon):
            raise ValueError(
                f"{self.model_name}: expected input (B, {self.in_channels}, {nlat}, {nlon}), got {tuple(x.shape)}"
            )
        return x if self.position is None else self.position(x)

    def _on_cuda(self) -> bool:
        return any(p.is_cuda for p in self.parameters())


def group_norm(channels: int, max_groups: int = 8) -> nn.GroupNorm:
    """``nn.GroupNorm`` with the largest group count <= ``max_groups`` that divides ``channels``."""
    groups = math.gcd(channels, max_groups)
    return nn.GroupNorm(groups, channels)
