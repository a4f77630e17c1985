"""Folders in the Well's layout (PlanetSWE's conventions), read with Dandelion's conventions."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import tiny_well
import torch
import yaml

from dandelion.cli.well_resample import main as resample_main
from dandelion.datasets import well as well_module
from dandelion.datasets.well import STATS_CACHE, UnsupportedGridError, WellFolder, is_well_folder
from dandelion.datasets.well_resample import resample_well_folder
from dandelion.sphere import SphereGrid

NLAT, NLON, T = 12, 24, 6


def _lg_rows_south_first(nlat=NLAT):
    return SphereGrid(nlat, NLON, "legendre-gauss").colat.numpy()[::-1].copy()


def test_reader_maps_grid_rows_and_velocity_components(tmp_path):
    root = tiny_well.make_well_folder(tmp_path / "pswe", _lg_rows_south_first(), NLON, n_frames=T)
    assert is_well_folder(root)
    wf = WellFolder(root)
    grid = wf.grid
    assert (grid.grid, grid.nlat, grid.nlon) == ("legendre-gauss", NLAT, NLON)
    meta = wf.metadata
    assert meta["fields"]["height"]["kind"] == "scalar" and meta["fields"]["velocity"]["kind"] == "vector"
    assert meta["dt_frame"] == pytest.approx(tiny_well.DT) and meta["time_units"] == "nondimensional"
    assert meta["source"]["rows_flipped"] is True
    assert [len(wf.trajectories(s)) for s in ("train", "valid", "test")] == [3, 1, 1]
    # the fields at OUR rows (north first), with u eastward and v northward
    h, u, v = tiny_well.analytic(grid.colat.numpy(), grid.lon.numpy(), 3, T)
    path, sample = wf.trajectories("valid")[0]
    with h5py.File(path, "r") as f:
        got = wf.read(f, sample, 1, 4)
    np.testing.assert_allclose(got["height"], h[1:4], rtol=1e-5)
    np.testing.assert_allclose(got["velocity"][..., 0], u[1:4], atol=1e-4)
    np.testing.assert_allclose(got["velocity"][..., 1], v[1:4], atol=1e-4)
    # a solid-body rotation is tangent with zero divergence: its area mean of v vanishes on our grid's weights
    vbar = (got["velocity"][0, ..., 1] * grid.weights.numpy()).sum()
    assert abs(vbar) < 1e-3 * np.abs(got["velocity"]).max() * 4 * np.pi


def test_area_weighted_statistics_are_computed_and_cached(tmp_path, monkeypatch):
    root = tiny_well.make_well_folder(tmp_path / "pswe", _lg_rows_south_first(), NLON, n_frames=T)
    wf = WellFolder(root)
    grid = wf.grid
    w = grid.weights.numpy() / grid.weights.numpy().sum() / NLON
    hs, speed2, dh = [], [], []
    for traj in (0, 1, 2):
        h, u, v = tiny_well.analytic(grid.colat.numpy(), grid.lon.numpy(), traj, T)
        hs.append(h)
        speed2.append(u**2 + v**2)
        dh.append(np.diff(h, axis=0))
    hs, speed2, dh = np.stack(hs), np.stack(speed2), np.stack(dh)
    area_mean = lambda a: (a * w).sum((-2, -1)).mean()  # noqa: E731  area mean per frame, then over frames
    st = wf.stats
    assert st["height"]["mean"] == pytest.approx(area_mean(hs), rel=1e-5)
    assert st["height"]["std"] == pytest.approx(np.sqrt(area_mean((hs - area_mean(hs)) ** 2)), rel=1e-4)
    assert st["velocity"]["rms"] == pytest.approx(np.sqrt(area_mean(speed2)), rel=1e-4)
    assert st["height"]["delta_std"] == pytest.approx(np.sqrt(area_mean((dh - area_mean(dh)) ** 2)), rel=1e-3)
    # the plain grid-point means of the Well's stats.yaml differ from the area means (pole rows over-counted)
    well = yaml.safe_load((root / "stats.yaml").read_text())
    assert abs(well["mean"]["height"] - st["height"]["mean"]) > 1e-3
    assert (root / STATS_CACHE).is_file()

    def recompute(*args):
        raise AssertionError("statistics recomputed although cached")

    monkeypatch.setattr(well_module, "area_weighted_stats", recompute)
    assert WellFolder(root).stats == st


def test_planetswe_rows_are_refused_with_the_remedy_which_works(tmp_path):
    rows = tiny_well.planetswe_rows(NLAT)  # equally spaced, poles excluded: not a torch-harmonics grid
    src = tiny_well.make_well_folder(tmp_path / "pswe", rows, NLON, n_frames=T)
    with pytest.raises(UnsupportedGridError, match="dandelion-well-resample") as err:
        WellFolder(src)
    assert "poles excluded" in str(err.value)
    with pytest.raises(ValueError, match="beyond the stored rows"):
        resample_well_folder(src, tmp_path / "eq", grid="equiangular")  # would need the poles
    dst = resample_well_folder(src, tmp_path / "lg")
    wf = WellFolder(dst)
    assert (wf.grid.grid, wf.grid.nlat, wf.grid.nlon) == ("legendre-gauss", NLAT, NLON)
    h, u, v = tiny_well.analytic(wf.grid.colat.numpy(), wf.grid.lon.numpy(), 0, T)
    path, sample = wf.trajectories("train")[0]
    with h5py.File(path, "r") as f:
        got = wf.read(f, sample)
    # cubic splines over 15-degree rows: smooth fields come back to 1e-3 of their range (measured 2e-4)
    assert np.abs(got["height"] - h).max() < 1e-3 * np.ptp(h)
    assert np.abs(got["velocity"][..., 0] - u).max() < 1e-3 * np.abs(u).max()
    assert np.abs(got["velocity"][..., 1] - v).max() < 1e-3 * np.abs(v).max()
    assert (dst / "stats.yaml").is_file()


def test_resampled_folder_still_opens_with_the_wells_loader(tmp_path):
    the_well = pytest.importorskip("the_well.data")
    src = tiny_well.make_well_folder(tmp_path / "pswe", tiny_well.planetswe_rows(NLAT), NLON, n_frames=T)
    dst = resample_well_folder(src, tmp_path / "lg")
    ds = the_well.WellDataset(path=str(dst), well_split_name="train", n_steps_input=2, n_steps_output=1)
    sample = ds[0]
    assert tuple(sample["input_fields"].shape) == (2, NLAT, NLON, 3)
    assert torch.isfinite(sample["input_fields"]).all()


def test_resample_cli_missing_folder_is_one_line_exit_2(tmp_path, capsys):
    """``dandelion-well-resample`` on a folder that does not exist: exit 2, one stderr line naming the download."""
    with pytest.raises(SystemExit) as info:
        resample_main([f"src={tmp_path / 'planetswe'}", f"dst={tmp_path / 'out'}"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "the-well-download" in err
    assert not (tmp_path / "out").exists()
