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
advection (``advect_state``): three more output channels, a Cartesian displacement linear in the input, along which
         a forecast step moves the newest frame (:mod:`dandelion.warp.advection`)
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

import torch
import torch.nn as nn
import torch.utils.checkpoint

from .degree_mixing import spectral_path
from .grid_guard import GridGuard
from .model_options import (
    SMALL,
    DandelionAblation,
    DandelionArchitecture,
    DandelionExecution,
    execution_names,
    group_options,
    network_defaults,
    option_names,
)
from .norm import AreaNormS2
from .pointwise import Pointwise
from .registry import register_preset_model
from .spectral_pooling import SpectralDownsample, SpectralUpsample, coarse_grid, pooling_band_limit
from .sphere import SphereGrid
from .warp import StateAdvection, TangentWarpS2

__all__ = ["Dandelion", "WarpBlockS2", "PRESETS", "FAST_PRESETS"]

#: Hyper-parameters of the presets. ``paper`` follows docs/ARCHITECTURE.md §5 (width 150, 4 levels with
#: multipliers 1, 2, 4, 8, 50 heads); its blocks per level (2, 2, 2, 3 down, 2, 2, 2 up) were chosen
#: to land at about 19M parameters for Galewsky's layout (16 in, 4 out): 18,840,055. ``small``
#: (147,319 parameters at 16/4) and ``tiny`` (7,023) are for CPU work: on one core at 64x128,
#: ``small`` takes about 0.25 s of CPU time per training step (batch 1); ``tiny`` about 0.07 s at
#: 32x64 (batch 4). Parameter counts do not depend on the grid. These three move the newest frame along a
#: learned Cartesian displacement before adding the increment (``advect_state``, advected persistence: 51 more
#: parameters at 16 inputs; the decision and its measurements are in docs/model.md); the ``*_fast`` presets do
#: not (on shock caps it lost beyond the seed spread there).
PRESETS: dict[str, dict] = {
    "paper": dict(
        width=150,
        multipliers=(1, 2, 4, 8),
        heads=50,
        encoder_blocks=(2, 2, 2, 3),
        decoder_blocks=(2, 2, 2),
        offset_ratio=0.5,
        advect_state=True,
    ),
    "small": dict(SMALL, advect_state=True),  # SMALL: also DandelionArchitecture's defaults
    "tiny": dict(
        width=16,
        multipliers=(1, 2),
        heads=4,
        encoder_blocks=(1, 1),
        decoder_blocks=(1,),
        offset_ratio=0.5,
        advect_state=True,
    ),
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
    cartesian : bool
        Each head's displacement also follows a Cartesian vector linear in the features
        (:class:`~dandelion.warp.TangentWarpS2`, ``cartesian``).
    warp_kernel : str
        The warp's sampling kernel (``auto``, ``eager``, ``triton``, ``cpp``; :data:`~dandelion.warp.WARP_KERNELS`).

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
        cartesian: bool = False,
        warp_kernel: str = "auto",
    ):
        super().__init__()
        self.norm = AreaNormS2(grid, channels, groups=norm_groups, compile_kernels=compile_kernels)
        self.film = nn.Linear(cond_dim, 2 * channels) if cond_dim else None
        if self.film is not None:
            nn.init.zeros_(self.film.weight)
            nn.init.zeros_(self.film.bias)
        self.warp = TangentWarpS2(
            grid,
            channels,
            heads,
            offset_hidden,
            init_radius,
            compile_kernels=compile_kernels,
            offset_gain=offset_gain,
            kernel=warp_kernel,
            cartesian=cartesian,
        )
        self.act = nn.GELU()
        self.out = _pointwise(channels, channels)

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        h = self.norm(x)
        if self.film is not None:
            gamma, beta = self.film(cond)[:, :, None, None].chunk(2, dim=1)
            h = torch.addcmul(h + beta, h, gamma)
        return x + self.out(self.act(self.warp(h)))


