"""Latitude-longitude Arakawa C grid with a land mask, for the layered ocean of :mod:`dandelion.solvers.ocean`.

Cells are latitude-longitude boxes (``nlat`` rows stored SOUTH to NORTH, ``nlon`` columns east from
``lon_west``, periodic); thicknesses and tracers live at cell centres, ``u`` (eastward) on the west face of each
cell, ``v`` (northward) on the south face of each cell plus one extra row for the northern edge
(shape ``(nlat + 1, nlon)``), relative vorticity and potential vorticity at cell corners
(``(nlat + 1, nlon)``, corner ``(j, i)`` = south-west corner of cell ``(j, i)``). Arakawa & Lamb
(1977), *Methods Comput. Phys.* 17, 173-265, §III (the C grid).

Metrics on the sphere of radius ``a``: cell area ``a^2 dlam (sin phi_{j+1/2} - sin phi_{j-1/2})``,
zonal face spacing ``a cos(phi_j) dlam``, meridional spacing ``a dphi``. Land is a boolean mask of
cells; a face is open only when both of its cells are wet (and, for a sector that is not periodic in
longitude, the western edge of column 0 is a wall), so every land face carries exactly zero velocity.
``area_c_wet`` (``(nlat + 1, nlon)``, m^2) is the wet part of each dual (corner) cell, the sum of its quadrants
that lie in wet cells; it is the area of the no-slip wall vorticity of :mod:`dandelion.solvers.ocean`.

:func:`idealised_land` builds the default continents (two meridional ridges and polar caps beyond 80
degrees). :func:`conservative_remap_matrices` maps wet-cell averages onto a :class:`dandelion.sphere.SphereGrid`
by area overlap (first-order conservative remapping, Jones 1999, *Mon. Weather Rev.* 127, 2204-2210, eq. 3).
"""

from __future__ import annotations

import math

import torch

from dandelion.sphere import SphereGrid

__all__ = ["OceanGrid", "idealised_land", "conservative_remap_matrices", "remap_wet"]

EARTH_RADIUS = 6.371e6  # m
EARTH_OMEGA = 7.292e-5  # 1/s


