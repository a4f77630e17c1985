"""Spherical transformer baseline: neighbourhood attention on the sphere (torch-harmonics' layers).

Bonev, Rietmann, Paris, Ocampo, Kurth et al. 2025, "Attention on the Sphere" (arXiv:2505.11157),
Sec. 3-4: self-attention whose softmax integrates over a geodesic disk of radius ``theta`` against
the grid's quadrature weights (their eq. for neighbourhood attention; an approximately SO(3)-equivariant
operator), in the pre-norm transformer block of their S2 transformer. The network follows
torch-harmonics' ``examples.models.SphericalTransformer`` and is assembled from torch-harmonics' layers:

* input: the unit position vector ``(x, y, z)`` is appended as 3 channels (as every model of the package);
* encoder: a DISCO convolution (:class:`~torch_harmonics.DiscreteContinuousConvS2`; Ocampo et al. 2023)
  from the data grid to an internal Legendre-Gauss grid of ``(nlat - 1) // scale_factor + 1`` rows and
  ``nlon // scale_factor`` columns (torch-harmonics' formula);
* ``num_layers`` blocks :class:`torch_harmonics.examples.models.s2transformer.SphericalAttentionBlock`:
  ``x + Attn(Norm(x))`` with :class:`~torch_harmonics.NeighborhoodAttentionS2`, then ``x + MLP(Norm(x))``;
* decoder: bilinear resampling back to the data grid (:class:`~torch_harmonics.ResampleS2`) and a DISCO
  convolution on the data grid to ``out_channels``.

torch-harmonics' own encoder and decoder classes derive their filter radii from the grid (and know only
the older filter bases), so the two convolutions are built here directly, as in
:mod:`dandelion.baselines.disco`: basis ``"harmonic"``, ``kernel_shape = (3, 3)``, ``basis_norm_mode="nodal"``.

Radii (RADIANS, fixed by the preset, so the same weights mean the same operator on every grid):
``theta_cutoff`` for the decoder convolution on the data grid, ``scale_factor * theta_cutoff`` for the
encoder (onto the coarser internal grid), ``attention_cutoff`` for the neighbourhood of the attention.
The presets set ``theta_cutoff`` to two grid spacings of the preset's resolution (``2 pi / nlat``, as the
DISCO baseline) and ``attention_cutoff`` to two spacings of the internal grid there
(``2 pi / (nlat / scale_factor)``); on a coarser grid a disk covers fewer nodes, on a finer one more
(the attention's cost grows with the nodes per disk).

Weights do not depend on the grid (``resolution_dependent = False``): 1x1 projections, MLPs, norms and
DISCO filter weights; the sparse neighbourhood and filter tables are non-persistent buffers rebuilt in
``__init__``. Attention runs in float32 with autocast off (``_Float32Attention``); torch-harmonics'
block switches autocast off on CUDA only.

Kernels: torch-harmonics' compiled attention and DISCO kernels are used when installed; its PyPI wheels
carry them for the CPU only (``tools/gpu/build_torch_harmonics_cuda.py`` builds the CUDA ones from the
sources inside the wheel). The pure-torch attention path is a Python loop over output points and
neighbours: at the tiny preset and 32x64, 17.7 s forward and 95.8 s backward against 0.14 s and 0.13 s on
the compiled kernels (issue #69). Moving the model to CUDA without the CUDA kernels switches the attention
and DISCO layers to the pure-torch path (same weights; :meth:`S2Transformer.use_torch_kernels`) on grids of
at most :data:`TORCH_PATH_MAX_POINTS` points and REFUSES larger ones in one line naming the remedy (build
the kernels, or ``allow_slow_kernels=True``).
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn as nn
from torch_harmonics import ResampleS2
from torch_harmonics.examples.models.s2transformer import SphericalAttentionBlock

from ..registry import register_preset_model
from .common import BaselineModel, preset_table
from .disco import _disco, cuda_kernels_available, rebuild_disco_layers_with_torch_kernels, refuse_slow_cuda_path

try:  # whether torch-harmonics' compiled kernels are installed (CPU and, separately, CUDA)
    from attention_helpers import cuda_kernels_is_available as _attention_cuda_available
    from disco_helpers import optimized_kernels_is_available as _optimized_available
except ImportError:  # pragma: no cover

    def _optimized_available() -> bool:
        return False

    def _attention_cuda_available() -> bool:
        return False


__all__ = ["S2Transformer", "S2TRANSFORMER_PRESETS", "TORCH_PATH_MAX_POINTS"]

#: Data-grid points (nlat * nlon) up to which the model runs torch-harmonics' pure-torch attention on CUDA (16x32);
#: above, a move to CUDA without the CUDA kernels raises unless ``allow_slow_kernels=True``.
TORCH_PATH_MAX_POINTS = 16 * 32

#: Presets, matched to Dandelion's (16 in, 4 out channels; resolution-free): tiny 7,380 vs 7,023;
#: small 145,856 vs 147,319; paper 17,976,816 vs 18,840,055. ``theta_cutoff`` and ``attention_cutoff``
#: in radians: two grid spacings of the data grid and of the internal grid at 32x64 (tiny), 64x128
#: (small) and 256x512 (paper).
S2TRANSFORMER_PRESETS: dict[str, dict] = preset_table(
    dict(
        num_layers=4,
        scale_factor=2,
        mlp_ratio=2.0,
        normalization_layer="layer_norm",
        position_channels=True,
        optimized_kernel=None,
        allow_slow_kernels=False,
    ),
    tiny=dict(embed_dim=12, num_heads=4, theta_cutoff=2 * math.pi / 32, attention_cutoff=2 * math.pi / 16),
    small=dict(embed_dim=64, num_heads=8, theta_cutoff=2 * math.pi / 64, attention_cutoff=2 * math.pi / 32),
    paper=dict(
        embed_dim=528, num_layers=8, num_heads=8, theta_cutoff=2 * math.pi / 256, attention_cutoff=2 * math.pi / 128
    ),
)


class _Float32Attention(nn.Module):
    """Run a torch-harmonics attention layer in float32 with autocast off on the input's device.

    ``(B, C, H, W) -> (B, C_out, H, W)`` float32; the surrounding block casts back to its dtype. Holds the
    layer as ``self.attn`` (its parameters keep their names under ``attn.``).
    """

    def __init__(self, attn: nn.Module):
        super().__init__()
        self.attn = attn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self.attn(x.float())


def _attention_to_torch(model: nn.Module) -> None:
    """Point every torch-harmonics attention layer in ``model`` at the pure-torch kernel."""
    from torch_harmonics.attention.kernels_torch.attention_torch import _neighborhood_s2_attention_torch

    for m in model.modules():
        if getattr(m, "attention_handle", None) is not None:
            m.attention_handle, m.optimized_kernel = _neighborhood_s2_attention_torch, False


def _check_options(embed_dim: int, num_heads: int, sf: int, theta_cutoff: float, attention_cutoff: float) -> None:
    """Raise ValueError for heads that do not divide the embedding or a radius out of range."""
    if embed_dim % num_heads:
        raise ValueError(f"s2transformer: num_heads={num_heads} must divide embed_dim={embed_dim}")
    if not (0 < theta_cutoff and sf * theta_cutoff < math.pi and 0 < attention_cutoff < math.pi):
        raise ValueError(
            f"s2transformer: theta_cutoff={theta_cutoff} and attention_cutoff={attention_cutoff} rad must be "
            f"> 0 with scale_factor * theta_cutoff < pi and attention_cutoff < pi"
        )


def _attention_block(inner, embed_dim, num_heads, mlp_ratio, normalization_layer, attention_cutoff) -> nn.Module:
    """One neighbourhood-attention block of torch-harmonics on the internal Legendre-Gauss grid ``inner``, its
    attention computed in float32 (:class:`_Float32Attention`)."""
    block = SphericalAttentionBlock(
        in_shape=inner,
        out_shape=inner,
        grid_in="legendre-gauss",
        grid_out="legendre-gauss",
        in_chans=embed_dim,
        out_chans=embed_dim,
        num_heads=num_heads,
        mlp_ratio=mlp_ratio,
        drop_rate=0.0,
        drop_path=0.0,
        act_layer=nn.GELU,
        norm_layer=normalization_layer,
        use_mlp=True,
        bias=False,
        attention_mode="neighborhood",
        theta_cutoff=attention_cutoff,
    )
    block.self_attn = _Float32Attention(block.self_attn)
    return block


class S2Transformer(BaselineModel):
    """Spherical transformer: ``(B, in_channels, nlat, nlon) -> (B, out_channels, nlat, nlon)``.

    Parameters
    ----------
    in_channels, out_channels : int
    nlat, nlon, grid :
        The data grid; ``nlon`` must divide by ``scale_factor``.
    embed_dim, num_layers, num_heads, mlp_ratio :
        Width, attention blocks, heads (must divide ``embed_dim``) and MLP hidden width / ``embed_dim``.
    scale_factor : int
        Internal Legendre-Gauss grid of ``(nlat - 1) // scale_factor + 1`` by ``nlon // scale_factor``.
    normalization_layer : str
        ``"layer_norm"``, ``"instance_norm"`` or ``"none"`` (torch-harmonics' block's names).
    theta_cutoff, attention_cutoff : float
        Radii in radians (module docstring); ``0 < scale_factor * theta_cutoff < pi`` and
        ``0 < attention_cutoff < pi``.
    position_channels : bool
        Append the unit position vector as 3 input channels.
    optimized_kernel : bool or None
        Use torch-harmonics' compiled kernels; None = when installed.
    allow_slow_kernels : bool
        Accept the pure-torch attention and DISCO paths on CUDA above :data:`TORCH_PATH_MAX_POINTS` grid points.

    Raises
    ------
    ValueError
        For a bad grid, ``nlon`` not divisible by ``scale_factor``, heads not dividing ``embed_dim``, or
        a radius out of range; on a move to CUDA that would run the pure-torch attention on a grid above
        :data:`TORCH_PATH_MAX_POINTS` points without ``allow_slow_kernels``.
    """

    model_name = "s2transformer"
    resolution_dependent = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        nlat: int,
        nlon: int,
        grid: str = "equiangular",
        *,
        embed_dim: int = 32,
        num_layers: int = 4,
        num_heads: int = 4,
        scale_factor: int = 2,
        mlp_ratio: float = 2.0,
        normalization_layer: str = "layer_norm",
        theta_cutoff: float = 2 * math.pi / 32,
        attention_cutoff: float = 2 * math.pi / 16,
        position_channels: bool = True,
        optimized_kernel: bool | None = None,
        allow_slow_kernels: bool = False,
    ):
        super().__init__()
        self.allow_slow_kernels = bool(allow_slow_kernels)
        sf = int(scale_factor)
        c_in = self.init_interface(
            in_channels,
            out_channels,
            nlat,
            nlon,
            grid,
            position_channels,
            nlon_divisor=sf,
            nlat_min=2 * sf,
            nlon_reason=f"scale_factor={sf}: use another scale_factor or nlon",
        )
        _check_options(embed_dim, num_heads, sf, theta_cutoff, attention_cutoff)
        if optimized_kernel is None:
            optimized_kernel = _optimized_available()
        self.optimized_kernel = opt = bool(optimized_kernel) and _optimized_available()
        data, inner = (int(nlat), int(nlon)), ((nlat - 1) // sf + 1, nlon // sf)
        self.internal_shape = inner
        conv = dict(kernel_shape=(3, 3), basis_type="harmonic", basis_norm_mode="nodal", bias=False)

        self.encoder = _disco(
            "conv",
            in_channels=c_in,
            out_channels=embed_dim,
            in_shape=data,
            out_shape=inner,
            grid_in=grid,
            grid_out="legendre-gauss",
            theta_cutoff=sf * theta_cutoff,
            optimized_kernel=opt,
            **conv,
        )
        self.blocks = nn.ModuleList(
            _attention_block(inner, embed_dim, num_heads, mlp_ratio, normalization_layer, attention_cutoff)
            for _ in range(int(num_layers))
        )
        self.upsample = ResampleS2(*inner, *data, grid_in="legendre-gauss", grid_out=grid)
        self.decoder = _disco(
            "conv",
            in_channels=embed_dim,
            out_channels=out_channels,
            in_shape=data,
            out_shape=data,
            grid_in=grid,
            grid_out=grid,
            theta_cutoff=theta_cutoff,
            optimized_kernel=opt,
            **conv,
        )
        if not opt:
            _attention_to_torch(self)

    # -- kernels --------------------------------------------------------------------------------
    def use_torch_kernels(self) -> None:
        """Switch the attention layers and the DISCO convolutions to torch-harmonics' pure-torch path.

        Same parameters; called automatically on a move to CUDA when torch-harmonics has no compiled
        CUDA kernels. The attention keeps its neighbourhood tables (both paths read them).
        """
        _attention_to_torch(self)
        if self.optimized_kernel:
            rebuild_disco_layers_with_torch_kernels(self)
        self.optimized_kernel = False

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        if not self._on_cuda() or (self.optimized_kernel and _attention_cuda_available() and cuda_kernels_available()):
            return out
        nlat, nlon = self.grid_spec["nlat"], self.grid_spec["nlon"]
        refuse_slow_cuda_path("s2transformer", "attention", nlat, nlon, TORCH_PATH_MAX_POINTS, self.allow_slow_kernels)
        compiled = [getattr(m, "optimized_kernel", False) for m in self.modules() if m is not self]
        if any(compiled):
            warnings.warn(
                "S2Transformer moved to CUDA without torch-harmonics' compiled CUDA kernels: switching attention "
                "and DISCO layers to the pure-torch path",
                stacklevel=2,
            )
            self.use_torch_kernels()
        return out

    # -- forward --------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` : ``(B, in_channels, nlat, nlon)`` -> ``(B, out_channels, nlat, nlon)``; ValueError otherwise."""
        x = self.encoder(self.prepare_input(x))
        for block in self.blocks:
            x = block(x)
        return self.decoder(self.upsample(x))


#: Kernel choices: they change how the network runs, not what it is (dandelion.registry.execution_keys).
_EXECUTION_ONLY = ("optimized_kernel", "allow_slow_kernels")
#: Builds :class:`S2Transformer` from a preset (:data:`S2TRANSFORMER_PRESETS`) and overrides of its keys.
build_s2transformer = register_preset_model(
    "s2transformer", S2Transformer, S2TRANSFORMER_PRESETS, execution=_EXECUTION_ONLY
)
