"""``global_ocean``: a reduced, layered global ocean with idealised continents (the card's "ocean-lite" variant).

**What this dataset is.** Each trajectory is one run of the reduced-gravity two-layer ("2.5-layer":
two active isopycnal layers over a motionless abyss) shallow-water ocean of
:mod:`dandelion.solvers.ocean`, finite volume on a latitude-longitude Arakawa C grid of ``ocean_nlat x
ocean_nlon`` cells (default: the stored grid's ``nlat x nlon``), started from rest with the upper
layer at the restoring temperature and salinity, forced by a seasonal analytic zonal wind stress
(0.1 N/m^2) and restored towards analytic seasonal zonal SST and SSS
(:mod:`dandelion.solvers.ocean_forcing`). Land: two meridional ridge continents from polar cap to
polar cap (280-300 E and 10-40 E) and polar caps poleward of 80 degrees
(:func:`dandelion.solvers.ocean_grid.idealised_land`).

**What differs from the reference benchmark** (MITgcm global_ocean.cs32x15, 15 z-levels on the cs32
cubed sphere): no realistic coastlines or bathymetry (idealised continents, flat layers, no
circumpolar channel); two isopycnal layers (upper 150 m, lower 600 m) instead of 15 z* levels, so
no thermocline structure and no overturning circulation; analytic zonal forcing instead of
Levitus/Trenberth/NCEP fields, and no surface heat or freshwater fluxes beyond the restoring;
GM is the layered interface-thickness diffusion and Redi the along-layer tracer diffusion with the same
diffusivity (Redi = GM, Griffies 1998), diff_kr a crude interface-relaxing diapycnal flux, no GGL90; a
linear drag (``drag_days``, 30 d) on both layers and an upper-layer entrainment below 50 m (``h_entrain``),
which MITgcm does not need, with the entrained water returned by a basin-uniform detrainment so that each
layer keeps its volume (Hurlburt & Hogan 2000; :mod:`dandelion.solvers.ocean`); no-slip coasts; a start
from rest instead of a 200-year pickup: the 360-day spin-up is dropped, but the baroclinic adjustment of
the basins takes decades and continues through the stored years (the stored frames are that transient:
measured in ``docs/datasets/global_ocean.md``);
velocities are the upper layer's, not level 2's; ``eta`` is the reduced-gravity sea-surface height
(the upper layer's Montgomery potential over g) minus its wet-area mean. Nothing here is
numerically comparable with MITgcm; what carries over is the task (slow, forced, non-autonomous,
masked data) and the sweep.

**Resolution.** At the default 64 x 128 cells (2.8125 degrees) the Munk layer width (A/beta)^(1/3)
is 196-293 km for visc_ah = 1.5e5-5e5 m^2/s at 30 degrees, about one cell, as upstream: western
boundary currents are barely resolved.

**Sweep** (3^5 = 243, no seed; row-major, the last axis fastest), mapped as the card states:

* ``gm_background_k`` in {250, 1000, 2500} m^2/s -> interface-thickness diffusivity;
* ``visc_ah`` in {1.5e5, 3e5, 5e5} m^2/s -> Laplacian viscosity (same values);
* ``diff_kr`` in {1e-5, 3e-5, 1e-4} m^2/s -> diapycnal diffusivity of the crude flux;
* ``tau_theta_relax`` in {30, 60, 120} d -> temperature restoring time;
* ``tau_salt_relax`` in {90, 180, 360} d -> salinity restoring time.

**Stored** (every ``frame_days`` = 30 d after ``spinup_days`` = 360 d, time rebased; model time 0 is
1 January): ``theta`` (degC) and ``salt`` (psu) of the upper layer, ``velocity`` = (u east, v north) of
the upper layer (m/s), ``eta`` (m), and the forcing channels ``doy_sin``, ``doy_cos`` =
sin, cos(2 pi doy / 365) (doy = model day mod 365, spatially uniform). The land mask is stored once
per file (``mask/wet``, 1 = ocean; ``mask/wet_fraction``).

**Remap.** Fields are computed at the ocean cell centres (velocities averaged from the faces) and
remapped to the stored torch-harmonics grid by first-order conservative remapping over wet area
(:func:`dandelion.solvers.ocean_grid.remap_wet`): each stored cell (latitude band from the
cumulative quadrature weights, so its area equals its quadrature weight) holds the mean over the
ocean part of its area, 0 where it holds no ocean; ``wet_fraction`` is its ocean fraction (so the
wet-area integral is exactly conserved) and ``wet = wet_fraction >= 0.5``. The stored grid label
is true (nodes of that grid); the fields are not band-limited (``band_limited: false``: no
``lmax`` in the metadata or the files).
"""

