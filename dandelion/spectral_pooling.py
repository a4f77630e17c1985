"""Spectral pooling between grids: truncate (down) or zero-pad (up) spherical harmonic coefficients.

docs/ARCHITECTURE.md §5. Down: ``RealSHT`` on the fine grid, keep degrees and orders below the coarse band
limit, ``InverseRealSHT`` on the coarse grid. Up: the reverse; the missing degrees are zero. Both
directions use the same band limit, so down then up is the orthogonal projection onto the
degrees ``< lmax`` (exact for fields already band-limited there).

Coarse U-Net levels live on Legendre-Gauss grids with ``ceil(nlat / 2**k)`` rows and
``nlon / 2**k`` columns (:func:`coarse_grid`), so odd-row data grids such as 721 x 1440 work.

The map is torch-harmonics' ``InverseRealSHT(RealSHT(x))`` with ``lmax = mmax`` (triangular truncation), its
two Legendre stages fused into one float64 matrix per order and stored in float32 (:class:`_Resample`). The
stages are built from torch-harmonics' public functions (``quadrature.precompute_latitudes``,
``legendre.legpoly``), the calls its transform modules make, not read from the modules' private buffers;
tests/dandelion/test_spectral_pooling.py checks the result against the public transforms. On autocast the
pooling runs in float32 (docs/ARCHITECTURE.md §3).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch_harmonics.fft import irfft, rfft
from torch_harmonics.legendre import legpoly
from torch_harmonics.quadrature import precompute_latitudes

from .sphere import SphereGrid

__all__ = ["coarse_grid", "pooling_band_limit", "SpectralResample", "SpectralDownsample", "SpectralUpsample"]


def coarse_grid(grid: SphereGrid, k: int) -> SphereGrid:
    """Grid of U-Net level ``k``: the data grid for ``k = 0``, else Legendre-Gauss ``ceil(nlat/2^k) x nlon/2^k``.

    Raises
    ------
    ValueError
        If ``nlon`` does not divide by ``2**k``.
    """
    if k == 0:
        return grid
    if grid.nlon % 2**k:
        raise ValueError(
            f"nlon={grid.nlon} must divide by 2**{k} = {2**k} for a U-Net level {k}: choose nlon a multiple of "
            f"{2**k} or fewer levels"
        )
    return SphereGrid(max(2, math.ceil(grid.nlat / 2**k)), grid.nlon // 2**k, "legendre-gauss")


def pooling_band_limit(fine: SphereGrid, coarse: SphereGrid) -> int:
    """Band limit (exclusive degree and order) shared by the two grids.

    ``min(fine.lmax, coarse.lmax, mmax(fine), mmax(coarse))`` with ``mmax(g) = (nlon - 1)//2 + 1``:
    every order the grid's longitudes resolve without a Nyquist ambiguity (even ``nlon`` loses the
    order ``nlon/2``, whose sine is zero at every node).
    """
    return min(fine.lmax, coarse.lmax, (fine.nlon - 1) // 2 + 1, (coarse.nlon - 1) // 2 + 1)


def legendre_analysis(grid: SphereGrid, band: int) -> torch.Tensor:
    """The Legendre stage of torch-harmonics' ``RealSHT(..., lmax=band, mmax=band)`` (orthonormal, Condon-Shortley
    phase): ``(band, band, nlat)`` float64 ``[m, l, k]``, the quadrature weight of row ``k`` (times ``2 pi``, the
    longitude integral of the forward-normalised FFT) times the Legendre function ``P_l^m`` there."""
    colatitude, weights = precompute_latitudes(grid.nlat, grid=grid.grid)
    weights = 2.0 * torch.pi * weights
    return torch.einsum("mlk,k->mlk", legpoly(band, band, torch.cos(colatitude)), weights).contiguous()


def legendre_synthesis(grid: SphereGrid, band: int) -> torch.Tensor:
    """The Legendre stage of torch-harmonics' ``InverseRealSHT(..., lmax=band, mmax=band)``: ``(band, nlat, band)``
    float64 ``[m, k, l]``, the Legendre function ``P_l^m`` at row ``k``."""
    colatitude, _ = precompute_latitudes(grid.nlat, grid=grid.grid)
    return legpoly(band, band, torch.cos(colatitude), inverse=True).permute(0, 2, 1).contiguous()


class SpectralResample(nn.Module):
    """Spectral resampling from ``grid_in`` to ``grid_out`` at band limit ``lmax`` (default :func:`pooling_band_limit`):
    the common base of :class:`SpectralDownsample` and :class:`SpectralUpsample` (see those for the parameters)."""

    def __init__(self, grid_in: SphereGrid, grid_out: SphereGrid, lmax: int | None = None):
        super().__init__()
        band = pooling_band_limit(grid_in, grid_out) if lmax is None else int(lmax)
        if band < 1 or band > pooling_band_limit(grid_in, grid_out):
            raise ValueError(
                f"lmax={lmax} must be in [1, {pooling_band_limit(grid_in, grid_out)}] for {grid_in} -> {grid_out}"
            )
        self.grid_in, self.grid_out, self.lmax, self.mmax = grid_in, grid_out, band, band
        resample = torch.matmul(legendre_synthesis(grid_out, band), legendre_analysis(grid_in, band))
        # the two Legendre stages composed, one (nlat_out, nlat_in) matrix per order m; entries below
        # 2**-100 (high orders at rows next to the poles, where the Legendre functions fall off as
        # sin(theta)**m) become 0: in float32 many are subnormal, and subnormal operands slow the CPU
        # matrix product several times (6.1 -> 2.2 ms for the 64x128 -> 32x64 forward); what they
        # contribute to an output is below 2**-100 times the input's size, far under rounding
        resample[resample.abs() < 2.0**-100] = 0.0
        self.register_buffer("resample", resample.to(torch.float32), persistent=False)

    def extra_repr(self) -> str:
        gi, go = self.grid_in, self.grid_out
        return f"{gi.nlat}x{gi.nlon} {gi.grid} -> {go.nlat}x{go.nlon} {go.grid}, lmax=mmax={self.lmax}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (..., nlat_in, nlon_in)`` -> ``(..., nlat_out, nlon_out)``; float32 under autocast."""
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x.float()
        with torch.autocast(device_type=x.device.type, enabled=False):
            return _Resample.apply(x, self.resample.to(x.dtype), self.mmax, self.grid_out.nlon)


