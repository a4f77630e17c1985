"""The Dandelion network: a U-Net of multi-head great-circle warps with spectral pooling.

docs/ARCHITECTURE.md §5. Every layer is pointwise (1x1 maps) except the warps (which move information along
great circles, :mod:`dandelion.warp`) and the spectral pooling between levels
(:mod:`dandelion.spectral_pooling`); there is no spatial convolution. All weights are resolution-free:
the grid-dependent tables (sampler row tables, quadrature weights, Legendre tables, node
positions) are non-persistent buffers rebuilt for the grid the model is constructed on, so one
state dict runs on any grid (build the model for the new grid and ``load_state_dict``).

Layout
------
lift:    [x, position (3-D unit vector)] -> width, pointwise MLP
level k: ``encoder_blocks[k]`` warp blocks at width ``width * multipliers[k]`` on the level grid
         (``coarse_grid(grid, k)``: the data grid for k = 0, Legendre-Gauss ceil(nlat/2^k) x nlon/2^k)
down:    spectral truncation to level k+1, then a pointwise map to the wider width
up:      pointwise map to the narrower width, spectral zero-padding to level k, concatenation with
         the encoder's output at level k (skip), pointwise fuse, ``decoder_blocks[k]`` warp blocks
head:    area-weighted norm, pointwise MLP -> out_channels
spectral path (``spectral_lmax > 0``): a per-degree linear map of the input in the spherical-harmonic domain
         (:class:`~dandelion.degree_mixing.DegreeMixS2`, zero at initialisation), added before the head's norm

A level may have zero blocks: ``encoder_blocks[0] = decoder_blocks[0] = 0`` leaves only pointwise maps on the
data grid (lift, skip fuse, head) and runs every warp on the half-resolution grids below, which is how the
``*_fast`` presets cost what SFNO costs (SFNO's blocks also run on an internal grid coarser than the data's).

Warp block (pre-norm residual): ``x + W(GELU(warp(norm(x))))`` with area-weighted norm, a
multi-head tangent warp (:class:`~dandelion.warp.TangentWarpS2`) and pointwise ``W``; with FiLM
conditioning, ``norm(x) * (1 + gamma(c)) + beta(c)`` (gamma, beta linear in the scalar
parameters ``c``, zero at initialisation).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
import torch.nn as nn
import torch.utils.checkpoint

from .degree_mixing import spectral_path
from .grid_guard import GridGuard
from .kernels import Pointwise
from .norm import AreaNormS2
from .registry import register_preset_model
from .spectral_pooling import SpectralDownsample, SpectralUpsample, coarse_grid, pooling_band_limit
from .sphere import SphereGrid
from .warp import TangentWarpS2

__all__ = ["Dandelion", "WarpBlockS2", "PRESETS", "FAST_PRESETS"]

#: Hyper-parameters of the presets. ``paper`` follows docs/ARCHITECTURE.md §5 (width 150, 4 levels with
#: multipliers 1, 2, 4, 8, 50 heads); its blocks per level (2, 2, 2, 3 down, 2, 2, 2 up) were chosen
#: to land at about 19M parameters for Galewsky's layout (16 in, 4 out): 18,840,004. ``small``
#: (147,268 parameters at 16/4) and ``tiny`` (6,972) are for CPU work: on one core at 64x128,
#: ``small`` takes about 0.25 s of CPU time per training step (batch 1); ``tiny`` about 0.07 s at
#: 32x64 (batch 4). Parameter counts do not depend on the grid.
PRESETS: dict[str, dict] = {
    "paper": dict(
        width=150,
        multipliers=(1, 2, 4, 8),
        heads=50,
        encoder_blocks=(2, 2, 2, 3),
        decoder_blocks=(2, 2, 2),
        offset_ratio=0.5,
    ),
    "small": dict(
        width=32, multipliers=(1, 2, 4), heads=8, encoder_blocks=(1, 1, 2), decoder_blocks=(1, 1), offset_ratio=0.5
    ),
    "tiny": dict(width=16, multipliers=(1, 2), heads=4, encoder_blocks=(1, 1), decoder_blocks=(1,), offset_ratio=0.5),
    # cost-matched (docs/model.md, "Cost-matched presets"): the data grid keeps only pointwise maps (lift, skip
    # fuse, head, at half the width); the warp levels of small/tiny run one level down, on half-resolution grids
    "small_fast": dict(
        width=16,
        multipliers=(1, 2, 4, 8),
        heads=4,
        encoder_blocks=(0, 1, 1, 2),
        decoder_blocks=(0, 1, 1),
        offset_ratio=0.5,
    ),
    "paper_fast": dict(
        width=75,
        multipliers=(1, 2, 4, 8, 16),
        heads=50,
        encoder_blocks=(0, 2, 2, 2, 3),
        decoder_blocks=(0, 2, 2, 2),
        offset_ratio=0.5,
    ),
    "tiny_fast": dict(
        width=8, multipliers=(1, 2, 4), heads=4, encoder_blocks=(0, 1, 1), decoder_blocks=(0, 1), offset_ratio=0.5
    ),
}

#: The presets of the ``dandelion_fast`` registry entry: the cost-matched presets under the size names the
#: benchmark grid uses (``build_model("dandelion_fast", "small")`` is ``build_model("dandelion", "small_fast")``).
FAST_PRESETS: dict[str, dict] = {size: PRESETS[f"{size}_fast"] for size in ("paper", "small", "tiny")}


def _pointwise(cin: int, cout: int) -> Pointwise:
    return Pointwise(cin, cout)


class WarpBlockS2(nn.Module):
    """Pre-norm residual warp block ``x + W(GELU(warp(norm(x))))``.

    Parameters
    ----------
    grid : SphereGrid
    channels, heads : int
    offset_hidden : int
        Width of the displacement MLP of the warp.
    init_radius : float
        Initial displacement scale of the heads, radians (see :class:`TangentWarpS2`).
    cond_dim : int
        Number of scalar conditioning parameters (FiLM); 0 disables it.
    compile_kernels : bool
        ``torch.compile``'d elementwise kernels of the warp index and the norm (see
        :class:`~dandelion.warp.TangentWarpS2` and :class:`~dandelion.norm.AreaNormS2`).
    norm_groups : int
        Groups of the block's area norm (1: one statistic over all channels).
    offset_gain : float
        Initial scale of the displacement MLP's last layer (:class:`~dandelion.warp.TangentWarpS2`).

    Shapes: ``(B, channels, nlat, nlon)`` (and ``cond (B, cond_dim)``) -> same.
    """

    def __init__(
        self,
        grid: SphereGrid,
        channels: int,
        heads: int,
        offset_hidden: int,
        init_radius: float,
        cond_dim: int = 0,
        compile_kernels: bool = False,
        norm_groups: int = 1,
        offset_gain: float = 0.1,
    ):
        super().__init__()
        self.norm = AreaNormS2(grid, channels, groups=norm_groups, compile_kernels=compile_kernels)
        self.film = nn.Linear(cond_dim, 2 * channels) if cond_dim else None
        if self.film is not None:
            nn.init.zeros_(self.film.weight)
            nn.init.zeros_(self.film.bias)
        self.warp = TangentWarpS2(
            grid, channels, heads, offset_hidden, init_radius, compile_kernels=compile_kernels, offset_gain=offset_gain
        )
        self.act = nn.GELU()
        self.out = _pointwise(channels, channels)

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        h = self.norm(x)
        if self.film is not None:
            gamma, beta = self.film(cond)[:, :, None, None].chunk(2, dim=1)
            h = torch.addcmul(h + beta, h, gamma)
        return x + self.out(self.act(self.warp(h)))


class Dandelion(GridGuard, nn.Module):
    """Dandelion: U-Net of multi-head tangent warps on the sphere (docs/ARCHITECTURE.md §5).

    Parameters
    ----------
    in_channels, out_channels : int
        Channels of the input ``(B, in_channels, nlat, nlon)`` (frames folded into channels) and of
        the output ``(B, out_channels, nlat, nlon)``.
    nlat, nlon : int
        Data grid. ``nlon`` must divide by ``2**(levels - 1)``.
    grid : str
        ``"equiangular"`` or ``"legendre-gauss"`` (torch-harmonics names).
    width : int
        Channels at level 0.
    multipliers : sequence of int
        Width multiplier of each level; ``levels = len(multipliers)``.
    heads : int
        Warp heads at every level; every level width must divide by it.
    encoder_blocks : sequence of int, one per level
        Warp blocks on the way down (the last entry is the bottom of the U); 0 leaves a level with pointwise
        maps only (the ``*_fast`` presets at level 0).
    decoder_blocks : sequence of int, one per level except the bottom
        Warp blocks on the way up, ``decoder_blocks[k]`` at level k.
    offset_ratio : float
        Width of each warp's displacement MLP as a fraction of the level width.
    cond_dim : int
        Number of scalar conditioning parameters for FiLM (0: off, the benchmark protocol).
    checkpoint_blocks : bool
        Activation checkpointing (recomputation) of every warp block while gradients are on
        (``torch.utils.checkpoint``, non-reentrant; Chen et al. 2016, arXiv:1604.06174): a block keeps
        only its input for backward and runs its forward again there, trading about one more forward
        of the blocks for their saved activations. Same parameters and state_dict; outputs and
        gradients are those of the plain model (the recomputation repeats the same operations).
        Off by default (the cost tables in benchmarks/results measure it off and on).
    compile_kernels : bool
        Evaluate the elementwise chains of every warp (exponential-map indices and their Jacobian,
        :func:`~dandelion.kernels.index_of_warp`) and every area norm (statistics, affine map,
        backward) with ``torch.compile``'d kernels (the first step on a grid compiles them, some
        10 s per kernel and U-Net level on one CPU core; a C++ compiler is needed on the CPU). Same
        parameters and state_dict; outputs and gradients equal those of the eager model up to
        rounding (the eager default keeps zero displacement the identity bit for bit). Falls back to
        the eager kernels with a warning when compilation fails. Off by default.
    pool_lmax : sequence of int, one per level except the bottom, optional
        Band limit (exclusive degree and order) of the spectral pooling between level ``k`` and
        ``k + 1``, both ways. Default: the largest both level grids resolve
        (:func:`~dandelion.spectral_pooling.pooling_band_limit`), so the band limits double with the grid. Giving
        the band limits of the grid a model was trained on keeps its coarse levels at the trained
        degrees on a finer grid (zero-shot resolution transfer: the convention of SFNO's fixed
        ``lmax``, Bonev et al. 2023, arXiv:2306.03838). Not part of the state_dict.
    spectral_lmax : int
        Degrees (exclusive) of the spectral path, a per-degree linear map of the input in the spherical-harmonic
        domain (:class:`~dandelion.degree_mixing.DegreeMixS2`), zero-initialised, resolution-free (a grid resolving
        fewer degrees uses the first ones). 0 (default): no spectral path.
    spectral_into : str
        ``"head"`` (default): the path maps the input to the level-0 width and is added to the features entering
        the head's area norm (``spectral_lmax * in_channels * width`` parameters); ``"output"``: it maps the input
        to the output channels and is added to the output (``spectral_lmax * in_channels * out_channels``).
    spectral_anchors : int
        0 (default): one matrix per degree; ``K >= 2``: ``K`` anchor matrices linearly interpolated in the degree
        (``spectral_lmax`` replaced by ``K`` in the counts above).
    spectral_from : str
        ``"input"`` (default): the path reads the network's input; ``"lift"``: the lifted features (level-0
        width), so its size does not grow with the input channels (``in_channels`` replaced by ``width`` above).
    fixed_displacements : bool
        Ablation: every warp head keeps its initial displacement (``init_radius * (1 + h % 3)`` in direction
        ``2*pi*h/heads``, :class:`~dandelion.warp.TangentWarpS2`) for good: the displacement network's output
        layer is zero and its parameters are frozen (``requires_grad=False``, not counted, not trained), so the
        warps are a fixed stencil and only what they read is learned. Default False.
    norm_groups : int
        Groups of every area norm of the warp blocks (and of the resampling norms), default 1 (one statistic over
        all channels of a level); must divide the width of every level it normalises. The reference code uses
        GroupNorm with as many groups as heads.
    offset_gain : float
        Initial scale of the displacement networks' last layer (default 0.1, :class:`~dandelion.warp.TangentWarpS2`).
    resample_norm : bool
        An area norm and a GELU after every spectral down- and up-sampling (default False), as the reference code
        follows its resampling with GroupNorm and GELU.

    Attributes
    ----------
    resolution_dependent : bool
        False: no weight shape depends on the grid. The state_dict records the grid
        (:mod:`dandelion.grid_guard`): it loads into a model of another ``(nlat, nlon)`` of the same
        grid type, and a model on another grid type refuses it (unless
        :func:`~dandelion.grid_guard.allow_grid_change`).
    grids : list of SphereGrid, one per level.
    pool_lmax : list of int
        The band limit of each pooling (one per level except the bottom).

    Raises
    ------
    ValueError
        For inconsistent hyper-parameters, ``nlon`` not divisible by ``2**(levels - 1)``, an
        unknown grid, or a ``pool_lmax`` that is not one positive integer per pooling or exceeds what a level's
        grids resolve.
    """

    resolution_dependent = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        nlat: int,
        nlon: int,
        grid: str = "equiangular",
        *,
        width: int = 32,
        multipliers: Sequence[int] = (1, 2, 4),
        heads: int = 8,
        encoder_blocks: Sequence[int] = (1, 1, 2),
        decoder_blocks: Sequence[int] = (1, 1),
        offset_ratio: float = 0.5,
        cond_dim: int = 0,
        checkpoint_blocks: bool = False,
        compile_kernels: bool = False,
        pool_lmax: Sequence[int] | None = None,
        spectral_lmax: int = 0,
        spectral_into: str = "head",
        spectral_anchors: int = 0,
        spectral_from: str = "input",
        fixed_displacements: bool = False,
        norm_groups: int = 1,
        offset_gain: float = 0.1,
        resample_norm: bool = False,
    ):
        super().__init__()
        levels = len(multipliers)
        self.checkpoint_blocks = bool(checkpoint_blocks)
        self.compile_kernels = bool(compile_kernels)
        if int(in_channels) < 1 or int(out_channels) < 1 or int(width) < 1 or int(heads) < 1:
            raise ValueError(
                f"in_channels={in_channels}, out_channels={out_channels}, width={width} "
                f"and heads={heads} must all be >= 1"
            )
        if levels < 1:
            raise ValueError("multipliers must name at least one level")
        if len(encoder_blocks) != levels or len(decoder_blocks) != levels - 1:
            raise ValueError(
                f"need one encoder_blocks entry per level ({levels}) and one decoder_blocks entry per level but the "
                f"bottom ({levels - 1}); got {tuple(encoder_blocks)} and {tuple(decoder_blocks)}"
            )
        if nlon % 2 ** (levels - 1):
            raise ValueError(
                f"nlon={nlon} must divide by 2**(levels-1) = {2 ** (levels - 1)} for {levels} U-Net levels: choose "
                f"nlon a multiple of {2 ** (levels - 1)} or fewer levels"
            )
        widths = [int(width * m) for m in multipliers]
        counts = [int(encoder_blocks[k]) + (int(decoder_blocks[k]) if k < levels - 1 else 0) for k in range(levels)]
        if min(int(n) for n in (*encoder_blocks, *decoder_blocks)) < 0:
            raise ValueError(f"block counts must be >= 0, got {tuple(encoder_blocks)} and {tuple(decoder_blocks)}")
        for w, n in zip(widths, counts):
            if n and w % heads:
                raise ValueError(
                    f"level width {w} does not divide by heads={heads}: choose width and heads so that every width * "
                    "multiplier of a level with warp blocks divides by heads"
                )
        data_grid = SphereGrid(nlat, nlon, grid)
        self.init_grid_guard(nlat, nlon, grid)
        self.in_channels, self.out_channels, self.cond_dim = in_channels, out_channels, cond_dim
        self.nlat, self.nlon, self.grid = nlat, nlon, grid
        self.grids = [coarse_grid(data_grid, k) for k in range(levels)]
        self.widths = widths
        self.register_buffer("position", data_grid.xyz.to(torch.float32)[None], persistent=False)

        def blocks(k: int, n: int) -> nn.ModuleList:
            g, w = self.grids[k], widths[k]
            hidden = max(1, int(round(offset_ratio * w)))
            return nn.ModuleList(
                WarpBlockS2(
                    g,
                    w,
                    heads,
                    hidden,
                    init_radius=math.pi / g.nlat,
                    cond_dim=cond_dim,
                    compile_kernels=self.compile_kernels,
                    norm_groups=norm_groups,
                    offset_gain=offset_gain,
                )
                for _ in range(n)
            )

        self.lift = nn.Sequential(_pointwise(in_channels + 3, width), nn.GELU(), _pointwise(width, widths[0]))
        self.encoder = nn.ModuleList(blocks(k, encoder_blocks[k]) for k in range(levels))
        resolved = [pooling_band_limit(self.grids[k], self.grids[k + 1]) for k in range(levels - 1)]
        if pool_lmax is None:
            pool_lmax = resolved
        if (
            isinstance(pool_lmax, (str, bytes))
            or not isinstance(pool_lmax, Sequence)
            or len(pool_lmax) != levels - 1
            or not all(isinstance(b, numbers.Integral) and not isinstance(b, bool) and b >= 1 for b in pool_lmax)
        ):
            raise ValueError(
                f"pool_lmax needs one band limit per pooling, a positive integer each ({levels - 1} for {levels} "
                f"levels), got {pool_lmax!r}"
            )
        self.pool_lmax = [int(b) for b in pool_lmax]
        for k, (b, top) in enumerate(zip(self.pool_lmax, resolved)):
            if b > top:
                raise ValueError(
                    f"pool_lmax[{k}] = {b} exceeds the band limit {top} that pooling {k} resolves between "
                    f"its level grids {self.grids[k].nlat}x{self.grids[k].nlon} and "
                    f"{self.grids[k + 1].nlat}x{self.grids[k + 1].nlon} "
                    f"(data grid {nlat}x{nlon}): give at most {resolved}, or build the model on a finer grid"
                )
        self.down = nn.ModuleList(
            SpectralDownsample(self.grids[k], self.grids[k + 1], lmax=self.pool_lmax[k]) for k in range(levels - 1)
        )
        self.down_proj = nn.ModuleList(_pointwise(widths[k], widths[k + 1]) for k in range(levels - 1))
        self.up_proj = nn.ModuleList(_pointwise(widths[k + 1], widths[k]) for k in range(levels - 1))
        self.up = nn.ModuleList(
            SpectralUpsample(self.grids[k + 1], self.grids[k], lmax=self.pool_lmax[k]) for k in range(levels - 1)
        )
        self.fuse = nn.ModuleList(_pointwise(2 * widths[k], widths[k]) for k in range(levels - 1))
        self.resample_norm = bool(resample_norm)
        if self.resample_norm:  # area norm + GELU after each resampling (the reference code's GroupNorm + GELU)
            ck = self.compile_kernels
            self.down_act = nn.ModuleList(
                nn.Sequential(
                    AreaNormS2(self.grids[k + 1], widths[k + 1], groups=norm_groups, compile_kernels=ck), nn.GELU()
                )
                for k in range(levels - 1)
            )
            self.up_act = nn.ModuleList(
                nn.Sequential(AreaNormS2(self.grids[k], widths[k], groups=norm_groups, compile_kernels=ck), nn.GELU())
                for k in range(levels - 1)
            )
        self.decoder = nn.ModuleList(blocks(k, decoder_blocks[k]) for k in range(levels - 1))
        self.fixed_displacements = bool(fixed_displacements)
        if self.fixed_displacements:  # ablation: every head keeps its initial displacement (the bias of the last layer)
            for blocks_k in (*self.encoder, *self.decoder):
                for blk in blocks_k:
                    nn.init.zeros_(blk.warp.offset[-1].weight)
                    for p in blk.warp.offset.parameters():
                        p.requires_grad_(False)
        self.head_norm = AreaNormS2(data_grid, widths[0], compile_kernels=self.compile_kernels)
        self.head = nn.Sequential(_pointwise(widths[0], widths[0]), nn.GELU(), _pointwise(widths[0], out_channels))
        self.spectral = spectral_path(  # None when spectral_lmax is 0; validates the options
            data_grid, in_channels, widths[0], out_channels, spectral_lmax, spectral_into, spectral_from,
            spectral_anchors,
        )  # fmt: skip
        self.spectral_lmax, self.spectral_into, self.spectral_from = int(spectral_lmax), spectral_into, spectral_from

    def extra_repr(self) -> str:
        return (
            f"in_channels={self.in_channels}, out_channels={self.out_channels}, nlat={self.nlat}, nlon={self.nlon}, "
            f"grid={self.grid!r}, widths={self.widths}"
        )

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        """``x (B, in_channels, nlat, nlon)`` [, ``cond (B, cond_dim)``] -> ``(B, out_channels, nlat, nlon)``.

        Raises
        ------
        ValueError
            If ``x`` does not match the model's channels and grid, or ``cond`` is missing/unexpected.
        """
        if x.dim() != 4 or x.shape[1] != self.in_channels or tuple(x.shape[-2:]) != (self.nlat, self.nlon):
            raise ValueError(
                f"input of shape {tuple(x.shape)} does not match (B, {self.in_channels}, {self.nlat}, {self.nlon}): "
                "build the model for this grid (weights are resolution-free: load_state_dict into it)"
            )
        if (cond is None) != (self.cond_dim == 0):
            raise ValueError(
                f"cond must be given exactly when cond_dim > 0 (cond_dim={self.cond_dim}, cond "
                f"{'missing' if cond is None else 'given'})"
            )
        if cond is not None and tuple(cond.shape) != (x.shape[0], self.cond_dim):
            raise ValueError(
                f"cond of shape {tuple(cond.shape)} must be (B, cond_dim) = ({x.shape[0]}, {self.cond_dim})"
            )
        pos = self.position.to(x.dtype).expand(x.shape[0], -1, -1, -1)
        h = self.lift(torch.cat([x, pos], dim=1))
        source = h if self.spectral_from == "lift" else x
        skips = []
        levels = len(self.widths)
        for k in range(levels):
            for blk in self.encoder[k]:
                h = self._block(blk, h, cond)
            if k < levels - 1:
                skips.append(h)
                h = self.down_proj[k](self.down[k](h))
                if self.resample_norm:
                    h = self.down_act[k](h)
        for k in reversed(range(levels - 1)):
            h = self.up[k](self.up_proj[k](h))
            if self.resample_norm:
                h = self.up_act[k](h)
            h = self.fuse[k](torch.cat([h.to(skips[k].dtype), skips[k]], dim=1))
            for blk in self.decoder[k]:
                h = self._block(blk, h, cond)
        if self.spectral is not None and self.spectral_into == "head":
            h = h + self.spectral(source).to(h.dtype)
        out = self.head(self.head_norm(h))
        if self.spectral is not None and self.spectral_into == "output":
            out = out + self.spectral(source).to(out.dtype)
        return out

    def _block(self, blk: WarpBlockS2, h: torch.Tensor, cond: torch.Tensor | None) -> torch.Tensor:
        if self.checkpoint_blocks and torch.is_grad_enabled():
            return torch.utils.checkpoint.checkpoint(blk, h, cond, use_reentrant=False)
        return blk(h, cond)


#: Registry builder of :class:`Dandelion`: ``PRESETS[preset]`` updated with ``overrides``, which may also set
#: the hyper-parameters the presets leave at their defaults (conditioning, checkpointing, kernels, pooling).
_EXTRA = (
    "cond_dim",
    "checkpoint_blocks",
    "compile_kernels",
    "pool_lmax",
    "spectral_lmax",
    "spectral_into",
    "spectral_anchors",
    "spectral_from",
    "fixed_displacements",
    "norm_groups",
    "offset_gain",
    "resample_norm",
)
build_dandelion = register_preset_model("dandelion", Dandelion, PRESETS, extra=_EXTRA)
#: The cost-matched Dandelion as its own model name, so a benchmark grid (one preset name for every model)
#: can hold it next to ``dandelion``.
build_dandelion_fast = register_preset_model("dandelion_fast", Dandelion, FAST_PRESETS, extra=_EXTRA)
