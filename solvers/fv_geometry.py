"""Geometry of the finite-volume grid of the whole unit sphere: the Calhoun-Helzel single-patch map.

Why this grid (and not a gnomonic cubed sphere). Calhoun, Helzel & LeVeque (2008), "Logically
rectangular grids and finite volume methods for PDEs in circular and spherical domains", SIAM
Review 50(4), 723-752, give a map of ONE logically rectangular
computational domain ``[-3, 1] x [-1, 1]`` onto the whole sphere: each half ``[-3, -1] x [-1, 1]``
and ``[-1, 1] x [-1, 1]`` is mapped onto one hemisphere (square -> disk -> lift), the square's
boundary onto the equator. The state is then a single dense tensor ``(B, 4, ny, nx)`` with
``nx = 2 ny``; the neighbours across every seam are index permutations (periodic in x; across
``y = +-1`` the row itself with x reversed), so the whole sphere is one batched torch stencil with no
per-panel bookkeeping and no vector rotations between panels (momentum is Cartesian). The poles are
interior points of the squares (cell corners for even ``ny``), so no cell is singular; the cell
areas vary by a factor of at most 2^(3/4) = 1.68 (no latitude-longitude ``1/sin`` blow-up). A
cubed sphere would give more uniform cells but six panels with rotated connectivity and 12 seams.

The area ratio follows from the map's area density (sphere area per unit computational area, ``mapc2p_upper``):
near the centre of the square the disk map is ``(x, y) = sqrt(2) (xc, yc)``, density 2, the largest; at the
midpoints of the square's edges (on the equator) the disk coordinate along the edge is ``xc / sqrt(2)`` and the
distance from the equator ``2^(3/4) (1 - |yc|)``, density ``2^(1/4)``, the smallest. Cells of side ``2 / ny``
have areas ``(2 / ny)^2`` times the density averaged over them, so the pole-to-equator ratio tends to
``2 / 2^(1/4) = 2^(3/4)`` as ``ny`` grows: 1.44 at ``ny = 8``, 1.61 at 32, 1.67 at 256.

What is exact here. The corners are the mapped computational corners (on the unit sphere); every
cell is the spherical quadrilateral with GREAT-CIRCLE edges between its corners, so the cells tile
the sphere exactly and

* the cell area is the spherical excess (two triangles, Van Oosterom & Strackee 1983, IEEE Trans.
  Biomed. Eng. 30, 125: ``tan(E/2) = a.(b x c) / (1 + a.b + b.c + c.a)``), the areas sum to 4 pi;
* along a great-circle edge from ``a`` to ``b`` the in-surface unit normal ``n = a x b / |a x b|``
  is CONSTANT and tangent to the sphere everywhere on the edge, and the edge length is the angle
  ``atan2(|a x b|, a.b)``: the flux of a state constant along the edge is exact;
* the cell centre is ``-sum_e L_e n_e / |sum_e L_e n_e|`` (outward normals): by the surface
  divergence theorem ``sum_e L_e n_e = -2 int_cell r dA``, so the centre is the direction of the
  cell's area centroid, and the pressure of a uniform state at rest exerts a purely radial force on
  the cell; after the projection onto the tangent plane at the centre it vanishes to round-off
  (free-stream preservation).

Glued points are computed once: the lower hemisphere's corners are the upper hemisphere's,
mirrored in x with ``z -> -z``, and corners on the equator get ``z = 0`` exactly, so the two copies of
every seam edge have bit-identical end points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = [
    "CalhounHelzelGrid",
    "mapc2p_upper",
    "spherical_triangle_area",
    "pad_x",
    "pad_y",
    "subdivide",
    "subdivision_corners",
]


def mapc2p_upper(xc: torch.Tensor, yc: torch.Tensor) -> torch.Tensor:
    """Calhoun-Helzel map of the square ``[-1, 1]^2`` onto the upper hemisphere of the unit sphere.

    Calhoun, Helzel & LeVeque (2008), SIAM Review 50(4) (the disk map, radius 1, then
    ``z = sqrt(1 - x^2 - y^2)``). Points on the square's boundary land on the equator (``z = 0``
    exactly here).

    Parameters
    ----------
    xc, yc : torch.Tensor of equal shapes, float64, in ``[-1, 1]``.

    Returns
    -------
    torch.Tensor of shape ``(*xc.shape, 3)``: unit vectors.
    """
    ax, ay = xc.abs(), yc.abs()
    d = torch.maximum(torch.maximum(ax, ay), torch.full_like(ax, 1e-10))
    dd = d * (2.0 - d) / math.sqrt(2.0)
    centre = dd - torch.sqrt((1.0 - dd * dd).clamp_min(0.0))
    xp, yp = dd / d * ax, dd / d * ay
    ymajor = ay >= ax
    yp = torch.where(ymajor, centre + torch.sqrt((1.0 - xp * xp).clamp_min(0.0)), yp)
    xp = torch.where(ymajor, xp, centre + torch.sqrt((1.0 - yp * yp).clamp_min(0.0)))
    edge = torch.maximum(ax, ay) >= 1.0
    r = torch.sqrt(xp * xp + yp * yp)
    xp = torch.where(edge, xp / r, xp)
    yp = torch.where(edge, yp / r, yp)
    zp = torch.where(edge, torch.zeros_like(xp), torch.sqrt((1.0 - xp * xp - yp * yp).clamp_min(0.0)))
    p = torch.stack([torch.sign(xc) * xp, torch.sign(yc) * yp, zp], dim=-1)
    return p / p.norm(dim=-1, keepdim=True)


def spherical_triangle_area(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Signed spherical excess of the triangle ``(a, b, c)`` of unit vectors ``(..., 3)``
    (positive when counter-clockwise seen from outside); Van Oosterom & Strackee (1983)."""
    num = (a * torch.linalg.cross(b, c, dim=-1)).sum(-1)
    den = 1.0 + (a * b).sum(-1) + (b * c).sum(-1) + (c * a).sum(-1)
    return 2.0 * torch.atan2(num, den)


