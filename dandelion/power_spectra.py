"""Angular power spectra of fields on the sphere.

``P(l) = (|f_l0|^2 + 2 sum_{m>=1} |f_lm|^2) / (4 pi)`` from the orthonormal real SHT (torch-harmonics
``RealSHT``), so ``sum_l P(l) = <f^2>`` (Parseval) for a field band-limited to the grid's analysis band
limit. On a masked (ocean) domain the spectrum is not defined; it is taken of the field with land filled
by the field's wet-area mean (zero anomaly on land), which keeps the wet variance and adds no land signal
(the coastline still leaks power into high degrees). Re-exported by :mod:`dandelion.metrics`.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch_harmonics import RealSHT

from dandelion.sphere import SphereGrid

from .quadrature import _check_wet, weighted_mean

__all__ = ["power_spectrum"]


@lru_cache(maxsize=16)
def _sht(nlat: int, nlon: int, grid: str, lmax: int, mmax: int, device: str):
    return RealSHT(nlat, nlon, lmax=lmax, mmax=mmax, grid=grid, norm="ortho").to(torch.device(device))


def power_spectrum(
    field: torch.Tensor, grid: SphereGrid, lmax: int | None = None, mmax: int | None = None, wet=None
) -> torch.Tensor:
    """Angular power spectrum per spherical-harmonic degree.

    Uses torch-harmonics ``RealSHT`` (orthonormal harmonics, ``lmax`` and ``mmax`` passed
    explicitly). ``P(l) = (|f_l0|^2 + 2 sum_{m=1}^{l} |f_lm|^2) / (4 pi)``, so that
    ``sum_l P(l)`` equals the area-weighted mean of ``f^2`` for a field band-limited to ``lmax``.

    Parameters
    ----------
    field : torch.Tensor of shape (..., nlat, nlon)
        Real field on ``grid`` (computed in float64).
    grid : SphereGrid
    lmax, mmax : int, optional
        Number of degrees / orders kept (exclusive bounds); default the grid's exact analysis band
        limit ``grid.lmax`` for both.
    wet : bool tensor (nlat, nlon), optional
        Ocean mask: land is filled with the field's area-weighted wet mean (zero anomaly) before the SHT.

    Returns
    -------
    torch.Tensor of shape (..., lmax), float64, in squared units of the field.
    """
    grid.check_shape(field)
    lmax = grid.lmax if lmax is None else int(lmax)
    mmax = lmax if mmax is None else int(mmax)
    if not (1 <= mmax <= lmax <= grid.lmax):
        raise ValueError(
            f"need 1 <= mmax={mmax} <= lmax={lmax} <= grid.lmax={grid.lmax} "
            f"for a {grid.nlat}x{grid.nlon} {grid.grid} grid"
        )
    sht = _sht(grid.nlat, grid.nlon, grid.grid, lmax, mmax, str(field.device))
    field = field.to(torch.float64)
    if wet is not None:
        wet = _check_wet(wet, field)
        field = torch.where(wet, field, weighted_mean(field, grid, wet)[..., None, None])
    coeffs = sht(field)  # (..., lmax, mmax) complex
    power = coeffs.abs() ** 2
    power[..., 1:] *= 2.0
    return power.sum(-1) / (4.0 * math.pi)