def _check_sizes(arch: DandelionArchitecture, in_channels: int, out_channels: int, nlon: int) -> None:
    """Raise ValueError for channels below 1, ``nlon`` the levels cannot halve, or a level width the heads do not
    divide (levels without warp blocks excepted)."""
    if int(in_channels) < 1 or int(out_channels) < 1:
        raise ValueError(f"in_channels={in_channels} and out_channels={out_channels} must both be >= 1")
    levels = arch.levels
    if nlon % 2 ** (levels - 1):
        raise ValueError(
            f"nlon={nlon} must divide by 2**(levels-1) = {2 ** (levels - 1)} for {levels} U-Net levels: choose "
            f"nlon a multiple of {2 ** (levels - 1)} or fewer levels"
        )
    for w, n in zip(arch.widths(), arch.blocks_per_level()):
        if n and w % arch.heads:
            raise ValueError(
                f"level width {w} does not divide by heads={arch.heads}: choose width and heads so that every width "
                "* multiplier of a level with warp blocks divides by heads"
            )


def _pool_band_limits(grids: list[SphereGrid], pool_lmax, data_grid: SphereGrid) -> list[int]:
    """The band limit of every pooling: ``pool_lmax`` when given, else the largest both level grids resolve.

    Raises
    ------
    ValueError
        If a given band limit exceeds what its level grids resolve.
    """
    resolved = [pooling_band_limit(grids[k], grids[k + 1]) for k in range(len(grids) - 1)]
    chosen = resolved if pool_lmax is None else [int(b) for b in pool_lmax]
    for k, (b, top) in enumerate(zip(chosen, resolved)):
        if b > top:
            raise ValueError(
                f"pool_lmax[{k}] = {b} exceeds the band limit {top} that pooling {k} resolves between "
                f"its level grids {grids[k].nlat}x{grids[k].nlon} and {grids[k + 1].nlat}x{grids[k + 1].nlon} "
                f"(data grid {data_grid.nlat}x{data_grid.nlon}): give at most {resolved}, or build the model on a "
                "finer grid"
            )
    return chosen


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
    architecture : DandelionArchitecture, optional
        Width, levels (``multipliers``), heads, blocks per level, displacement-network width, pooling band
        limits, FiLM conditioning (:mod:`dandelion.model_options`). Default: the ``small`` preset's shape.
    execution : DandelionExecution, optional
        Activation checkpointing and compiled kernels: how the same network is computed.
    ablation : DandelionAblation, optional
        The switches of docs/model.md's ablations (spectral path, frozen warps, reference-code screens); the
        default is the presets' network.
    **options
        Any option of the three groups by name (``width=16``, ``compile_kernels=True``, ``spectral_lmax=32``),
        the form ``build_model`` overrides take; not together with the object of its group.

    Attributes
    ----------
    resolution_dependent : bool
        False: no weight shape depends on the grid. The state_dict records the grid
        (:mod:`dandelion.grid_guard`): it loads into a model of another ``(nlat, nlon)`` of the same
        grid type, and a model on another grid type refuses it (unless
        :func:`~dandelion.grid_guard.allow_grid_change`).
    architecture, execution, ablation :
        The three option groups the model was built with.
    grids : list of SphereGrid, one per level.
    widths : list of int, the channels of every level.
    pool_lmax : list of int
        The band limit of each pooling (one per level except the bottom).

    Raises
    ------
    ValueError
        For inconsistent hyper-parameters (:class:`~dandelion.model_options.DandelionArchitecture`), a level width
        that does not divide by the heads, ``nlon`` not divisible by ``2**(levels - 1)``, an unknown grid, or a
        ``pool_lmax`` that exceeds what a level's grids resolve.
    TypeError
        For an unknown option name (:func:`~dandelion.model_options.group_options`).
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
        architecture: DandelionArchitecture | None = None,
        execution: DandelionExecution | None = None,
        ablation: DandelionAblation | None = None,
        **options,
    ):
        super().__init__()
        arch, run, abl = group_options(options, architecture, execution, ablation)
        self.architecture, self.execution, self.ablation = arch, run, abl
        self.checkpoint_blocks, self.compile_kernels = run.checkpoint_blocks, run.compile_kernels
        _check_sizes(arch, in_channels, out_channels, nlon)
        data_grid = SphereGrid(nlat, nlon, grid)
        self.init_grid_guard(nlat, nlon, grid)
        self.in_channels, self.out_channels, self.cond_dim = in_channels, out_channels, arch.cond_dim
        self.nlat, self.nlon, self.grid = nlat, nlon, grid
        self.grids = [coarse_grid(data_grid, k) for k in range(arch.levels)]
        self.widths = widths = arch.widths()
        self.register_buffer("position", data_grid.xyz.to(torch.float32)[None], persistent=False)
        # built in this order: parameters draw their initial values from the global generator in turn
        self.lift = nn.Sequential(_pointwise(in_channels + 3, arch.width), nn.GELU(), _pointwise(arch.width, widths[0]))
        self.encoder = nn.ModuleList(self._blocks(k, arch.encoder_blocks[k]) for k in range(arch.levels))
        self.pool_lmax = _pool_band_limits(self.grids, arch.pool_lmax, data_grid)
        self._build_resampling()
        self.decoder = nn.ModuleList(self._blocks(k, arch.decoder_blocks[k]) for k in range(arch.levels - 1))
        if abl.fixed_displacements:  # every head keeps its initial displacement (the bias of the last layer)
            self._freeze_displacements()
        self.head_norm = AreaNormS2(data_grid, widths[0], compile_kernels=self.compile_kernels)
        self.head = nn.Sequential(_pointwise(widths[0], widths[0]), nn.GELU(), _pointwise(widths[0], out_channels))
        self.spectral = spectral_path(  # None when spectral_lmax is 0; validates the options
            data_grid, in_channels, widths[0], out_channels, abl.spectral_lmax, abl.spectral_into, abl.spectral_from,
            abl.spectral_anchors,
        )  # fmt: skip
        self.advection = (  # advected persistence: 3 more output channels (draws nothing from the generator)
            StateAdvection(data_grid, in_channels, kernel=run.warp_kernel) if arch.advect_state else None
        )

    def _blocks(self, k: int, n: int) -> nn.ModuleList:
        """``n`` warp blocks on level ``k``."""
        g, w, arch = self.grids[k], self.widths[k], self.architecture
        hidden = max(1, int(round(arch.offset_ratio * w)))
        return nn.ModuleList(
            WarpBlockS2(
                g,
                w,
                arch.heads,
                hidden,
                init_radius=math.pi / g.nlat,
                cond_dim=arch.cond_dim,
                compile_kernels=self.compile_kernels,
                norm_groups=self.ablation.norm_groups,
                offset_gain=self.ablation.offset_gain,
                cartesian=arch.cartesian_displacement,
                warp_kernel=self.execution.warp_kernel,
            )
            for _ in range(n)
        )

    def _build_resampling(self) -> None:
        """Spectral pooling between the levels, the pointwise maps changing the width, the skip fuses, and (ablation
        ``resample_norm``) an area norm and a GELU after every resampling (the reference code's GroupNorm + GELU)."""
        grids, widths, pairs = self.grids, self.widths, range(len(self.grids) - 1)
        self.down = nn.ModuleList(SpectralDownsample(grids[k], grids[k + 1], lmax=self.pool_lmax[k]) for k in pairs)
        self.down_proj = nn.ModuleList(_pointwise(widths[k], widths[k + 1]) for k in pairs)
        self.up_proj = nn.ModuleList(_pointwise(widths[k + 1], widths[k]) for k in pairs)
        self.up = nn.ModuleList(SpectralUpsample(grids[k + 1], grids[k], lmax=self.pool_lmax[k]) for k in pairs)
        self.fuse = nn.ModuleList(_pointwise(2 * widths[k], widths[k]) for k in pairs)
        if self.ablation.resample_norm:
            groups, ck = self.ablation.norm_groups, self.compile_kernels

            def norm_act(k: int) -> nn.Sequential:
                return nn.Sequential(AreaNormS2(grids[k], widths[k], groups=groups, compile_kernels=ck), nn.GELU())

            self.down_act = nn.ModuleList(norm_act(k + 1) for k in pairs)
            self.up_act = nn.ModuleList(norm_act(k) for k in pairs)

    def _freeze_displacements(self) -> None:
        """Ablation ``fixed_displacements``: zero every displacement network's output layer and freeze the network."""
        for blocks_k in (*self.encoder, *self.decoder):
            for blk in blocks_k:
                nn.init.zeros_(blk.warp.offset[-1].weight)
                for p in blk.warp.offset.parameters():
                    p.requires_grad_(False)

    def extra_repr(self) -> str:
        return (
            f"in_channels={self.in_channels}, out_channels={self.out_channels}, nlat={self.nlat}, nlon={self.nlon}, "
            f"grid={self.grid!r}, widths={self.widths}"
        )

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        """``x (B, in_channels, nlat, nlon)`` [, ``cond (B, cond_dim)``] -> ``(B, out_channels, nlat, nlon)``, or
        ``(B, out_channels + 3, nlat, nlon)`` with ``advect_state`` (the last three: the Cartesian displacement of
        advected persistence, radians, computed in float32 at least also under autocast, and the output then in
        that dtype; :mod:`dandelion.warp.advection`).

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
        abl = self.ablation
        source = h if abl.spectral_from == "lift" else x
        skips = []
        levels = len(self.widths)
        for k in range(levels):
            for blk in self.encoder[k]:
                h = self._block(blk, h, cond)
            if k < levels - 1:
                skips.append(h)
                h = self.down_proj[k](self.down[k](h))
                if abl.resample_norm:
                    h = self.down_act[k](h)
        for k in reversed(range(levels - 1)):
            h = self.up[k](self.up_proj[k](h))
            if abl.resample_norm:
                h = self.up_act[k](h)
            h = self.fuse[k](torch.cat([h.to(skips[k].dtype), skips[k]], dim=1))
            for blk in self.decoder[k]:
                h = self._block(blk, h, cond)
        if self.spectral is not None and abl.spectral_into == "head":
            h = h + self.spectral(source).to(h.dtype)
        out = self.head(self.head_norm(h))
        if self.spectral is not None and abl.spectral_into == "output":
            out = out + self.spectral(source).to(out.dtype)
        if self.advection is not None:  # the Cartesian displacement of advected persistence, after the increment,
            with torch.autocast(device_type=x.device.type, enabled=False):  # in float32 at least (a bf16 displacement
                vec = self.advection(x.to(torch.promote_types(x.dtype, torch.float32)))  # would move the frame off)
            out = torch.cat([out.to(vec.dtype), vec], dim=1)
        return out

    @property
    def advects_state(self) -> bool:
        """Whether the output ends with the three channels of advected persistence (``advect_state``)."""
        return self.advection is not None

    def advect(self, state: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
        """The newest frame ``state (B, C, nlat, nlon)`` moved by the output's displacement channels ``vector (B, 3,
        nlat, nlon)`` (:meth:`dandelion.warp.advection.StateAdvection.advect`).

        Raises
        ------
        RuntimeError
            For a model built without ``advect_state``.
        ValueError
            If ``vector`` is not ``(B, 3, nlat, nlon)`` for the state's batch and grid.
        """
        if self.advection is None:
            raise RuntimeError("this Dandelion was built without advect_state: its output has no displacement")
        return self.advection.advect(state, vector)

    def _block(self, blk: WarpBlockS2, h: torch.Tensor, cond: torch.Tensor | None) -> torch.Tensor:
        if self.checkpoint_blocks and torch.is_grad_enabled():
            return torch.utils.checkpoint.checkpoint(blk, h, cond, use_reentrant=False)
        return blk(h, cond)


#: Registry builder of :class:`Dandelion`: ``PRESETS[preset]`` updated with ``overrides``, which may also set any other
#: option of the three groups (:func:`~dandelion.model_options.option_names`: conditioning, pooling band limits,
#: checkpointing, kernels, the ablation switches).
_EXTRA = option_names()
#: The network-shaping options at their defaults and the execution-only ones, for the hyper-parameters a checkpoint
#: records (:func:`dandelion.registry.resolved_hyperparameters`).
_RECORD = dict(defaults=network_defaults(), execution=tuple(execution_names()))
build_dandelion = register_preset_model("dandelion", Dandelion, PRESETS, extra=_EXTRA, **_RECORD)
#: The cost-matched Dandelion as its own model name, so a benchmark grid (one preset name for every model)
#: can hold it next to ``dandelion``.
build_dandelion_fast = register_preset_model("dandelion_fast", Dandelion, FAST_PRESETS, extra=_EXTRA, **_RECORD)