def _edge(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Length (rad) and unit normal ``a x b / |a x b|`` of the great-circle edge from ``a`` to ``b``."""
    ab = torch.linalg.cross(a, b, dim=-1)
    s = ab.norm(dim=-1)
    return torch.atan2(s, (a * b).sum(-1)), ab / s.unsqueeze(-1)


def pad_x(q: torch.Tensor, n: int = 2) -> torch.Tensor:
    """Periodic ghost columns: ``(..., ny, nx) -> (..., ny, nx + 2n)``."""
    return torch.cat([q[..., -n:], q, q[..., :n]], dim=-1)


def pad_y(q: torch.Tensor, n: int = 2) -> torch.Tensor:
    """Folded ghost rows: beyond ``y = +-1`` lie the edge rows themselves with x reversed
    (``(..., ny, nx) -> (..., ny + 2n, nx)``)."""
    ny = q.shape[-2]
    top = q[..., [ny - 1 - k for k in range(n)], :].flip(-1)
    bottom = q[..., [n - 1 - k for k in range(n)], :].flip(-1)
    return torch.cat([bottom, q, top], dim=-2)


@dataclass
class CalhounHelzelGrid:
    """Precomputed geometry of the ``ny x 2 ny`` Calhoun-Helzel grid of the unit sphere (module docstring).

    Parameters
    ----------
    ny : int
        Cells across each hemisphere (even, >= 4); the grid has ``ny`` rows and ``nx = 2 ny`` columns.
    device : torch device; tensors are float64.

    Attributes (tensors)
    --------------------
    corners : (ny + 1, nx + 1, 3) unit vectors of the cell corners.
    area : (ny, nx) exact spherical cell areas (sum 4 pi).
    centre : (ny, nx, 3) unit area-centroid directions.
    len_x, normal_x, mid_x : (ny, nx), (ny, nx, 3), (ny, nx, 3): the x-face ``i - 1/2`` of row ``j``
        (face 0 is the periodic seam), its normal pointing to increasing ``i``, its midpoint.
    len_y, normal_y, mid_y : (ny + 1, nx), ...: the y-face ``j - 1/2`` of column ``i`` (rows 0 and
        ``ny`` are the folds at ``y = -1, +1``), normal pointing to increasing ``j``.
    rate_geometry : (ny, nx) ``perimeter / (2 area)``, for the Courant number.

    Raises
    ------
    ValueError
        For an odd or too small ``ny``.
    """

    ny: int
    device: torch.device | str = "cpu"

    def __post_init__(self):
        ny = int(self.ny)
        if ny != self.ny or ny < 4 or ny % 2:
            raise ValueError(f"ny={self.ny} must be an even integer >= 4 (cells across a hemisphere)")
        self.ny, self.nx = ny, 2 * ny
        dev = torch.device(self.device)
        f64 = dict(dtype=torch.float64, device=dev)
        s = (2.0 * torch.arange(ny + 1, **f64) - ny) / ny  # symmetric corner coordinates in [-1, 1]
        yc, xc = torch.meshgrid(s, s, indexing="ij")
        upper = mapc2p_upper(xc, yc)  # (ny + 1, ny + 1, 3), columns xc = -1 .. 1
        lower = upper.flip(1) * torch.tensor([1.0, 1.0, -1.0], **f64)  # xc = -3 .. -1 mirrors -1 .. 1
        self.corners = torch.cat([lower[:, :-1], upper], dim=1)  # (ny + 1, nx + 1, 3)
        c = self.corners
        a, b, cc, d = c[:-1, :-1], c[:-1, 1:], c[1:, 1:], c[1:, :-1]
        self.area = spherical_triangle_area(a, b, cc) + spherical_triangle_area(a, cc, d)
        # x-faces i - 1/2 (i = 0..nx-1): corners (j, i) -> (j + 1, i); y-faces j - 1/2: (j, i) -> (j, i + 1)
        self.len_x, nx_ = _edge(c[1:, :-1], c[:-1, :-1])
        self.len_y, ny_ = _edge(c[:, :-1], c[:, 1:])
        # each fold edge appears twice (columns i and nx-1-i): keep one copy, mirror it onto the other
        h = ny
        for row in (0, ny):
            self.len_y[row, h:] = self.len_y[row, :h].flip(0)
            ny_[row, h:] = -ny_[row, :h].flip(0)
        self.mid_x = _unit(c[1:, :-1] + c[:-1, :-1])
        self.mid_y = _unit(c[:, :-1] + c[:, 1:])
        # orient the normals to increasing index (checked against provisional centres, not assumed)
        guess = _unit(a + b + cc + d)
        sgn_x = torch.sign((nx_ * (guess - guess.roll(1, dims=1))).sum(-1, keepdim=True))
        gy = pad_y(guess.permute(2, 0, 1), 1).permute(1, 2, 0)
        sgn_y = torch.sign((ny_ * (gy[1:] - gy[:-1])).sum(-1, keepdim=True))
        if (sgn_x != sgn_x.flatten()[0]).any() or (sgn_y[1:-1] != sgn_y[1, 0]).any() or (sgn_y == 0).any():
            raise RuntimeError("Calhoun-Helzel grid: inconsistent face orientation (degenerate cell)")
        self.normal_x = nx_ * sgn_x
        self.normal_y = ny_ * sgn_y
        # centre: minus the sum of the outward normals times the edge lengths (module docstring)
        fx = self.len_x.unsqueeze(-1) * self.normal_x
        fy = self.len_y.unsqueeze(-1) * self.normal_y
        self.centre = _unit(fx - fx.roll(-1, dims=1) + fy[:-1] - fy[1:])
        if (self.centre * guess).sum(-1).min() <= 0 or (self.area <= 0).any():
            raise RuntimeError("Calhoun-Helzel grid: a cell has a non-positive area or a flipped centre")
        per = self.len_x + self.len_x.roll(-1, dims=1) + self.len_y[1:] + self.len_y[:-1]
        self.rate_geometry = per / (2.0 * self.area)

    # ------------------------------------------------------------------ helpers
    @property
    def shape(self) -> tuple[int, int]:
        """``(ny, nx)``."""
        return (self.ny, self.nx)

    def latlon(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Latitude and longitude (rad) of the cell centres, each ``(ny, nx)``."""
        c = self.centre
        return torch.asin(c[..., 2].clamp(-1.0, 1.0)), torch.atan2(c[..., 1], c[..., 0])

    def sub_points(self, m: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``m x m`` sub-points per cell in computational coordinates (for initial conditions): unit
        vectors ``(ny, nx, m, m, 3)`` at the centres of the ``m x m`` sub-squares (bilinear in the
        corners, normalised) and their weights ``(ny, nx, m, m)`` (sub-square areas / cell area)."""
        pts, areas = subdivide(self.corners, m)
        return _unit(pts), areas / areas.sum((-2, -1), keepdim=True)


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True)


def subdivision_corners(corners: torch.Tensor, m: int) -> tuple[torch.Tensor, ...]:
    """Corners ``(a, b, c, d)``, each ``(..., R, C, m, m, 3)``, of the ``m x m`` pieces of every cell of
    a corner array ``(..., R + 1, C + 1, 3)`` (see :func:`subdivide`); ``a -> b`` runs along x,
    ``a -> d`` along y."""
    t = torch.linspace(0.0, 1.0, m + 1, dtype=corners.dtype, device=corners.device)
    a, b = corners[..., :-1, :-1, :], corners[..., :-1, 1:, :]
    c, d = corners[..., 1:, 1:, :], corners[..., 1:, :-1, :]
    s = t.view(m + 1, 1, 1)  # along x (columns)
    r = t.view(1, m + 1, 1)  # along y (rows)
    A, B, C, D = (x.unsqueeze(-2).unsqueeze(-2) for x in (a, b, c, d))
    p = (1 - r) * ((1 - s) * A + s * B) + r * ((1 - s) * D + s * C)  # (..., m+1 (x), m+1 (y), 3)
    p = _unit(p).transpose(-3, -2)  # (..., y, x, 3)
    return p[..., :-1, :-1, :], p[..., :-1, 1:, :], p[..., 1:, 1:, :], p[..., 1:, :-1, :]


def subdivide(corners: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split every cell of a corner array ``(..., R + 1, C + 1, 3)`` into ``m x m`` spherical
    quadrilaterals with great-circle edges (corners: normalised bilinear interpolation, so sub-corners
    on a cell edge lie ON that edge's great circle and the pieces tile the cell exactly).

    Returns the pieces' centres (normalised mean of their corners, ``(..., R, C, m, m, 3)``) and
    exact areas ``(..., R, C, m, m)``.
    """
    pa, pb, pc, pd = subdivision_corners(corners, m)
    area = spherical_triangle_area(pa, pb, pc) + spherical_triangle_area(pa, pc, pd)
    return _unit(pa + pb + pc + pd), area
