"""CF standard names and long names of exported variables (the table of dandelion.export.cf_names)."""

import numpy as np
import pytest
import xarray as xr

from dandelion.datasets.scenario import available_scenarios, get_scenario
from dandelion.export.cf_names import CF_NAMES, cf_attributes
from dandelion.export.forecasts import export_forecasts
from dandelion.sphere import SphereGrid

# Canonical units of the standard names used (CF Standard Name Table), with the spellings the datasets use.
CANONICAL_UNITS = {
    "air_temperature": {"K"},
    "surface_air_pressure": {"Pa"},
    "eastward_wind": {"m s-1", "m/s"},
    "northward_wind": {"m s-1", "m/s"},
    "eastward_sea_water_velocity": {"m s-1", "m/s"},
    "northward_sea_water_velocity": {"m s-1", "m/s"},
    "sea_water_potential_temperature": {"K", "degC"},
    "sea_water_salinity": {"1e-3", "psu", "g kg-1", "g/kg"},
    "sea_surface_height_above_geoid": {"m"},
}

HS_FIELDS = {name: spec.to_dict() for name, spec in get_scenario("held_suarez").fields.items()}


def _held_suarez_export(tmp_path, **kw):
    grid = SphereGrid(8, 16)
    shape = (2, 3, 8, 16)  # init, lead, lat, lon (surface fields; the level axis is not the point here)
    rng = np.random.default_rng(0)
    fc = {
        "T": 250 + rng.random(shape),
        "ps": 1e5 + rng.random(shape),
        "tracer": rng.random(shape),
        "velocity": rng.standard_normal(shape + (2,)),
    }
    path = export_forecasts(
        fc,
        tmp_path / "hs.nc",
        grid=grid,
        fields=HS_FIELDS,
        init_time=[0.0, 3600.0],
        lead_time=[3600.0, 7200.0, 10800.0],
        truth=fc,
        **kw,
    )
    return xr.open_dataset(path)


def test_held_suarez_variables_carry_standard_names(tmp_path):
    with _held_suarez_export(tmp_path, attrs={"dataset": "held_suarez"}) as ds:  # the name as dandelion.api passes it
        assert ds.T.attrs["standard_name"] == "air_temperature"
        assert ds.ps.attrs["standard_name"] == "surface_air_pressure"
        assert ds.u.attrs["standard_name"] == "eastward_wind" and ds.v.attrs["standard_name"] == "northward_wind"
        assert ds.u.attrs["long_name"] == "eastward wind" and ds.v.attrs["long_name"] == "northward wind"
        assert "standard_name" not in ds.tracer.attrs  # a passive tracer has no CF name
        assert ds.T_truth.attrs["standard_name"] == "air_temperature"
        assert ds.T_truth.attrs["long_name"].endswith("(ground truth)")


def test_unknown_dataset_keeps_plain_long_names_without_standard_names(tmp_path):
    with _held_suarez_export(tmp_path, dataset="someone_elses") as ds:
        assert not any("standard_name" in v.attrs for v in ds.data_vars.values())
        assert ds.T.attrs["long_name"] == "air temperature"
        assert ds.u.attrs["long_name"] == "eastward component of horizontal wind"
        assert ds.v.attrs["long_name"] == "northward component of horizontal wind"


@pytest.mark.parametrize("name", available_scenarios())
def test_every_registered_dataset_field_is_in_the_table(name):
    """A new dataset adds its row to CF_NAMES (standard name or None, and a long name, per field)."""
    fields = get_scenario(name).fields
    assert name in CF_NAMES, f"add a row for dataset {name!r} to CF_NAMES in dandelion/export/cf_names.py"
    assert set(fields) <= set(CF_NAMES[name]), f"add the fields {sorted(set(fields) - set(CF_NAMES[name]))} of {name!r}"
    for field, spec in fields.items():
        for component in [None] if spec.kind == "scalar" else [0, 1]:
            attrs = cf_attributes(name, field, component)
            assert attrs.get("long_name")
            standard = attrs.get("standard_name")
            if standard is not None:  # a standard name only for the quantity in units of its canonical dimension
                assert spec.units in CANONICAL_UNITS[standard], (name, field, spec.units, standard)
