"""The exponential map of the unit sphere, with finite values and gradients at zero displacement.

A warp head walks ``|d|`` radians from a node ``x`` along the great circle leaving it in direction
``d = (d_e, d_n)`` of its local (east, north) frame (do Carmo, *Riemannian Geometry*, ch. 3),

    y = cos|d| x + sin|d| (d_e e + d_n n) / |d|.

:func:`cos_sinc` evaluates ``cos|d|`` and ``sin|d|/|d|`` so that both stay finite, with finite
derivatives, at ``d = 0``; :func:`pole_tol2` is the distance from a pole below which a point counts
as on it (its longitude is then undefined and the node's own is kept). The in-place index arithmetic
of the warps of a grid's nodes (:func:`dandelion.warp.index.warp_index`) uses both.
"""

from __future__ import annotations

import torch

__all__ = ["cos_sinc", "exp_map", "pole_tol2"]


def pole_tol2(dtype: torch.dtype) -> float:
    """Squared distance from a pole below which a point counts as ON the pole: ``(8 eps)^2``."""
    return (8.0 * torch.finfo(dtype).eps) ** 2


def cos_sinc(d_east: torch.Tensor, d_north: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos|d|`` and ``sin|d|/|d|`` with finite values and gradients at ``d = 0``.

    ``|d|`` is evaluated as ``sqrt(max(|d|^2, eps^2))`` (``eps`` the dtype's machine epsilon). For
    ``|d| <= eps`` the Taylor series ``cos|d| = 1 - |d|^2/2 + ...`` and ``sin|d|/|d| = 1 - |d|^2/6 + ...``
    equal their first term, 1, in working precision, and that is exactly what the clamped
    evaluation returns; above ``eps`` the functions are evaluated directly (accurate to an ulp, no
    cancellation in the values; the rounding in the autograd derivative of ``sin s / s`` enters
    the derivative of the exponential map multiplied by ``|d|``, i.e. at the ``eps`` level). The
    clamp has zero gradient below ``eps^2``, so no infinite derivative of the square root is ever
    formed. (A ``torch.where`` between the series and the functions would be slower: on CPU, boolean
    selection costs ten times an arithmetic pass.)
    """
    s2 = d_east * d_east + d_north * d_north
    eps = torch.finfo(s2.dtype).eps
    s = torch.sqrt(s2.clamp_min(eps * eps))
    return torch.cos(s), torch.sin(s) / s


def exp_map(
    x: torch.Tensor,
    d_east: torch.Tensor,
    d_north: torch.Tensor,
    east: torch.Tensor | None = None,
    north: torch.Tensor | None = None,
) -> torch.Tensor:
    """Exponential map of the unit sphere: walk ``|d|`` radians from ``x`` along direction ``d``.

    ``y = cos|d| x + sin|d| (d_e e + d_n n) / |d|`` (do Carmo, *Riemannian Geometry*, ch. 3; for
    the sphere the geodesics are great circles). ``sin|d|/|d|`` and ``cos|d|`` are evaluated at
    ``max(|d|, eps)`` (where they equal 1, their series' first term), so values and gradients are
    finite at ``d = 0`` (:func:`cos_sinc`).

    Parameters
    ----------
    x : torch.Tensor of shape (3, ...)
        Unit position vectors, Cartesian component FIRST (the layout of ``SphereGrid.xyz``).
    d_east, d_north : torch.Tensor broadcastable with ``x[0]``
        Displacement along the local east and north unit vectors, radians.
    east, north : torch.Tensor of shape (3, ...), optional
        The local frame at ``x``. Pass ``SphereGrid.east`` / ``SphereGrid.north`` for grid nodes
        (on pole rows they are the limits along each column's meridian). When omitted they are
        computed from ``x``: ``e = z_hat x x / |z_hat x x|``, ``n = x x e``; within
        ``8 * eps`` of a pole, where that frame is undefined, the frame of longitude 0 is used
        (e = y_hat, n = -+x_hat).

    Returns
    -------
    torch.Tensor of shape (3, ...)
        The unit vectors reached.

    Raises
    ------
    ValueError
        If ``x`` (or a given frame) does not have 3 components in its first dimension.
    """
    if x.shape[0] != 3:
        raise ValueError(
            f"x has shape {tuple(x.shape)}: put the 3 Cartesian components in the FIRST dimension, (3, ...)"
        )
    if (east is None) != (north is None):
        raise ValueError("pass both east and north (the local frame at x), or neither")
    if east is None:
        rho2 = x[0] * x[0] + x[1] * x[1]
        off = rho2 > pole_tol2(x.dtype)
        rho = torch.sqrt(torch.where(off, rho2, torch.ones_like(rho2)))
        cl = torch.where(off, x[0] / rho, torch.ones_like(rho))  # cos(lon), lon = 0 on a pole
        sl = torch.where(off, x[1] / rho, torch.zeros_like(rho))
        z = x[2]
        east = torch.stack([-sl, cl, torch.zeros_like(cl)])
        north = torch.stack([-z * cl, -z * sl, torch.where(off, rho, torch.zeros_like(rho))])
    elif east.shape[0] != 3 or north.shape[0] != 3:
        raise ValueError(
            f"east {tuple(east.shape)} and north {tuple(north.shape)} must have 3 components first, (3, ...)"
        )
    cos_s, sinc_s = cos_sinc(d_east, d_north)
    return cos_s * x + sinc_s * (d_east * east + d_north * north)
