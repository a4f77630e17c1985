"""Sampling on the sphere: the exponential map and pole-aware bilinear interpolation.

docs/ARCHITECTURE.md §5. The warp layer (:class:`~dandelion.warp.TangentWarpS2`) is built on
this module. A warp head predicts, at every grid node x with local frame (east e, north n), a
displacement d = (d_e, d_n) in radians and reads its value features at the point reached by walking
|d| along the great circle leaving x in direction d (the exponential map of the unit sphere),

    y = cos|d| x + sin|d| (d_e e + d_n n) / |d|.

The value at y is interpolated bilinearly in (row, column) index space of the grid: longitude is
periodic (a wrapped column) and colatitude is mapped to a fractional row through the grid's own row
table (non-uniform on Gaussian grids). Across a pole, the neighbour of a point is the mirrored row
at longitude + pi: the image handed to :func:`torch.nn.functional.grid_sample` carries one ghost
row beyond each pole (the row nearest the pole that is not a pole row, at colatitude -theta or
2*pi - theta, rolled by half a turn), so no point is ever clamped to a border.

Numerical care (each item has bitten public code):

* ``sin|d| / |d|`` and ``cos|d|`` are evaluated at ``|d|`` clamped below at the machine epsilon,
  where both equal the first term of their Taylor series (1) in working precision, so values and
  gradients are finite at zero displacement (see :func:`_cos_sinc`);
* the colatitude and longitude of y are computed as increments over the node's own coordinates,
  ``delta_theta = atan2(sin(theta_y - theta_x), cos(theta_y - theta_x))`` and
  ``delta_lon = atan2(y.e, y.h)`` (h the horizontal outward unit vector of the node's meridian); the
  square root and the longitude ``atan2`` are guarded (:class:`_PolarAngles`, a mask with zero
  gradient) when y is within ``8 eps`` of a pole: there the node's own longitude is kept, so a
  pole-row column j is never sent to column j + nlon/2 by a rounding error;
* zero displacement is bit-exactly the identity, pole rows included: the increments are exactly
  zero, the column index is the node's integer column plus the increment, and the padded image has
  ``2**k + 1`` rows and columns so that grid_sample's normalisation ``(g + 1) * (size - 1) / 2``
  (``align_corners=True``) maps integer indices to themselves without rounding.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .kernels import _GhostPad, _pole_tol2, warp_index
from .sphere import SphereGrid

__all__ = ["exp_map", "sample_sphere", "SphereSampler"]


def _cos_sinc(d_east: torch.Tensor, d_north: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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
    finite at ``d = 0`` (:func:`_cos_sinc`).

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
        off = rho2 > _pole_tol2(x.dtype)
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
    cos_s, sinc_s = _cos_sinc(d_east, d_north)
    return cos_s * x + sinc_s * (d_east * east + d_north * north)


class _PolarAngles(torch.autograd.Function):
    """``rho = |(a, b)|`` and ``phi = atan2(a, b)``, both set to 0 where ``rho^2 <= tol2``.

    Used for the horizontal part ``(a, b) = (y.e, y.h)`` of a target point y: ``rho`` is the sine
    of its colatitude and ``phi`` its longitude relative to the node's meridian. Within
    ``sqrt(tol2)`` of a pole the node's own longitude is kept (``phi = 0``) and ``rho = 0``, with
    zero gradients there; elsewhere the gradients are the analytic ones, so the square root and
    ``atan2`` never see ``(0, 0)`` in the backward pass. Masks are applied by multiplication with a
    float mask (cheaper than ``torch.where`` on CPU, and exact: ``x * 1 == x``).
    """

    @staticmethod
    def forward(ctx, a, b, tol2: float):
        r2 = a * a + b * b
        keep = (r2 > tol2).to(r2.dtype)
        rho = torch.sqrt(r2) * keep
        phi = torch.atan2(a, b) * keep
        ctx.save_for_backward(a, b, r2, keep)
        ctx.tol2 = tol2
        return rho, phi

    @staticmethod
    def backward(ctx, g_rho, g_phi):
        a, b, r2, keep = ctx.saved_tensors
        r2c = r2.clamp_min(ctx.tol2)
        inv_r = torch.rsqrt(r2c) * keep
        inv_r2 = keep / r2c
        gr = g_rho * inv_r
        gp = g_phi * inv_r2
        return gr * a + gp * b, gr * b - gp * a, None


def _next_pow2_plus1(n: int) -> int:
    """Smallest ``2**k + 1 >= n`` (k >= 1)."""
    k = max(1, math.ceil(math.log2(max(n - 1, 1))))
    return 2**k + 1


class SphereSampler(nn.Module):
    """Bilinear sampler of fields on a :class:`~dandelion.sphere.SphereGrid`, pole-aware.

    Points are handled in the sampler's padded index space: fractional row ``r`` (row ``i`` of the
    grid is ``r = i + 1``; ``r = 0`` and ``r = nlat + 1`` are the ghost rows beyond the poles) and
    fractional column ``c`` in ``[0, nlon]`` (``c = nlon`` is column 0 again). Colatitude maps to
    ``r`` piecewise linearly through the row table ``[-theta_gn, theta_0, ..., theta_{nlat-1},
    2*pi - theta_gs]``, where ``gn``/``gs`` are the rows nearest the poles that are not pole rows.

    Parameters
    ----------
    grid : SphereGrid
        The grid the sampled fields live on.
    dtype : torch.dtype
        Working dtype of the tables (float32 by default; ``.double()`` converts them).

    Buffers (non-persistent, computed in float64 and cast once)
    -------
    row_table : (nlat + 2,) colatitudes of the padded rows, radians.
    row_inv_step : (nlat + 1,) ``1 / (row_table[k+1] - row_table[k])``.
    colat, sin_colat, cos_colat : (nlat, 1) node colatitudes and their sine and cosine.
    node_rows : (nlat, 1) padded row of each node (``i + 1``); columns : (nlon,) ``0..nlon-1``.
    bin_row : (nbins,) int32, row of the left edge of uniform colatitude bins of half the smallest
        row spacing (locates a colatitude's row without a binary search).

    Equiangular row tables (ghost rows included) are uniform, and warps of the grid's own nodes
    then map the colatitude increment to rows linearly, ``r = i + 1 + delta_theta / step``;
    other grids go through :meth:`row_index`.

    The padded image is ``(hp, wp) = (2**a + 1, 2**b + 1)`` with ``hp >= nlat + 2`` and
    ``wp >= nlon + 1``: with these sizes grid_sample's unnormalisation is exact for integer indices.
    """

    def __init__(self, grid: SphereGrid, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.grid = grid
        self.nlat, self.nlon = grid.nlat, grid.nlon
        nlat = grid.nlat
        self.gn = 1 if grid.has_poles else 0
        self.gs = nlat - 2 if grid.has_poles else nlat - 1
        colat = grid.colat
        table = torch.cat([-colat[self.gn : self.gn + 1], colat, 2 * math.pi - colat[self.gs : self.gs + 1]])
        if not bool((table[1:] > table[:-1]).all()):
            raise ValueError(f"grid {grid} has non-increasing colatitudes: cannot build a row table")
        self.hp = _next_pow2_plus1(nlat + 2)
        self.wp = _next_pow2_plus1(self.nlon + 1)
        self.register_buffer("row_table", table.to(dtype), persistent=False)
        self.register_buffer("row_inv_step", (1.0 / (table[1:] - table[:-1])).to(dtype), persistent=False)
        self.register_buffer("colat", colat[:, None].to(dtype), persistent=False)
        self.register_buffer("sin_colat", torch.sin(colat)[:, None].to(dtype), persistent=False)
        self.register_buffer("cos_colat", torch.cos(colat)[:, None].to(dtype), persistent=False)
        self.register_buffer("columns", torch.arange(self.nlon, dtype=torch.float64).to(dtype), persistent=False)
        self.register_buffer(
            "node_rows", torch.arange(1, nlat + 1, dtype=torch.float64)[:, None].to(dtype), persistent=False
        )
        # equiangular tables (ghost rows included) are uniform: row = i + 1 + delta_theta / step
        step = table[1:] - table[:-1]
        self.uniform_rows = bool((step - step.mean()).abs().max() <= 1e-9 * step.mean())
        self.inv_step = float(1.0 / step.mean())
        # general tables: uniform bins of half the smallest row spacing, each knowing the row of its
        # left edge, locate a colatitude's row within one row (then one comparison each way)
        bin_width = 0.5 * float(step.min())
        nbins = int(math.floor(float(table[-1] - table[0]) / bin_width)) + 2
        edges = table[0] + bin_width * torch.arange(nbins, dtype=torch.float64)
        bin_row = (torch.searchsorted(table, edges, right=True) - 1).clamp(0, nlat).to(torch.int32)
        self.register_buffer("bin_row", bin_row, persistent=False)
        self.inv_bin_width, self.nbins = 1.0 / bin_width, nbins

    def extra_repr(self) -> str:
        return f"nlat={self.nlat}, nlon={self.nlon}, grid={self.grid.grid!r}, padded=({self.hp}, {self.wp})"

    # ------------------------------------------------------------------ index space
    def canonical(self, colat: torch.Tensor, cols: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Bring colatitudes outside the row table back onto the sphere.

        A colatitude outside ``[row_table[0], row_table[-1]]`` is reduced modulo ``2*pi`` and, when
        above ``pi``, reflected (``theta -> 2*pi - theta``) with half a turn added to its column.
        Values already inside the table are returned unchanged (bit for bit).
        """
        t0, t1 = self.row_table[0], self.row_table[-1]
        out = (colat < t0) | (colat > t1)
        tm = torch.remainder(colat, 2 * math.pi)
        flip = out & (tm > math.pi)
        colat = torch.where(out, torch.where(flip, 2 * math.pi - tm, tm), colat)
        cols = torch.where(flip, cols + 0.5 * self.nlon, cols)
        return colat, cols

    def row_index(self, colat: torch.Tensor) -> torch.Tensor:
        """Fractional padded row of colatitudes (piecewise linear through ``row_table``, exact at nodes).

        Colatitudes outside the table are clamped to its ends (bring them back with
        :meth:`canonical` first).
        """
        return self._row_index(colat)[0]

    def _row_index(self, colat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`row_index` and its derivative (0 where the clamp is active)."""
        table = self.row_table
        t = colat.clamp(table[0], table[-1])

        def lookup(values, index):  # index_select on the flattened index: the fastest gather on CPU
            return values.index_select(0, index.reshape(-1)).reshape(index.shape)

        kb = ((t.detach() - table[0]) * self.inv_bin_width).to(torch.int32).clamp_(0, self.nbins - 1)
        k = lookup(self.bin_row, kb)
        k = k - (t < lookup(table, k)).to(torch.int32) + (t >= lookup(table, k + 1)).to(torch.int32)
        k = k.clamp_(0, self.nlat)
        inv_step = lookup(self.row_inv_step, k)
        slope = ((colat >= table[0]) & (colat <= table[-1])).to(t.dtype) * inv_step
        return k.to(t.dtype) + (t - lookup(table, k)) * inv_step, slope

    def sample_index(self, field: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Sample ``field (N, C, nlat, nlon)`` at padded indices ``rows, cols (N, H_out, W_out)``.

        ``rows`` must lie in ``[0, nlat + 1]``; ``cols`` may be any real number (reduced modulo
        ``nlon``). One ``grid_sample`` call; returns ``(N, C, H_out, W_out)``.
        """
        image = _GhostPad.apply(field, self.gn, self.gs, self.hp, self.wp)
        return F.grid_sample(
            image, self.sample_grid(rows, cols), mode="bilinear", padding_mode="border", align_corners=True
        )

    def sample_grid(self, rows: torch.Tensor, cols: torch.Tensor, near: bool = False) -> torch.Tensor:
        """grid_sample's normalised ``(N, H_out, W_out, 2)`` grid of padded indices (columns reduced modulo ``nlon``).

        ``near=True`` promises ``-nlon <= cols < 2 * nlon`` (true of warps of the grid's own nodes,
        whose columns lie within half a turn of the node's) and OVERWRITES ``cols``: the reduction is
        then one add of ``+-nlon`` where a column lies outside ``[0, nlon)``, bit for bit what
        ``torch.remainder`` gives there (``fmod`` is exact) at a third of its CPU cost.
        """
        grid = rows.new_empty(*rows.shape, 2)  # filled by two copies (cheaper than torch.stack on the CPU)
        if near:
            below = torch.lt(cols, 0.0, out=torch.empty_like(cols))
            cols = cols.add_(
                below.sub_(torch.ge(cols, float(self.nlon), out=torch.empty_like(cols))), alpha=float(self.nlon)
            )
        else:
            cols = torch.remainder(cols, self.nlon)
        grid[..., 0] = cols.mul_(2.0 / (self.wp - 1)).sub_(1.0)
        grid[..., 1] = (rows * (2.0 / (self.hp - 1))).sub_(1.0)
        return grid

    def pad(self, field: torch.Tensor) -> torch.Tensor:
        """The padded ``(..., hp, wp)`` image of ``field (..., nlat, nlon)``.

        Ghost rows beyond the poles and the periodic column are filled in; no autograd.
        """
        return _GhostPad.pad(field, self.gn, self.gs, self.hp, self.wp)

    def pad_adjoint(self, grad: torch.Tensor) -> torch.Tensor:
        """Adjoint of :meth:`pad`: ``(..., hp, wp) -> (..., nlat, nlon)``."""
        return _GhostPad.pad_adjoint(grad, self.nlat, self.nlon, self.gn, self.gs)

    def forward(self, field: torch.Tensor, colat: torch.Tensor, lon: torch.Tensor) -> torch.Tensor:
        """Sample ``field (B, C, nlat, nlon)`` at points ``colat, lon (B, H_out, W_out)`` (radians).

        Returns ``(B, C, H_out, W_out)``. Any colatitude is accepted (reduced modulo 2*pi and
        reflected through the poles); longitude is periodic.
        """
        self.grid.check_shape(field)
        if field.dim() != 4 or colat.dim() != 3 or colat.shape != lon.shape or colat.shape[0] != field.shape[0]:
            raise ValueError(
                "expected field (B, C, nlat, nlon) and colat, lon (B, H_out, W_out) with the same B; "
                f"got field {tuple(field.shape)}, colat {tuple(colat.shape)}, lon {tuple(lon.shape)}"
            )
        cols = lon * (self.nlon / (2 * math.pi))
        # Snap columns within a few ulps of an integer onto it, so that node longitudes (which are
        # not exactly representable) hit their columns exactly; moves no point by more than
        # 4 * eps * nlon columns (the rounding error of the product above).
        near = torch.round(cols)
        tol = 4 * torch.finfo(cols.dtype).eps * max(self.nlon, 1)
        cols = torch.where((cols - near).abs() <= tol, near + (cols - cols.detach()), cols)
        colat, cols = self.canonical(colat, cols)
        return self.sample_index(field, self.row_index(colat), cols)

    # ------------------------------------------------------------------ warps of the grid's own nodes
    def displaced_index(self, d_east: torch.Tensor, d_north: torch.Tensor, jacobian: bool = False):
        """Padded indices of the exponential-map images of every grid node.

        Parameters
        ----------
        d_east, d_north : torch.Tensor of shape (N, nlat, nlon)
            Displacements in radians along each node's east and north unit vectors
            (``SphereGrid.east/north``; on pole rows, the limits along each column's meridian).
        jacobian : bool
            Also return the derivatives of the indices (for :class:`~dandelion.kernels.WarpSample`):
            evaluated without autograd and in place by :func:`~dandelion.kernels.warp_index`.

        Returns
        -------
        rows, cols : torch.Tensor of shape (N, nlat, nlon)
            For ``d = 0`` exactly the node's own ``(i + 1, j)``.
        jac : tuple of 4 tensors (N, nlat, nlon), only with ``jacobian=True``
            ``(d rows/d d_east, d rows/d d_north, d cols/d d_east, d cols/d d_north)``, the
            derivatives autograd would give through this function (same masks at the clamps and
            the poles).

        Notes
        -----
        In the node's frame the target ``y = exp_x(d)`` has components ``z = cos s cos t + S d_n sin t``
        (polar axis), ``y.e = S d_e`` and ``y.h = cos s sin t - S d_n cos t`` along the horizontal
        outward vector h of the node's meridian, with ``t`` the node colatitude, ``s = |d|`` and
        ``S = sin s / s``. With ``rho = |(y.e, y.h)|`` (= sin of y's colatitude),
        ``delta_theta = atan2(rho cos t - z sin t, z cos t + rho sin t)`` and
        ``delta_lon = atan2(y.e, y.h)`` (spherical trigonometry of the triangle pole-x-y). The
        derivatives use ``d cos s = -S d.dd``, ``d S = K d.dd`` with ``K = (cos s - S)/s^2`` (its
        Taylor series ``-1/3 + s^2/30 - s^4/840 + ...`` below ``s = 1/2``, where the difference
        cancels), ``d delta_theta = (z d rho - rho d z) / (rho^2 + z^2)`` and the polar-angle derivatives.
        """
        if jacobian:
            return warp_index(self, d_east, d_north, jacobian=True)
        cos_s, sinc_s = _cos_sinc(d_east, d_north)
        st, ct = self.sin_colat, self.cos_colat
        sd_n = sinc_s * d_north
        ye = sinc_s * d_east
        yh = torch.addcmul(cos_s * st, sd_n, ct, value=-1.0)
        z = torch.addcmul(cos_s * ct, sd_n, st)
        rho, dlon = _PolarAngles.apply(ye, yh, _pole_tol2(ye.dtype))
        # the numerator as two separate products: at d = 0 it is fl(st*ct) - fl(ct*st) = 0 exactly,
        # which a fused multiply-add (addcmul may contract into one on some devices) would not give
        dtheta = torch.atan2(rho * ct - z * st, torch.addcmul(z * ct, rho, st))
        cols = self.columns + dlon * (self.nlon / (2 * math.pi))
        if self.uniform_rows:
            # a walk of exactly pi from the south pole to the north pole gives delta_theta = +pi
            # (atan2's branch) and lands on the south ghost row; no other point leaves the table
            return (self.node_rows + dtheta * self.inv_step).clamp(0, self.nlat + 1), cols
        return self.row_index(self.colat + dtheta), cols


_SAMPLERS: dict = {}


def sample_sphere(field: torch.Tensor, colat: torch.Tensor, lon: torch.Tensor, grid: SphereGrid) -> torch.Tensor:
    """Bilinear, pole-aware interpolation of a field on a grid at arbitrary points.

    Bilinear in the grid's (row, column) index space: periodic in longitude, colatitude mapped to
    a fractional row through the grid's row table, and across the poles through mirrored ghost rows
    at longitude + pi (no clamping). One ``grid_sample`` call. At grid nodes the node values are
    returned exactly.

    Parameters
    ----------
    field : torch.Tensor of shape (B, C, nlat, nlon)
        Values at the nodes of ``grid``.
    colat, lon : torch.Tensor of shape (B, H_out, W_out)
        Colatitude and longitude of the sample points, radians, same dtype as ``field``.
    grid : SphereGrid
        The grid of ``field``.

    Returns
    -------
    torch.Tensor of shape (B, C, H_out, W_out)

    Raises
    ------
    ValueError
        If the shapes do not match the grid or each other.
    """
    key = (grid, field.dtype, field.device)
    sampler = _SAMPLERS.get(key)
    if sampler is None:
        if len(_SAMPLERS) > 32:
            _SAMPLERS.clear()
        sampler = _SAMPLERS[key] = SphereSampler(grid, dtype=field.dtype).to(field.device)
    return sampler(field, colat, lon)
