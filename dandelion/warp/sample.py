"""The fused warp sampling node: displacement -> padded index -> bilinear sample as ONE autograd node.

:class:`WarpSample` evaluates the warp index (:func:`~dandelion.warp.index.warp_index`, with the 2x2
Jacobian of the indices in the displacement when the displacement needs a gradient) and
``grid_sample`` of the ghost-padded image (:class:`~dandelion.warp.padding.GhostPad`). It keeps for
backward only the padded image (built once per forward; about twice the size of the values), the sampling
grid and that Jacobian (instead of about a dozen intermediate index tensors); backward calls
``grid_sampler_2d_backward`` directly and applies the Jacobian (a handful of products instead of the
autograd graph of the index arithmetic). Forward values are those of the unfused graph bit for bit;
gradients agree to rounding (float64 tests) and are more accurate for small displacements (a Taylor
series where the derivative of ``sin s / s`` cancels). The displacements enter as one
``(N, 2, nlat, nlon)`` tensor, whose gradient is written in one piece.
"""

from __future__ import annotations

import torch

from .index import index_of_warp

__all__ = ["WarpSample"]


class WarpSample(torch.autograd.Function):
    """``grid_sample(pad(values), grid(displaced_index(d[:, 0], d[:, 1])))`` as one autograd node.

    ``apply(values, d, sampler)`` with ``values (N, C, nlat, nlon)``, displacements ``d (N, 2,
    nlat, nlon)`` (east, north; radians) and ``sampler`` a :class:`~dandelion.warp.SphereSampler`;
    returns ``(N, C, nlat, nlon)``. The displacement gradient comes back as ONE ``(N, 2, nlat,
    nlon)`` tensor (two separate east and north inputs would each be scattered into a zero tensor
    of ``d``'s shape by autograd and then added). Differentiable once (a second derivative is not
    supported). The Jacobian is evaluated only when ``d`` requires a gradient.
    """

    @staticmethod
    def forward(ctx, values, d, sampler):
        need_d = ctx.needs_input_grad[1]
        if need_d:
            rows, cols, jac = index_of_warp(sampler, d[:, 0], d[:, 1], jacobian=True)
        else:
            (rows, cols), jac = index_of_warp(sampler, d[:, 0], d[:, 1]), ()
        # warp columns lie within half a turn of the node's column: the cheap exact wrap applies
        grid = sampler.sample_grid(rows, cols, near=True)
        image = sampler.pad(values)  # built once: the backward reads it again
        ctx.save_for_backward(image, grid, *jac)
        ctx.sampler = sampler
        return torch.grid_sampler_2d(image, grid, 0, 1, True)  # bilinear, border, align_corners

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        image, grid, *jac = ctx.saved_tensors
        sampler = ctx.sampler
        need_v = ctx.needs_input_grad[0]
        need_d = bool(jac)
        g_image, g_grid = torch.ops.aten.grid_sampler_2d_backward(
            grad.contiguous(), image, grid, 0, 1, True, [need_v, need_d]
        )
        g_values = sampler.pad_adjoint(g_image) if need_v else None
        g_d = None
        if need_d:
            r_e, r_n, c_e, c_n = jac
            g_cols = g_grid[..., 0] * (2.0 / (sampler.wp - 1))  # contiguous copies: read twice each below
            g_rows = g_grid[..., 1] * (2.0 / (sampler.hp - 1))
            g_d = g_grid.new_empty(g_grid.shape[0], 2, *g_grid.shape[1:3])
            for k, (r, c) in enumerate(
                ((r_e, c_e), (r_n, c_n))
            ):  # saved tensors stay unmodified (backward may run twice)
                torch.mul(r, g_rows, out=g_d[:, k]).addcmul_(g_cols, c)
        return g_values, g_d, None
