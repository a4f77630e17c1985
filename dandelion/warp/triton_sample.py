"""The fused warp as one Triton kernel: exponential map, pole-aware ghost rows and bilinear sampling.

:class:`TritonWarpSample` computes what :class:`~dandelion.warp.sample.WarpSample` computes (the warp index of
:mod:`dandelion.warp.index`, then bilinear sampling of the ghost-padded image) in one pass over memory:
each program reads its nodes' displacements once, evaluates the index in float32 (float64 for float64
displacements: index arithmetic never runs in bfloat16, where a column of a 1440-column grid would be off by
several columns), and gathers the four corners of every channel of its head straight from the field. The
ghost rows beyond the poles (the row nearest the pole at longitude + pi, the average of the two columns
around it for odd ``nlon``) and the periodic column are index arithmetic, so no padded image is ever built.
Values stay in their own dtype (the autocast dtype under autocast); they are accumulated in float32.

The backward kernel recomputes the index and its Jacobian (the formulas of :mod:`dandelion.warp.index`)
instead of reading them from memory, accumulates the gradient of the displacements over the head's channels
in registers, and scatters the gradient of the values with atomic adds into a float32 buffer. Per node and
head a forward moves ``2 C + 2`` values and a backward ``5 C + 4`` (plus the atomics), against some 30
intermediate tensors of the eager path.

Agreement with the eager sampler: equal to rounding (float32 rows and columns by a few units in the last
place: grid_sample's normalised coordinates round where this kernel's indices do not); zero displacement
is the identity bit for bit (the increments are gated to exactly zero). ``atan2`` is written out here
(two argument halvings and a Taylor series, accurate to the dtype's rounding) because Triton's interpreter
has no libdevice; tests run the kernels under ``TRITON_INTERPRET=1`` on the CPU
(``tests/dandelion/test_warp_triton.py``).

Triton decides between compiling and interpreting when a kernel is decorated, i.e. when this module is
imported: import it after setting ``TRITON_INTERPRET`` (the tests reload it).
"""

from __future__ import annotations

import warnings

import torch

from ..sphere import SphereGrid
from .sample import WarpSample
from .sampler import SphereSampler

try:  # triton ships with torch's CUDA wheels; elsewhere the eager warp runs
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the installation
    triton = None

__all__ = ["AVAILABLE", "TritonWarpSample", "triton_warp_sample", "usable_on"]

#: whether triton is importable here
AVAILABLE = triton is not None
BLOCK = 128

