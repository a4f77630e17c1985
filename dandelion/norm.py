"""Area-weighted normalisation on the sphere.

Statistics are integrals over the sphere with the grid's quadrature weights (docs/ARCHITECTURE.md §3 and §5),
so the same weights mean the same thing on every grid and resolution (a plain mean over grid
nodes would over-weight the crowded polar rows of a latitude-longitude grid).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from .compiled import call_compiled
from .sphere import SphereGrid

__all__ = ["AreaNormS2"]


class AreaNormS2(nn.Module):
    """Group normalisation with area-weighted statistics.

    For each sample and group of channels, ``mean = (1/(4 pi |G|)) sum_{c in G} int x_c dA`` and
    ``var`` likewise of ``(x - mean)^2``; returns ``(x - mean) / sqrt(var + eps) * gamma + beta``
    with per-channel ``gamma`` (init 1) and ``beta`` (init 0). ``groups=1`` normalises over all
    channels and the sphere.

    Parameters
    ----------
    grid : SphereGrid
        Grid of the input; its quadrature weights (``(nlat, 1)``, summing to 4*pi) are stored
        once as a float32 non-persistent buffer ``row_weights (nlat,)`` divided by 4*pi.
    channels : int
    groups : int
        Must divide ``channels``.
    eps : float
    compile_kernels : bool
        Evaluate the statistics, the affine map and the backward with ``torch.compile``'d kernels
        (:func:`~dandelion.compiled.call_compiled`): faster on the CPU, equal up to rounding.

    Shapes: ``(B, channels, nlat, nlon) -> (B, channels, nlat, nlon)``.
    """

    def __init__(
        self, grid: SphereGrid, channels: int, groups: int = 1, eps: float = 1e-5, compile_kernels: bool = False
    ):
        super().__init__()
        if channels % groups:
            raise ValueError(f"channels={channels} must divide by groups={groups}")
        self.channels, self.groups, self.eps = channels, groups, eps
        self.compile_kernels = bool(compile_kernels)
        # the weights include 2*pi/nlon, so summing over longitude then rows integrates
        self.register_buffer("row_weights", (grid.weights[:, 0] / (4 * math.pi)).to(torch.float32), persistent=False)
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def extra_repr(self) -> str:
        return f"channels={self.channels}, groups={self.groups}, eps={self.eps}"

    def _integral(self, x: torch.Tensor) -> torch.Tensor:
        # (B, C, nlat, nlon) -> (B, C): normalised area integral
        return torch.matmul(x.sum(-1), self.row_weights.to(x.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x (B, channels, nlat, nlon)``; statistics in float32 at least (also under autocast).

        The output (and the input's gradient) keep ``x``'s dtype: a bfloat16 input is read as it is and the
        float32 result written in bfloat16 directly (no cast passes; the rounding a cast would do).
        """
        work = torch.promote_types(x.dtype, torch.float32)
        with torch.autocast(device_type=x.device.type, enabled=False):
            return _AreaNormFunction.apply(
                x,
                self.weight.to(work),
                self.bias.to(work),
                self.row_weights.to(work),
                self.groups,
                self.eps,
                self.compile_kernels,
            )


