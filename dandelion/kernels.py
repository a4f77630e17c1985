"""Fast building blocks of the Dandelion network: pointwise maps and the fused warp sampler.

Both compute exactly what their plain counterparts compute (a 1x1 convolution; the exponential
map followed by pole-aware bilinear sampling, :mod:`dandelion.warp`) and differ only in cost:

* :class:`Pointwise` is an ``nn.Conv2d`` with kernel size 1 (same parameters, same state_dict
  keys and shapes) whose forward is one batched matrix product ``W @ x + b`` on the
  ``(B, C, nlat * nlon)`` view, instead of the convolution kernels (on CPU the generic
  ``slow_conv2d`` path fills and copies buffers around its matrix products);
* :class:`WarpSample` evaluates displacement -> padded (row, column) index -> ``grid_sample`` as
  ONE autograd node. Its forward also evaluates the 2x2 Jacobian of the indices in the
  displacement (:meth:`~dandelion.warp.SphereSampler.displaced_index`), and it keeps for backward
  only the values, the sampling grid and that Jacobian (instead of about a dozen intermediate
  index tensors plus the padded image, which is twice the size of the values); backward calls
  ``grid_sampler_2d_backward`` directly and applies the Jacobian (a handful of products instead
  of the autograd graph of the index arithmetic). Forward values are those of the unfused graph
  bit for bit (the same operations in the same order); gradients agree to rounding (float64
  tests) and are more accurate for small displacements (a Taylor series where the derivative of
  ``sin s / s`` cancels).
"""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["Pointwise", "WarpSample"]


class _GhostPad(torch.autograd.Function):
    """Pad ``(..., nlat, nlon)`` to the sampler's ``(..., Hp, Wp)`` image in ONE copy.

    Padded row ``p = i + 1`` holds data row ``i``; row 0 is the north ghost (row ``gn`` at
    longitude + pi), row ``nlat + 1`` the south ghost (row ``gs`` at longitude + pi); column
    ``nlon`` repeats column 0 (periodic longitude); row ``nlat + 2`` and column ``nlon + 1`` (read
    by grid_sample with weight 0) are zero; the rest is never read (present only so that the
    normalisation is exact) and left uninitialised. For odd ``nlon`` the ghost rows are
    linearly interpolated half-way between the two columns around longitude + pi.
    """

    @staticmethod
    def _ghost(row: torch.Tensor, nlon: int) -> torch.Tensor:
        h = nlon // 2
        if nlon % 2 == 0:
            return torch.cat([row[..., h:], row[..., :h]], dim=-1)
        # column j sits at lon_j + pi = lon_{j + h + 1/2}
        r0 = torch.cat([row[..., h:], row[..., :h]], dim=-1)
        r1 = torch.cat([row[..., h + 1 :], row[..., : h + 1]], dim=-1)
        return 0.5 * (r0 + r1)

    @staticmethod
    def _ghost_t(g: torch.Tensor, nlon: int) -> torch.Tensor:
        """Adjoint of :meth:`_ghost`."""
        h = nlon // 2
        if nlon % 2 == 0:
            return torch.cat([g[..., nlon - h :], g[..., : nlon - h]], dim=-1)
        g0 = torch.cat([g[..., nlon - h :], g[..., : nlon - h]], dim=-1)
        g1 = torch.cat([g[..., nlon - h - 1 :], g[..., : nlon - h - 1]], dim=-1)
        return 0.5 * (g0 + g1)

    @staticmethod
    def pad(field: torch.Tensor, gn: int, gs: int, hp: int, wp: int) -> torch.Tensor:
        nlat, nlon = field.shape[-2:]
        out = field.new_empty(*field.shape[:-2], hp, wp)
        out[..., 1 : nlat + 1, :nlon] = field
        out[..., 0, :nlon] = _GhostPad._ghost(field[..., gn, :], nlon)
        out[..., nlat + 1, :nlon] = _GhostPad._ghost(field[..., gs, :], nlon)
        out[..., : nlat + 2, nlon] = out[..., : nlat + 2, 0]
        # bilinear weights of zero reach one row below the south ghost and one column right of
        # the periodic one; those are zeroed (finite), the rest of the power-of-two image is never read
        out[..., : nlat + 2, nlon + 1 : nlon + 2] = 0
        out[..., nlat + 2 : nlat + 3, : nlon + 2] = 0
        return out

    @staticmethod
    def pad_adjoint(grad: torch.Tensor, nlat: int, nlon: int, gn: int, gs: int) -> torch.Tensor:
        core = grad[..., : nlat + 2, :nlon].clone()
        core[..., :, 0] += grad[..., : nlat + 2, nlon]
        g = core[..., 1 : nlat + 1, :]
        g[..., gn, :] += _GhostPad._ghost_t(core[..., 0, :], nlon)
        g[..., gs, :] += _GhostPad._ghost_t(core[..., nlat + 1, :], nlon)
        return g

    @staticmethod
    def forward(ctx, field, gn: int, gs: int, hp: int, wp: int):
        nlat, nlon = field.shape[-2:]
        ctx.meta = (nlat, nlon, gn, gs)
        return _GhostPad.pad(field, gn, gs, hp, wp)

    @staticmethod
    def backward(ctx, grad):
        return _GhostPad.pad_adjoint(grad, *ctx.meta), None, None, None, None


