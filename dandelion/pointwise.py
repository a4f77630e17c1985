"""Pointwise (1x1) linear maps of fields as one batched matrix product.

:class:`Pointwise` computes exactly what ``nn.Conv2d(in_channels, out_channels, 1)`` computes (same
parameters, same state_dict keys and shapes) and differs only in cost: its forward is one batched matrix
product ``W @ x + b`` on the ``(B, C, nlat * nlon)`` view, instead of the convolution kernels (on CPU the
generic ``slow_conv2d`` path fills and copies buffers around its matrix products), with a hand-written
backward (:class:`PointwiseFunction`). Every pointwise map of the Dandelion network (lift, warp values and
displacement networks, block outputs, head) is one.
"""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["Pointwise", "PointwiseFunction"]


class PointwiseFunction(torch.autograd.Function):
    """``y[b] = W x[b] + bias`` on ``(B, C, N)`` views, with a hand-written backward.

    Forward: one ``bmm`` with the weight broadcast over the batch (``baddbmm`` with a stride-0
    batch operand takes a generic path on the CPU that costs several times the matrix product)
    followed by an in-place bias add. Backward: ``dx[b] = W^T dy[b]``, ``dW = sum_b dy[b] x[b]^T``,
    ``dbias = sum dy``. Saves only ``x`` and ``W``.
    """

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        b = x.shape[0]
        return torch.bmm(weight.expand(b, -1, -1), x).add_(bias[:, None])

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        b = x.shape[0]
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = torch.bmm(weight.t().expand(b, -1, -1), grad)
        if ctx.needs_input_grad[1]:
            gw = torch.bmm(grad, x.transpose(1, 2)).sum(0)
        if ctx.needs_input_grad[2]:
            gb = grad.sum((0, 2))
        return gx, gw, gb


class Pointwise(nn.Conv2d):
    """Pointwise (1x1) linear map of ``(B, in_channels, nlat, nlon)`` fields, as a batched matmul.

    A subclass of ``nn.Conv2d(in_channels, out_channels, 1)``: same initialisation, parameters
    ``weight (out, in, 1, 1)`` and ``bias (out,)``, state_dict keys and shapes. ``y[b] = W x[b] + bias``
    with ``x[b]`` viewed as ``(in_channels, nlat * nlon)`` (:class:`PointwiseFunction`).

    Shapes: ``(B, in_channels, H, W) -> (B, out_channels, H, W)``.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__(in_channels, out_channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels or self.bias is None:
            return super().forward(x)  # the convolution's own shape checks and messages
        b, c, h, w = x.shape
        dtype = x.dtype
        if torch.is_autocast_enabled(x.device.type):  # the cast autocast applies to a convolution
            dtype = torch.get_autocast_dtype(x.device.type)
        weight = self.weight.reshape(self.out_channels, c).to(dtype)
        y = PointwiseFunction.apply(x.reshape(b, c, h * w).to(dtype), weight, self.bias.to(dtype))
        return y.reshape(b, self.out_channels, h, w)
