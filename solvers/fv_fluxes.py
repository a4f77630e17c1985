"""Fluxes of rotation-free shallow water on the Calhoun-Helzel grid: MUSCL-MC reconstruction and HLL.

The equations (conservation form on the unit sphere, momentum as a 3-D Cartesian vector ``m = h u``
tangent to the sphere; Rossmanith 2006, "A wave propagation method for hyperbolic systems on the
sphere", J. Comput. Phys. 213, 629-658)::

    d_t h + div(h u) = 0
    d_t m + div(h u (x) u + g h^2 / 2 I) = (normal force)   -> removed by projecting m onto the tangent plane

are discretised per cell ``i`` of area ``A_i`` with edges ``e`` of length ``L_e`` and constant in-surface
unit normal ``n_e`` (great-circle edges, :mod:`dandelion.solvers.fv_geometry`)::

    d_t q_i = -(1 / A_i) sum_e L_e F(q_L, q_R; n_e)

* reconstruction: MUSCL in computational index space on the primitive variables ``(h, u_x, u_y,
  u_z)`` with the monotonised-central (MC) limiter of van Leer (1977), J. Comput. Phys. 23, 276-299
  (``sigma = minmod((d- + d+) / 2, 2 d-, 2 d+)``); every reconstructed face depth lies between the
  two neighbouring cell depths, so it is positive when they are;
* Riemann solver: HLL (Harten, Lax & van Leer 1983, SIAM Rev. 25, 35-61) with the wave
  speeds of Einfeldt (1988), SIAM J. Numer. Anal. 25, 294-318 (Roe averages): positively
  conservative (Einfeldt, Munz, Roe & Sjogreen 1991, J. Comput. Phys. 92, 273-295). At an edge the
  face velocities are first projected onto the tangent plane at the edge midpoint; the flux of a
  state ``(h, u)`` through normal ``n`` is ``(h u.n, h u (u.n) + g h^2 / 2 n)``;
* every edge flux is computed ONCE and used with opposite signs by its two cells: x-faces are
  periodic (face 0 is the seam), and on the two folds ``y = +-1`` the fluxes of columns
  ``nx/2 .. nx-1`` are the mirrored negatives of columns ``0 .. nx/2-1`` (the same physical edges),
  so the total mass changes only by round-off.

Tensors: states ``q`` of shape ``(B, 4, ny, nx)`` (``h``, ``m_x``, ``m_y``, ``m_z``), float64.
"""

from __future__ import annotations

import torch

from .fv_geometry import CalhounHelzelGrid, pad_x, pad_y

__all__ = ["GRAVITY_ND", "FVOperator", "mc_slope", "hll_flux"]

#: Gravity of the non-dimensional shock-caps problem (g = 9.80616 on the unit sphere, docs/datasets/shock_caps.md).
GRAVITY_ND = 9.80616


def mc_slope(wm: torch.Tensor, w0: torch.Tensor, wp: torch.Tensor) -> torch.Tensor:
    """Monotonised-central limited slope per index of the centre values ``w0`` given neighbours
    ``wm`` (lower index) and ``wp`` (van Leer 1977): ``minmod((d- + d+)/2, 2 d-, 2 d+)``."""
    dl, dr = w0 - wm, wp - w0
    mag = torch.minimum(torch.minimum(2.0 * dl.abs(), 2.0 * dr.abs()), 0.5 * (dl + dr).abs())
    return torch.where(dl * dr > 0, torch.sign(dl) * mag, torch.zeros_like(dl))


def hll_flux(wl: torch.Tensor, wr: torch.Tensor, n: torch.Tensor, r: torch.Tensor, g: float):
    """HLL flux with Einfeldt speeds through faces of unit normal ``n`` (module docstring).

    Parameters
    ----------
    wl, wr : (B, 4, ...) primitive face states ``(h, u_x, u_y, u_z)`` on the lower / upper index side.
    n : (3, ...) unit normals (pointing from ``wl`` to ``wr``); r : (3, ...) unit edge midpoints.
    g : gravity.

    Returns
    -------
    flux : (B, 4, ...) flux along ``n`` per unit edge length; speed : (B, ...) ``max(|s_L|, |s_R|)``.
    """
    hl, hr = wl[:, :1], wr[:, :1]
    ul = wl[:, 1:] - (wl[:, 1:] * r).sum(1, keepdim=True) * r
    ur = wr[:, 1:] - (wr[:, 1:] * r).sum(1, keepdim=True) * r
    unl, unr = (ul * n).sum(1, keepdim=True), (ur * n).sum(1, keepdim=True)
    cl, cr = torch.sqrt(g * hl), torch.sqrt(g * hr)
    sql, sqr = torch.sqrt(hl), torch.sqrt(hr)
    uhat = (sql * unl + sqr * unr) / (sql + sqr)
    chat = torch.sqrt(0.5 * g * (hl + hr))
    sl = torch.minimum(unl - cl, uhat - chat).clamp_max(0.0)
    sr = torch.maximum(unr + cr, uhat + chat).clamp_min(0.0)
    fl = torch.cat([hl * unl, hl * unl * ul + 0.5 * g * hl * hl * n], dim=1)
    fr = torch.cat([hr * unr, hr * unr * ur + 0.5 * g * hr * hr * n], dim=1)
    dq = torch.cat([hr - hl, hr * ur - hl * ul], dim=1)
    flux = (sr * fl - sl * fr + sl * sr * dq) / (sr - sl)
    return flux, torch.maximum(-sl, sr)[:, 0]


