"""The warp index: padded (row, column) of the exponential-map image of every grid node, and its Jacobian.

The ONE implementation of the index arithmetic of a warp (:func:`warp_index`), used by the sampler
(:meth:`~dandelion.warp.sampler.SphereSampler.displaced_index`), by the fused sampling node
(:class:`~dandelion.warp.sample.WarpSample`) and, through ``torch.compile``, by the compiled path
(:func:`index_of_warp`). It runs without autograd and in place (on the CPU a fresh intermediate of a
few MiB costs more than the arithmetic on it); its derivatives are analytic (:func:`index_jacobian`),
and :class:`WarpIndex` makes it differentiable by applying them.

Geometry (spherical trigonometry of the triangle pole-x-y). In the frame of node ``x`` at colatitude
``t``, the target ``y = exp_x(d)`` (:func:`~dandelion.warp.expmap.exp_map`) has components
``z = cos s cos t + S d_n sin t`` (polar axis), ``y.e = S d_e`` and ``y.h = cos s sin t - S d_n cos t``
along the horizontal outward vector h of the node's meridian, with ``s = |d|`` and ``S = sin s / s``.
With ``rho = |(y.e, y.h)|`` (the sine of y's colatitude), ``delta_theta = atan2(rho cos t - z sin t,
z cos t + rho sin t)`` and ``delta_lon = atan2(y.e, y.h)``; row ``= i + 1 + delta_theta / step`` on a
uniform (equiangular) row table, the sampler's piecewise-linear row map of ``t + delta_theta``
otherwise; column ``= j + delta_lon * nlon / (2 pi)``. Within ``8 eps`` of a pole (``rho^2 <= tol``,
:func:`~dandelion.warp.expmap.pole_tol2`) ``rho`` and ``delta_lon`` are set to 0 with zero gradient:
the node's own longitude is kept.

Derivatives: ``d cos s = -S d.dd``, ``d S = K d.dd`` with ``K = (cos s - S)/s^2`` (its Taylor series
``-1/3 + s^2/30 - s^4/840 + ...`` below ``s = 1/2``, where the difference cancels),
``d delta_theta = (z d rho - rho d z) / (rho^2 + z^2)`` and ``d delta_lon = (y.h d y.e - y.e d y.h) / rho^2``.
"""

from __future__ import annotations

import math

import torch

from ..compiled import call_compiled
from .expmap import pole_tol2

__all__ = ["WarpIndex", "index_jacobian", "index_of_warp", "warp_index"]


def _mask(compare, x: torch.Tensor, threshold: float) -> torch.Tensor:
    """``compare(x, threshold)`` as 1.0 / 0.0 in ``x.dtype`` (written directly: a boolean tensor
    converted with ``.to`` costs several times the comparison on the CPU)."""
    return compare(x, threshold, out=torch.empty_like(x))


