"""Vertical discretisation of the sigma-coordinate primitive equations, and output on pressure levels.

Sigma levels and the vertical operators of Simmons & Burridge (1981, MWR 109, 758-766), eqs. (2.12),
(3.3)-(3.13) specialised to pure sigma (A = 0, B = sigma): geopotential
``Phi_k = Phi_s + R alpha_k T_k + R sum_{j>k} ln(sigma_{j+1/2}/sigma_{j-1/2}) T_j`` with
``alpha_1 = ln 2``, ``alpha_k = 1 - sigma_{k-1/2}/dsigma_k ln(sigma_{k+1/2}/sigma_{k-1/2})``; the
energy-conserving ``omega/p``; centred vertical advection
``(sdot_{k+1/2}(X_{k+1}-X_k) + sdot_{k-1/2}(X_k-X_{k-1})) / (2 dsigma_k)``; and the interpolation of
model-level fields to pressure levels (linear in ``ln p``). Used by
:mod:`dandelion.solvers.primitive_equations`. Float64, device-agnostic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["SigmaCoordinates", "Vertical", "level_vector", "interpolate_to_pressure"]


@dataclass(frozen=True)
class SigmaCoordinates:
    """Sigma levels: interfaces ``sigma_{k+1/2}`` from 0 (top) to 1 (surface).

    Parameters
    ----------
    boundaries : tuple of float
        ``N + 1`` strictly increasing values with ``boundaries[0] == 0`` and ``boundaries[-1] == 1``.

    Raises
    ------
    ValueError
        If the boundaries are not strictly increasing from 0 to 1 or ``N < 2``.
    """

    boundaries: tuple

    def __post_init__(self):
        b = np.asarray(self.boundaries, dtype=np.float64)
        if b.ndim != 1 or b.size < 3:
            raise ValueError(f"need at least 3 sigma interfaces (2 levels), got {b.size}")
        if abs(b[0]) > 0 or abs(b[-1] - 1.0) > 1e-14 or np.any(np.diff(b) <= 0):
            raise ValueError(
                f"sigma interfaces must increase strictly from 0 (model top) to 1 (surface); got {b.tolist()}"
            )

    @classmethod
    def equally_spaced(cls, n_levels: int) -> SigmaCoordinates:
        """``n_levels`` layers of equal thickness ``1/n_levels`` (Held & Suarez 1994 use 20)."""
        if int(n_levels) != n_levels or n_levels < 2:
            raise ValueError(f"n_levels={n_levels} must be an integer >= 2")
        return cls(tuple(np.linspace(0.0, 1.0, int(n_levels) + 1).tolist()))

    @property
    def n_levels(self) -> int:
        return len(self.boundaries) - 1

    @property
    def half(self) -> np.ndarray:
        return np.asarray(self.boundaries, dtype=np.float64)

    @property
    def thickness(self) -> np.ndarray:
        """``dsigma_k`` (N,)."""
        return np.diff(self.half)

    @property
    def centers(self) -> np.ndarray:
        """Full levels ``sigma_k`` (N,): layer midpoints (used by forcing and output interpolation)."""
        h = self.half
        return 0.5 * (h[1:] + h[:-1])

    @property
    def log_ratio(self) -> np.ndarray:
        """``ln(sigma_{k+1/2}/sigma_{k-1/2})`` (N,), with 0 for the top layer (where it multiplies empty sums)."""
        h = self.half
        out = np.zeros(self.n_levels)
        out[1:] = np.log(h[2:] / h[1:-1])
        return out

    @property
    def alpha(self) -> np.ndarray:
        """Simmons & Burridge (1981) eq. (3.8) ``alpha_k`` (N,); ``alpha_1 = ln 2``."""
        h = self.half
        a = np.empty(self.n_levels)
        a[0] = math.log(2.0)
        a[1:] = 1.0 - h[1:-1] / self.thickness[1:] * self.log_ratio[1:]
        return a

    def geopotential_matrix(self, R: float) -> np.ndarray:
        """``G`` (N, N) with ``Phi = Phi_s + G @ T`` (Simmons & Burridge 1981, eqs. 2.21-2.22), m^2/s^2 per K."""
        n = self.n_levels
        g = np.zeros((n, n))
        lr, a = self.log_ratio, self.alpha
        for k in range(n):
            g[k, k] = a[k]
            g[k, k + 1 :] = lr[k + 1 :]
        return R * g

    @property
    def pressure_gradient_coefficient(self) -> np.ndarray:
        """``c_k`` (N,) in the pressure-gradient term ``R T_k c_k grad ln ps``: 1 on every level.

        Energy conservation (Simmons & Burridge 1981, §3) pairs this term with the
        ``V_k . grad ln ps`` term of ``omega/p`` (coefficient 1) once the geopotential work is
        integrated by parts; the residual of the energy conversion on level k is proportional to
        ``1 - c_k``. For k > 1 SB81's eq. (3.13) gives 1 identically; at the top (``sigma_{1/2} = 0``)
        the limit of that expression is also 1, and the ``ln 2`` of ``alpha_1`` enters only the
        geopotential and ``omega/p`` (tests check the exact energy conversion numerically).
        """
        return np.ones(self.n_levels)


def level_vector(x: np.ndarray | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Per-level vector (N,) shaped to broadcast on dim 1 of ``like`` (B, N, ...)."""
    t = torch.as_tensor(x, dtype=torch.float64, device=like.device)
    return t.reshape((1, -1) + (1,) * (like.ndim - 2))


