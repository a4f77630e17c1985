"""DISCO U-Net baseline: a spherical U-Net whose spatial operators are DISCO convolutions.

Ocampo, Price, McEwen 2023, "Scalable and equivariant spherical CNNs by discrete-continuous (DISCO)
convolutions" (ICLR), eq. 5-7: a convolution with a continuous, compactly supported filter of radius
``theta_cutoff``, written in a fixed filter basis and integrated with the grid's quadrature; strided
(fine -> coarse grid) and transposed (coarse -> fine) variants move between U-Net levels. The layers
are torch-harmonics' :class:`~torch_harmonics.DiscreteContinuousConvS2` and
:class:`~torch_harmonics.DiscreteContinuousConvTransposeS2`.

Why not torch-harmonics' ``SphericalUNet`` (``examples/models/s2unet.py``): it computes
``theta_cutoff`` internally (not passable), builds the first level's convolutions on the internal
grid type instead of the data grid, has no ``optimized_kernel`` switch, uses BatchNorm and
dropout; so this module assembles the same kind of network from the two DISCO layers directly.

Network (levels ``k = 0..L-1``, channels ``c_k = width * multipliers[k]``):

* lift: the input plus the unit position vector ``(x, y, z)`` by a pointwise MLP (as Dandelion's);
* level grids: level 0 is the data grid; level ``k >= 1`` is Legendre-Gauss with
  ``ceil(nlat / 2**k)`` rows and ``nlon / 2**k`` columns (as Dandelion's pooling, docs/ARCHITECTURE.md §5);
* block: pre-norm residual ``x + W(GELU(DISCO(GroupNorm(x))))`` with a 1x1 ``W`` (the Dandelion
  block with the warp replaced by a DISCO convolution), ``encoder_blocks[k]`` blocks at level ``k``
  on the way down and ``decoder_blocks[k]`` on the way up (the scaffold of :mod:`dandelion.model`);
* down: strided DISCO convolution level ``k`` -> ``k+1``; up: transposed DISCO convolution
  ``k+1`` -> ``k``, concatenated with the skip and merged by a 1x1 map;
* head: GroupNorm and a pointwise MLP to ``out_channels``.

Filters: basis ``"harmonic"`` with ``kernel_shape = (3, 3)`` (9 basis functions; torch-harmonics'
non-deprecated replacement of the ``"morlet"`` basis its examples use), ``basis_norm_mode="nodal"``.
``theta_cutoff`` is a radius in RADIANS, passed explicitly to every layer so results do not depend on
torch-harmonics' default heuristic: ``theta_cutoff`` at level 0 and ``theta_cutoff * 2**k`` at level
``k`` (strided and transposed layers between ``k`` and ``k+1`` use the coarse level's radius). The
presets fix it as two grid spacings of the preset's resolution (``2 * pi / nlat``), the s2unet
heuristic ``(kernel_shape[0] + 1) * 0.5 * pi / (nlat - 1)`` evaluated once and frozen.

Resolution: the weights have shape ``(c_out, c_in, 9)`` whatever the grid; the resolution-dependent
sparse filter tensors ``psi`` are non-persistent buffers (not in the state_dict, rebuilt in
``__init__``), so ``resolution_dependent = False``: the same weights run on any grid and mean the same
continuous filters (fixed radius in radians). On a grid much coarser than the preset's, the filter may
cover few nodes.

Kernels (important on GPUs): torch-harmonics' PyPI wheels carry compiled DISCO kernels for the CPU
only; ``tools/gpu/build_torch_harmonics_cuda.py`` builds the CUDA ones from the CUDA sources inside the
wheel (README, "GPU"). ``optimized_kernel=None`` (default) uses the compiled kernels where installed. A
model moved to CUDA (``.to("cuda")``, ``.cuda()``) keeps them when their CUDA build is installed
(:func:`cuda_kernels_available`); otherwise it switches its DISCO layers to the pure-torch path (same
weights, same results up to rounding; see :meth:`DiscoUNet.use_torch_kernels`) on grids of at most
:data:`TORCH_PATH_MAX_POINTS` points, and REFUSES larger grids in one line naming the remedy (build the
kernels, or ``allow_slow_kernels=True``): the pure-torch path rolls the input once per longitude and basis
function, about 5.1 TB of memory traffic per sample forward and backward for the paper preset at 256x512,
at least 19 s per batch-16 step on an H200 (issue #69).
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_harmonics import DiscreteContinuousConvS2, DiscreteContinuousConvTransposeS2

from ..registry import register_preset_model
from .common import BaselineModel, group_norm, preset_table

try:  # whether torch-harmonics' compiled (CPU) DISCO kernels are installed
    from disco_helpers import optimized_kernels_is_available as _optimized_available
except ImportError:  # pragma: no cover

    def _optimized_available() -> bool:
        return False


__all__ = [
    "DiscoUNet",
    "DISCO_PRESETS",
    "TORCH_PATH_MAX_POINTS",
    "cuda_kernels_available",
    "refuse_slow_cuda_path",
    "rebuild_disco_layers_with_torch_kernels",
]

#: Data-grid points (nlat * nlon) up to which a DISCO model runs torch-harmonics' pure-torch DISCO path on CUDA
#: (64x128); above, a move to CUDA without the CUDA kernels raises unless ``allow_slow_kernels=True``.
TORCH_PATH_MAX_POINTS = 64 * 128


def cuda_kernels_available() -> bool:
    """Whether the installed torch-harmonics has its DISCO kernels compiled for CUDA (``disco_helpers``)."""
    try:
        from disco_helpers import cuda_kernels_is_available
    except ImportError:  # pragma: no cover
        return False
    return bool(cuda_kernels_is_available())


def refuse_slow_cuda_path(model: str, path: str, nlat: int, nlon: int, max_points: int, allow: bool) -> None:
    """Raise where ``model`` would run ``path`` (a pure-torch kernel) on CUDA at a grid above ``max_points`` points.

    Raises
    ------
    ValueError
        In one line naming both remedies, unless ``allow`` (the model's ``allow_slow_kernels``) or
        ``nlat * nlon <= max_points``.
    """
    if allow or nlat * nlon <= max_points:
        return
    raise ValueError(
        f"{model} on CUDA at {nlat}x{nlon} would run torch-harmonics' pure-torch {path} (its CUDA kernels are not "
        f"installed; impractical above {max_points} grid points): build them with "
        f"'python tools/gpu/build_torch_harmonics_cuda.py --install', or accept the slow path with "
        f"allow_slow_kernels=true (model.allow_slow_kernels=true)"
    )


#: Presets: Dandelion's scaffold (levels, blocks per level) with the width lowered to match its
#: parameter count (16 in, 4 out; resolution-free): tiny 6,756 vs 6,972; small 138,934 vs 147,268;
#: paper 18,470,308 vs 18,840,004 (Dandelion presets of commit 2466712). ``theta_cutoff`` = two grid
#: spacings of the preset's resolution (32, 64, 256 rows), in radians.
DISCO_PRESETS: dict[str, dict] = preset_table(
    dict(
        kernel_shape=(3, 3),
        basis_type="harmonic",
        position_channels=True,
        optimized_kernel=None,
        allow_slow_kernels=False,
    ),
    tiny=dict(width=8, multipliers=(1, 2), encoder_blocks=(1, 1), decoder_blocks=(1,), theta_cutoff=2 * math.pi / 32),
    small=dict(
        width=15, multipliers=(1, 2, 4), encoder_blocks=(1, 1, 2), decoder_blocks=(1, 1), theta_cutoff=2 * math.pi / 64
    ),
    paper=dict(
        width=72,
        multipliers=(1, 2, 4, 8),
        encoder_blocks=(2, 2, 2, 3),
        decoder_blocks=(2, 2, 2),
        theta_cutoff=2 * math.pi / 256,
    ),
)


def _disco(kind: str, **kw) -> nn.Module:
    cls = DiscreteContinuousConvS2 if kind == "conv" else DiscreteContinuousConvTransposeS2
    layer = cls(**kw)
    layer._dandelion_build = (kind, {k: v for k, v in kw.items() if k != "optimized_kernel"})
    return layer


def rebuild_disco_layers_with_torch_kernels(model: nn.Module) -> None:
    """Replace every DISCO layer made by :func:`_disco` inside ``model`` by one on the pure-torch path.

    Same weight and bias objects (so optimisers and state_dicts are unaffected); the new layers' sparse
    tables are built on the CPU in float64 by torch-harmonics and moved to the old layer's device and
    dtype. Used when a model is moved to CUDA (torch-harmonics' PyPI wheels compile CPU kernels only).
    """
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            build = getattr(child, "_dandelion_build", None)
            if build is None:
                continue
            kind, kw = build
            new = _disco(kind, optimized_kernel=False, **kw)
            device, dtype = child.weight.device, child.psi_vals.dtype
            new.to(device=device)
            for bname, buf in list(new.named_buffers(recurse=False)):
                if buf.is_floating_point():
                    setattr(new, bname, buf.to(dtype))
            new.weight = child.weight
            new.bias = child.bias
            for attr in ("psi", "psi_st"):
                if hasattr(new, attr):
                    setattr(new, attr, getattr(new, attr).to(device=device, dtype=dtype))
            setattr(parent, name, new)


class _Block(nn.Module):
    """Pre-norm residual block ``x + W(GELU(DISCO(GroupNorm(x))))`` on one grid."""

    def __init__(
        self,
        channels: int,
        shape,
        grid: str,
        theta_cutoff: float,
        kernel_shape,
        basis_type: str,
        optimized_kernel: bool,
    ):
        super().__init__()
        self.norm = group_norm(channels)
        self.conv = _disco(
            "conv",
            in_channels=channels,
            out_channels=channels,
            in_shape=shape,
            out_shape=shape,
            kernel_shape=kernel_shape,
            basis_type=basis_type,
            basis_norm_mode="nodal",
            grid_in=grid,
            grid_out=grid,
            bias=False,
            theta_cutoff=theta_cutoff,
            optimized_kernel=optimized_kernel,
        )
        self.mix = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        return x + self.mix(F.gelu(self.conv(self.norm(x))))


def _check_levels(levels: int, theta_cutoff: float, encoder_blocks, decoder_blocks) -> None:
    """Raise ValueError for a ``theta_cutoff`` the coarsest level cannot hold (it doubles per level) or block counts
    that are not one per level (one fewer on the way up)."""
    if not (theta_cutoff > 0 and theta_cutoff * 2 ** (levels - 1) < math.pi):
        raise ValueError(f"disco: theta_cutoff={theta_cutoff} rad must be > 0 and theta_cutoff * 2**(levels-1) < pi")
    if len(encoder_blocks) != levels or len(decoder_blocks) != levels - 1:
        raise ValueError(
            f"disco: need {levels} encoder_blocks and {levels - 1} decoder_blocks entries, "
            f"got {tuple(encoder_blocks)} and {tuple(decoder_blocks)}"
        )


class DiscoUNet(BaselineModel):
    """DISCO U-Net: ``(B, in_channels, nlat, nlon) -> (B, out_channels, nlat, nlon)``.

    Parameters
    ----------
    in_channels, out_channels : int
    nlat, nlon, grid :
        The data grid; ``nlon`` must divide by ``2**(levels-1)``.
    width : int
        Channels of level 0; level ``k`` has ``width * multipliers[k]``.
    multipliers : sequence of int
        One per level (``levels = len(multipliers)``).
    encoder_blocks, decoder_blocks : sequence of int
        Residual blocks per level on the way down (``levels`` entries) and up (``levels - 1``).
    kernel_shape, basis_type :
        DISCO filter basis (torch-harmonics names).
    theta_cutoff : float
        Filter radius at level 0 in radians (``0 < theta_cutoff``, ``theta_cutoff * 2**(levels-1) < pi``).
    position_channels : bool
        Append the unit position vector as 3 input channels.
    optimized_kernel : bool or None
        Use torch-harmonics' compiled DISCO kernels; None = where they are installed.
    allow_slow_kernels : bool
        Accept the pure-torch DISCO path on CUDA above :data:`TORCH_PATH_MAX_POINTS` grid points.

    Raises
    ------
    ValueError
        For bad grids, ``nlon`` not divisible by ``2**(levels-1)``, too few rows for the levels,
        or a ``theta_cutoff`` out of range; on a move to CUDA that would run the pure-torch path on a grid
        above :data:`TORCH_PATH_MAX_POINTS` points without ``allow_slow_kernels``.
    """

    model_name = "disco"
    resolution_dependent = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        nlat: int,
        nlon: int,
        grid: str = "equiangular",
        *,
        width: int = 12,
        multipliers=(1, 2),
        encoder_blocks=(1, 1),
        decoder_blocks=(1,),
        kernel_shape=(3, 3),
        basis_type: str = "harmonic",
        theta_cutoff: float = 2 * math.pi / 32,
        position_channels: bool = True,
        optimized_kernel: bool | None = None,
        allow_slow_kernels: bool = False,
    ):
        super().__init__()
        self.allow_slow_kernels = bool(allow_slow_kernels)
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
            nlat_min=2 * div,
            nlon_reason=f"2**(levels-1) for {levels} levels: use fewer levels or another nlon",
        )
        _check_levels(levels, theta_cutoff, encoder_blocks, decoder_blocks)
        if optimized_kernel is None:
            optimized_kernel = _optimized_available()
        self.optimized_kernel = bool(optimized_kernel) and _optimized_available()
        self.theta_cutoff = float(theta_cutoff)
        ch = [int(width * m) for m in multipliers]
        shapes = [(nlat, nlon)] + [(math.ceil(nlat / 2**k), nlon // 2**k) for k in range(1, levels)]
        grids = [grid] + ["legendre-gauss"] * (levels - 1)
        thetas = [theta_cutoff * 2**k for k in range(levels)]
        opt = self.optimized_kernel
        common = dict(kernel_shape=tuple(kernel_shape), basis_type=basis_type)

        self.lift = nn.Sequential(nn.Conv2d(c_in, width, 1), nn.GELU(), nn.Conv2d(width, ch[0], 1))

        def blocks(k, n):
            return nn.Sequential(
                *[_Block(ch[k], shapes[k], grids[k], thetas[k], optimized_kernel=opt, **common) for _ in range(n)]
            )

        self.down_blocks = nn.ModuleList([blocks(k, encoder_blocks[k]) for k in range(levels)])

        def resample(kind: str, k: int, src: int, dst: int) -> nn.Module:  # level src -> level dst (k, k + 1)
            return _disco(
                kind,
                in_channels=ch[src],
                out_channels=ch[dst],
                in_shape=shapes[src],
                out_shape=shapes[dst],
                basis_norm_mode="nodal",
                grid_in=grids[src],
                grid_out=grids[dst],
                bias=True,
                theta_cutoff=thetas[k + 1],
                optimized_kernel=opt,
                **common,
            )

        self.downs = nn.ModuleList([resample("conv", k, k, k + 1) for k in range(levels - 1)])
        self.ups = nn.ModuleList([resample("transpose", k, k + 1, k) for k in range(levels - 1)])
        self.merges = nn.ModuleList([nn.Conv2d(2 * ch[k], ch[k], 1) for k in range(levels - 1)])
        self.up_blocks = nn.ModuleList([blocks(k, decoder_blocks[k]) for k in range(levels - 1)])
        self.head_norm = group_norm(ch[0])
        self.head = nn.Sequential(nn.Conv2d(ch[0], ch[0], 1), nn.GELU(), nn.Conv2d(ch[0], out_channels, 1))

    # -- kernels --------------------------------------------------------------------------------
    def use_torch_kernels(self) -> None:
        """Rebuild every DISCO layer with ``optimized_kernel=False`` (pure-torch path), keeping weights.

        Called automatically when the model is moved to CUDA without torch-harmonics' CUDA kernels (those
        of its PyPI wheels are CPU only). The new layers' tables are built on the CPU in float64 by
        torch-harmonics and moved to the weights' device.
        """
        if not self.optimized_kernel:
            return
        rebuild_disco_layers_with_torch_kernels(self)
        self.optimized_kernel = False

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        if self._on_cuda() and not (self.optimized_kernel and cuda_kernels_available()):
            nlat, nlon = self.grid_spec["nlat"], self.grid_spec["nlon"]
            refuse_slow_cuda_path("disco", "DISCO path", nlat, nlon, TORCH_PATH_MAX_POINTS, self.allow_slow_kernels)
            if self.optimized_kernel:
                warnings.warn(
                    "DiscoUNet moved to CUDA: switching DISCO layers to torch-harmonics' pure-torch kernels "
                    "(its compiled ones are CPU only here; tools/gpu/build_torch_harmonics_cuda.py builds them)",
                    stacklevel=2,
                )
                self.use_torch_kernels()
        return out

    # -- forward --------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` : ``(B, in_channels, nlat, nlon)`` -> ``(B, out_channels, nlat, nlon)``."""
        x = self.lift(self.prepare_input(x))
        skips = []
        for k, blocks in enumerate(self.down_blocks):
            x = blocks(x)
            if k < len(self.downs):
                skips.append(x)
                x = self.downs[k](x)
        for k in reversed(range(len(self.ups))):
            x = self.ups[k](x)
            x = self.merges[k](torch.cat([skips[k], x], dim=1))
            x = self.up_blocks[k](x)
        return self.head(self.head_norm(x))


#: Kernel choices: they change how the network runs, not what it is (dandelion.registry.execution_keys).
_EXECUTION_ONLY = ("optimized_kernel", "allow_slow_kernels")
#: Builds :class:`DiscoUNet` from a preset (:data:`DISCO_PRESETS`) and overrides of its keys.
build_disco = register_preset_model("disco", DiscoUNet, DISCO_PRESETS, execution=_EXECUTION_ONLY)