class FVOperator:
    """The semi-discrete right-hand side ``L(q)`` of shallow water on a :class:`CalhounHelzelGrid`.

    Parameters
    ----------
    grid : CalhounHelzelGrid
    gravity : float (default :data:`GRAVITY_ND`).

    Calling ``op(q)`` with ``q`` of shape ``(B, 4, ny, nx)`` returns ``(dq/dt, rate)``: the tendency
    (same shape) and, per trajectory, the largest ``sum_e L_e s_e / (2 A_i)`` over cells (1/time;
    the Courant number of a step ``dt`` is ``dt * rate``, which for a square cell of side ``D`` is
    ``(s_x + s_y) dt / D``, the sum of the two directional Courant numbers).
    """

    def __init__(self, grid: CalhounHelzelGrid, gravity: float = GRAVITY_ND):
        self.grid, self.g = grid, float(gravity)

        def t(v):  # (Y, X, 3) -> (3, Y, X)
            return v.permute(2, 0, 1).contiguous()

        self.nx_, self.ny_ = t(grid.normal_x), t(grid.normal_y)
        self.rx, self.ry = t(grid.mid_x), t(grid.mid_y)
        self.lx, self.ly = grid.len_x, grid.len_y
        self.area = grid.area
        self.centre = t(grid.centre)
        self.half = grid.nx // 2

    def project(self, q: torch.Tensor) -> torch.Tensor:
        """Momentum projected onto the tangent plane at the cell centres (h unchanged)."""
        m = q[:, 1:]
        m = m - (m * self.centre).sum(1, keepdim=True) * self.centre
        return torch.cat([q[:, :1], m], dim=1)

    def primitive(self, q: torch.Tensor) -> torch.Tensor:
        return torch.cat([q[:, :1], q[:, 1:] / q[:, :1]], dim=1)

    def face_states(self, w: torch.Tensor, axis: str):
        """Reconstructed primitive states on both sides of every x-face ``(B, 4, ny, nx)`` or y-face
        ``(B, 4, ny + 1, nx)`` (face ``k - 1/2`` between cells ``k - 1`` and ``k``)."""
        if axis == "x":
            p = pad_x(w, 2)
            c = p[..., 1:-1]
            s = mc_slope(p[..., :-2], c, p[..., 2:])  # cells -1 .. nx
            return (c + 0.5 * s)[..., :-2], (c - 0.5 * s)[..., 1:-1]
        p = pad_y(w, 2)
        c = p[..., 1:-1, :]
        s = mc_slope(p[..., :-2, :], c, p[..., 2:, :])  # rows -1 .. ny
        return (c + 0.5 * s)[..., :-1, :], (c - 0.5 * s)[..., 1:, :]

    def __call__(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.primitive(q)
        wl, wr = self.face_states(w, "x")
        fx, sx = hll_flux(wl, wr, self.nx_, self.rx, self.g)
        wl, wr = self.face_states(w, "y")
        fy, sy = hll_flux(wl, wr, self.ny_, self.ry, self.g)
        h = self.half
        for row in (0, -1):  # fold edges: one flux per physical edge (module docstring)
            fy[..., row, h:] = -fy[..., row, :h].flip(-1)
            sy[..., row, h:] = sy[..., row, :h].flip(-1)
        fx = fx * self.lx
        fy = fy * self.ly
        div = fx.roll(-1, dims=-1) - fx + fy[..., 1:, :] - fy[..., :-1, :]
        dq = -div / self.area
        sx, sy = sx * self.lx, sy * self.ly
        per = sx + sx.roll(-1, dims=-1) + sy[..., 1:, :] + sy[..., :-1, :]
        rate = (per / (2.0 * self.area)).flatten(1).amax(1)
        return dq, rate

    # ------------------------------------------------------------------ diagnostics
    def mass(self, q: torch.Tensor) -> torch.Tensor:
        """``int h dA`` per trajectory, (B,)."""
        return (q[:, 0] * self.area).flatten(1).sum(1)

    def energy(self, q: torch.Tensor) -> torch.Tensor:
        """``int (|m|^2 / (2 h) + g h^2 / 2) dA`` per trajectory, (B,)."""
        e = 0.5 * (q[:, 1:] ** 2).sum(1) / q[:, 0] + 0.5 * self.g * q[:, 0] ** 2
        return (e * self.area).flatten(1).sum(1)

    def radial_momentum(self, q: torch.Tensor) -> torch.Tensor:
        """``max |m . r|`` per trajectory, (B,) (zero after :meth:`project`, up to round-off)."""
        return (q[:, 1:] * self.centre).sum(1).abs().flatten(1).amax(1)