class OceanGrid:
    """A latitude-longitude C grid (module docstring).

    Parameters
    ----------
    nlat, nlon : int
        Cells in latitude and longitude (``>= 3`` each).
    wet : bool tensor (nlat, nlon), optional
        True for ocean cells (rows south to north); default all wet.
    lat_bounds, lon_bounds : (float, float)
        Domain edges in degrees (default the globe: ``(-90, 90)``, ``(0, 360)``). The stencils are periodic
        in longitude; a sector spanning less than 360 degrees must have its last column land, which
        closes it (the wrap-around then only meets land). The northern and southern edges are walls.
    radius, omega : float
        Planet radius (m) and rotation rate (1/s); Earth by default.

    Raises
    ------
    ValueError
        For too few cells, bounds outside the sphere, or a mask of the wrong shape.
    """

    def __init__(
        self,
        nlat: int,
        nlon: int,
        *,
        wet: torch.Tensor | None = None,
        lat_bounds=(-90.0, 90.0),
        lon_bounds=(0.0, 360.0),
        radius: float = EARTH_RADIUS,
        omega: float = EARTH_OMEGA,
        device: str | torch.device = "cpu",
    ):
        if int(nlat) < 3 or int(nlon) < 3:
            raise ValueError(f"an ocean grid needs nlat, nlon >= 3 cells, got {nlat} x {nlon}")
        s, n = float(lat_bounds[0]), float(lat_bounds[1])
        w, e = float(lon_bounds[0]), float(lon_bounds[1])
        if not -90.0 <= s < n <= 90.0 or not 0.0 < e - w <= 360.0:
            raise ValueError(
                f"lat_bounds={lat_bounds} must lie in [-90, 90] ascending and lon_bounds={lon_bounds} span (0, 360]"
            )
        self.nlat, self.nlon = int(nlat), int(nlon)
        self.radius, self.omega = float(radius), float(omega)
        self.periodic = abs((e - w) - 360.0) < 1e-12
        self.device = torch.device(device)
        dt = dict(dtype=torch.float64, device=self.device)
        self.lat_edges = torch.deg2rad(torch.linspace(s, n, self.nlat + 1, **dt))  # (nlat+1,)
        self.lon_edges = torch.deg2rad(torch.linspace(w, e, self.nlon + 1, **dt))
        self.lat = 0.5 * (self.lat_edges[1:] + self.lat_edges[:-1])  # centres
        self.lon = 0.5 * (self.lon_edges[1:] + self.lon_edges[:-1])
        self.dphi = float(math.radians(n - s) / self.nlat)
        self.dlam = float(math.radians(e - w) / self.nlon)
        a = self.radius
        sin_e = torch.sin(self.lat_edges)
        self.area = (a * a * self.dlam * (sin_e[1:] - sin_e[:-1]))[:, None]  # (nlat, 1) m^2
        self.dx = (a * torch.cos(self.lat) * self.dlam)[:, None]  # (nlat, 1) zonal spacing at centres/u faces
        self.dx_v = (a * torch.cos(self.lat_edges).clamp_min(0.0) * self.dlam)[:, None]  # (nlat+1, 1) v-face lengths
        self.dy = a * self.dphi
        # dual (corner) cells: between centre rows j-1 and j; half cells at the domain edges
        lat_c = torch.cat([self.lat_edges[:1], self.lat, self.lat_edges[-1:]])
        self.area_c = (a * a * self.dlam * (torch.sin(lat_c[1:]) - torch.sin(lat_c[:-1])))[:, None]  # (nlat+1, 1)
        self.f_corner = (2.0 * self.omega * sin_e)[:, None]  # (nlat+1, 1)
        self.f_center = (2.0 * self.omega * torch.sin(self.lat))[:, None]
        self.beta = (2.0 * self.omega * torch.cos(self.lat) / a)[:, None]
        self.set_wet(torch.ones(self.nlat, self.nlon, dtype=torch.bool) if wet is None else wet)

    def set_wet(self, wet: torch.Tensor) -> None:
        """Install the ocean mask ``wet`` (bool, (nlat, nlon)) and derive the open-face masks."""
        wet = torch.as_tensor(wet, device=self.device).bool()
        if tuple(wet.shape) != (self.nlat, self.nlon):
            raise ValueError(f"wet mask of shape {tuple(wet.shape)}, expected (nlat, nlon) = {(self.nlat, self.nlon)}")
        if not wet.any():
            raise ValueError("the wet mask has no ocean cell: pass a mask with True on ocean cells")
        self.wet = wet.to(torch.float64)
        mu = self.wet * torch.roll(self.wet, 1, -1)
        if not self.periodic and bool(wet[:, -1].any()):
            raise ValueError(
                "a sector grid (longitude span < 360 degrees) needs its last column land: "
                "mark wet[:, -1] = False (it closes the basin)"
            )
        self.mask_u = mu
        mv = torch.zeros(self.nlat + 1, self.nlon, dtype=torch.float64, device=self.device)
        mv[1:-1] = self.wet[1:] * self.wet[:-1]
        self.mask_v = mv
        # wet part of each dual (corner) cell: its four quadrants belong to the four cells around the corner
        a, sin = self.radius, torch.sin
        lat_c = torch.cat([self.lat_edges[:1], self.lat, self.lat_edges[-1:]])
        q_north = (0.5 * a * a * self.dlam * (sin(lat_c[1:]) - sin(self.lat_edges)))[:, None]  # (nlat+1, 1)
        q_south = (0.5 * a * a * self.dlam * (sin(self.lat_edges) - sin(lat_c[:-1])))[:, None]
        w = self.pad_rows(self.wet)  # (nlat+2, nlon): rows -1 .. nlat, dry outside the domain
        pair = w + torch.roll(w, 1, -1)  # cell and its western neighbour
        self.area_c_wet = q_north * pair[1:] + q_south * pair[:-1]  # (nlat+1, nlon) m^2

    # ------------------------------------------------------------------ stencils
    @staticmethod
    def west(f: torch.Tensor) -> torch.Tensor:
        """Value of the western neighbour (column ``i - 1``), periodic in the last dimension."""
        return torch.roll(f, 1, -1)

    @staticmethod
    def east(f: torch.Tensor) -> torch.Tensor:
        """Value of the eastern neighbour (column ``i + 1``)."""
        return torch.roll(f, -1, -1)

    @staticmethod
    def to_v_rows(f: torch.Tensor) -> torch.Tensor:
        """Centre field (..., nlat, nlon) -> average of rows ``j - 1`` and ``j`` at v faces (..., nlat+1, nlon)
        (edge rows repeat the edge cell)."""
        p = torch.cat([f[..., :1, :], f, f[..., -1:, :]], dim=-2)
        return 0.5 * (p[..., 1:, :] + p[..., :-1, :])

    @staticmethod
    def pad_rows(f: torch.Tensor) -> torch.Tensor:
        """(..., nlat, nlon) -> (..., nlat + 2, nlon) with a zero row on each side."""
        z = torch.zeros_like(f[..., :1, :])
        return torch.cat([z, f, z], dim=-2)

    def wet_mean(self, f: torch.Tensor) -> torch.Tensor:
        """Area-weighted mean over wet cells of ``f`` (..., nlat, nlon); returns (...)."""
        w = self.area * self.wet
        return (f * w).sum((-2, -1)) / w.sum()

    def wet_integral(self, f: torch.Tensor) -> torch.Tensor:
        """Area integral over wet cells of ``f`` (..., nlat, nlon) in (units of f) m^2; returns (...)."""
        return (f * self.area * self.wet).sum((-2, -1))


