"""Sphere geometry shared by every part of Dandelion: grids, quadrature weights and local frames.

Conventions (docs/ARCHITECTURE.md §3):

* arrays are ``(..., nlat, nlon)``; row 0 is the northernmost row (colatitude ascending,
  as torch-harmonics orders it); longitudes are ``2*pi*j/nlon``, ``j = 0..nlon-1``;
* grid names are torch-harmonics grid names: ``"equiangular"`` (Clenshaw-Curtis nodes,
  poles included) and ``"legendre-gauss"`` (the regular Gaussian grid, poles excluded);
* angles are radians; quantities are float64 (cast once where a model needs float32).

Nodes and quadrature weights come from :func:`torch_harmonics.quadrature.precompute_latitudes`,
so the weights are exactly those the spherical harmonic transforms use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

from .compiled import compile_deferred

with compile_deferred():  # torch-harmonics calls torch.compile when imported: see dandelion/compiled.py
    from torch_harmonics.quadrature import precompute_latitudes

__all__ = ["SphereGrid", "GRIDS", "analysis_lmax"]

#: Grids supported everywhere in the package (torch-harmonics names).
GRIDS = ("equiangular", "legendre-gauss")


def analysis_lmax(nlat: int, grid: str) -> int:
    """Exact analysis band limit of a grid (number of degrees, exclusive upper bound).

    The quadrature of an ``nlat``-row grid integrates products of two fields exactly up to a
    degree; fields truncated to this band limit can be analysed exactly (docs/ARCHITECTURE.md §3).

    Parameters
    ----------
    nlat : int
        Number of latitude rows.
    grid : str
        ``"equiangular"`` gives ``(nlat + 1) // 2``; ``"legendre-gauss"`` gives ``nlat``.

    Raises
    ------
    ValueError
        If ``grid`` is not one of :data:`GRIDS`.
    """
    _check_grid(grid)
    return nlat if grid == "legendre-gauss" else (nlat + 1) // 2


def _check_grid(grid: str) -> None:
    if grid not in GRIDS:
        raise ValueError(f"unknown grid {grid!r}: use one of {GRIDS} (torch-harmonics grid names)")


@dataclass(frozen=True)
class SphereGrid:
    """A latitude-longitude grid on the unit sphere.

    Parameters
    ----------
    nlat : int
        Number of latitude rows (>= 2; >= 3 for ``"equiangular"``, whose end rows are the poles).
    nlon : int
        Number of longitude columns (>= 1).
    grid : str
        ``"equiangular"`` (default; poles included) or ``"legendre-gauss"``.

    Attributes (all float64 tensors, computed once per instance)
    ----------
    colat : (nlat,) colatitude in radians, ascending from the north.
    lat : (nlat,) latitude in radians, descending (``pi/2 - colat``).
    lon : (nlon,) longitude in radians, ``2*pi*j/nlon``.
    weights : (nlat, 1) area quadrature weights including the longitude spacing ``2*pi/nlon``,
        so ``(f * grid.weights).sum((-2, -1))`` integrates ``f`` over the unit sphere (4*pi for 1).
    xyz : (3, nlat, nlon) unit position vectors.
    east, north : (3, nlat, nlon) local unit vectors. On pole rows they are the limits along
        each column's meridian (so they differ from column to column, as the meridians do).

    Raises
    ------
    ValueError
        For an unknown grid name or too few rows/columns.
    """

    nlat: int
    nlon: int
    grid: str = "equiangular"

    def __post_init__(self):
        _check_grid(self.grid)
        min_rows = 3 if self.grid == "equiangular" else 2
        if int(self.nlat) != self.nlat or self.nlat < min_rows:
            raise ValueError(f"nlat={self.nlat} is too small for grid {self.grid!r}: need an integer >= {min_rows}")
        if int(self.nlon) != self.nlon or self.nlon < 1:
            raise ValueError(f"nlon={self.nlon} must be a positive integer")

    # ------------------------------------------------------------------ coordinates
    @cached_property
    def _nodes(self):
        colat, w = precompute_latitudes(self.nlat, grid=self.grid)
        return colat.to(torch.float64).clone(), w.to(torch.float64).clone()

    @property
    def shape(self) -> tuple[int, int]:
        """``(nlat, nlon)``."""
        return (self.nlat, self.nlon)

    @property
    def lmax(self) -> int:
        """Exact analysis band limit of this grid, see :func:`analysis_lmax`."""
        return analysis_lmax(self.nlat, self.grid)

    @property
    def has_poles(self) -> bool:
        """True when the first and last rows are the poles (equiangular grids)."""
        return self.grid == "equiangular"

    @cached_property
    def colat(self) -> torch.Tensor:
        return self._nodes[0]

    @cached_property
    def lat(self) -> torch.Tensor:
        return 0.5 * math.pi - self.colat

    @cached_property
    def lon(self) -> torch.Tensor:
        return 2.0 * math.pi * torch.arange(self.nlon, dtype=torch.float64) / self.nlon

    @cached_property
    def weights(self) -> torch.Tensor:
        return (self._nodes[1] * (2.0 * math.pi / self.nlon)).reshape(self.nlat, 1)

    # ------------------------------------------------------------------ frames
    @cached_property
    def _trig(self):
        ct, st = torch.cos(self.colat)[:, None], torch.sin(self.colat)[:, None]
        cl, sl = torch.cos(self.lon)[None, :], torch.sin(self.lon)[None, :]
        return ct, st, cl, sl

    @cached_property
    def xyz(self) -> torch.Tensor:
        ct, st, cl, sl = self._trig
        return torch.stack([st * cl, st * sl, ct.expand(-1, self.nlon)])

    @cached_property
    def east(self) -> torch.Tensor:
        ct, st, cl, sl = self._trig
        return torch.stack(
            [
                (-sl).expand(self.nlat, -1),
                cl.expand(self.nlat, -1),
                torch.zeros(self.nlat, self.nlon, dtype=torch.float64),
            ]
        )

    @cached_property
    def north(self) -> torch.Tensor:
        ct, st, cl, sl = self._trig
        return torch.stack([-ct * cl, -ct * sl, st.expand(-1, self.nlon)])

    # ------------------------------------------------------------------ helpers
    def integrate(self, f: torch.Tensor) -> torch.Tensor:
        """Integral over the unit sphere of ``f`` of shape ``(..., nlat, nlon)``; returns ``(...)``."""
        self.check_shape(f)
        return (f * self.weights.to(f.dtype).to(f.device)).sum((-2, -1))

    def mean(self, f: torch.Tensor) -> torch.Tensor:
        """Area-weighted mean of ``f`` of shape ``(..., nlat, nlon)``; returns ``(...)``."""
        return self.integrate(f) / (4.0 * math.pi)

    def check_shape(self, f: torch.Tensor) -> None:
        """Raise ``ValueError`` unless the last two dimensions of ``f`` are ``(nlat, nlon)``."""
        if tuple(f.shape[-2:]) != self.shape:
            raise ValueError(
                f"field of shape {tuple(f.shape)} does not end in the grid's (nlat, nlon) = {self.shape} ({self.grid})"
            )

    def to_dict(self) -> dict:
        """Plain-type description, for metadata and checkpoints."""
        return {"nlat": int(self.nlat), "nlon": int(self.nlon), "grid": str(self.grid)}
