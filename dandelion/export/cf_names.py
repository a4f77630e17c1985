"""CF names of the exported variables: a table per dataset and field (:mod:`dandelion.export.forecasts`).

Each entry gives the CF ``standard_name`` (from the CF Standard Name Table,
https://cfconventions.org/Data/cf-standard-names/current/build/cf-standard-name-table.html) where the
quantity has one, and a plain ``long_name``. A vector field has one entry per component, (eastward,
northward), exported as ``u`` and ``v`` (or ``<field>_u``, ``<field>_v``).

A quantity gets a ``standard_name`` only when it is that physical quantity in units convertible to the
table's canonical units: non-dimensional datasets (``units = "1"`` standing for a scaled quantity, or
times in units of ``tau``) and quantities the table does not define (the shallow-water height departure,
a phase field, a passive tracer) get a long name only. A dataset added to the package adds its row here;
a dataset missing from the table is exported with the long names of its ``dataset.yaml`` and no
standard names.
"""

from __future__ import annotations

__all__ = ["CF_NAMES", "cf_attributes"]

_WIND = (("eastward_wind", "eastward wind"), ("northward_wind", "northward wind"))

#: dataset name -> field name -> (standard_name | None, long_name) for a scalar, or a pair of those
#: (eastward, northward) for a vector field.
CF_NAMES: dict[str, dict[str, tuple]] = {
    # barotropic shallow water of the atmosphere (Galewsky et al. 2004): the velocity is the air's
    "galewsky": {
        "h": (None, "height departure from the mean depth"),
        "velocity": _WIND,
    },
    "held_suarez": {
        "T": ("air_temperature", "air temperature"),
        "ps": ("surface_air_pressure", "surface air pressure"),
        "velocity": _WIND,
        "tracer": (None, "passive tracer mixing ratio"),
    },
    # non-dimensional advection test (Williamson et al. 1992, case 1)
    "solid_body": {
        "h": (None, "advected tracer (non-dimensional)"),
        "velocity": ((None, "eastward velocity (non-dimensional)"), (None, "northward velocity (non-dimensional)")),
    },
    # non-dimensional exact transport by prescribed flows (docs/datasets/transport.md)
    "transport": {
        "h": (None, "advected tracer mixing ratio (non-dimensional)"),
        "velocity": (
            (None, "prescribed eastward velocity (non-dimensional)"),
            (None, "prescribed northward velocity (non-dimensional)"),
        ),
    },
    # non-dimensional rotation-free shallow water (dam breaks)
    "shock_caps": {
        "h": (None, "fluid depth (non-dimensional)"),
        "momentum": (
            (None, "eastward momentum h u (non-dimensional)"),
            (None, "northward momentum h v (non-dimensional)"),
        ),
    },
    "cahn_hilliard": {
        "phi": (None, "phase field (order parameter)"),
    },
    "chained_turbulence": {
        "vorticity": (None, "relative vorticity (in units of 1/tau)"),
    },
    # layered shallow-water ocean: upper-layer temperature and salinity, currents, sea-surface height
    "global_ocean": {
        "theta": ("sea_water_potential_temperature", "upper-layer sea water potential temperature"),
        "salt": ("sea_water_salinity", "upper-layer sea water salinity"),
        "eta": (None, "sea-surface height minus its wet-area mean"),  # an anomaly: no CF standard name
        "doy_sin": (None, "forcing channel: sine of the phase of the year"),
        "doy_cos": (None, "forcing channel: cosine of the phase of the year"),
        "velocity": (
            ("eastward_sea_water_velocity", "eastward sea water velocity"),
            ("northward_sea_water_velocity", "northward sea water velocity"),
        ),
    },
}


def cf_attributes(dataset: str | None, field: str, component: int | None = None) -> dict:
    """``{"standard_name": ..., "long_name": ...}`` of one exported variable, from :data:`CF_NAMES`.

    Parameters
    ----------
    dataset : the dataset's name (``dataset.yaml`` ``name``), or None.
    field : the stored field name.
    component : 0 (eastward) or 1 (northward) for a vector field, None for a scalar.

    Returns
    -------
    dict with the keys that are known (empty for a dataset or field not in the table).
    """
    entry = CF_NAMES.get(str(dataset), {}).get(field)
    if entry is None:
        return {}
    if component is not None:
        entry = entry[component]
    standard_name, long_name = entry
    return {k: v for k, v in (("standard_name", standard_name), ("long_name", long_name)) if v}
