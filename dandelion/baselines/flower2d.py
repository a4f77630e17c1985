"""Flower2D baseline: the planar Flower U-Net applied to the latitude-longitude image.

Written from the description in Muser, Spitzer, Lassas, de Hoop, Dokmanić 2026, "Flowers: A Warp
Drive for Neural PDE Solvers" (ICML; arXiv:2603.04430), Fig. 1 and Sec. 3: a multi-head self-warp
layer computes, at every pixel ``x``, per head ``h`` a value ``v_h(x)`` by a pointwise affine map of
the input and a displacement ``rho_h(x)`` by a small pointwise MLP, and returns ``v_h`` sampled
(bilinearly) at ``x + rho_h(x)``; heads are concatenated. Warps sit in pre-norm residual blocks with
group normalisation inside a U-Net whose only spatial convolutions are the 2x2 strided convolutions
(down) and 2x2 transposed convolutions (up) of the multiscale scaffold.

The sphere is treated as a plane (the point of this baseline):

* displacements live in the lat-lon image, in NORMALISED image coordinates of the current level
  (``grid_sample``'s ``align_corners=True`` convention): ``rho = (rho_lon, rho_lat)`` with
  ``rho_lon = 2`` one full turn in longitude (``2 pi``) and ``rho_lat = 2`` the distance from the
  first to the last row; the same weights therefore mean the same displacement at every resolution;
* sampling is periodic in longitude (the column index is taken modulo ``nlon`` and one wrapped column
  is appended) and zero-padded beyond the first and last rows (``padding_mode="zeros"``): no
  pole-crossing, as in a planar model;
* levels halve rows and columns; an odd row count is zero-padded by one row before the strided
  convolution and the extra row is cropped after the transposed one, so odd grids work.

Block: ``x + W(GELU(SelfWarp(GroupNorm(x))))`` with a 1x1 ``W``: Dandelion's block with the planar
warp. The scaffold (lift MLP with the unit position vector ``(x, y, z)`` appended to the input, blocks
per level, skip fusion, head MLP) and the displacement initialisation (heads spread over directions,
1 to 3 grid spacings) mirror :mod:`dandelion.model`, so the comparison isolates the warp geometry
and the pooling.
Weights do not depend on the grid: ``resolution_dependent = False``.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..registry import register_preset_model
from .common import BaselineModel, group_norm, preset_table

__all__ = ["Flower2D", "SelfWarp2d", "FLOWER2D_PRESETS"]

#: Presets: Dandelion's scaffold (levels, blocks per level, offset_ratio) with width/heads adjusted to
#: match its parameter count (16 in, 4 out; resolution-free; paper keeps Dandelion's 3 channels per
#: head): tiny 6,508 vs 7,023; small 149,862 vs 147,319; paper 18,985,300 vs 18,840,055 (Dandelion
#: presets with advected persistence).
FLOWER2D_PRESETS: dict[str, dict] = preset_table(
    dict(position_channels=True),
    tiny=dict(width=12, multipliers=(1, 2), heads=4, encoder_blocks=(1, 1), decoder_blocks=(1,), offset_ratio=1.0),
    small=dict(
        width=27, multipliers=(1, 2, 4), heads=9, encoder_blocks=(1, 1, 2), decoder_blocks=(1, 1), offset_ratio=0.5
    ),
    paper=dict(
        width=132,
        multipliers=(1, 2, 4, 8),
        heads=44,
        encoder_blocks=(2, 2, 2, 3),
        decoder_blocks=(2, 2, 2),
        offset_ratio=0.5,
    ),
)


class SelfWarp2d(nn.Module):
    """Multi-head planar self-warp on a lat-lon image.

    ``(B, C, nlat, nlon) -> (B, C, nlat, nlon)``: per head a pointwise affine value map
    (``C -> C / heads``, one ``C -> C`` map split by heads) and a displacement ``(rho_lon, rho_lat)``
    from a shared pointwise MLP ``C -> hidden -> GELU -> 2 * heads``; the values are sampled at the
    displaced points with one ``grid_sample`` call (heads folded into the batch), periodic in
    longitude, zero outside the first and last rows.

    Parameters
    ----------
    channels, heads, hidden : int
        ``channels`` must divide by ``heads``.
    init_shape : (nlat, nlon) or None
        Grid used only to initialise the displacements as Dandelion's warp does: head ``h`` starts
        ``1 + h % 3`` grid spacings away in direction ``2 pi h / heads`` (last MLP layer's weights
        scaled by 0.1). None: all displacements start at zero (the identity).

    Raises
    ------
    ValueError
        If ``channels`` is not divisible by ``heads``.
    """

    def __init__(self, channels: int, heads: int, hidden: int, init_shape: tuple[int, int] | None = None):
        super().__init__()
        if channels % heads != 0:
            raise ValueError(f"flower2d: channels={channels} must be divisible by heads={heads}")
        self.heads = heads
        self.value = nn.Conv2d(channels, channels, 1)
        self.disp = nn.Sequential(nn.Conv2d(channels, hidden, 1), nn.GELU(), nn.Conv2d(hidden, 2 * heads, 1))
        last = self.disp[-1]
        with torch.no_grad():
            if init_shape is None:
                last.weight.zero_()
                last.bias.zero_()
            else:
                nlat, nlon = init_shape
                last.weight.mul_(0.1)
                h = torch.arange(heads, dtype=torch.float64)
                ang, rad = 2 * math.pi * h / heads, 1.0 + h % 3  # in grid spacings
                d_lon = rad * torch.cos(ang) * (2.0 / nlon)
                d_lat = rad * torch.sin(ang) * (2.0 / max(nlat - 1, 1))
                last.bias.copy_(torch.stack([d_lon, d_lat], dim=1).reshape(-1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        n = self.heads
        v = self.value(x).reshape(B * n, C // n, H, W)
        v = torch.cat([v, v[..., :1]], dim=-1)  # one wrapped column: index W is column 0
        d = self.disp(x).reshape(B * n, 2, H, W)
        cols = torch.arange(W, device=x.device, dtype=x.dtype).view(1, 1, W)
        rows = torch.arange(H, device=x.device, dtype=x.dtype).view(1, H, 1)
        # column index modulo W (periodic), then normalised on the (W + 1)-column padded image
        col = torch.remainder(cols + d[:, 0] * (W / 2.0), W)
        gx = col * (2.0 / W) - 1.0
        gy = (rows * (2.0 / max(H - 1, 1)) - 1.0) + d[:, 1]
        out = F.grid_sample(v, torch.stack([gx, gy], dim=-1), mode="bilinear", padding_mode="zeros", align_corners=True)
        return out.reshape(B, C, H, W)


class _Block(nn.Module):
    """Pre-norm residual block ``x + W(GELU(SelfWarp(GroupNorm(x))))``."""

    def __init__(self, channels: int, heads: int, hidden: int, init_shape):
        super().__init__()
        self.norm = group_norm(channels)
        self.warp = SelfWarp2d(channels, heads, hidden, init_shape)
        self.mix = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        return x + self.mix(F.gelu(self.warp(self.norm(x))))


class Flower2D(BaselineModel):
    """Planar Flower U-Net on the lat-lon image: ``(B, in_channels, nlat, nlon) -> (B, out_channels, nlat, nlon)``.

    The scaffold mirrors :class:`dandelion.Dandelion` (lift MLP, blocks per level, skips fused by a
    1x1 map, head MLP) with the planar warp, GroupNorm and 2x2 (transposed) strided convolutions.

    Parameters
    ----------
    in_channels, out_channels : int
    nlat, nlon, grid :
        The data grid; ``nlon`` must divide by ``2**(levels-1)``. The grid type only enters through
        the position channels (node coordinates) and the grid guard.
    width, multipliers :
        Level ``k`` has ``width * multipliers[k]`` channels; ``levels = len(multipliers)``.
    heads : int
        Warp heads at every level (every level width must divide by it).
    encoder_blocks, decoder_blocks : sequence of int
        Blocks per level on the way down (``levels`` entries) and up (``levels - 1`` entries).
    offset_ratio : float
        Hidden width of the displacement MLP as a fraction of the level width.
    position_channels : bool
        Append the unit position vector as 3 input channels.

    Raises
    ------
    ValueError
        For bad grids, ``nlon`` not divisible by ``2**(levels-1)``, block lists of the wrong length,
        or a level width not divisible by ``heads``.
    """

    model_name = "flower2d"
    resolution_dependent = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        nlat: int,
        nlon: int,
        grid: str = "equiangular",
        *,
        width: int = 16,
        multipliers=(1, 2),
        heads: int = 4,
        encoder_blocks=(1, 1),
        decoder_blocks=(1,),
        offset_ratio: float = 0.5,
        position_channels: bool = True,
    ):
        super().__init__()
        levels = len(multipliers)
        div = 2 ** (levels - 1)
        c_in = self.init_interface(
            in_channels,
            out_channels,
            nlat,
            nlon,
            grid,
            position_channels,
            nlon_divisor=div,
            nlat_min=div,
            nlon_reason=f"2**(levels-1) for {levels} levels: use fewer levels or another nlon",
        )
        if len(encoder_blocks) != levels or len(decoder_blocks) != levels - 1:
            raise ValueError(
                f"flower2d: need {levels} encoder_blocks and {levels - 1} decoder_blocks entries, "
                f"got {tuple(encoder_blocks)} and {tuple(decoder_blocks)}"
            )
        ch = [int(width * m) for m in multipliers]
        if any(c % heads for c in ch):
            raise ValueError(f"flower2d: level widths {ch} must all be divisible by heads={heads}")
        shapes = [(nlat, nlon)]
        for _ in range(levels - 1):
            shapes.append(((shapes[-1][0] + 1) // 2, shapes[-1][1] // 2))

        def blocks(k, n):
            return nn.Sequential(
                *[_Block(ch[k], heads, max(1, int(offset_ratio * ch[k])), shapes[k]) for _ in range(n)]
            )

        self.lift = nn.Sequential(nn.Conv2d(c_in, width, 1), nn.GELU(), nn.Conv2d(width, ch[0], 1))
        self.down_blocks = nn.ModuleList([blocks(k, encoder_blocks[k]) for k in range(levels)])
        self.downs = nn.ModuleList([nn.Conv2d(ch[k], ch[k + 1], 2, stride=2) for k in range(levels - 1)])
        self.ups = nn.ModuleList([nn.ConvTranspose2d(ch[k + 1], ch[k], 2, stride=2) for k in range(levels - 1)])
        self.merges = nn.ModuleList([nn.Conv2d(2 * ch[k], ch[k], 1) for k in range(levels - 1)])
        self.up_blocks = nn.ModuleList([blocks(k, decoder_blocks[k]) for k in range(levels - 1)])
        self.head_norm = group_norm(ch[0])
        self.head = nn.Sequential(nn.Conv2d(ch[0], ch[0], 1), nn.GELU(), nn.Conv2d(ch[0], out_channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` : ``(B, in_channels, nlat, nlon)`` -> ``(B, out_channels, nlat, nlon)``."""
        x = self.lift(self.prepare_input(x))
        skips = []
        for k, blocks in enumerate(self.down_blocks):
            x = blocks(x)
            if k < len(self.downs):
                skips.append(x)
                if x.shape[-2] % 2:  # zero row below the last one (zero padding in latitude)
                    x = F.pad(x, (0, 0, 0, 1))
                x = self.downs[k](x)
        for k in reversed(range(len(self.ups))):
            x = self.ups[k](x)[..., : skips[k].shape[-2], :]
            x = self.merges[k](torch.cat([skips[k], x], dim=1))
            x = self.up_blocks[k](x)
        return self.head(self.head_norm(x))


#: Builds :class:`Flower2D` from a preset (:data:`FLOWER2D_PRESETS`) and overrides of its keys.
build_flower2d = register_preset_model("flower2d", Flower2D, FLOWER2D_PRESETS)
