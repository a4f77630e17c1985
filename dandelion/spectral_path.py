"""A per-degree linear map in the spherical-harmonic domain: Dandelion's isotropic spectral path.

docs/model.md ("Spectral path"). The map is

    y_lm^o = sum_i W_l^{oi} x_lm^i,    l < L, |m| <= l,

one real ``(out_channels, in_channels)`` matrix per degree ``l``, shared by every order ``m``. A linear map
of fields that commutes with every rotation of the sphere acts on each degree by one such matrix (Schur's
lemma; for a convolution with a zonal kernel this is the convolution theorem of Driscoll and Healy 1994,
Theorem 1), so these are the isotropic linear operators. SFNO (Bonev et al. 2023, arXiv:2306.03838) has them
by construction: its spectral convolution multiplies the coefficients by a matrix per degree, or per degree and
order. The warps of Dandelion cannot represent such an operator with few layers: they move features along
great circles, they do not filter them by scale.

The weights are resolution-free: ``weight`` has ``lmax`` rows whatever the grid; on a grid that
resolves fewer degrees (:func:`dandelion.pooling.pooling_band_limit`) the first ones are used, on a finer
grid the degrees ``>= lmax`` get no path (the fixed-``lmax`` convention of SFNO). The transforms are
torch-harmonics' ``RealSHT`` / ``InverseRealSHT`` (orthonormal), run in float32 under autocast.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch_harmonics import InverseRealSHT, RealSHT

from .pooling import pooling_band_limit
from .sphere import SphereGrid

__all__ = ["DegreeMixS2"]


class DegreeMixS2(nn.Module):
    """Per-degree channel mixing ``isht(W_l sht(x))`` on one grid, zero at initialisation.

    Parameters
    ----------
    grid : SphereGrid
        The grid of the input and output fields.
    in_channels, out_channels : int
    lmax : int
        Degrees with a weight (exclusive), independent of the grid; the transforms use
        ``min(lmax, pooling_band_limit(grid, grid))`` of them.
    init_scale : float
        Standard deviation of the initial weights; 0 (the default) starts the path at zero, so a
        model with the path computes at initialisation what it computes without it.

    Shapes: ``(B, in_channels, nlat, nlon) -> (B, out_channels, nlat, nlon)``.

    Raises
    ------
    ValueError
        If ``lmax``, ``in_channels`` or ``out_channels`` is below 1.
    """

    def __init__(self, grid: SphereGrid, in_channels: int, out_channels: int, lmax: int, init_scale: float = 0.0):
        super().__init__()
        if int(lmax) < 1 or int(in_channels) < 1 or int(out_channels) < 1:
            raise ValueError(f"lmax={lmax}, in_channels={in_channels} and out_channels={out_channels} must all be >= 1")
        self.grid, self.lmax = grid, int(lmax)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.band = min(self.lmax, pooling_band_limit(grid, grid))
        self.sht = RealSHT(grid.nlat, grid.nlon, lmax=self.band, mmax=self.band, grid=grid.grid)
        self.isht = InverseRealSHT(grid.nlat, grid.nlon, lmax=self.band, mmax=self.band, grid=grid.grid)
        self.sht.weights = self.sht.weights.to(torch.float32)  # float64 tables cast once (as in pooling.py)
        self.isht.pct = self.isht.pct.to(torch.float32)
        self.weight = nn.Parameter(torch.randn(self.lmax, self.out_channels, self.in_channels) * float(init_scale))

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels} -> {self.out_channels}, lmax={self.lmax} (transforms at {self.band}), "
            f"{self.grid.nlat}x{self.grid.nlon} {self.grid.grid}"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x.float()
        with torch.autocast(device_type=x.device.type, enabled=False):
            coeffs = torch.view_as_real(self.sht(x))  # (B, in, L, M, 2)
            w = self.weight[: self.band].to(x.dtype)
            out = torch.einsum("bilmc,loi->bolmc", coeffs, w)
            return self.isht(torch.view_as_complex(out.contiguous()))
