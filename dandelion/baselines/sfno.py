"""SFNO baseline: torch-harmonics' Spherical Fourier Neural Operator on the common model interface.

Bonev et al. 2023, "Spherical Fourier Neural Operators: Learning Stable Dynamics on the Sphere"
(ICML), Sec. 4: lift by a pointwise encoder, ``num_layers`` blocks of a spectral convolution
(Driscoll-Healy: one complex weight per in/out channel pair and degree ``l``, eq. 9) plus a pointwise
MLP, pointwise decoder. The network itself is
:class:`torch_harmonics.examples.models.SphericalFourierNeuralOperator`; this module only wraps it.

Band limits (set explicitly, never left to torch-harmonics' defaults, docs/ARCHITECTURE.md §3):

* The data grid ``(nlat, nlon, grid)`` is passed through as ``img_size`` and ``grid``.
* The internal grid is Legendre-Gauss with ``h = (nlat - 1) // scale_factor + 1`` rows and
  ``w = nlon // scale_factor`` columns (torch-harmonics' formula), ``scale_factor = 2`` by default
  (as in torch-harmonics' shallow-water examples).
* Every SHT in the model uses ``lmax = mmax = L`` with, by default,
  ``L = min(lmax of the data grid, h, w // 2)`` (``lmax`` of the data grid = ``(nlat+1)//2``
  equiangular, ``nlat`` Legendre-Gauss): no degree beyond what the data grid analyses exactly and the
  internal grid resolves. torch-harmonics derives ``L`` from ``hard_thresholding_fraction``; we compute
  the fraction that yields exactly ``L`` and check the built model's ``lmax``/``mmax``.

Because the spectral weights have shape ``(C, C, L)``, the weights depend on the resolution
(``resolution_dependent = True``): a state_dict made at one ``(nlat, nlon)`` is refused at another
(:mod:`dandelion.grid_guard`). Parameters are complex; :func:`count_real_parameters` counts 2 per
complex entry, and the presets are matched on that count.

Parameter matching on every grid: the count grows as ``2 E^2 L`` per block (``E = embed_dim``), so a
fixed width would halve the count from 64x128 (L = 32) to 32x64 (L = 16). Each preset therefore fixes
a reference point (width ``matched_embed_dim`` at the grid ``matched_at``, matched once to Dandelion's
preset) and, on any other grid, takes the width whose count is nearest the reference count
(:func:`sfno_matched_embed_dim`, counts in closed form by :func:`sfno_parameter_count`). The width is
a function of ``L`` alone (plus the channels and the other hyper-parameters), so two grids with the
same band limit get the same width and can exchange weights where the grid guard allows it.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch_harmonics.examples.models import SphericalFourierNeuralOperator

from ..registry import register_preset_model
from ..sphere import analysis_lmax
from .common import BaselineModel, preset_table

__all__ = [
    "SFNO",
    "SFNO_PRESETS",
    "sfno_band_limit",
    "sfno_parameter_count",
    "sfno_matched_embed_dim",
    "Float32Transform",
]

#: Presets. ``embed_dim=None`` lets :func:`sfno_matched_embed_dim` choose the width on every grid so the
#: count stays that of width ``matched_embed_dim`` at the grid ``matched_at`` (the rule of the module
#: docstring); an integer ``embed_dim`` override fixes the width instead. The reference points were
#: matched to Dandelion's presets (16 in, 4 out channels; real scalars, complex counted twice): tiny
#: 7,273 at 32x64 (L = 16) vs 7,023; small 144,601 at 64x128 (L = 32) vs 147,319; paper 19,240,056 at
#: 256x512 (L = 128) vs 18,840,055.
SFNO_PRESETS: dict[str, dict] = preset_table(
    dict(
        embed_dim=None,
        num_layers=4,
        scale_factor=2,
        mlp_ratio=2.0,
        lmax=None,
        position_channels=True,
        normalization_layer="none",
    ),
    tiny=dict(matched_embed_dim=7, matched_at=(32, 64)),
    small=dict(matched_embed_dim=23, matched_at=(64, 128)),
    paper=dict(matched_embed_dim=136, matched_at=(256, 512)),
)


def sfno_band_limit(nlat: int, nlon: int, grid: str, scale_factor: int) -> int:
    """Default SHT band limit ``L = min(lmax of the data grid, h, w // 2)`` (see module docstring)."""
    h = (nlat - 1) // scale_factor + 1
    w = nlon // scale_factor
    return int(min(analysis_lmax(nlat, grid), h, w // 2))


def sfno_parameter_count(
    embed_dim: int,
    lmax: int,
    in_channels: int,
    out_channels: int,
    *,
    num_layers: int,
    mlp_ratio: float,
    position_channels: bool,
    normalization_layer: str,
) -> int:
    """Trainable real scalars of :class:`SFNO` in closed form (complex weights counted twice).

    With ``E = embed_dim``, ``L = lmax``, ``H = int(E * mlp_ratio)`` and ``C = in_channels (+ 3)``::

        N = C E + num_layers (2 E^2 L + 2 H E + H + n_norm) + E out_channels

    one 1x1 encoder and decoder without bias, per block the Driscoll-Healy spectral weight (``E x E x L``
    complex, Bonev et al. 2023, eq. 9) and the two-layer MLP (bias on its first layer only), and
    ``n_norm`` the affine norm of a block: 0 for ``"none"``, ``2 E`` for ``"instance_norm"``. The tests
    check it against the built model.

    Raises
    ------
    ValueError
        For ``"layer_norm"`` (torch-harmonics' SFNO normalises over the grid, so its weights are counted
        per node, not per channel) or another unknown ``normalization_layer``.
    """
    e, h = int(embed_dim), int(embed_dim * mlp_ratio)
    c_in = int(in_channels) + (3 if position_channels else 0)
    if normalization_layer == "none":
        norm = 0
    elif normalization_layer == "instance_norm":
        norm = 2 * e
    else:
        raise ValueError(
            f"sfno: no closed-form count for normalization_layer={normalization_layer!r}: "
            "use 'none' or 'instance_norm', or give embed_dim explicitly"
        )
    return int(c_in * e + num_layers * (2 * e * e * int(lmax) + 2 * h * e + h + norm) + e * int(out_channels))


def sfno_matched_embed_dim(lmax: int, reference_lmax: int, reference_embed_dim: int, **count_args) -> int:
    """The width whose parameter count at band limit ``lmax`` is nearest that of the reference width.

    ``argmin_E |N(E, lmax) - N(reference_embed_dim, reference_lmax)|`` with ``N`` =
    :func:`sfno_parameter_count` and ``count_args`` its other arguments (ties go to the narrower
    width). The spectral weights grow as ``E^2 L``, so a grid with half the band limit gets about
    ``sqrt(2)`` times the width and the same count; the width depends on the grid only through ``L``.
    """
    target = sfno_parameter_count(reference_embed_dim, reference_lmax, **count_args)
    best, best_err, e = 1, None, 1
    while True:
        err = abs(sfno_parameter_count(e, lmax, **count_args) - target)
        if best_err is None or err < best_err:
            best, best_err = e, err
        elif sfno_parameter_count(e, lmax, **count_args) > target:  # the count grows with E: past the optimum
            return best
        e += 1


class Float32Transform(nn.Module):
    """Run a spherical harmonic transform in single precision with autocast off, on any device.

    torch-harmonics' SHTs contract real and complex float32 tables with the input; under
    ``torch.autocast(dtype=torch.bfloat16)`` the contraction would run in bfloat16, which the complex
    kernels refuse (``Expected both inputs to be Half, Float or Double tensors``), and torch-harmonics'
    SFNO only switches autocast off on CUDA. This wrapper switches it off on the input's device and
    casts the input to float32 (complex64 for coefficients), so the transform's numbers are those of a
    float32 run. Outside autocast with float32 input it is the identity around the transform.

    Parameters
    ----------
    transform : torch_harmonics.RealSHT or torch_harmonics.InverseRealSHT
        Kept as ``self.transform``; its ``nlat``, ``nlon``, ``lmax``, ``mmax`` are exposed unchanged.
        The transform has no persistent buffers, so state_dicts are unchanged by the wrapping.
    """

    def __init__(self, transform: nn.Module):
        super().__init__()
        self.transform = transform
        for key in ("nlat", "nlon", "lmax", "mmax", "grid"):
            if hasattr(transform, key):
                setattr(self, key, getattr(transform, key))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` : real ``(..., nlat, nlon)`` (forward SHT) or complex ``(..., lmax, mmax)`` (inverse SHT)."""
        x = x.to(torch.complex64) if x.is_complex() else x.to(torch.float32)
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self.transform(x)


def _keep_transforms_in_float32(sfno: nn.Module) -> None:
    """Wrap every SHT of a torch-harmonics SFNO in :class:`Float32Transform` (the model's own attributes and
    the references its spectral convolutions hold)."""
    wrapped = {}
    for name in ("trans_down", "itrans_up", "trans", "itrans"):
        t = getattr(sfno, name)
        wrapped[id(t)] = Float32Transform(t)
        setattr(sfno, name, wrapped[id(t)])
    for block in sfno.blocks:
        conv = block.global_conv
        conv.forward_transform = wrapped[id(conv.forward_transform)]
        conv.inverse_transform = wrapped[id(conv.inverse_transform)]


class SFNO(BaselineModel):
    """SFNO on the common interface: ``(B, in_channels, nlat, nlon) -> (B, out_channels, nlat, nlon)``.

    Parameters
    ----------
    in_channels, out_channels : int
        Input channels (frames folded into channels) and output channels (the next frame).
    nlat, nlon, grid :
        The data grid (torch-harmonics grid name).
    embed_dim, num_layers, mlp_ratio, normalization_layer :
        Passed to ``SphericalFourierNeuralOperator`` (dropout and drop-path are 0; no positional
        embedding inside the SFNO; ``bias=False`` as torch-harmonics' default).
    scale_factor : int
        Internal Legendre-Gauss grid of ``(nlat - 1) // scale_factor + 1`` by ``nlon // scale_factor``.
    lmax : int or None
        Band limit (``lmax = mmax``) of every SHT; None = :func:`sfno_band_limit`.
    position_channels : bool
        Append the unit position vector ``(x, y, z)`` as 3 input channels (Dandelion's lift does the
        same), so the model can know the latitude.

    Raises
    ------
    ValueError
        For an unknown grid, a grid too coarse for ``scale_factor``, or ``lmax`` above the default
        band limit (the internal grid or the data grid cannot resolve it).
    """

    model_name = "sfno"
    resolution_dependent = True

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
        scale_factor: int = 2,
        mlp_ratio: float = 2.0,
        lmax: int | None = None,
        position_channels: bool = True,
        normalization_layer: str = "none",
    ):
        super().__init__()
        c_in = self.init_interface(
            in_channels, out_channels, nlat, nlon, grid, position_channels, nlat_min=2 * scale_factor
        )
        l_default = sfno_band_limit(nlat, nlon, grid, scale_factor)
        if lmax is None:
            lmax = l_default
        if not 1 <= lmax <= l_default:
            raise ValueError(
                f"sfno: lmax={lmax} must be in [1, {l_default}] for grid ({nlat}, {nlon}, {grid!r}) and "
                f"scale_factor={scale_factor}; lower lmax or scale_factor"
            )
        h, w = (nlat - 1) // scale_factor + 1, nlon // scale_factor
        m0 = min(h, w // 2)  # torch-harmonics: modes = int(min(h, w // 2 + 1 - 1) * fraction)
        fraction = (lmax + 0.5) / m0
        self.lmax = self.mmax = int(lmax)
        self.sfno = SphericalFourierNeuralOperator(
            img_size=(nlat, nlon),
            grid=grid,
            grid_internal="legendre-gauss",
            scale_factor=scale_factor,
            in_chans=c_in,
            out_chans=out_channels,
            embed_dim=embed_dim,
            num_layers=num_layers,
            activation_function="gelu",
            encoder_layers=1,
            use_mlp=True,
            mlp_ratio=mlp_ratio,
            drop_rate=0.0,
            drop_path_rate=0.0,
            normalization_layer=normalization_layer,
            hard_thresholding_fraction=fraction,
            residual_prediction=False,
            pos_embed="none",
            bias=False,
        )
        for t in (self.sfno.trans_down, self.sfno.itrans_up, self.sfno.trans, self.sfno.itrans):
            if (t.lmax, t.mmax) != (self.lmax, self.mmax):  # pragma: no cover - guards a torch-harmonics change
                raise RuntimeError(
                    f"sfno: torch-harmonics built an SHT with (lmax, mmax) = {(t.lmax, t.mmax)}, "
                    f"expected {(self.lmax, self.mmax)}"
                )
        _keep_transforms_in_float32(self.sfno)  # bf16 autocast on CPU and CUDA: the SHTs stay float32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` : ``(B, in_channels, nlat, nlon)`` -> ``(B, out_channels, nlat, nlon)``."""
        return self.sfno(self.prepare_input(x))


def _matched_width(cfg: dict, in_channels: int, out_channels: int, nlat: int, nlon: int, grid: str) -> dict:
    """The :class:`SFNO` arguments of a resolved preset: ``matched_at`` and ``matched_embed_dim`` replaced by
    the width they imply on this grid.

    With ``embed_dim=None`` (the presets) the width is :func:`sfno_matched_embed_dim` for the band limit
    of this grid (``lmax``, or :func:`sfno_band_limit` when ``lmax`` is None) against the reference width
    ``matched_embed_dim`` at the default band limit of the grid ``matched_at`` (same grid type and
    ``scale_factor``). An integer ``embed_dim`` is used as given.
    """
    matched_at, matched_embed_dim = cfg.pop("matched_at"), cfg.pop("matched_embed_dim")
    if cfg["embed_dim"] is None:
        sf = int(cfg["scale_factor"])
        lmax = cfg["lmax"] if cfg["lmax"] is not None else sfno_band_limit(nlat, nlon, grid, sf)
        cfg["embed_dim"] = sfno_matched_embed_dim(
            max(1, int(lmax)),
            sfno_band_limit(int(matched_at[0]), int(matched_at[1]), grid, sf),
            int(matched_embed_dim),
            in_channels=in_channels,
            out_channels=out_channels,
            num_layers=int(cfg["num_layers"]),
            mlp_ratio=float(cfg["mlp_ratio"]),
            position_channels=bool(cfg["position_channels"]),
            normalization_layer=str(cfg["normalization_layer"]),
        )
    return cfg


#: Builds :class:`SFNO` from a preset (:data:`SFNO_PRESETS`) and overrides of its keys, the width matched
#: to the grid by :func:`_matched_width`.
build_sfno = register_preset_model("sfno", SFNO, SFNO_PRESETS, prepare=_matched_width)
