"""Area quadrature weights on the sphere and weighted means, over the whole grid or over wet points.

The statistics of :mod:`dandelion.metrics`, :mod:`dandelion.power_spectra` and :mod:`dandelion.loss` are built
on these: ``w`` is the grid's quadrature weight (:attr:`dandelion.sphere.SphereGrid.weights`) normalised to
sum 1 over the grid and ``<f> = sum(w f)``. With a ``wet`` mask (bool ``(nlat, nlon)``, True on ocean) ``w``
is the quadrature weight times the mask, normalised to sum 1 over the wet points, and values on land (NaN
included) are replaced by 0 before any product.
"""

from __future__ import annotations

import math

import torch

from dandelion.sphere import SphereGrid

__all__ = ["area_weights", "weighted_mean"]


def area_weights(grid: SphereGrid, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """Quadrature weights of ``grid`` normalised to sum 1 over all ``nlat * nlon`` points.

    Returns
    -------
    torch.Tensor of shape (nlat, 1)
        ``grid.weights / (4 pi)``; multiply by a field of shape ``(..., nlat, nlon)`` and sum over the
        last two dimensions for the area-weighted mean.
    """
    return (grid.weights / (4.0 * math.pi)).to(dtype=dtype, device=device)


def _check_wet(wet, like: torch.Tensor) -> torch.Tensor:
    wet = torch.as_tensor(wet, device=like.device)
    if wet.dtype != torch.bool or wet.shape != like.shape[-2:]:
        raise ValueError(
            f"wet mask of dtype {wet.dtype} and shape {tuple(wet.shape)} "
            f"does not fit fields of shape {tuple(like.shape)}: "
            "pass a bool (nlat, nlon) tensor, True on wet points (WindowDataset.wet)"
        )
    if not wet.any():
        raise ValueError("the wet mask has no wet point: nothing to average over; check the dataset's mask/wet")
    return wet


def _as_weights(weights, like: torch.Tensor, wet=None) -> torch.Tensor:
    if isinstance(weights, SphereGrid):
        weights = weights.weights
    w = torch.as_tensor(weights).to(dtype=like.dtype, device=like.device)
    if w.ndim == 1:
        w = w[:, None]
    if w.ndim != 2 or w.shape[0] != like.shape[-2] or w.shape[1] not in (1, like.shape[-1]):
        raise ValueError(
            f"weights of shape {tuple(w.shape)} do not fit fields of shape {tuple(like.shape)}: "
            "pass the grid's quadrature weights of shape (nlat, 1) (SphereGrid.weights) or the SphereGrid itself"
        )
    if not torch.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights must be finite and non-negative: pass SphereGrid.weights")
    w = w.expand(like.shape[-2], like.shape[-1])
    if wet is not None:
        w = w * _check_wet(wet, like)
    return w / w.sum()


def weighted_mean(f: torch.Tensor, weights, wet=None) -> torch.Tensor:
    """Area-weighted mean over ``(nlat, nlon)`` (over the wet points when ``wet`` is given).

    Parameters
    ----------
    f : torch.Tensor of shape (..., nlat, nlon)
    weights : SphereGrid or torch.Tensor of shape (nlat, 1), (nlat,) or (nlat, nlon)
        Quadrature weights (any positive scale; they are normalised to sum 1).
    wet : bool tensor of shape (nlat, nlon), optional
        Ocean mask; land values are not read.

    Returns
    -------
    torch.Tensor of shape (...)
    """
    w = _as_weights(weights, f, wet)
    if wet is not None:
        f = torch.where(w > 0, f, torch.zeros((), dtype=f.dtype, device=f.device))
    return (f * w).sum((-2, -1))