class Vertical:
    """Vertical operators on tensors ``(B, N, ...)`` (level axis 1), float64."""

    def __init__(self, coords: SigmaCoordinates, device):
        f = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float64, device=device)  # noqa: E731
        self.n = coords.n_levels
        self.dsig = f(coords.thickness)
        self.half_inner = f(coords.half[1:-1])
        self.log_ratio = f(coords.log_ratio)
        self.alpha = f(coords.alpha)

    def column_terms(self, D: torch.Tensor, ugl: torch.Tensor):
        """Given ``D_k = delta_k + V_k.grad ln ps`` and ``ugl = V.grad ln ps`` (B, N, ...), return
        ``(dlnps_dt (B, ...), sdot at interior interfaces (B, N-1, ...), omega/p (B, N, ...))``."""
        ds = level_vector(self.dsig, D)
        flux = ds * D
        S = torch.cumsum(flux, dim=1)
        total = S[:, -1:]
        sdot = level_vector(self.half_inner, D[:, 1:]) * total - S[:, :-1]
        S_prev = S - flux
        omega_p = ugl - (level_vector(self.log_ratio, D) * S_prev + level_vector(self.alpha, D) * flux) / ds
        return -total[:, 0], sdot, omega_p

    def advection(self, sdot: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """Simmons-Burridge centred ``(sdot dX/dsigma)_k`` (B, N, ...)."""
        prod = sdot * (X[:, 1:] - X[:, :-1])
        zero = torch.zeros_like(X[:, :1])
        return (torch.cat([prod, zero], 1) + torch.cat([zero, prod], 1)) / (2.0 * level_vector(self.dsig, X))

    def flux_divergence(self, sdot: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """``([sdot X]_{k+1/2} - [sdot X]_{k-1/2}) / dsigma_k`` with centred interface values (B, N, ...)."""
        w = sdot * 0.5 * (X[:, 1:] + X[:, :-1])
        zero = torch.zeros_like(X[:, :1])
        return (torch.cat([w, zero], 1) - torch.cat([zero, w], 1)) / level_vector(self.dsig, X)


def interpolate_to_pressure(
    values: torch.Tensor,
    sigma: torch.Tensor,
    ps: torch.Tensor,
    p_out: torch.Tensor,
    *,
    lapse_rate: float | None = None,
    R: float = 287.04,
    gravity: float = 9.80616,
) -> torch.Tensor:
    """Interpolate model-level fields to pressure levels, linearly in ``ln p``.

    Parameters
    ----------
    values : (B, N, nlat, nlon) on full levels ``p_k = sigma_k ps``.
    sigma : (N,) increasing full-level sigma.
    ps : (B, nlat, nlon) surface pressure (Pa).
    p_out : (P,) target pressures (Pa).
    lapse_rate : float, optional
        For temperature: below the lowest full level use ``T_N (p/p_N)^(R lapse/g)`` (constant lapse
        rate, e.g. 6.5e-3 K/m, docs/datasets/held_suarez.md); otherwise values are held constant below it.
        Above the top full level values are held constant.

    Returns
    -------
    (B, P, nlat, nlon) float64.
    """
    ls = torch.log(sigma)  # (N,)
    s = torch.log(p_out.reshape(1, -1, 1, 1) / ps.unsqueeze(1))  # (B, P, nlat, nlon): ln(p/ps)
    n = ls.numel()
    idx = torch.searchsorted(ls.contiguous(), s.contiguous().reshape(-1)).reshape(s.shape)
    hi = idx.clamp(1, n - 1)
    lo = hi - 1
    l_lo, l_hi = ls[lo], ls[hi]
    w = ((s - l_lo) / (l_hi - l_lo)).clamp(0.0, 1.0)
    B, P = s.shape[:2]
    vlo = torch.gather(values, 1, lo)
    vhi = torch.gather(values, 1, hi)
    out = vlo + w * (vhi - vlo)
    below = s > ls[-1]
    if lapse_rate is not None:
        bottom = values[:, -1:].expand_as(out)
        ext = bottom * torch.exp((R * lapse_rate / gravity) * (s - ls[-1]))
        out = torch.where(below, ext, out)
    return out
