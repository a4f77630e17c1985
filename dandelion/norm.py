"""Area-weighted normalisation on the sphere.

Statistics are integrals over the sphere with the grid's quadrature weights (DESIGN.md §2, §4),
so the same weights mean the same thing on every grid and resolution (a plain mean over grid
nodes would over-weight the crowded polar rows of a latitude-longitude grid).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from .sphere import SphereGrid

__all__ = ["AreaNormS2"]


class AreaNormS2(nn.Module):
    """Group normalisation with area-weighted statistics.

    For each sample and group of channels, ``mean = (1/(4 pi |G|)) sum_{c in G} int x_c dA`` and
    ``var`` likewise of ``(x - mean)^2``; returns ``(x - mean) / sqrt(var + eps) * gamma + beta``
    with per-channel ``gamma`` (init 1) and ``beta`` (init 0). ``groups=1`` normalises over all
    channels and the sphere.

    Parameters
    ----------
    grid : SphereGrid
        Grid of the input; its quadrature weights (``(nlat, 1)``, summing to 4*pi) are stored
        once as a float32 non-persistent buffer ``row_weights (nlat,)`` divided by 4*pi.
    channels : int
    groups : int
        Must divide ``channels``.
    eps : float

    Shapes: ``(B, channels, nlat, nlon) -> (B, channels, nlat, nlon)``.
    """

    def __init__(self, grid: SphereGrid, channels: int, groups: int = 1, eps: float = 1e-5):
        super().__init__()
        if channels % groups:
            raise ValueError(f"channels={channels} must divide by groups={groups}")
        self.channels, self.groups, self.eps = channels, groups, eps
        # the weights include 2*pi/nlon, so summing over longitude then rows integrates
        self.register_buffer("row_weights", (grid.weights[:, 0] / (4 * math.pi)).to(torch.float32), persistent=False)
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def extra_repr(self) -> str:
        return f"channels={self.channels}, groups={self.groups}, eps={self.eps}"

    def _integral(self, x: torch.Tensor) -> torch.Tensor:
        # (B, C, nlat, nlon) -> (B, C): normalised area integral
        return torch.matmul(x.sum(-1), self.row_weights.to(x.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x (B, channels, nlat, nlon)``; statistics in float32 at least (also under autocast)."""
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self._forward(x.to(torch.promote_types(x.dtype, torch.float32)))

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c = x.shape[:2]
        g = self.groups
        mean = self._integral(x).reshape(b, g, -1).mean(-1, keepdim=True)  # (B, G, 1)
        mean = mean.expand(b, g, c // g).reshape(b, c, 1, 1)
        d = x - mean
        var = self._integral(d * d).reshape(b, g, -1).mean(-1, keepdim=True)
        scale = torch.rsqrt(var + self.eps).expand(b, g, c // g).reshape(b, c) * self.weight
        return torch.addcmul(self.bias[:, None, None], d, scale[:, :, None, None])
