"""Fast building blocks of the Dandelion network: pointwise maps and the fused warp sampler.

Both compute exactly what their plain counterparts compute (a 1x1 convolution; the exponential
map followed by pole-aware bilinear sampling, :mod:`dandelion.warp`) and differ only in cost:

* :class:`Pointwise` is an ``nn.Conv2d`` with kernel size 1 (same parameters, same state_dict
  keys and shapes) whose forward is one batched matrix product ``W @ x + b`` on the
  ``(B, C, nlat * nlon)`` view, instead of the convolution kernels (on CPU the generic
  ``slow_conv2d`` path fills and copies buffers around its matrix products), with a
  hand-written backward (:class:`_PointwiseFunction`);
* :class:`WarpSample` evaluates displacement -> padded (row, column) index -> ``grid_sample`` as
  ONE autograd node. Its forward also evaluates the 2x2 Jacobian of the indices in the
  displacement (:meth:`~dandelion.warp.SphereSampler.displaced_index`), and it keeps for backward
  only the values, the sampling grid and that Jacobian (instead of about a dozen intermediate
  index tensors plus the padded image, which is twice the size of the values); backward calls
  ``grid_sampler_2d_backward`` directly and applies the Jacobian (a handful of products instead
  of the autograd graph of the index arithmetic). Forward values are those of the unfused graph
  bit for bit (the same operations in the same order); gradients agree to rounding (float64
  tests) and are more accurate for small displacements (a Taylor series where the derivative of
  ``sin s / s`` cancels). The index arithmetic runs in place (:func:`warp_index`): on the CPU a
  fresh intermediate of a few MiB costs more than the arithmetic done on it. The displacements
  enter as one ``(N, 2, nlat, nlon)`` tensor, whose gradient is written in one piece.

Optionally (``compile_kernels=True`` on :class:`~dandelion.model.Dandelion`), :func:`index_of_warp`
runs the index arithmetic and its Jacobian through ``torch.compile`` (:func:`call_compiled`), which
fuses its ~40 elementwise passes into one loop, and the area norms do the same with their
statistics and affine maps; that path equals the eager one up to rounding only, so it is off by
default.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn as nn

__all__ = ["Pointwise", "WarpSample", "index_of_warp", "call_compiled"]


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


class _PointwiseFunction(torch.autograd.Function):
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
    with ``x[b]`` viewed as ``(in_channels, nlat * nlon)`` (:class:`_PointwiseFunction`).

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
        y = _PointwiseFunction.apply(x.reshape(b, c, h * w).to(dtype), weight, self.bias.to(dtype))
        return y.reshape(b, self.out_channels, h, w)


def _pole_tol2(dtype: torch.dtype) -> float:
    """Squared distance from a pole below which a point counts as ON the pole."""
    return (8.0 * torch.finfo(dtype).eps) ** 2


def _mask(compare, x: torch.Tensor, threshold: float) -> torch.Tensor:
    """``compare(x, threshold)`` as 1.0 / 0.0 in ``x.dtype`` (written directly: a boolean tensor
    converted with ``.to`` costs several times the comparison on the CPU)."""
    return compare(x, threshold, out=torch.empty_like(x))


@torch.no_grad()
def warp_index(sampler, d_east: torch.Tensor, d_north: torch.Tensor, jacobian: bool = False):
    """:meth:`~dandelion.warp.SphereSampler.displaced_index` evaluated in place, without autograd.

    Same arguments and returns (``rows, cols`` and, with ``jacobian=True``, the 4 index
    derivatives). ``rows`` and ``cols`` are bit for bit those of the autograd graph of
    ``displaced_index`` (the same operations in the same order, with results written over
    temporaries that are no longer needed: on the CPU each fresh intermediate of a few MiB costs
    more than the arithmetic on it). Inputs are not modified.
    """
    a, b = d_east, d_north
    st, ct = sampler.sin_colat, sampler.cos_colat
    eps = torch.finfo(a.dtype).eps
    s2 = a * a
    s2.add_(b * b)
    s = s2.clamp_min(eps * eps).sqrt_()
    cos_s = torch.cos(s)
    sinc_s = torch.sin(s).div_(s)
    sd_n = sinc_s * b
    ye = sinc_s * a
    yh = torch.mul(cos_s, st).addcmul_(sd_n, ct, value=-1.0)
    z = torch.mul(cos_s, ct).addcmul_(sd_n, st)
    del sd_n
    r2 = ye * ye
    r2.add_(yh * yh)
    keep = _mask(torch.gt, r2, _pole_tol2(a.dtype))
    rho = torch.sqrt(r2).mul_(keep)
    cols = torch.atan2(ye, yh).mul_(keep).mul_(sampler.nlon / (2 * math.pi)).add_(sampler.columns)
    num = rho * ct
    num.sub_(z * st)
    dtheta = num.atan2_(torch.mul(z, ct).addcmul_(rho, st))
    if sampler.uniform_rows:
        pre = dtheta.mul_(sampler.inv_step).add_(sampler.node_rows)
        rows = pre.clamp(0, sampler.nlat + 1)
    else:
        rows, slope = sampler._row_index(dtheta.add_(sampler.colat))
    if not jacobian:
        return rows, cols
    if sampler.uniform_rows:
        slope = _mask(torch.ge, pre, 0.0).mul_(_mask(torch.le, pre, sampler.nlat + 1)).mul_(sampler.inv_step)
    return rows, cols, _index_jacobian(sampler, a, b, s2, cos_s, sinc_s, ye, yh, z, rho, r2, keep, slope)


def _index_jacobian(sampler, a, b, s2, cos_s, sinc_s, ye, yh, z, rho, r2, keep, slope):
    """Derivatives of (rows, cols) in (d_east, d_north), in place.

    See :meth:`~dandelion.sampling.SphereSampler.displaced_index`.

    Overwrites ``cos_s``, ``r2`` and ``slope``.
    """
    st, ct = sampler.sin_colat, sampler.cos_colat
    eps = torch.finfo(s2.dtype).eps
    moving = _mask(torch.ge, s2, eps * eps)  # the clamp of |d| passes no gradient below eps
    # K = (cos s - S)/s^2 = sum_n (-1)^n 2n s^(2n-2) / (2n+1)!, n >= 1; series below s = 1/2 (truncation
    # below 3e-15), evaluated at min(s^2, 1/4) so that it stays finite where it is not used
    s2s = s2.clamp_max(0.25)
    series = s2s * (1.0 / 518918400.0)
    for c in (-1.0 / 3991680.0, 1.0 / 45360.0, -1.0 / 840.0, 1.0 / 30.0):
        series.add_(c).mul_(s2s)
    series.add_(-1.0 / 3.0)
    direct = cos_s.sub_(sinc_s).div_(s2.clamp_min(0.25))
    # lerp with a 0/1 weight selects exactly (start + 0 * (end - start), end - 0 * (end - start))
    # and costs a tenth of torch.where on the CPU
    k = torch.lerp(series, direct, _mask(torch.ge, s2, 0.25)).mul_(moving)
    del series, direct, s2s
    ka, kb = k * a, k.mul_(b)
    sm = moving.mul_(sinc_s)
    dc_a, dc_b = (sm * a).neg_(), sm.mul_(b).neg_()  # d cos s
    dye_a, dye_b = torch.addcmul(sinc_s, ka, a), ka.mul_(b)  # d (S a); d (S b) / d a is dye_b too
    dsn_b = torch.addcmul(sinc_s, kb, b)
    del kb
    dyh_a = torch.mul(dc_a, st).sub_(dye_b * ct)
    dyh_b = torch.mul(dc_b, st).sub_(dsn_b * ct)
    dz_a = dc_a.mul_(ct).add_(dye_b * st)
    dz_b = dc_b.mul_(ct).add_(dsn_b.mul_(st))
    tol2 = _pole_tol2(r2.dtype)
    r2c = r2.clamp_min_(tol2)
    inv_r = torch.rsqrt(r2c).mul_(keep)
    col_scale = keep.div_(r2c).mul_(sampler.nlon / (2 * math.pi))
    row_scale = slope.div_(torch.mul(z, z).addcmul_(rho, rho))  # d atan2(P, Q) = (Q dP - P dQ) / (P^2 + Q^2)
    out = []
    for dye, dyh, dz in ((dye_a, dyh_a, dz_a), (dye_b, dyh_b, dz_b)):
        drho = torch.mul(ye, dye).addcmul_(yh, dyh).mul_(inv_r)
        out.append(drho.mul_(z).sub_(dz.mul_(rho)).mul_(row_scale))
        out.append(dye.mul_(yh).sub_(dyh.mul_(ye)).mul_(col_scale))
    return out[0], out[2], out[1], out[3]


def _index_only(sampler, d_east, d_north):
    return warp_index(sampler, d_east, d_north)


def _index_and_jacobian(sampler, d_east, d_north):
    return warp_index(sampler, d_east, d_north, jacobian=True)


#: torch.compile'd kernels, built on first use (one per function). Arguments are passed detached
#: (the autograd Functions around them own the gradients), so the cache does not split on
#: ``requires_grad`` or freeze parameter shapes: a kernel compiles once per U-Net level's grid and
#: dtype (the sampler's tables have static shapes) and serves any batch. Past torch._dynamo's
#: recompile limit (8 per function, e.g. many resolutions in one process) dynamo runs the function
#: eagerly. ``_COMPILE_FAILED`` turns every kernel off for the process after a compiler failure
#: (no C++ compiler, an unsupported device), with one warning.
_COMPILED: dict = {}
_COMPILE_FAILED: list = []


def _out_of_memory(err: BaseException) -> bool:
    return isinstance(err, getattr(torch, "OutOfMemoryError", ())) or "out of memory" in str(err).lower()


def call_compiled(fn, *args):
    """``fn(*args)`` through ``torch.compile(fn, dynamic=True)``, or None when compilation is unavailable.

    The compiled code fuses a chain of elementwise passes and reductions into a few loops; its
    values differ from ``fn``'s eager ones by rounding only (operations fused and reordered). The
    first failure (for example no C++ compiler for the CPU backend) is warned about once, with the
    error, and every later call returns None at once: the caller then runs the eager ``fn``. Out of
    memory is re-raised (it is not a compiler failure). Inside an outer ``torch.compile`` this
    returns None, so the outer trace sees the eager function.

    Raises
    ------
    torch.OutOfMemoryError (or the device's out-of-memory RuntimeError)
        Unchanged.
    """
    if _COMPILE_FAILED or torch.compiler.is_compiling():
        return None
    args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    try:
        compiled = _COMPILED.get(fn)
        if compiled is None:
            compiled = _COMPILED[fn] = torch.compile(fn, dynamic=True)
        return compiled(*args)
    except Exception as err:  # noqa: BLE001 - any compiler failure falls back to the exact eager path
        if _out_of_memory(err):
            raise
        _COMPILE_FAILED.append(f"{type(err).__name__}: {err}")
        warnings.warn(
            f"compile_kernels: torch.compile failed ({type(err).__name__}: {str(err)[:300]}); using the eager "
            "kernels for the rest of this process (install a C++ compiler for the CPU, or set "
            "compile_kernels=false)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def index_of_warp(sampler, d_east: torch.Tensor, d_north: torch.Tensor, jacobian: bool = False):
    """:func:`warp_index`, through ``torch.compile`` (:func:`call_compiled`) when ``sampler.compile_kernels`` is set.

    The compiled kernel fuses the ~40 elementwise passes of the exponential map and its Jacobian
    into one loop (on the CPU about 5x faster at 64x128, the largest single cost of a warp). Its
    values differ from the eager ones by rounding (float32 rows and columns by a few units in the
    last place), so it is an option, off by default: the eager path keeps the exact properties
    (zero displacement is the identity bit for bit).
    """
    if getattr(sampler, "compile_kernels", False):
        out = call_compiled(_index_and_jacobian if jacobian else _index_only, sampler, d_east, d_north)
        if out is not None:
            return out
    return warp_index(sampler, d_east, d_north, jacobian=jacobian)


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
        g_image, g_grid = torch.ops.aten.grid_sampler_2d_backward(
            grad.contiguous(), sampler.pad(values), grid, 0, 1, True, [need_v, need_d]
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