class _Resample(torch.autograd.Function):
    """``irfft(R_m rfft(x)_m)``: the fused ``isht(sht(x))`` of :class:`SpectralResample` as one autograd node.

    Forward: per order m, the analysis (quadrature weights times Legendre functions, (lmax,
    nlat_in)) and the synthesis (Legendre functions, (nlat_out, lmax)) are one matrix
    ``R_m (nlat_out, nlat_in)`` computed once in float64, between torch-harmonics' truncated real
    FFT and its inverse (``norm="forward"``). The map is linear, so backward is its adjoint
    written out: ``rfft`` of the gradient (orders ``m > 0`` counted twice, they stand for
    ``+-m``), ``R_m^T``, and ``irfft`` back onto the input's longitudes (orders ``m > 0`` halved, all
    divided by ``nlon_in``). Autograd through the FFT functions would pad the spectrum to full
    length and run a complex-to-complex transform instead. Nothing is saved for backward.
    """

    @staticmethod
    def forward(ctx, x, resample, mmax: int, nlon_out: int):
        ctx.meta = (x.shape[-1], mmax)
        ctx.save_for_backward(resample)
        coeffs = torch.view_as_real(rfft(x, nmodes=mmax, dim=-1, norm="forward"))  # (..., nlat_in, mmax, 2)
        out = torch.einsum("...kmc,mok->...omc", coeffs, resample)
        return irfft(torch.view_as_complex(out.contiguous()), n=nlon_out, dim=-1, norm="forward")

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (resample,) = ctx.saved_tensors
        nlon_in, mmax = ctx.meta
        scale = torch.full((mmax,), 2.0, dtype=grad.dtype, device=grad.device)
        scale[0] = 1.0
        g = torch.fft.rfft(grad, dim=-1)[..., :mmax] * scale  # imaginary part of order 0: zero
        g = torch.einsum("...omc,mok->...kmc", torch.view_as_real(g), resample)
        g = torch.view_as_complex(g.contiguous()) / (nlon_in * scale)
        return torch.fft.irfft(g, n=nlon_in, dim=-1, norm="forward"), None, None, None


class SpectralDownsample(SpectralResample):
    """Spectral truncation from a fine grid to a coarse one.

    Parameters
    ----------
    grid_in, grid_out : SphereGrid
        Fine and coarse grids (``grid_out`` typically ``coarse_grid(grid_in, 1)``).
    lmax : int, optional
        Band limit (exclusive degree = exclusive order); default :func:`pooling_band_limit`.

    Shapes: ``(..., grid_in.nlat, grid_in.nlon) -> (..., grid_out.nlat, grid_out.nlon)``.

    Raises
    ------
    ValueError
        If ``lmax`` exceeds what both grids resolve.
    """


class SpectralUpsample(SpectralResample):
    """Spectral interpolation from a coarse grid to a fine one (degrees >= lmax are zero).

    Parameters
    ----------
    grid_in, grid_out : SphereGrid
        Coarse and fine grids.
    lmax : int, optional
        Band limit; default :func:`pooling_band_limit`.

    Shapes: ``(..., grid_in.nlat, grid_in.nlon) -> (..., grid_out.nlat, grid_out.nlon)``.
    """
