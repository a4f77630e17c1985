"""The ``global_ocean`` scenario: sweep mapping, a tiny generated set that passes dandelion-verify, the
land mask stored once per file, wet-only statistics (garbage on land changes nothing)."""

import shutil

import h5py
import numpy as np
import pytest

from dandelion.datasets import folder, statistics, storage
from dandelion.datasets.generate import generate
from dandelion.datasets.scenario import get_scenario
from dandelion.datasets.verify import verify


def cfg(path, **dataset):
    d = {
        "name": "global_ocean",
        "path": str(path),
        "nlat": 16,
        "nlon": 32,
        "n_trajectories": 3,
        "n_frames": 3,
        "spinup_days": 2.0,
        "frame_days": 2.0,
    }
    d.update(dataset)
    return {"dataset": d, "device": "cpu", "batch_size": 3, "progress": False}


def test_sweep_axes_follow_the_card():
    s = get_scenario("global_ocean")({})
    assert s.n_sweep == 243 and s.n_frames == 1189 and s.cfg["spinup_days"] == 360.0
    assert s.axes() == {
        "gm_background_k": [250.0, 1000.0, 2500.0],
        "visc_ah": [1.5e5, 3.0e5, 5.0e5],
        "diff_kr": [1e-5, 3e-5, 1e-4],
        "tau_theta_relax": [30.0, 60.0, 120.0],
        "tau_salt_relax": [90.0, 180.0, 360.0],
    }
    assert s.sweep_index(1) == {**{k: v[0] for k, v in s.axes().items()}, "tau_salt_relax": 180.0, "seed": 0}
    assert get_scenario("global_ocean")({"spinup_days": 30}).spinup() == 30 * 86400.0


@pytest.fixture(scope="module")
def ocean_set(tmp_path_factory):
    return generate(cfg(tmp_path_factory.mktemp("ocean") / "d"))


def test_generated_set_passes_verify_and_stores_the_mask_once(ocean_set):
    root = ocean_set
    assert verify(root) == []
    meta = folder.load_metadata(root)
    assert meta["masked"] is True and meta["reduced"] is True and meta["forcing_fields"] == ["doy_sin", "doy_cos"]
    files = sorted(root.glob("*/traj_*.h5"))
    masks = []
    for p in files:
        with storage.open_trajectory(p) as f:
            wet = storage.read_mask(f)
            frac = f["mask/wet_fraction"][()]
            assert f["mask/wet"].shape == (16, 32)  # static: once per file, no time axis
            np.testing.assert_array_equal(wet, frac >= 0.5)
            theta = f["t0_fields/theta"][0]
            lat = f["dimensions/lat"][()]
            masks.append(wet)
            assert not wet[np.abs(lat) > 85].any() and wet.mean() > 0.6  # polar caps and ridges are land
            assert np.all((theta[:, wet] > -3) & (theta[:, wet] < 31))
            assert np.all(theta[:, frac == 0] == 0)  # no ocean at all: stored 0
    assert all(np.array_equal(m, masks[0]) for m in masks)


def test_statistics_cover_wet_points_only(ocean_set, tmp_path):
    meta = folder.load_metadata(ocean_set)
    files = sorted(ocean_set.glob("train/traj_*.h5"))
    copies = []
    for p in files:
        q = tmp_path / p.name
        shutil.copy(p, q)
        with h5py.File(q, "r+") as f:
            land = ~f["mask/wet"][()].astype(bool)
            for group in ("t0_fields", "t1_fields"):
                for d in f[group].values():
                    a = d[()]
                    a[:, :, land] = 1.0e6  # garbage on land
                    d[()] = a
        copies.append(q)
    clean = statistics.compute_stats(files, meta["fields"])
    dirty = statistics.compute_stats(copies, meta["fields"])
    assert clean == dirty


def test_verify_flags_a_missing_mask(ocean_set, tmp_path):
    root = tmp_path / "d"
    shutil.copytree(ocean_set, root)
    p = sorted(root.glob("train/traj_*.h5"))[0]
    with h5py.File(p, "r+") as f:
        del f["mask"]
    assert any("lacks mask/wet" in line for line in verify(root))


def test_unmasked_dataset_has_no_mask_group(tmp_path):
    root = generate(
        {
            "dataset": {
                "name": "solid_body",
                "path": str(tmp_path / "s"),
                "nlat": 8,
                "nlon": 16,
                "n_trajectories": 2,
                "n_frames": 2,
            },
            "progress": False,
        }
    )
    for p in root.glob("*/traj_*.h5"):
        with storage.open_trajectory(p) as f:
            assert "mask" not in f and storage.read_mask(f) is None
    assert verify(root) == []


def test_an_unstable_step_is_refused_before_anything_is_written(tmp_path):
    """dandelion-generate's up-front check (nothing written) refuses a dt above the ocean's stability
    limit with the largest safe step, as every other scenario's ``validate_time_step`` does."""
    from dandelion.datasets.generate import check

    path = tmp_path / "ocean"
    with pytest.raises(ValueError, match="largest safe step is"):
        check(cfg(path, dt=1.0e5))
    with pytest.raises(ValueError, match="longer than the frame interval"):
        check(cfg(path, dt=3.0 * 86400.0))
    assert not path.exists()
    assert check(cfg(path, dt=600.0)) == path.resolve()


def test_land_cells_hold_zero_only_where_wholly_dry(ocean_set):
    """The stored value of a cell is the mean over its ocean part: 0 only where it holds no ocean at all; a
    partly wet cell marked land (``0 < wet_fraction < 0.5``, ``mask/wet = 0``) holds that ocean mean, not 0."""
    p = sorted(ocean_set.glob("*/traj_*.h5"))[0]
    with storage.open_trajectory(p) as f:
        frac = f["mask/wet_fraction"][()]
        theta = f["t0_fields/theta"][0]
    partly = (frac > 0) & (frac < 0.5)
    assert partly.any() and (frac == 0).any()
    assert np.all(theta[:, frac == 0] == 0)
    assert np.all((theta[:, partly] > -3) & (theta[:, partly] < 31) & (theta[:, partly] != 0))


def test_redi_diffusivity_is_gm_background_k():
    """Redi = GM (Griffies 1998): each trajectory's isopycnal tracer diffusivity is its gm_background_k."""
    import torch

    from dandelion.solvers.ocean_simulation import OceanSimulation

    s = get_scenario("global_ocean")({"nlat": 16, "nlon": 32})
    gm = torch.tensor(s.axes()["gm_background_k"], dtype=torch.float64)
    params = {
        k: (gm if k == "gm_background_k" else torch.full((3,), v[1], dtype=torch.float64)) for k, v in s.axes().items()
    }
    sim = OceanSimulation(params, nlat=16, nlon=32, settings=s.settings())
    assert torch.equal(sim.model.kappa_T.reshape(-1), gm)
