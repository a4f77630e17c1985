"""Conservative, second-order remap from the finite-volume cells to a latitude-longitude grid.

Target cells. Node ``(k, j)`` of a :class:`dandelion.sphere.SphereGrid` owns the cell between the
mid-colatitudes of its row and the neighbouring rows (0 and pi at the ends) and between the
longitudes ``lon_j -+ pi / nlon`` (centred on the node: no half-cell offset). On a pole-including
(equiangular) grid the pole row is ONE cell, the polar cap, and all its nodes get its value.

Overlaps. Every source cell (a spherical quadrilateral with great-circle edges) is split into
``m x m`` spherical quadrilaterals that tile it exactly
(:func:`dandelion.solvers.fv_geometry.subdivision_corners`, exact areas), ``m`` chosen per source cell
so that pieces are at most half the narrowest target cell they can meet (the thin wedges next to the
poles get the finest split). A piece whose corners do not all lie in the target cell of its centre is
split 2 x 2 (edge midpoints on its great circles, so the children tile it), up to three times; then
each piece goes to the target cell holding its centre. The pieces of one source cell sum to its
area to round-off, so the remap is conservative to round-off WITH THE REMAP'S CELLS (the unions of
their pieces, whose areas ``area_out`` differ from the exact latitude-longitude cells by about 0.1%
(median) and at most about 3% at 32x64).

Second order, no blocks. Inside each source cell the state is the limited linear reconstruction
of the solver (monotonised-central slopes per index, :func:`dandelion.solvers.fv_fluxes.mc_slope`),
so a target cell much smaller than a source cell (rows next to the poles, Gaussian rows) gets the
reconstruction's mean over its own part instead of the source cell's mean, and fronts are not
smeared by a second averaging. Pieces record their offsets ``(xi, eta)`` in the cell's index space
relative to the cell's area centroid, so the linear part integrates to zero over every source cell:
the remap stays exactly conservative. The depth slopes are scaled down where needed so that the
reconstruction stays above half the cell mean (positivity; a conservative scaling, no clipping).

Weights: three sparse matrices (mean, x-slope, y-slope), built once with SciPy and applied as
``torch.sparse`` matrix products (rows of the mean matrix sum to 1). Momentum is remapped as its
Cartesian components and projected onto (east, north) at the target nodes afterwards.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import torch

from dandelion.sphere import SphereGrid

from .fv_fluxes import mc_slope
from .fv_geometry import CalhounHelzelGrid, pad_x, pad_y, spherical_triangle_area, subdivision_corners

__all__ = ["ConservativeRemap", "target_colat_bounds"]


def _tri(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return spherical_triangle_area(*(torch.from_numpy(np.ascontiguousarray(x)) for x in (a, b, c))).numpy()


def target_colat_bounds(grid: SphereGrid) -> np.ndarray:
    """Colatitude boundaries ``(nlat + 1,)`` of the target cells (mid-colatitudes, 0 and pi at the ends)."""
    ct = grid.colat.numpy()
    return np.concatenate([[0.0], 0.5 * (ct[1:] + ct[:-1]), [math.pi]])


class ConservativeRemap:
    """Remap of finite-volume states to the nodes of ``grid_out`` (module docstring).

    Parameters
    ----------
    grid_in : CalhounHelzelGrid
    grid_out : SphereGrid
    pieces_per_width : float
        Pieces across the narrowest target cell a source cell meets before refinement (default 2).
    max_split : int
        Largest ``m`` (pieces per source-cell side).

    Attributes
    ----------
    area_out : torch.Tensor (nlat, nlon)
        Areas of the remap's target cells (the pole cap once, in column 0, zeros in the other columns
        of a pole row), summing to 4 pi.

    Calling the remap with a state ``(B, 4, ny, nx)`` returns ``{"h", "hu", "hv"}``, each
    ``(B, nlat, nlon)`` float64 (depth; eastward and northward momentum).
    """

    def __init__(
        self, grid_in: CalhounHelzelGrid, grid_out: SphereGrid, *, pieces_per_width: float = 2.0, max_split: int = 512
    ):
        self.grid_in, self.grid_out = grid_in, grid_out
        self.device = grid_in.area.device
        self.bounds = target_colat_bounds(grid_out)
        nlat, nlon = grid_out.nlat, grid_out.nlon
        S, T = grid_in.ny * grid_in.nx, nlat * nlon
        mats = [sp.csr_matrix((T, S)) for _ in range(3)]
        for rows, cols, *vals in self._pieces(float(pieces_per_width), int(max_split)):
            for k, v in enumerate(vals):  # sum each chunk at once: memory stays at the final non-zeros
                mats[k] = mats[k] + sp.coo_matrix((v, (rows, cols)), shape=(T, S)).tocsr()
        area_t = np.asarray(mats[0].sum(axis=1)).ravel()
        used = area_t > 0
        pole_rows = [0, nlat - 1] if grid_out.has_poles else []
        expect = np.ones((nlat, nlon), dtype=bool)
        expect[pole_rows, 1:] = False
        if not np.array_equal(used.reshape(nlat, nlon), expect):
            raise RuntimeError(
                f"remap to {grid_out}: {int((expect.ravel() & ~used).sum())} target cells got no "
                "piece; raise pieces_per_width"
            )
        inv = sp.diags(np.where(used, 1.0 / np.where(used, area_t, 1.0), 0.0))
        self.area_out = torch.from_numpy(area_t.reshape(nlat, nlon)).to(self.device)
        self._w = [self._to_torch(inv @ m) for m in mats]
        self.pole_rows = pole_rows
        self.east, self.north = grid_out.east.to(self.device), grid_out.north.to(self.device)

    def _to_torch(self, m: sp.spmatrix) -> torch.Tensor:
        m = m.tocoo()
        idx = torch.from_numpy(np.stack([m.row, m.col]).astype(np.int64))
        return (
            torch.sparse_coo_tensor(
                idx, torch.from_numpy(m.data), size=m.shape, dtype=torch.float64, check_invariants=False
            )
            .coalesce()
            .to(self.device)
        )

    def _split_per_cell(self, ppw: float, max_split: int) -> np.ndarray:
        g, go = self.grid_in, self.grid_out
        c = g.corners.cpu().numpy()
        centre = g.centre.cpu().numpy()
        corners = np.stack([c[:-1, :-1], c[:-1, 1:], c[1:, 1:], c[1:, :-1]], axis=2)  # (ny, nx, 4, 3)
        diam = np.arccos(np.clip((corners * centre[:, :, None]).sum(-1), -1, 1)).max(-1)  # (ny, nx)
        side = 2.0 * diam
        colat = np.arccos(np.clip(centre[..., 2], -1, 1))
        polar = np.maximum(np.minimum(colat, math.pi - colat) - diam, 0.0)
        dtheta = np.diff(self.bounds)
        first = min(self.bounds[1], math.pi - self.bounds[-2])
        dlon = 2.0 * math.pi / go.nlon
        width = np.minimum(dtheta.min(), dlon * np.sin(np.maximum(polar, first)))
        m = np.ceil(ppw * side / width)
        return np.clip(m, 2, max_split).astype(np.int64)

    def _target(self, p: np.ndarray) -> np.ndarray:
        """Target cell index ``row * nlon + col`` of unit vectors ``(..., 3)`` (pole rows: column 0)."""
        go = self.grid_out
        colat = np.arccos(np.clip(p[..., 2], -1.0, 1.0))
        row = np.clip(np.searchsorted(self.bounds, colat, side="right") - 1, 0, go.nlat - 1)
        lon = np.mod(np.arctan2(p[..., 1], p[..., 0]), 2.0 * math.pi)
        col = np.mod(np.floor(lon * go.nlon / (2.0 * math.pi) + 0.5).astype(np.int64), go.nlon)
        if go.has_poles:
            col = np.where((row == 0) | (row == go.nlat - 1), 0, col)
        return row * go.nlon + col

    def _pieces(self, ppw: float, max_split: int, levels: int = 3):
        """Chunks of pieces: (target index, source index, area, area * xi, area * eta), flat arrays.
        Pieces whose corners do not all lie in the target cell of their centre are split 2 x 2 (edge
        midpoints on the great circles, so the children tile the parent), up to ``levels`` times."""
        g = self.grid_in
        ny, nx = g.ny, g.nx
        m_cell = self._split_per_cell(ppw, max_split)
        c = g.corners.detach().cpu()
        quad = torch.stack([torch.stack([c[:-1, :-1], c[:-1, 1:]], 2), torch.stack([c[1:, :-1], c[1:, 1:]], 2)], 2)
        quad = quad.reshape(ny * nx, 2, 2, 3)  # per cell a 2 x 2 corner array
        area_in = g.area.cpu().numpy().ravel()

        def unit(v):
            return v / np.linalg.norm(v, axis=-1, keepdims=True)

        for m in np.unique(m_cell):
            m = int(m)
            cells = np.nonzero(m_cell.ravel() == m)[0]
            t = (np.arange(m) + 0.5) / m - 0.5
            chunk = max(1, 500_000 // (m * m))
            for k in range(0, len(cells), chunk):
                idx = cells[k : k + chunk]
                corners = [
                    x[:, 0, 0].numpy().reshape(-1, 3) for x in subdivision_corners(quad[torch.from_numpy(idx)], m)
                ]
                xi = np.broadcast_to(t[None, None, :], (len(idx), m, m)).ravel()
                eta = np.broadcast_to(t[None, :, None], (len(idx), m, m)).ravel()
                src = np.repeat(np.arange(len(idx)), m * m)
                size, out = 1.0 / m, []
                for level in range(levels + 1):
                    A, B, C, D = corners
                    tid = self._target(unit(A + B + C + D))
                    keep = np.ones(len(tid), dtype=bool)
                    if level < levels:
                        keep = (
                            (self._target(A) == tid)
                            & (self._target(B) == tid)
                            & (self._target(C) == tid)
                            & (self._target(D) == tid)
                        )
                    area = _tri(A[keep], B[keep], C[keep]) + _tri(A[keep], C[keep], D[keep])
                    out.append((tid[keep], src[keep], area, xi[keep], eta[keep]))
                    if keep.all():
                        break
                    A, B, C, D = (x[~keep] for x in corners)
                    ab, bc, cd, da, o = unit(A + B), unit(B + C), unit(C + D), unit(D + A), unit(A + B + C + D)
                    corners = [
                        np.concatenate(v) for v in ((A, ab, o, da), (ab, B, bc, o), (o, bc, C, cd), (da, o, cd, D))
                    ]
                    h = 0.25 * size
                    x0, y0 = xi[~keep], eta[~keep]
                    xi = np.concatenate([x0 - h, x0 + h, x0 + h, x0 - h])
                    eta = np.concatenate([y0 - h, y0 - h, y0 + h, y0 + h])
                    src = np.tile(src[~keep], 4)
                    size *= 0.5
                tid, src, area, xi, eta = (np.concatenate(v) for v in zip(*out))
                asum = np.bincount(src, weights=area, minlength=len(idx))
                area = area * (area_in[idx] / asum)[src]  # exact column sums
                xb = np.bincount(src, weights=area * xi, minlength=len(idx)) / area_in[idx]
                yb = np.bincount(src, weights=area * eta, minlength=len(idx)) / area_in[idx]
                yield tid, idx[src], area, area * (xi - xb[src]), area * (eta - yb[src])

    def slopes(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Limited slopes per index ``(B, 4, ny, nx)`` in x and y (depth slopes scaled so that the
        reconstruction stays >= half the cell mean)."""
        px, py = pad_x(q, 1), pad_y(q, 1)
        sx = mc_slope(px[..., :-2], q, px[..., 2:])
        sy = mc_slope(py[..., :-2, :], q, py[..., 2:, :])
        h = q[:, :1]
        dev = 0.5 * (sx[:, :1].abs() + sy[:, :1].abs())
        theta = torch.where(dev > 0.5 * h, 0.5 * h / dev.clamp_min(1e-300), torch.ones_like(h))
        scale = torch.cat([theta, torch.ones_like(q[:, 1:])], dim=1)
        return sx * scale, sy * scale

    def cartesian(self, q: torch.Tensor) -> torch.Tensor:
        """Remapped conserved variables ``(B, 4, nlat, nlon)`` (``h``, ``m_x``, ``m_y``, ``m_z``)."""
        B = q.shape[0]
        sx, sy = self.slopes(q)

        def flat(v):
            return v.reshape(B * 4, -1).transpose(0, 1)

        out = sum(torch.sparse.mm(w, flat(v)) for w, v in zip(self._w, (q, sx, sy)))
        out = out.transpose(0, 1).reshape(B, 4, self.grid_out.nlat, self.grid_out.nlon)
        for r in self.pole_rows:
            out[..., r, :] = out[..., r, :1]
        return out

    def __call__(self, q: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.cartesian(q)
        m = out[:, 1:]
        return {"h": out[:, 0], "hu": (m * self.east).sum(1), "hv": (m * self.north).sum(1)}

    def integral(self, f: torch.Tensor) -> torch.Tensor:
        """``sum f * area_out`` over the remap's cells, ``(B, nlat, nlon) -> (B,)`` (pole caps once)."""
        return (f * self.area_out).flatten(1).sum(1)
