"""A lower bound of a warp model's cost: the same network with its sampler replaced by the identity.

Used by ``dandelion-bench target=models models.identity_sampler=true`` (benchmarks/speed/models.py)
to answer a question about cost bounds rather than to build a model: how fast could the training step
of a warp model be if the sampling of its warps (the index arithmetic of the displaced points and the
bilinear gather, forward and backward) cost nothing? Everything else is kept: the value map, the
displacement network (its backward runs on a zero gradient, at the cost of a real one), the norms,
the pooling, the skips and the head. The result is a floor of the step time no sampler implementation
can go below. With the number of values each model samples per forward (:func:`sampled_values`),
``floor + sampled values x another model's sampling cost per value`` estimates the step the model
would take with a sampler that fast.

The patched model computes a different function: it is for timing only, not for training or saving.

Warp modules handled: Dandelion's :class:`~dandelion.warp.TangentWarpS2` and Flower2D's
:class:`~dandelion.baselines.flower2d.SelfWarp2d`; a model with neither is refused.
"""

from __future__ import annotations

import types

import torch
import torch.nn as nn

from dandelion.baselines.flower2d import SelfWarp2d
from dandelion.warp import TangentWarpS2

__all__ = ["IdentitySample", "with_identity_sampler", "sampled_values"]

_WARPS = (TangentWarpS2, SelfWarp2d)


class IdentitySample(torch.autograd.Function):
    """``(values, displacements) -> values``: a sampler that does not move, with a zero displacement gradient.

    ``values`` of any shape come back as a new tensor (the one cost of a sampler kept: writing its
    output), promoted to float32 at least as the real samplers return it under autocast; the
    gradient of ``d`` is zeros of its shape and dtype. The displacements stay in the autograd graph
    (their network runs backward on zeros, which costs what a real gradient costs).
    """

    @staticmethod
    def forward(ctx, values: torch.Tensor, d: torch.Tensor):
        ctx.d_meta = (d.shape, d.dtype, d.device)
        ctx.values_dtype = values.dtype
        return values.to(torch.promote_types(values.dtype, torch.float32), copy=True)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        shape, dtype, device = ctx.d_meta
        return g.to(ctx.values_dtype), torch.zeros(shape, dtype=dtype, device=device)


def _dandelion_identity(self: TangentWarpS2, values: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    return IdentitySample.apply(values, d)


def _flower_identity(self: SelfWarp2d, x: torch.Tensor) -> torch.Tensor:
    b, c, h, w = x.shape
    return IdentitySample.apply(self.value(x), self.disp(x).reshape(b * self.heads, 2, h, w))


def with_identity_sampler(model: nn.Module) -> nn.Module:
    """Replace, in place, the sampling of every warp of ``model`` by :class:`IdentitySample`; returns ``model``.

    Overrides instance attributes (``TangentWarpS2._warp``, through which its ``forward`` and
    ``warp`` sample, and ``SelfWarp2d.forward``); it cannot be undone: build a new model.

    Raises
    ------
    ValueError
        If ``model`` has no warp module this function knows (Dandelion's or Flower2D's).
    """
    n = 0
    for mod in model.modules():
        if isinstance(mod, TangentWarpS2):
            mod._warp = types.MethodType(_dandelion_identity, mod)
            n += 1
        elif isinstance(mod, SelfWarp2d):
            mod.forward = types.MethodType(_flower_identity, mod)
            n += 1
    if n == 0:
        raise ValueError(
            f"{type(model).__name__} has no warp module to replace (identity sampler: Dandelion and Flower2D only)"
        )
    return model


def sampled_values(model: nn.Module, x: torch.Tensor) -> int:
    """Number of values the warps of ``model`` sample in one forward of ``x`` ``(B, in_channels, nlat, nlon)``.

    The sum over every :class:`~dandelion.warp.TangentWarpS2` and
    :class:`~dandelion.baselines.flower2d.SelfWarp2d` of its output's size (channels x nodes x B: one
    bilinear sample each), for the whole batch; 0 for a model without warps. Runs one forward without
    gradients in the model's current mode; errors of that forward propagate.
    """
    count = [0]

    def hook(_mod, _inp, out):
        count[0] += out.numel()

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, _WARPS)]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return count[0]
