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

With ``anchors = K > 0`` the matrices are smooth in the degree: ``W_l = sum_k h_k(l) A_k``, with ``K`` anchor
matrices ``A_k`` at the degrees ``l_k = k (lmax - 1) / (K - 1)`` and the piecewise-linear hat functions ``h_k``
(linear interpolation between neighbouring anchors). A degree the data barely excite then shares its weights with
its neighbours instead of being moved by noise at the optimiser's full rate (docs/model.md, "Spectral path").

The weights are resolution-free: ``weight`` has ``lmax`` rows (``K`` with anchors) whatever the grid; on a grid that
resolves fewer degrees (:func:`dandelion.spectral_pooling.pooling_band_limit`) the first ones are used, on a finer
grid the degrees ``>= lmax`` get no path (the fixed-``lmax`` convention of SFNO). The transforms are
torch-harmonics' ``RealSHT`` / ``InverseRealSHT`` (orthonormal), used through their public forward (they cast their
float64 Legendre tables to the input's dtype on each call), run in float32 under autocast.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn as nn
from torch_harmonics import InverseRealSHT, RealSHT

from .spectral_pooling import pooling_band_limit
from .sphere import SphereGrid

__all__ = ["DegreeMixS2", "SPECTRAL_INTO", "SPECTRAL_FROM", "spectral_path"]

#: Where the path's output goes: ``"head"``, added to the features entering the head's area norm (the norm bounds
#: what the path contributes); ``"output"``, added to the network's output (a linear map from input to output, which
#: made the autoregressive rollouts diverge: docs/model.md, "Spectral path").
SPECTRAL_INTO = ("head", "output")
#: What the path reads: ``"input"``, the network's input; ``"lift"``, the lifted features (level-0 width), so the
#: path's size does not grow with the input channels (164 on Held-Suarez against 16 on Galewsky).
SPECTRAL_FROM = ("input", "lift")


def spectral_path(grid, in_channels, width, out_channels, lmax, into="head", source="input", anchors=0):
    """Dandelion's spectral path (:class:`DegreeMixS2`) for its options, or None when ``lmax`` is 0.

    ``in_channels``, ``width`` and ``out_channels`` are the network's input channels, level-0 width and output
    channels; ``into`` is one of :data:`SPECTRAL_INTO`, ``source`` one of :data:`SPECTRAL_FROM`.

    Raises
    ------
    ValueError
        If ``lmax`` is not a non-negative integer, ``into`` or ``source`` is not one of the choices, or
        :class:`DegreeMixS2` rejects the sizes.
    """
    if isinstance(lmax, bool) or not isinstance(lmax, numbers.Integral) or lmax < 0:
        raise ValueError(f"spectral_lmax must be a non-negative integer (0: no spectral path), got {lmax!r}")
    if into not in SPECTRAL_INTO:
        raise ValueError(f"spectral_into={into!r}: choose one of {SPECTRAL_INTO}")
    if source not in SPECTRAL_FROM:
        raise ValueError(f"spectral_from={source!r}: choose one of {SPECTRAL_FROM}")
    if not lmax:
        return None
    n_in = width if source == "lift" else in_channels
    return DegreeMixS2(grid, n_in, width if into == "head" else out_channels, int(lmax), anchors=anchors)


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
    anchors : int
        0 (default): one free matrix per degree. ``K >= 2``: ``K`` anchor matrices, linearly interpolated in the
        degree (module docstring).

    Shapes: ``(B, in_channels, nlat, nlon) -> (B, out_channels, nlat, nlon)``.

    Raises
    ------
    ValueError
        If ``lmax``, ``in_channels`` or ``out_channels`` is below 1, or ``anchors`` is 1, negative or above ``lmax``.
    """

    def __init__(
        self,
        grid: SphereGrid,
        in_channels: int,
        out_channels: int,
        lmax: int,
        init_scale: float = 0.0,
        anchors: int = 0,
    ):
        super().__init__()
        if int(lmax) < 1 or int(in_channels) < 1 or int(out_channels) < 1:
            raise ValueError(f"lmax={lmax}, in_channels={in_channels} and out_channels={out_channels} must all be >= 1")
        if int(anchors) < 0 or int(anchors) == 1 or int(anchors) > int(lmax):
            raise ValueError(f"anchors={anchors}: use 0 (a matrix per degree) or 2..lmax={lmax} anchor matrices")
        self.anchors = int(anchors)
        self.grid, self.lmax = grid, int(lmax)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.band = min(self.lmax, pooling_band_limit(grid, grid))
        self.sht = RealSHT(grid.nlat, grid.nlon, lmax=self.band, mmax=self.band, grid=grid.grid)
        self.isht = InverseRealSHT(grid.nlat, grid.nlon, lmax=self.band, mmax=self.band, grid=grid.grid)
        rows = self.anchors or self.lmax
        self.weight = nn.Parameter(torch.randn(rows, self.out_channels, self.in_channels) * float(init_scale))
        if self.anchors:  # hat functions h_k(l) at the degrees 0..band-1: (band, K), each row sums to 1
            pos = torch.arange(self.band, dtype=torch.float64) * (self.anchors - 1) / max(self.lmax - 1, 1)
            hat = (1.0 - (pos[:, None] - torch.arange(self.anchors, dtype=torch.float64)[None, :]).abs()).clamp(min=0)
            self.register_buffer("interp", hat.to(torch.float32), persistent=False)

    def degree_weights(self) -> torch.Tensor:
        """The per-degree matrices ``W_l`` of the degrees the grid resolves: ``(band, out_channels, in_channels)``."""
        if self.anchors:
            return torch.einsum("lk,koi->loi", self.interp, self.weight)
        return self.weight[: self.band]

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels} -> {self.out_channels}, lmax={self.lmax} (transforms at {self.band}), "
            f"{f'{self.anchors} anchors, ' if self.anchors else ''}"
            f"{self.grid.nlat}x{self.grid.nlon} {self.grid.grid}"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x.float()
        with torch.autocast(device_type=x.device.type, enabled=False):
            coeffs = torch.view_as_real(self.sht(x))  # (B, in, L, M, 2)
            w = self.degree_weights().to(x.dtype)
            out = torch.einsum("bilmc,loi->bolmc", coeffs, w)
            return self.isht(torch.view_as_complex(out.contiguous()))