def idealised_land(
    nlat: int, nlon: int, *, polar_cap_deg: float = 80.0, ridges_deg=((280.0, 300.0), (10.0, 40.0))
) -> torch.Tensor:
    """The idealised continents on a global ``nlat x nlon`` cell grid (rows south to north).

    Land: every cell whose centre lies poleward of ``polar_cap_deg``, and every cell whose centre
    longitude lies in one of the ``ridges_deg`` intervals (meridional continents from cap to cap;
    defaults: an "America" at 280-300 E and an "Africa-Eurasia" at 10-40 E, leaving an Atlantic-like
    basin 70 degrees wide and an Indo-Pacific-like basin 240 degrees wide, no circumpolar channel).

    Returns
    -------
    bool tensor (nlat, nlon): True on ocean cells.
    """
    lat = -90.0 + (torch.arange(nlat, dtype=torch.float64) + 0.5) * 180.0 / nlat
    lon = (torch.arange(nlon, dtype=torch.float64) + 0.5) * 360.0 / nlon
    land = (lat.abs() > polar_cap_deg)[:, None].expand(nlat, nlon).clone()
    for w, e in ridges_deg:
        land |= ((lon >= w) & (lon <= e))[None, :]
    return ~land


def _overlap(a0: torch.Tensor, a1: torch.Tensor, b0: torch.Tensor, b1: torch.Tensor) -> torch.Tensor:
    """Lengths of the overlaps of intervals [a0, a1] (rows) with [b0, b1] (columns)."""
    return (torch.minimum(a1[:, None], b1[None, :]) - torch.maximum(a0[:, None], b0[None, :])).clamp_min(0.0)


def conservative_remap_matrices(src: OceanGrid, dst: SphereGrid) -> tuple[torch.Tensor, torch.Tensor]:
    """Area-overlap matrices from the ocean cells to the cells of a :class:`SphereGrid`.

    The destination cell of node ``(k, l)`` spans the longitudes ``lon_l +- pi/nlon`` and the band
    between ``sin(phi) = 1 - sum_{k' < k} w_k'`` and ``1 - sum_{k' <= k} w_k'``, ``w`` the grid's
    latitude quadrature weights (``dst.weights * nlon / (2 pi)``, summing to 2): the cell's area is then
    exactly the node's quadrature weight, for equiangular and Legendre-Gauss grids alike. The
    overlap of two latitude-longitude boxes is the product of the overlap in ``sin(phi)`` and in
    longitude, so the area matrix factorises.

    Returns
    -------
    (R_lat, R_lon) : float64 tensors (dst.nlat, src.nlat) with overlaps in ``sin(phi)`` (destination
    rows north to south, as the grid stores them) and (dst.nlon, src.nlon) with overlaps in
    longitude (radians, periodic).
    """
    wlat = dst.weights.reshape(-1).to(torch.float64) * dst.nlon / (2.0 * math.pi)
    top = 1.0 - torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(wlat, 0)[:-1]])
    bot = (top - wlat).clamp(-1.0, 1.0)
    s = torch.sin(src.lat_edges.cpu())
    r_lat = _overlap(bot, top.clamp(-1.0, 1.0), s[:-1], s[1:])
    lon = dst.lon.to(torch.float64)
    half = math.pi / dst.nlon
    e = src.lon_edges.cpu()
    r_lon = torch.zeros(dst.nlon, src.nlon, dtype=torch.float64)
    for shift in (-2.0 * math.pi, 0.0, 2.0 * math.pi):  # periodic images of the destination cells
        r_lon += _overlap(lon - half + shift, lon + half + shift, e[:-1], e[1:])
    return r_lat, r_lon


def remap_wet(
    fields: torch.Tensor, wet: torch.Tensor, r_lat: torch.Tensor, r_lon: torch.Tensor, *, min_fraction: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """First-order conservative remap of wet-cell values (Jones 1999, eq. 3, restricted to wet area).

    Parameters
    ----------
    fields : (..., src nlat, src nlon) values at ocean cell centres (land values are ignored).
    wet : (src nlat, src nlon) 0/1 ocean mask.
    r_lat, r_lon : from :func:`conservative_remap_matrices`.
    min_fraction : a destination cell is wet when at least this fraction of its area is ocean.

    Returns
    -------
    values : (..., dst nlat, dst nlon) wet-area mean of each destination cell (0 where the cell holds
        no ocean at all). ``sum(values * wet_fraction * area)`` equals the source's wet-area integral.
    wet_fraction : (dst nlat, dst nlon) ocean fraction of each destination cell's area.
    wet_dst : (dst nlat, dst nlon) bool, ``wet_fraction >= min_fraction``.
    """
    r_lat = r_lat.to(fields.device, fields.dtype)
    r_lon = r_lon.to(fields.device, fields.dtype)
    wet = wet.to(fields.device, fields.dtype)
    wet_area = r_lat @ wet @ r_lon.T  # ocean area (unit sphere) in each destination cell
    area = r_lat.sum(1, keepdim=True) * r_lon.sum(1)[None, :]
    integral = torch.einsum("ka,...ab,lb->...kl", r_lat, fields * wet, r_lon)
    values = torch.where(wet_area > 0, integral / wet_area.clamp_min(1e-300), torch.zeros_like(integral))
    fraction = (wet_area / area.clamp_min(1e-300)).clamp(0.0, 1.0)
    return values, fraction, fraction >= min_fraction