class Pointwise(nn.Conv2d):
    """Pointwise (1x1) linear map of ``(B, in_channels, nlat, nlon)`` fields, as a batched matmul.

    A subclass of ``nn.Conv2d(in_channels, out_channels, 1)``: same initialisation, parameters
    ``weight (out, in, 1, 1)`` and ``bias (out,)``, state_dict keys and shapes. ``y[b] = W x[b] + bias``
    with ``x[b]`` viewed as ``(in_channels, nlat * nlon)``.

    Shapes: ``(B, in_channels, H, W) -> (B, out_channels, H, W)``.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__(in_channels, out_channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            return super().forward(x)  # the convolution's own shape checks and messages
        b, c, h, w = x.shape
        weight = self.weight.reshape(self.out_channels, c).expand(b, -1, -1)
        y = torch.baddbmm(self.bias[:, None], weight, x.reshape(b, c, h * w))
        return y.reshape(b, self.out_channels, h, w)


class WarpSample(torch.autograd.Function):
    """``grid_sample(pad(values), grid(displaced_index(d_east, d_north)))`` as one autograd node.

    ``apply(values, d_east, d_north, sampler)`` with ``values (N, C, nlat, nlon)``, displacements
    ``(N, nlat, nlon)`` and ``sampler`` a :class:`~dandelion.warp.SphereSampler`; returns
    ``(N, C, nlat, nlon)``. Differentiable once (a second derivative is not supported). The
    Jacobian is evaluated only when a displacement requires a gradient.
    """

    @staticmethod
    def forward(ctx, values, d_east, d_north, sampler):
        need_d = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        if need_d:
            rows, cols, jac = sampler.displaced_index(d_east, d_north, jacobian=True)
        else:
            (rows, cols), jac = sampler.displaced_index(d_east, d_north), ()
        grid = sampler.sample_grid(rows, cols)
        ctx.save_for_backward(values, grid, *jac)
        ctx.sampler = sampler
        return torch.grid_sampler_2d(sampler.pad(values), grid, 0, 1, True)  # bilinear, border, align_corners

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        values, grid, *jac = ctx.saved_tensors
        sampler = ctx.sampler
        need_v = ctx.needs_input_grad[0]
        need_d = bool(jac)
        g_image, g_grid = torch.ops.aten.grid_sampler_2d_backward(grad.contiguous(), sampler.pad(values), grid, 0, 1, True, [need_v, need_d])
        g_values = sampler.pad_adjoint(g_image) if need_v else None
        g_e = g_n = None
        if need_d:
            r_e, r_n, c_e, c_n = jac
            g_cols = g_grid[..., 0] * (2.0 / (sampler.wp - 1))
            g_rows = g_grid[..., 1] * (2.0 / (sampler.hp - 1))
            g_e = torch.addcmul(g_rows * r_e, g_cols, c_e)
            g_n = torch.addcmul(g_rows * r_n, g_cols, c_n)
        return g_values, g_e, g_n, None