from __future__ import annotations

import numpy as np
import torch

from dandelion.solvers.ocean_simulation import OceanSimulation

from .scenario import FieldSpec, Scenario, register_scenario

__all__ = ["GlobalOceanScenario"]

_DAY = 86400.0
#: Linear (interfacial) drag time of the dataset's runs, days. Without it the wind-driven equatorial
#: jets of the upper layer grow to several m/s and thin the layer to h_min within months (measured at
#: 32 x 64 and 64 x 128 cells) before the basin-crossing waves set up the zonal pressure gradient.
DEFAULT_DRAG_DAYS = 30.0


@register_scenario("global_ocean")
class GlobalOceanScenario(Scenario):
    """The global ocean scenario (module docstring). Config keys besides the generic ones:
    ``spinup_days`` (360), ``frame_days`` (30), ``ocean_nlat``, ``ocean_nlon`` (null: the stored grid's),
    ``dt`` (s, null: the largest safe divisor of a day), ``n_layers`` (2), ``H`` ([150, 600] m), ``g2``
    (0.01 m/s^2), ``tau0`` (0.1 N/m^2), ``polar_cap_deg`` (80), ``drag_days`` (linear drag time on both
    layers, :data:`DEFAULT_DRAG_DAYS`; 0 switches it off), ``h_entrain`` (50 m: the upper layer entrains
    lower-layer water within a day where it is thinner, returned to the lower layer by a basin-uniform
    detrainment; 0 switches it off)."""

    time_units = "s"
    fields = {
        "theta": FieldSpec("scalar", "degC", "upper-layer potential temperature", ("theta",)),
        "salt": FieldSpec("scalar", "psu", "upper-layer salinity", ("salt",)),
        "velocity": FieldSpec("vector", "m/s", "upper-layer velocity (u eastward, v northward)", ("u", "v")),
        "eta": FieldSpec("scalar", "m", "sea-surface height minus its wet-area mean", ("eta",)),
        "doy_sin": FieldSpec("scalar", "1", "forcing channel sin(2 pi doy / 365)", ("doy_sin",)),
        "doy_cos": FieldSpec("scalar", "1", "forcing channel cos(2 pi doy / 365)", ("doy_cos",)),
    }
    forcing_fields = ("doy_sin", "doy_cos")
    parameter_units = {
        "gm_background_k": "m^2/s",
        "visc_ah": "m^2/s",
        "diff_kr": "m^2/s",
        "tau_theta_relax": "d",
        "tau_salt_relax": "d",
    }
    band_limited = False  # finite volume, conservatively remapped: no solver band limit, no stored lmax
    default_n_seeds = 1
    default_n_frames = 1189
    distinct_note = (
        "every trajectory is its own simulation: the five physics parameters differ between "
        "trajectories and there is no seed, so no simulation appears in two splits"
    )

    def __init__(self, cfg=None):
        super().__init__(cfg)
        self.cfg["lmax"] = None  # not band-limited (band_limited = False)
        for key, default in (
            ("spinup_days", 360.0),
            ("frame_days", 30.0),
            ("g2", 0.01),
            ("tau0", 0.1),
            ("polar_cap_deg", 80.0),
            ("drag_days", DEFAULT_DRAG_DAYS),
            ("h_entrain", 50.0),
        ):
            self.cfg[key] = float(default if self.cfg.get(key) is None else self.cfg[key])
        for key in ("ocean_nlat", "ocean_nlon"):
            v = self.cfg.get(key)
            self.cfg[key] = int(self.cfg["nlat" if key == "ocean_nlat" else "nlon"] if v is None else v)
        self.cfg["n_layers"] = int(self.cfg.get("n_layers") or 2)
        self.cfg["H"] = [float(x) for x in (self.cfg.get("H") or [150.0, 600.0])]
        self.cfg.setdefault("dt", None)
        if self.cfg["frame_days"] <= 0 or self.cfg["spinup_days"] < 0:
            raise ValueError(
                f"frame_days={self.cfg['frame_days']} must be > 0 and spinup_days={self.cfg['spinup_days']} >= 0"
            )
        if self.cfg["ocean_nlat"] < 8 or self.cfg["ocean_nlon"] < 8:
            raise ValueError(
                f"ocean grid {self.cfg['ocean_nlat']} x {self.cfg['ocean_nlon']} is too coarse: use >= 8 x 8 cells"
            )

    def axes(self):
        return {
            "gm_background_k": [250.0, 1000.0, 2500.0],
            "visc_ah": [1.5e5, 3.0e5, 5.0e5],
            "diff_kr": [1.0e-5, 3.0e-5, 1.0e-4],
            "tau_theta_relax": [30.0, 60.0, 120.0],
            "tau_salt_relax": [90.0, 180.0, 360.0],
        }

    @property
    def reduced(self) -> bool:
        """Always: a reduced ocean model, not the reference's (``reduced_note`` in dataset.yaml)."""
        return True

    def spinup(self):
        return self.cfg["spinup_days"] * _DAY

    def dt_frame(self):
        return self.cfg["frame_days"] * _DAY

    def settings(self) -> dict:
        """Ocean settings handed to :class:`dandelion.solvers.ocean_simulation.OceanSimulation`."""
        return {
            "n_layers": self.cfg["n_layers"],
            "H": tuple(self.cfg["H"]),
            "g2": self.cfg["g2"],
            "tau0": self.cfg["tau0"],
            "polar_cap_deg": self.cfg["polar_cap_deg"],
            "h_entrain": self.cfg["h_entrain"],
            "drag": 0.0 if self.cfg["drag_days"] <= 0 else 1.0 / (self.cfg["drag_days"] * _DAY),
        }

    def build_simulation(self, params, *, lmax, device):
        return OceanSimulation(
            params,
            nlat=self.cfg["ocean_nlat"],
            nlon=self.cfg["ocean_nlon"],
            settings=self.settings(),
            dt=self.cfg["dt"],
            device=device,
        )

    def validate_time_step(self) -> None:
        """Refuse a configured ``dt`` longer than the frame interval or above the ocean's stability limit for
        the trajectories to be made (:class:`dandelion.solvers.ocean_simulation.OceanSimulation` raises
        ``ValueError`` with the largest safe step); ``dt: null`` picks a safe step itself."""
        if self.cfg["dt"] is None:
            return
        self.refuse_step_longer_than_frames(self.cfg["dt"])
        ps = [self.parameters(i) for i in range(self.n_trajectories)]
        params = {k: torch.tensor([p[k] for p in ps], dtype=torch.float64) for k in self.axes()}
        OceanSimulation(
            params,
            nlat=self.cfg["ocean_nlat"],
            nlon=self.cfg["ocean_nlon"],
            settings=self.settings(),
            dt=self.cfg["dt"],
        )

    def static_mask(self) -> np.ndarray:
        """Ocean fraction (nlat, nlon) of each stored cell, float64 (from the remap of the land mask)."""
        one = {k: torch.tensor([float(v[-1])], dtype=torch.float64) for k, v in self.axes().items()}
        sim = OceanSimulation(
            one, nlat=self.cfg["ocean_nlat"], nlon=self.cfg["ocean_nlon"], settings=self.settings(), dt=self.cfg["dt"]
        )
        return sim.wet_fraction(self.grid).numpy()

    def solver_settings(self):
        one = {k: torch.tensor([float(max(v))], dtype=torch.float64) for k, v in self.axes().items()}
        sim = OceanSimulation(
            one, nlat=self.cfg["ocean_nlat"], nlon=self.cfg["ocean_nlon"], settings=self.settings(), dt=self.cfg["dt"]
        )
        return {
            "model": "reduced-gravity layered shallow water, finite volume, lat-lon C grid (dandelion.solvers.ocean)",
            "scheme": "ssp-rk3",
            "dt": sim.dt,
            "ocean_nlat": self.cfg["ocean_nlat"],
            "ocean_nlon": self.cfg["ocean_nlon"],
            **{k: (list(v) if isinstance(v, tuple) else v) for k, v in self.settings().items()},
            "remap": "first-order conservative over wet area",
            "band_limited": False,
        }

    def describe(self) -> dict:
        d = super().describe()
        d["reduced_note"] = (
            "ocean-lite: two-layer reduced-gravity ocean with idealised continents and analytic forcing, "
            "not the reference MITgcm model (see dandelion.datasets.global_ocean)"
        )
        d["forcing_fields"] = list(self.forcing_fields)
        d["masked"] = True
        return d