if AVAILABLE:

    @triton.jit
    def _atan_unit(t, N_TERMS: tl.constexpr):
        """``atan(t)`` for ``0 <= t <= 1``: two halvings ``atan t = 2 atan(t / (1 + sqrt(1 + t^2)))`` bring
        ``t`` below ``tan(pi/16) = 0.199``, where the Taylor series converges (N_TERMS terms)."""
        u = t / (1.0 + tl.sqrt(1.0 + t * t))
        u = u / (1.0 + tl.sqrt(1.0 + u * u))
        u2 = u * u
        # atan u = sum_k (-1)^k u^(2k+1) / (2k+1), k < N_TERMS, by Horner's rule in u^2
        acc = u * 0.0 + 1.0 / (2 * N_TERMS - 1)
        for kk in tl.static_range(N_TERMS - 1):
            acc = acc * (-u2) + 1.0 / (2 * (N_TERMS - 2 - kk) + 1)
        return 4.0 * u * acc

    @triton.jit
    def _atan2(y, x, half_pi, pi, N_TERMS: tl.constexpr):
        """``atan2(y, x)`` in ``[-pi, pi]`` (0 for ``y = x = 0``)."""
        ax = tl.abs(x)
        ay = tl.abs(y)
        big = tl.maximum(ax, ay)
        small = tl.minimum(ax, ay)
        t = tl.where(big > 0, small / tl.where(big > 0, big, 1.0), 0.0)
        a = _atan_unit(t, N_TERMS)
        a = tl.where(ay > ax, half_pi - a, a)
        a = tl.where(x < 0, pi - a, a)
        return tl.where(y < 0, -a, a)

    @triton.jit
    def _warp_index(
        a, b, i, j, st, ct, colat_i, table_ptr, inv_step_ptr, bin_row_ptr, const_ptr,
        nlat, nbins, EPS: tl.constexpr, TOL2: tl.constexpr, UNIFORM: tl.constexpr, N_TERMS: tl.constexpr,
    ):  # fmt: skip
        """Rows, columns and the intermediates of their Jacobian (:func:`dandelion.warp.index.warp_index`)."""
        inv_step = tl.load(const_ptr)
        col_per_rad = tl.load(const_ptr + 1)
        half_pi = tl.load(const_ptr + 2)
        pi = tl.load(const_ptr + 3)
        inv_bin_width = tl.load(const_ptr + 4)
        s2 = a * a + b * b
        s = tl.sqrt(tl.maximum(s2, EPS * EPS))
        cos_s = tl.cos(s)
        sinc_s = tl.sin(s) / s
        sd_n = sinc_s * b
        ye = sinc_s * a
        yh = cos_s * st - sd_n * ct
        z = cos_s * ct + sd_n * st
        r2 = ye * ye + yh * yh
        keep = r2 > TOL2
        rho = tl.where(keep, tl.sqrt(r2), 0.0)
        still = s2 == 0.0  # zero displacement: exactly the node (identity bit for bit, FMA contraction or not)
        dlon = tl.where(keep & (s2 > 0.0), _atan2(ye, yh, half_pi, pi, N_TERMS), 0.0)
        dtheta = tl.where(still, 0.0, _atan2(rho * ct - z * st, z * ct + rho * st, half_pi, pi, N_TERMS))
        cols = j + dlon * col_per_rad
        if UNIFORM:
            pre = (i + 1) + dtheta * inv_step
            rows = tl.minimum(tl.maximum(pre, 0.0), nlat + 1.0)
            slope = tl.where((pre >= 0.0) & (pre <= nlat + 1.0), inv_step, 0.0)
        else:
            t0 = tl.load(table_ptr)
            t1 = tl.load(table_ptr + nlat + 1)
            theta = colat_i + dtheta
            t = tl.minimum(tl.maximum(theta, t0), t1)
            kb = tl.minimum(tl.maximum(((t - t0) * inv_bin_width).to(tl.int32), 0), nbins - 1)
            k = tl.load(bin_row_ptr + kb)
            k = k - (t < tl.load(table_ptr + k)).to(tl.int32) + (t >= tl.load(table_ptr + k + 1)).to(tl.int32)
            k = tl.minimum(tl.maximum(k, 0), nlat)
            step_inv = tl.load(inv_step_ptr + k)
            rows = k + (t - tl.load(table_ptr + k)) * step_inv
            slope = tl.where((theta >= t0) & (theta <= t1), step_inv, 0.0)
        return rows, cols, s2, cos_s, sinc_s, ye, yh, z, rho, r2, keep, slope

    @triton.jit
    def _corners(rows, cols, nlon):
        """Top-left padded corner ``(p0, c0)``, the column right of it (periodic) and the fractions."""
        r0f = tl.floor(rows)
        fr = rows - r0f
        cw = cols - tl.floor(cols / nlon) * nlon  # periodic column in [0, nlon)
        cw = tl.where(cw >= nlon, cw - nlon, cw)
        c0f = tl.floor(cw)
        fc = cw - c0f
        p0 = r0f.to(tl.int32)
        c0 = c0f.to(tl.int32)
        c1 = tl.where(c0 + 1 >= nlon, c0 + 1 - nlon, c0 + 1)
        return p0, c0, c1, fr, fc

    @triton.jit
    def _source(p, q, nlat, nlon, gn, gs, ODD: tl.constexpr):
        """Data row, the two data columns (equal off the ghost rows) and validity of padded corner (p, q)."""
        ghost = (p == 0) | (p == nlat + 1)
        row = tl.where(p == 0, gn, tl.where(p == nlat + 1, gs, p - 1))
        h = nlon // 2
        qa = tl.where(ghost, (q + h) % nlon, q)
        if ODD:
            qb = tl.where(ghost, (q + h + 1) % nlon, q)
        else:
            qb = qa
        return row, qa, qb, p <= nlat + 1

    @triton.jit
    def _acc(x, F64: tl.constexpr):
        """``x`` in the accumulation dtype: float64 for float64 values, float32 otherwise."""
        if F64:
            return x.to(tl.float64)
        return x.to(tl.float32)

    @triton.jit
    def _gather(base, row, qa, qb, valid, mask, nlon, ODD: tl.constexpr, F64: tl.constexpr):
        va = _acc(tl.load(base + row * nlon + qa, mask=mask & valid, other=0.0), F64)
        if ODD:
            vb = _acc(tl.load(base + row * nlon + qb, mask=mask & valid, other=0.0), F64)
            va = 0.5 * (va + vb)
        return va

    @triton.jit
    def _scatter(base, row, qa, qb, valid, mask, nlon, g, ghost_half, ODD: tl.constexpr):
        if ODD:
            g = tl.where(ghost_half, 0.5 * g, g)
            tl.atomic_add(base + row * nlon + qb, g, mask=mask & valid & ghost_half)
        tl.atomic_add(base + row * nlon + qa, g, mask=mask & valid)

    @triton.jit
    def _warp_kernel(
        values_ptr, d_ptr, out_ptr, g_out_ptr, g_values_ptr, g_d_ptr,
        sin_ptr, cos_ptr, colat_ptr, table_ptr, inv_step_ptr, bin_row_ptr,
        const_ptr, C, nlat, nlon, gn, gs, nbins,
        EPS: tl.constexpr, TOL2: tl.constexpr, UNIFORM: tl.constexpr, ODD: tl.constexpr,
        BACKWARD: tl.constexpr, N_TERMS: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        """One head ``n`` (program axis 1), BLOCK nodes (axis 0): forward samples, backward scatters."""
        n = tl.program_id(1)
        npix = nlat * nlon
        pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = pix < npix
        i = pix // nlon
        j = pix - i * nlon
        d_base = d_ptr + n.to(tl.int64) * 2 * npix
        a = tl.load(d_base + pix, mask=mask, other=0.0)
        b = tl.load(d_base + npix + pix, mask=mask, other=0.0)
        st = tl.load(sin_ptr + i, mask=mask, other=0.0)
        ct = tl.load(cos_ptr + i, mask=mask, other=1.0)
        colat_i = tl.load(colat_ptr + i, mask=mask, other=0.0)
        a = a.to(st.dtype)
        b = b.to(st.dtype)
        rows, cols, s2, cos_s, sinc_s, ye, yh, z, rho, r2, keep, slope = _warp_index(
            a, b, i, j, st, ct, colat_i, table_ptr, inv_step_ptr, bin_row_ptr, const_ptr,
            nlat, nbins, EPS, TOL2, UNIFORM, N_TERMS,
        )  # fmt: skip
        p0, c0, c1, fr, fc = _corners(rows, cols, nlon)
        r00, a00, b00, v00 = _source(p0, c0, nlat, nlon, gn, gs, ODD)
        r01, a01, b01, v01 = _source(p0, c1, nlat, nlon, gn, gs, ODD)
        r10, a10, b10, v10 = _source(p0 + 1, c0, nlat, nlon, gn, gs, ODD)
        r11, a11, b11, v11 = _source(p0 + 1, c1, nlat, nlon, gn, gs, ODD)
        w00 = (1.0 - fr) * (1.0 - fc)
        w01 = (1.0 - fr) * fc
        w10 = fr * (1.0 - fc)
        w11 = fr * fc
        acc_r = _acc(fr * 0.0, F64)  # loop-carried: one dtype throughout (the accumulation dtype)
        acc_c = _acc(fr * 0.0, F64)
        ghost0 = (p0 == 0) | (p0 == nlat + 1)
        ghost1 = (p0 + 1 == 0) | (p0 + 1 == nlat + 1)
        for c in range(C):
            plane = (n.to(tl.int64) * C + c) * npix
            if BACKWARD:
                go = _acc(tl.load(g_out_ptr + plane + pix, mask=mask, other=0.0), F64)
                gv = g_values_ptr + plane
                _scatter(gv, r00, a00, b00, v00, mask, nlon, go * w00, ghost0, ODD)
                _scatter(gv, r01, a01, b01, v01, mask, nlon, go * w01, ghost0, ODD)
                _scatter(gv, r10, a10, b10, v10, mask, nlon, go * w10, ghost1, ODD)
                _scatter(gv, r11, a11, b11, v11, mask, nlon, go * w11, ghost1, ODD)
                if g_d_ptr is not None:
                    vb = values_ptr + plane
                    f00 = _gather(vb, r00, a00, b00, v00, mask, nlon, ODD, F64)
                    f01 = _gather(vb, r01, a01, b01, v01, mask, nlon, ODD, F64)
                    f10 = _gather(vb, r10, a10, b10, v10, mask, nlon, ODD, F64)
                    f11 = _gather(vb, r11, a11, b11, v11, mask, nlon, ODD, F64)
                    acc_r += _acc(go * ((1.0 - fc) * (f10 - f00) + fc * (f11 - f01)), F64)
                    acc_c += _acc(go * ((1.0 - fr) * (f01 - f00) + fr * (f11 - f10)), F64)
            else:
                vb = values_ptr + plane
                f00 = _gather(vb, r00, a00, b00, v00, mask, nlon, ODD, F64)
                f01 = _gather(vb, r01, a01, b01, v01, mask, nlon, ODD, F64)
                f10 = _gather(vb, r10, a10, b10, v10, mask, nlon, ODD, F64)
                f11 = _gather(vb, r11, a11, b11, v11, mask, nlon, ODD, F64)
                res = f00 * w00 + f01 * w01 + f10 * w10 + f11 * w11
                tl.store(out_ptr + plane + pix, res.to(out_ptr.dtype.element_ty), mask=mask)
        if BACKWARD:
            if g_d_ptr is not None:
                dr_a, dr_b, dc_a, dc_b = _index_jacobian(
                    a, b, st, ct, s2, cos_s, sinc_s, ye, yh, z, rho, r2, keep, slope, tl.load(const_ptr + 1), EPS, TOL2
                )
                g_base = g_d_ptr + n.to(tl.int64) * 2 * npix
                ga = acc_r * dr_a + acc_c * dc_a
                gb = acc_r * dr_b + acc_c * dc_b
                tl.store(g_base + pix, ga.to(g_d_ptr.dtype.element_ty), mask=mask)
                tl.store(g_base + npix + pix, gb.to(g_d_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _index_jacobian(a, b, st, ct, s2, cos_s, sinc_s, ye, yh, z, rho, r2, keep, slope, col_per_rad, EPS, TOL2):
        """``(d rows/d a, d rows/d b, d cols/d a, d cols/d b)``: :func:`dandelion.warp.index.index_jacobian`."""
        moving = s2 >= EPS * EPS
        s2s = tl.minimum(s2, 0.25)
        series = s2s * (1.0 / 518918400.0) - 1.0 / 3991680.0
        series = series * s2s + 1.0 / 45360.0
        series = series * s2s - 1.0 / 840.0
        series = series * s2s + 1.0 / 30.0
        series = series * s2s - 1.0 / 3.0
        direct = (cos_s - sinc_s) / tl.maximum(s2, 0.25)
        k = tl.where(moving, tl.where(s2 >= 0.25, direct, series), 0.0)
        sm = tl.where(moving, sinc_s, 0.0)
        dc_a = -sm * a
        dc_b = -sm * b
        dye_a = sinc_s + k * a * a
        dye_b = k * a * b
        dsn_b = sinc_s + k * b * b
        dyh_a = dc_a * st - dye_b * ct
        dyh_b = dc_b * st - dsn_b * ct
        dz_a = dc_a * ct + dye_b * st
        dz_b = dc_b * ct + dsn_b * st
        r2c = tl.maximum(r2, TOL2)
        inv_r = tl.where(keep, 1.0 / tl.sqrt(r2c), 0.0)
        col_scale = tl.where(keep, 1.0 / r2c, 0.0) * col_per_rad
        row_scale = slope / (z * z + rho * rho)
        dr_a = ((ye * dye_a + yh * dyh_a) * inv_r * z - dz_a * rho) * row_scale
        dr_b = ((ye * dye_b + yh * dyh_b) * inv_r * z - dz_b * rho) * row_scale
        dc_a = (dye_a * yh - dyh_a * ye) * col_scale
        dc_b = (dye_b * yh - dyh_b * ye) * col_scale
        return dr_a, dr_b, dc_a, dc_b


def _launch(values, d, tables, meta, out=None, g_out=None, g_values=None, g_d=None):
    """Run :func:`_warp_kernel` (forward with ``out``, backward with ``g_out``); ``tables``/``meta``: :func:`_args`."""
    n, c, nlat, nlon = values.shape
    gn, gs, nbins, uniform = meta
    idx_dtype = tables[0].dtype  # the index arithmetic runs in the sampler's dtype (float32 or float64)
    eps = torch.finfo(idx_dtype).eps
    grid = (triton.cdiv(nlat * nlon, BLOCK), n)
    _warp_kernel[grid](
        values, d, out, g_out, g_values, g_d, *tables, c, nlat, nlon, gn, gs, nbins,
        EPS=eps, TOL2=(8.0 * eps) ** 2, UNIFORM=uniform, ODD=nlon % 2 == 1,
        BACKWARD=g_out is not None, N_TERMS=12 if idx_dtype == torch.float64 else 6,
        F64=values.dtype == torch.float64, BLOCK=BLOCK,
    )  # fmt: skip


def _args(sampler) -> tuple[list[torch.Tensor], list]:
    """The sampler's per-grid tables (kernel argument order) and its integers ``gn, gs, nbins, uniform_rows``."""
    tables = [sampler.sin_colat, sampler.cos_colat, sampler.colat, sampler.row_table, sampler.row_inv_step]
    return tables + [sampler.bin_row, sampler.kernel_constants], [sampler.gn, sampler.gs, sampler.nbins]


def _accumulation_dtype(values: torch.Tensor) -> torch.dtype:
    return torch.float64 if values.dtype == torch.float64 else torch.float32


# The two kernels as torch custom ops, so that dispatch-level tools (the roofline meter, benchmarks/speed/roofline.py;
# FakeTensorMode) see each as ONE op reading its inputs and writing its outputs. Registered once per process:
# importlib.reload (the tests' switch to the interpreter) re-runs this module in the same namespace, and the
# op bodies look up the (reloaded) _launch there at call time.
if AVAILABLE and not globals().get("_OPS_REGISTERED", False):

    @torch.library.custom_op("dandelion::warp_sample", mutates_args=())
    def _warp_sample_op(
        values: torch.Tensor, d: torch.Tensor, tables: list[torch.Tensor], gn: int, gs: int, nbins: int, uniform: bool
    ) -> torch.Tensor:
        out = torch.empty_like(values)
        _launch(values, d, tables, (gn, gs, nbins, uniform), out=out)
        return out

    @_warp_sample_op.register_fake
    def _(values, d, tables, gn, gs, nbins, uniform):
        return torch.empty_like(values)

    @torch.library.custom_op("dandelion::warp_sample_backward", mutates_args=())
    def _warp_sample_backward_op(
        grad: torch.Tensor,
        values: torch.Tensor,
        d: torch.Tensor,
        tables: list[torch.Tensor],
        gn: int,
        gs: int,
        nbins: int,
        uniform: bool,
        need_d: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        g_values = torch.zeros(values.shape, dtype=_accumulation_dtype(values), device=values.device)
        g_d = torch.empty_like(d) if need_d else d.new_empty(0)
        _launch(values, d, tables, (gn, gs, nbins, uniform), g_out=grad, g_values=g_values, g_d=g_d if need_d else None)
        return g_values, g_d

    @_warp_sample_backward_op.register_fake
    def _(grad, values, d, tables, gn, gs, nbins, uniform, need_d):
        g_values = values.new_empty(values.shape, dtype=_accumulation_dtype(values))
        return g_values, (torch.empty_like(d) if need_d else d.new_empty(0))

    _OPS_REGISTERED = True


class TritonWarpSample(torch.autograd.Function):
    """``apply(values, d, sampler)``: :class:`~dandelion.warp.sample.WarpSample` as one Triton kernel each way.

    ``values (N, C, nlat, nlon)`` in any float dtype (kept), displacements ``d (N, 2, nlat, nlon)`` (east,
    north; radians, any float dtype), ``sampler`` the grid's :class:`~dandelion.warp.sampler.SphereSampler`,
    whose dtype (float32, or float64) is that of the index arithmetic. Returns ``(N, C, nlat, nlon)`` in
    ``values``' dtype. Saves only ``values`` and ``d``. Differentiable once. The kernels run as the custom ops
    ``torch.ops.dandelion.warp_sample`` and ``warp_sample_backward`` (the value gradient is accumulated in
    float32 by atomic adds, then cast).
    """

    @staticmethod
    def forward(ctx, values, d, sampler):
        values, d = values.contiguous(), d.contiguous()
        tables, ints = _args(sampler)
        out = torch.ops.dandelion.warp_sample(values, d, tables, *ints, sampler.uniform_rows)
        ctx.save_for_backward(values, d)
        ctx.sampler = sampler
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        values, d = ctx.saved_tensors
        need_v, need_d = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        tables, ints = _args(ctx.sampler)
        g_values, g_d = torch.ops.dandelion.warp_sample_backward(
            grad.contiguous(), values, d, tables, *ints, ctx.sampler.uniform_rows, need_d
        )
        return (g_values.to(values.dtype) if need_v else None), (g_d if need_d else None), None


def triton_warp_sample(values: torch.Tensor, d: torch.Tensor, sampler) -> torch.Tensor:
    """:class:`TritonWarpSample` ``.apply`` (raises RuntimeError where triton is not installed)."""
    if not AVAILABLE:
        raise RuntimeError("the Triton warp kernel needs triton (pip install triton); use kernel='eager'")
    return TritonWarpSample.apply(values, d, sampler)


#: ``{device: bool}``: the outcome of :func:`usable_on`'s check, once per device and process
_CHECKED: dict[str, bool] = {}


def usable_on(device: torch.device) -> bool:
    """Whether the fused kernels compile on ``device`` and agree with the eager node there (checked once).

    The check runs forward and backward on tiny equiangular and Legendre-Gauss grids (both row maps) and
    compares values and both gradients with :class:`~dandelion.warp.sample.WarpSample` (to 1e-3 of their
    largest entry). A failure (a Triton compiler error on an untested GPU, a disagreement) is warned about once,
    with the error, and the caller (``kernel="auto"``) runs the eager path; out of memory is raised.
    """
    key = str(device)
    if key not in _CHECKED:
        _CHECKED[key] = AVAILABLE and _check(device)
    return _CHECKED[key]


def _check(device: torch.device) -> bool:
    try:
        with torch.enable_grad(), torch.autocast(device.type, enabled=False):
            for grid in ("equiangular", "legendre-gauss"):
                sampler = SphereSampler(SphereGrid(6, 12, grid)).to(device)
                gen = torch.Generator().manual_seed(0)
                v, d, w = (torch.randn(2, c, 6, 12, generator=gen).to(device) for c in (3, 2, 3))
                v, d = v.requires_grad_(), (0.5 * d).requires_grad_()
                got, want = TritonWarpSample.apply(v, d, sampler), WarpSample.apply(v, d, sampler)
                got = (got, *torch.autograd.grad(got, (v, d), w))
                want = (want, *torch.autograd.grad(want, (v, d), w))
                for name, a, b in zip(("values", "value gradient", "displacement gradient"), got, want):
                    err = float((a - b).detach().abs().max())
                    if not err <= 1e-3 * float(b.detach().abs().max()):
                        raise RuntimeError(f"the {name} disagree with the eager warp's by {err:.3g} on a {grid} grid")
    except Exception as err:  # noqa: BLE001 - any failure falls back to the eager warp, with a warning
        if isinstance(err, torch.OutOfMemoryError):
            raise
        warnings.warn(
            f"the fused Triton warp kernel failed its check on {device} ({type(err).__name__}: {str(err)[:300]}); "
            "Dandelion's warps run the eager path (kernel='eager' to choose it, kernel='triton' to raise instead)",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return True
