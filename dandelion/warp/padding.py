"""The padded image a warp samples: one ghost row beyond each pole and the periodic column.

Bilinear sampling of a field on a latitude-longitude grid must see, across a pole, the mirrored row at
longitude + pi, and across the 0/360 seam, column 0 again. :class:`GhostPad` writes both into a
``(..., hp, wp)`` image in one copy (and is its own autograd node, with the adjoint as backward);
:func:`next_pow2_plus1` gives the image sizes ``2**k + 1`` for which grid_sample's unnormalisation
``(g + 1) * (size - 1) / 2`` (``align_corners=True``) maps integer indices to themselves without
rounding (see :class:`dandelion.warp.sampler.SphereSampler`).
"""

from __future__ import annotations

import math

import torch

__all__ = ["GhostPad", "next_pow2_plus1"]


def next_pow2_plus1(n: int) -> int:
    """Smallest ``2**k + 1 >= n`` (k >= 1)."""
    k = max(1, math.ceil(math.log2(max(n - 1, 1))))
    return 2**k + 1


class GhostPad(torch.autograd.Function):
    """Pad ``(..., nlat, nlon)`` to the sampler's ``(..., Hp, Wp)`` image in ONE copy.

    Padded row ``p = i + 1`` holds data row ``i``; row 0 is the north ghost (row ``gn`` at
    longitude + pi), row ``nlat + 1`` the south ghost (row ``gs`` at longitude + pi); column
    ``nlon`` repeats column 0 (periodic longitude); row ``nlat + 2`` and column ``nlon + 1`` (read
    by grid_sample with weight 0) are zero; the rest is never read (present only so that the
    normalisation is exact) and left uninitialised. For odd ``nlon`` the ghost rows are
    linearly interpolated half-way between the two columns around longitude + pi.

    ``apply(field, gn, gs, hp, wp)``; :meth:`pad` and :meth:`pad_adjoint` are the same maps without autograd.
    """

    @staticmethod
    def ghost(row: torch.Tensor, nlon: int) -> torch.Tensor:
        """The ghost row of ``row (..., nlon)``: the same row at longitude + pi."""
        h = nlon // 2
        if nlon % 2 == 0:
            return torch.cat([row[..., h:], row[..., :h]], dim=-1)
        # column j sits at lon_j + pi = lon_{j + h + 1/2}
        r0 = torch.cat([row[..., h:], row[..., :h]], dim=-1)
        r1 = torch.cat([row[..., h + 1 :], row[..., : h + 1]], dim=-1)
        return 0.5 * (r0 + r1)

    @staticmethod
    def ghost_adjoint(g: torch.Tensor, nlon: int) -> torch.Tensor:
        """Adjoint of :meth:`ghost`."""
        h = nlon // 2
        if nlon % 2 == 0:
            return torch.cat([g[..., nlon - h :], g[..., : nlon - h]], dim=-1)
        g0 = torch.cat([g[..., nlon - h :], g[..., : nlon - h]], dim=-1)
        g1 = torch.cat([g[..., nlon - h - 1 :], g[..., : nlon - h - 1]], dim=-1)
        return 0.5 * (g0 + g1)

    @staticmethod
    def pad(field: torch.Tensor, gn: int, gs: int, hp: int, wp: int) -> torch.Tensor:
        """``(..., nlat, nlon) -> (..., hp, wp)``, no autograd."""
        nlat, nlon = field.shape[-2:]
        out = field.new_empty(*field.shape[:-2], hp, wp)
        out[..., 1 : nlat + 1, :nlon] = field
        out[..., 0, :nlon] = GhostPad.ghost(field[..., gn, :], nlon)
        out[..., nlat + 1, :nlon] = GhostPad.ghost(field[..., gs, :], nlon)
        out[..., : nlat + 2, nlon] = out[..., : nlat + 2, 0]
        # bilinear weights of zero reach one row below the south ghost and one column right of
        # the periodic one; those are zeroed (finite), the rest of the power-of-two image is never read
        out[..., : nlat + 2, nlon + 1 : nlon + 2] = 0
        out[..., nlat + 2 : nlat + 3, : nlon + 2] = 0
        return out

    @staticmethod
    def pad_adjoint(grad: torch.Tensor, nlat: int, nlon: int, gn: int, gs: int) -> torch.Tensor:
        """Adjoint of :meth:`pad`: ``(..., hp, wp) -> (..., nlat, nlon)``."""
        core = grad[..., : nlat + 2, :nlon].clone()
        core[..., :, 0] += grad[..., : nlat + 2, nlon]
        g = core[..., 1 : nlat + 1, :]
        g[..., gn, :] += GhostPad.ghost_adjoint(core[..., 0, :], nlon)
        g[..., gs, :] += GhostPad.ghost_adjoint(core[..., nlat + 1, :], nlon)
        return g

    @staticmethod
    def forward(ctx, field, gn: int, gs: int, hp: int, wp: int):
        nlat, nlon = field.shape[-2:]
        ctx.meta = (nlat, nlon, gn, gs)
        return GhostPad.pad(field, gn, gs, hp, wp)

    @staticmethod
    def backward(ctx, grad):
        return GhostPad.pad_adjoint(grad, *ctx.meta), None, None, None, None
