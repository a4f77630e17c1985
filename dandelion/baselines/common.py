"""Pieces shared by the baselines: preset lookup, parameter counting, position channels, norms."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ..registry import count_parameters as count_real_parameters  # the package's one count (real scalars)
from ..sphere import GRIDS, SphereGrid

__all__ = ["resolve_preset", "count_real_parameters", "check_grid_args", "PositionChannels", "group_norm"]


def resolve_preset(name: str, presets: dict[str, dict], preset: str, overrides: dict) -> dict:
    """The hyper-parameters of ``presets[preset]`` with ``overrides`` applied.

    Raises
    ------
    ValueError
        For an unknown preset, or an override naming no hyper-parameter of the preset (a typo would
        otherwise be silently ignored).
    """
    if preset not in presets:
        raise ValueError(f"{name}: unknown preset {preset!r}; choose one of {sorted(presets)}")
    cfg = dict(presets[preset])
    unknown = sorted(set(overrides) - set(cfg))
    if unknown:
        raise ValueError(f"{name}: unknown override(s) {unknown}; the {preset!r} preset has {sorted(cfg)}")
    cfg.update(overrides)
    return cfg


def check_grid_args(
    name: str,
    in_channels: int,
    out_channels: int,
    nlat: int,
    nlon: int,
    grid: str,
    nlon_divisor: int = 1,
    nlat_min: int = 4,
) -> None:
    """Validate the common builder arguments; ValueError naming the bad value and the fix."""
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
            f"{name}: nlon={nlon} must be a positive multiple of {nlon_divisor} (2**(levels-1)); "
            "use fewer levels or another nlon"
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


def group_norm(channels: int, max_groups: int = 8) -> nn.GroupNorm:
    """``nn.GroupNorm`` with the largest group count <= ``max_groups`` that divides ``channels``."""
    groups = math.gcd(channels, max_groups)
    return nn.GroupNorm(groups, channels)