@torch.no_grad()
def warp_index(sampler, d_east: torch.Tensor, d_north: torch.Tensor, jacobian: bool = False):
    """Padded indices of the exponential-map images of every grid node, evaluated in place without autograd.

    Parameters
    ----------
    sampler : SphereSampler
        The grid's sampler (:class:`~dandelion.warp.sampler.SphereSampler`): its node tables
        (``sin_colat``, ``cos_colat``, ``colat``, ``columns``, ``node_rows``) and row map.
    d_east, d_north : torch.Tensor of shape (N, nlat, nlon)
        Displacements in radians along each node's east and north unit vectors
        (``SphereGrid.east/north``; on pole rows, the limits along each column's meridian). Not modified.
    jacobian : bool
        Also return the four derivatives of the indices (:func:`index_jacobian`).

    Returns
    -------
    rows, cols : torch.Tensor of shape (N, nlat, nlon)
        Fractional padded row (``i + 1`` for row ``i``; in ``[0, nlat + 1]``) and column (within half a
        turn of the node's own, not reduced modulo ``nlon``). For ``d = 0`` exactly the node's own
        ``(i + 1, j)``, pole rows included.
    jac : tuple of 4 tensors (N, nlat, nlon), only with ``jacobian=True``
        ``(d rows/d d_east, d rows/d d_north, d cols/d d_east, d cols/d d_north)``.
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
    keep = _mask(torch.gt, r2, pole_tol2(a.dtype))
    rho = torch.sqrt(r2).mul_(keep)
    cols = torch.atan2(ye, yh).mul_(keep).mul_(sampler.nlon / (2 * math.pi)).add_(sampler.columns)
    # the numerator as two separate products: at d = 0 it is fl(st*ct) - fl(ct*st) = 0 exactly,
    # which a fused multiply-add would not give
    num = rho * ct
    num.sub_(z * st)
    dtheta = num.atan2_(torch.mul(z, ct).addcmul_(rho, st))
    if sampler.uniform_rows:
        # a walk of exactly pi from the south pole to the north pole gives delta_theta = +pi
        # (atan2's branch) and lands on the south ghost row; no other point leaves the table
        pre = dtheta.mul_(sampler.inv_step).add_(sampler.node_rows)
        rows = pre.clamp(0, sampler.nlat + 1)
    else:
        rows, slope = sampler.row_index_and_slope(dtheta.add_(sampler.colat))
    if not jacobian:
        return rows, cols
    if sampler.uniform_rows:
        slope = _mask(torch.ge, pre, 0.0).mul_(_mask(torch.le, pre, sampler.nlat + 1)).mul_(sampler.inv_step)
    return rows, cols, index_jacobian(sampler, a, b, s2, cos_s, sinc_s, ye, yh, z, rho, r2, keep, slope)


def index_jacobian(sampler, a, b, s2, cos_s, sinc_s, ye, yh, z, rho, r2, keep, slope):
    """Derivatives of (rows, cols) in (d_east, d_north), in place, from :func:`warp_index`'s intermediates.

    Returns ``(d rows/d a, d rows/d b, d cols/d a, d cols/d b)`` (module docstring: the formulas).
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
    r2c = r2.clamp_min_(pole_tol2(r2.dtype))
    inv_r = torch.rsqrt(r2c).mul_(keep)
    col_scale = keep.div_(r2c).mul_(sampler.nlon / (2 * math.pi))
    row_scale = slope.div_(torch.mul(z, z).addcmul_(rho, rho))  # d atan2(P, Q) = (Q dP - P dQ) / (P^2 + Q^2)
    out = []
    for dye, dyh, dz in ((dye_a, dyh_a, dz_a), (dye_b, dyh_b, dz_b)):
        drho = torch.mul(ye, dye).addcmul_(yh, dyh).mul_(inv_r)
        out.append(drho.mul_(z).sub_(dz.mul_(rho)).mul_(row_scale))
        out.append(dye.mul_(yh).sub_(dyh.mul_(ye)).mul_(col_scale))
    return out[0], out[2], out[1], out[3]


class WarpIndex(torch.autograd.Function):
    """:func:`warp_index` as a differentiable function: ``apply(sampler, d_east, d_north) -> (rows, cols)``.

    The backward applies the analytic Jacobian (``g_d_east = g_rows dr/da + g_cols dc/da``, likewise
    ``d_north``), evaluated in the forward only when a displacement requires a gradient.
    """

    @staticmethod
    def forward(ctx, sampler, d_east, d_north):
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            rows, cols, jac = warp_index(sampler, d_east, d_north, jacobian=True)
            ctx.save_for_backward(*jac)
        else:
            rows, cols = warp_index(sampler, d_east, d_north)
        return rows, cols

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_rows, g_cols):
        r_a, r_b, c_a, c_b = ctx.saved_tensors
        return None, g_rows * r_a + g_cols * c_a, g_rows * r_b + g_cols * c_b


def _index_only(sampler, d_east, d_north):
    return warp_index(sampler, d_east, d_north)


def _index_and_jacobian(sampler, d_east, d_north):
    return warp_index(sampler, d_east, d_north, jacobian=True)


def index_of_warp(sampler, d_east: torch.Tensor, d_north: torch.Tensor, jacobian: bool = False):
    """:func:`warp_index`, through ``torch.compile`` (:func:`~dandelion.compiled.call_compiled`) when
    ``sampler.compile_kernels`` is set.

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
