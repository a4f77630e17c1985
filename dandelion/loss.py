"""The training loss: the area-weighted mean squared error, over the wet points on a masked dataset.

Re-exported by :mod:`dandelion.metrics`, where the scores of the same fields are defined.
"""

from __future__ import annotations

import torch

from dandelion.sphere import SphereGrid

from .quadrature import _check_wet

__all__ = ["loss_weights", "area_weighted_mse"]


def loss_weights(grid: SphereGrid, wet=None) -> torch.Tensor:
    """Area quadrature weights of ``grid`` normalised to mean 1 over the grid points.

    Returns a float64 tensor of shape ``(nlat, 1)``; ``mean((a - b)**2 * w)`` over ``(nlat, nlon)``
    is then the area-weighted mean squared error (the integral over the sphere divided by 4*pi).
    With a ``wet`` mask (bool (nlat, nlon)): shape ``(nlat, nlon)``, zero on land, so that the same mean
    is the area-weighted mean squared error over the wet points (pass ``wet`` to
    :func:`area_weighted_mse` as well, so that non-finite land values are not read).
    """
    w = grid.weights
    if wet is None:
        return w / w.mean()
    w = w.expand(grid.shape) * _check_wet(wet, w.expand(grid.shape)).to(w.device)
    return w / w.mean()


def area_weighted_mse(pred: torch.Tensor, true: torch.Tensor, weights: torch.Tensor, wet=None) -> torch.Tensor:
    """The training loss: mean over everything of ``(pred - true)**2 * weights``.

    ``weights`` (nlat, 1) normalised to mean 1 (:func:`loss_weights`), so the result is the
    area-weighted mean squared error averaged over samples and channels; or (C, nlat, 1), the same
    times a per-channel factor (the trainer's ``1 / increment_scale**2`` for ``target=increment``:
    the error in units of the normalised increment). With a ``wet`` mask (bool (nlat, nlon)) the
    squared error on land is replaced by 0 before weighting (use ``loss_weights(grid, wet)``).
    """
    sq = (pred - true) ** 2
    if wet is not None:
        sq = torch.where(_check_wet(wet, sq), sq, torch.zeros((), dtype=sq.dtype, device=sq.device))
    return (sq * weights).mean()