class _AreaNormFunction(torch.autograd.Function):
    """Area-weighted group normalisation with an analytic backward (one autograd node).

    Forward (the operations of the plain graph, in the same order): ``m = sum_i w_i x_i``,
    ``d = x - m``, ``v = sum_i w_i d_i^2``, ``s = (v + eps)^(-1/2)``, ``y = beta + gamma s d``, the
    sums running over a group's channels and the sphere with ``w_i = row_weight / |G|``
    (``sum_i w_i = 1``). Saves ``d`` and ``s`` (besides the weight and the row weights). Backward, with
    ``q = gamma * dy`` (Ioffe & Szegedy 2015, eq. after Alg. 1, for weighted statistics; ``sum_i w_i d_i = 0``):
    ``dx_j = s q_j - w_j s sum_i q_i - w_j s^3 d_j sum_i q_i d_i``,
    ``dgamma_c = sum s dy d``, ``dbeta_c = sum dy``.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, row_weights, groups: int, eps: float, compiled: bool = False):
        args = (x, weight, bias, row_weights, groups, eps)
        out = call_compiled(_norm_forward, *args) if compiled and x.dtype == weight.dtype else None
        y, d, s = _norm_forward(*args) if out is None else out
        ctx.save_for_backward(d, s, weight, row_weights)
        ctx.groups, ctx.compiled, ctx.x_dtype = groups, compiled, x.dtype
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        args = (dy, *ctx.saved_tensors, ctx.groups)
        compiled = ctx.compiled and dy.dtype == ctx.x_dtype == args[3].dtype
        out = call_compiled(_norm_backward, *args) if compiled else None
        dx, g_weight, g_bias = _norm_backward(*args, out_dtype=ctx.x_dtype) if out is None else out
        return dx, g_weight, g_bias, None, None, None, None


def _norm_forward(x, weight, bias, row_weights, groups: int, eps: float):
    """``(y, d, s)`` of :class:`_AreaNormFunction` (``d = x - mean``, ``s`` the inverse deviations ``(B, G, 1)``).

    ``x`` may be of a lower precision than ``weight`` (bfloat16 under autocast): it is read as it is, the
    statistics and ``d`` are in ``weight``'s dtype and ``y`` is written in ``x``'s.
    """
    b, c = x.shape[:2]
    g = groups
    mean = (
        torch.matmul(x.sum(-1, dtype=weight.dtype), row_weights).reshape(b, g, -1).mean(-1, keepdim=True)
    )  # (B, G, 1)
    mean = mean.expand(b, g, c // g).reshape(b, c, 1, 1)
    d = x - mean
    var = torch.matmul(torch.linalg.vecdot(d, d), row_weights).reshape(b, g, -1).mean(-1, keepdim=True)
    s = torch.rsqrt(var + eps)  # (B, G, 1)
    scale = s.expand(b, g, c // g).reshape(b, c) * weight
    if x.dtype != d.dtype:  # the float32 result written in x's dtype, rounded once
        return torch.addcmul(bias[:, None, None], d, scale[:, :, None, None], out=torch.empty_like(x)), d, s
    # d * scale + bias as a product and an in-place add: on the CPU an addcmul whose first operand is the broadcast
    # (C, 1, 1) one takes a slow path, three times the two passes
    return torch.mul(d, scale[:, :, None, None]).add_(bias[:, None, None]), d, s


def _norm_backward(dy, d, s, weight, row_weights, groups: int, out_dtype: torch.dtype | None = None):
    """``(dx, dgamma, dbeta)`` of :class:`_AreaNormFunction` (formulas in its docstring).

    ``dy`` may be of a lower precision than ``d``; ``dx`` is written in ``out_dtype`` (default ``d``'s).
    """
    b, c = d.shape[:2]
    g = groups
    cg = c // g
    r = dy.sum((-2, -1), dtype=d.dtype)  # (B, C)
    qd = torch.linalg.vecdot(dy.flatten(-2).to(d.dtype), d.flatten(-2))  # (B, C)
    s_c = s.expand(b, g, cg).reshape(b, c)
    g_weight = (qd * s_c).sum(0)
    g_bias = r.sum(0)
    a = (r * weight).reshape(b, g, cg).sum(-1, keepdim=True)  # sum_i q_i
    bq = (qd * weight).reshape(b, g, cg).sum(-1, keepdim=True)  # sum_i q_i d_i
    alpha = (s_c * weight)[:, :, None, None]
    beta = (-s * a / cg).expand(b, g, cg).reshape(b, c, 1, 1)
    gamma = (-s * s * s * bq / cg).expand(b, g, cg).reshape(b, c, 1, 1)
    t = torch.mul(d, gamma).add_(beta)  # not addcmul(beta, d, gamma): its broadcast first operand is slow on the CPU
    t.mul_(row_weights[:, None])
    if out_dtype is None or out_dtype == t.dtype:
        return t.addcmul_(dy, alpha), g_weight, g_bias
    return torch.addcmul(t, dy, alpha, out=torch.empty_like(dy, dtype=out_dtype)), g_weight, g_bias
