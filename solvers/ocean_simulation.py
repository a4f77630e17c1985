"""Batched global ocean runs for datasets: :class:`OceanSimulation` wraps :class:`dandelion.solvers.ocean.OceanModel`
on the idealised continents, advances to exact times and returns the upper-layer fields remapped
conservatively onto a :class:`dandelion.sphere.SphereGrid` (:func:`dandelion.solvers.ocean_grid.remap_wet`)."""

from __future__ import annotations

import math

import torch

from dandelion.sphere import SphereGrid

from .ocean import OceanModel, OceanParams, forced_stable_dt
from .ocean_forcing import DAY, day_of_year
from .ocean_grid import OceanGrid, conservative_remap_matrices, idealised_land, remap_wet

__all__ = ["OceanSimulation", "default_ocean_dt", "ocean_grid"]


def ocean_grid(nlat: int, nlon: int, *, polar_cap_deg: float = 80.0, device="cpu") -> OceanGrid:
    """The global C grid of ``nlat x nlon`` cells with the idealised continents (:func:`idealised_land`)."""
    return OceanGrid(nlat, nlon, wet=idealised_land(nlat, nlon, polar_cap_deg=polar_cap_deg), device=device)


def default_ocean_dt(grid: OceanGrid, params: OceanParams) -> float:
    """The largest divisor of one day (s, a whole number of seconds >= 60) below the stability limit
    :func:`dandelion.solvers.ocean.stable_dt` (with the reduced gravity of the restoring targets), so that
    30-day frames are hit exactly.

    Raises ``ValueError`` if even 60 s is unstable."""
    safe, why = forced_stable_dt(grid, params)
    for n in range(1, 1441):
        if 86400 % n == 0 and 86400 / n <= safe:
            return 86400.0 / n
    raise ValueError(
        f"no time step >= 60 s is stable on this ocean grid (limit {safe:.1f} s, {why}); use a coarser grid"
    )


class OceanSimulation:
    """B global ocean trajectories from rest (scenario protocol: ``time``, ``advance_to``, ``fields``).

    Parameters
    ----------
    params : dict of (B,) float64 tensors
        ``visc_ah`` (m^2/s), ``gm_background_k`` (m^2/s), ``diff_kr`` (m^2/s), ``tau_theta_relax`` and
        ``tau_salt_relax`` (days).
    nlat, nlon : int
        Ocean cells.
    settings : dict
        Other :class:`OceanParams` fields (``n_layers``, ``H``, ``g2``, ``tau0``, ...) and ``polar_cap_deg``.
    dt : float or None
        Step (s); None: :func:`default_ocean_dt`.

    Raises
    ------
    ValueError
        For an unstable ``dt`` (the message gives the largest safe one).
    """

    def __init__(
        self,
        params: dict,
        *,
        nlat: int,
        nlon: int,
        settings: dict | None = None,
        dt: float | None = None,
        device: str | torch.device = "cpu",
    ):
        settings = dict(settings or {})
        cap = float(settings.pop("polar_cap_deg", 80.0))
        self.grid = ocean_grid(nlat, nlon, polar_cap_deg=cap, device=device)
        B = int(params["visc_ah"].shape[0])
        self.params = OceanParams(
            visc=params["visc_ah"].to(device),
            kappa_gm=params["gm_background_k"].to(device),
            kappa_d=params["diff_kr"].to(device),
            tau_T=params["tau_theta_relax"].to(device) * DAY,
            tau_S=params["tau_salt_relax"].to(device) * DAY,
            **settings,
        )
        self.dt = default_ocean_dt(self.grid, self.params) if dt is None else float(dt)
        self.model = OceanModel(self.grid, self.params, B, self.dt)
        self.time = 0.0
        self.state = self.model.rest_state(0.0)
        self._remap: dict = {}

    def advance_to(self, t: float) -> None:
        """Integrate to time ``t`` (s), landing on it exactly (a shorter last step if needed).

        Raises ``FloatingPointError`` naming the non-finite trajectory (batch index)."""
        n = math.floor((t - self.time) / self.dt + 1e-9)
        for _ in range(max(n, 0)):
            self.state = self.model.step(self.state, self.time)
            self.time += self.dt
        rest = t - self.time
        if rest > 1e-6 * self.dt:
            self.state = self.model.step(self.state, self.time, rest)
        self.time = float(t)
        self.model.check_finite(self.state, t)

    def _matrices(self, grid: SphereGrid):
        key = (grid.nlat, grid.nlon, grid.grid)
        if key not in self._remap:
            self._remap[key] = conservative_remap_matrices(self.grid, grid)
        return self._remap[key]

    def wet_fraction(self, grid: SphereGrid) -> torch.Tensor:
        """Ocean fraction (0..1) of each cell of ``grid`` (nlat, nlon), remapped with the fields."""
        r_lat, r_lon = self._matrices(grid)
        return remap_wet(
            torch.zeros(self.grid.nlat, self.grid.nlon, dtype=torch.float64), self.grid.wet.cpu(), r_lat, r_lon
        )[1]

    def native_fields(self) -> dict[str, torch.Tensor]:
        """Upper-layer fields at the ocean cell centres, (B, nlat, nlon), rows south to north."""
        s, m = self.state, self.model
        T, S = m.tracers(s)
        u = 0.5 * (s.u[:, 0] + torch.roll(s.u[:, 0], -1, -1))
        v = 0.5 * (s.v[:, 0, :-1] + s.v[:, 0, 1:])
        return {"theta": T, "salt": S, "u": u, "v": v, "eta": m.sea_surface_height(s)}

    def fields(self, grid: SphereGrid) -> dict[str, torch.Tensor]:
        """Remapped fields on ``grid``: ``theta`` (degC), ``salt`` (psu), ``u``, ``v`` (m/s), ``eta`` (m), each
        the wet-area mean over the ocean part of each cell (0 where a cell holds no ocean), plus the
        forcing channels ``doy_sin``, ``doy_cos`` = sin, cos(2 pi doy / 365); all (B, nlat, nlon) float64."""
        r_lat, r_lon = self._matrices(grid)
        nat = self.native_fields()
        names = list(nat)
        stack = torch.stack([nat[k] for k in names], dim=1)
        vals = remap_wet(stack, self.grid.wet, r_lat, r_lon)[0]
        out = {k: vals[:, i].cpu() for i, k in enumerate(names)}
        B = stack.shape[0]
        phase = 2.0 * math.pi * day_of_year(self.time) / 365.0
        out["doy_sin"] = torch.full((B, grid.nlat, grid.nlon), math.sin(phase), dtype=torch.float64)
        out["doy_cos"] = torch.full((B, grid.nlat, grid.nlon), math.cos(phase), dtype=torch.float64)
        return out
