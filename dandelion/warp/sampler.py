"""Pole-aware bilinear sampling of fields on a :class:`~dandelion.sphere.SphereGrid` (:class:`SphereSampler`).

Bilinear in the grid's (row, column) index space: longitude is periodic (a wrapped column) and colatitude is
mapped to a fractional row through the grid's own row table (non-uniform on Gaussian grids). Across a pole the
neighbour of a point is the mirrored row at longitude + pi: the image handed to
:func:`torch.nn.functional.grid_sample` carries one ghost row beyond each pole
(:class:`~dandelion.warp.padding.GhostPad`), so no point is ever clamped to a border. The sampler also holds
the per-grid tables of the warp index (:func:`~dandelion.warp.index.warp_index`) and the bins that locate a
colatitude's row on a non-uniform table. :func:`sample_sphere` samples at arbitrary points.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..sphere import SphereGrid
from .index import WarpIndex, warp_index
from .padding import GhostPad, next_pow2_plus1

__all__ = ["sample_sphere", "SphereSampler"]


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
    kernel_constants : (5,) ``1/step``, ``nlon/(2 pi)``, ``pi/2``, ``pi``, ``1/bin width`` for the Triton kernel.

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
        self.hp = next_pow2_plus1(nlat + 2)
        self.wp = next_pow2_plus1(self.nlon + 1)
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
        # the fused kernel's scalars in the working dtype (Triton passes Python floats as float32)
        consts = [self.inv_step, self.nlon / (2 * math.pi), 0.5 * math.pi, math.pi, self.inv_bin_width]
        self.register_buffer("kernel_constants", torch.tensor(consts, dtype=torch.float64).to(dtype), persistent=False)

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
        return self.row_index_and_slope(colat)[0]

    def row_index_and_slope(self, colat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`row_index` and its derivative in the colatitude (0 where the clamp is active)."""
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
        image = GhostPad.apply(field, self.gn, self.gs, self.hp, self.wp)
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
        return GhostPad.pad(field, self.gn, self.gs, self.hp, self.wp)

    def pad_adjoint(self, grad: torch.Tensor) -> torch.Tensor:
        """Adjoint of :meth:`pad`: ``(..., hp, wp) -> (..., nlat, nlon)``."""
        return GhostPad.pad_adjoint(grad, self.nlat, self.nlon, self.gn, self.gs)

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
        """Padded indices of the exponential-map images of every grid node (:func:`~dandelion.warp.index.warp_index`).

        Parameters
        ----------
        d_east, d_north : torch.Tensor of shape (N, nlat, nlon)
            Displacements in radians along each node's east and north unit vectors
            (``SphereGrid.east/north``; on pole rows, the limits along each column's meridian).
        jacobian : bool
            Also return the derivatives of the indices (without autograd).

        Returns
        -------
        rows, cols : torch.Tensor of shape (N, nlat, nlon)
            For ``d = 0`` exactly the node's own ``(i + 1, j)``. Differentiable in the displacements
            (:class:`~dandelion.warp.index.WarpIndex`, the analytic Jacobian) when ``jacobian=False``.
        jac : tuple of 4 tensors (N, nlat, nlon), only with ``jacobian=True``
            ``(d rows/d d_east, d rows/d d_north, d cols/d d_east, d cols/d d_north)``.
        """
        if jacobian:
            return warp_index(self, d_east, d_north, jacobian=True)
        return WarpIndex.apply(self, d_east, d_north)


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
