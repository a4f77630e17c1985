"""Leveled datasets (a `level` axis as a third spatial dimension, docs/datasets/README.md): storage layout,
per-level area-weighted statistics against hand-derived values, verify, the channel fold of the torch
pipeline (encode/decode), CF export with a level coordinate, and one real held_suarez generation."""

import math
import shutil

import numpy as np
import pytest
import tiny_leveled as tl
import tiny_model  # noqa: F401  (registers "_pointwise_test")
import torch
import xarray as xr
from train_config import train_cfg

from dandelion import api
from dandelion.channels import ChannelLayout
from dandelion.checkpoint import layout_from_checkpoint, load_checkpoint
from dandelion.cli.common import compose_config as compose
from dandelion.cli.train import train
from dandelion.datasets import folder, storage
from dandelion.datasets.generate import generate
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.datasets.verify import verify
from dandelion.evaluation.scoring import evaluate
from dandelion.reporting.figures import plot_maps
from dandelion.runtime import write_yaml_atomic
from dandelion.solvers.held_suarez import PRESSURE_LEVELS_HPA
from dandelion.sphere import SphereGrid

L = len(tl.LEVELS)


@pytest.fixture(scope="module")
def leveled(tmp_path_factory):
    return tl.make_tiny_leveled_dataset(tmp_path_factory.mktemp("lev") / "d", n_frames=6)


def test_file_layout_and_read_squeezes_surface(leveled):
    path = leveled / "train" / storage.trajectory_filename(0)
    with storage.open_trajectory(path, check_data=True) as f:
        assert int(f.attrs["n_spatial_dims"]) == 3
        assert list(f["dimensions"].attrs["spatial_dims"]) == ["level", "lat", "lon"]
        lev = f["dimensions"]["level"]
        assert lev[()].tolist() == tl.LEVELS and lev.attrs["units"] == "hPa"
        T, ps, vel = f["t0_fields"]["T"], f["t0_fields"]["ps"], f["t1_fields"]["velocity"]
        assert T.shape == (1, 6, L, 9, 16) and vel.shape == (1, 6, L, 9, 16, 2) and ps.shape == (1, 6, 1, 9, 16)
        assert list(T.attrs["dim_varying"]) == [True, True, True] and list(ps.attrs["dim_varying"]) == [
            False,
            True,
            True,
        ]
        assert T.chunks == (1, 1, L, 9, 16) and vel.chunks == (1, 1, L, 9, 16, 2)  # one frame, whole sphere, all levels
    got = storage.read_fields(path)
    want = tl.analytic_fields(SphereGrid(9, 16), 0, 6)
    assert got["ps"].shape == (6, 9, 16)  # surface field squeezed on read
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-6, atol=1e-5)


def test_per_level_stats_match_hand_derived(leveled):
    stats = folder.load_stats(leveled)
    exp = tl.expected_stats(6)
    for name, keys in (("T", ("mean", "std", "delta_mean", "delta_std")), ("velocity", ("rms", "delta_rms"))):
        for k in keys:
            assert isinstance(stats[name][k], list) and len(stats[name][k]) == L
            np.testing.assert_allclose(stats[name][k], exp[name][k], rtol=2e-5, atol=1e-4, err_msg=f"{name}.{k}")
    ps = stats["ps"]  # surface: single numbers; mean over trajectories 0, 1 and frames 0..5, area mean of z is 0
    assert isinstance(ps["mean"], float)
    assert ps["mean"] == pytest.approx(1e5 + 50.0 + 5.0 * 2.5, abs=0.05)
    assert ps["delta_mean"] == pytest.approx(5.0, abs=0.01)


def test_verify_accepts_and_catches_level_mismatch(leveled, tmp_path):
    assert verify(leveled) == []
    bad = tmp_path / "bad"
    shutil.copytree(leveled, bad)
    meta = folder.load_metadata(bad)
    meta["levels"] = {**meta["levels"], "values": [300.0, 500.0, 850.0]}
    write_yaml_atomic(bad / "dataset.yaml", meta)
    assert any("dimensions/level" in p for p in verify(bad))
    stats = folder.load_stats(bad)
    stats["T"]["mean"] = stats["T"]["mean"][:2]
    write_yaml_atomic(bad / "stats.yaml", stats)
    assert any("'T'" in p and "stats.yaml" in p for p in verify(bad))


@pytest.mark.parametrize("kwargs,match", [(dict(level_fields=["nope"]), "level_fields"), (dict(levels=[]), "levels")])
def test_writer_refuses_bad_levels(tmp_path, kwargs, match):
    args = dict(levels=tl.LEVELS, level_fields=["T"])
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        storage.TrajectoryWriter(
            tmp_path / "x.h5",
            dataset_name="x",
            grid=SphereGrid(9, 16),
            lmax=5,
            trajectory_id=0,
            times=[0.0],
            time_units="s",
            scalars={},
            fields=tl.FIELDS,
            **args,
        )
    assert not list(tmp_path.iterdir())


def test_channel_fold_order_normalisation_and_round_trip(leveled):
    ds = WindowDataset(leveled, "train", n_in=2, n_out=1)
    lay = ds.layout
    tags = [f"{v:g}hPa" for v in tl.LEVELS]
    assert lay.channels == ([f"T_{t}" for t in tags] + ["ps"] + [f"velocity_{c}_{t}" for c in "xyz" for t in tags])
    assert lay.n_channels == 4 * L + 1
    item = ds[0]
    assert item["x"].shape == (2 * lay.n_channels, 9, 16) and item["y"].shape == (1, lay.n_channels, 9, 16)
    grid = ds.grid
    raw = tl.analytic_fields(grid, 0, 6)
    st = ds.stats
    x = item["x"].double().reshape(2, lay.n_channels, 9, 16)
    xyz = grid.xyz.double()
    for lev in range(L):  # frame 0 (traj 0): per-level z-score, component-major Cartesian wind / per-level RMS
        np.testing.assert_allclose(
            x[0, lev], (raw["T"][0, lev] - st["T"]["mean"][lev]) / st["T"]["std"][lev], atol=2e-5
        )
        W = tl.W0[lev] / st["velocity"]["rms"][lev]
        np.testing.assert_allclose(x[0, L + 1 + lev], (-W * xyz[1]).numpy(), atol=1e-5)
        np.testing.assert_allclose(x[0, L + 1 + L + lev], (W * xyz[0]).numpy(), atol=1e-5)
        np.testing.assert_allclose(x[0, L + 1 + 2 * L + lev], 0.0, atol=1e-6)
    np.testing.assert_allclose(x[0, L], (raw["ps"][0] - st["ps"]["mean"]) / st["ps"]["std"], atol=1e-4)
    # round trip: encode -> decode gives the fields back, with their shapes
    enc = lay.encode({k: torch.as_tensor(v) for k, v in raw.items()})
    assert enc.shape == (6, lay.n_channels, 9, 16)
    dec = lay.decode(enc)
    assert (
        dec["T"].shape == (6, L, 9, 16) and dec["ps"].shape == (6, 9, 16) and dec["velocity"].shape == (6, L, 9, 16, 2)
    )
    for k in raw:
        np.testing.assert_allclose(dec[k].numpy(), raw[k], rtol=1e-12, atol=1e-9)
    # checkpoints carry the levels
    lay2 = ChannelLayout.from_dict(lay.to_dict())
    assert lay2.channels == lay.channels and torch.equal(lay2.encode(raw), enc)
    ds.close()


def test_layout_refuses_scalar_stats_for_level_field():
    grid = SphereGrid(9, 16)
    stats = {"T": {"kind": "scalar", "mean": 250.0, "std": 10.0}}
    with pytest.raises(ValueError, match="'T'.*list of 3"):
        ChannelLayout({"T": "scalar"}, stats, grid, levels={"values": tl.LEVELS, "units": "hPa", "fields": ["T"]})


class _Persistence(torch.nn.Module):
    def __init__(self, C):
        super().__init__()
        self.C = C

    def forward(self, x):
        return x[:, -self.C :]


def test_export_has_level_coordinate(leveled, tmp_path):
    ds = api.open_dataset(leveled, "test", n_in=2)
    model = api.Forecaster(_Persistence(ds.layout.n_channels), ds.layout, n_in=2, name="persistence")
    fc = api.rollout(model, ds, n_steps=2, max_inits=2)
    assert fc.levels.tolist() == tl.LEVELS
    out = api.export(fc, tmp_path / "fc.nc", include_truth=True)
    with xr.open_dataset(out) as x:
        assert x["T"].dims == ("trajectory", "init_time", "lead_time", "level", "lat", "lon")
        assert x["u"].dims == x["T"].dims and x["ps"].dims == ("trajectory", "init_time", "lead_time", "lat", "lon")
        lev = x["level"]
        assert lev.values.tolist() == tl.LEVELS
        assert (lev.attrs["units"], lev.attrs["standard_name"], lev.attrs["positive"]) == (
            "hPa",
            "air_pressure",
            "down",
        )
        raw = tl.analytic_fields(ds.grid, 3, 6)
        init = int(fc.init_index[0])
        # persistence: every lead repeats the last input frame; lat ascending in the file (grid rows north first)
        for k in range(2):
            np.testing.assert_allclose(x["T"].values[0, 0, k], raw["T"][init][:, ::-1], rtol=1e-5)
            np.testing.assert_allclose(x["u"].values[0, 0, k], raw["velocity"][init][:, ::-1, :, 0], atol=1e-4)
            np.testing.assert_allclose(x["ps_truth"].values[0, 0, k], raw["ps"][init + 1 + k][::-1], rtol=1e-6)
    ds.close()


def test_held_suarez_generate_smallest_passes_verify(tmp_path):
    # dandelion-generate dataset=held_suarez at the smallest settings: T9 (lmax 10), 4 sigma levels, 6 h spin-up
    cfg = compose(
        "generate",
        [
            "dataset=held_suarez",
            f"dataset.path={tmp_path / 'hs'}",
            "dataset.nlat=16",
            "dataset.nlon=32",
            "dataset.lmax=10",
            "dataset.n_levels=4",
            "dataset.n_frames=3",
            "dataset.spinup_days=0.25",
            "dataset.n_trajectories=2",
            "batch_size=2",
            "progress=false",
        ],
    )
    root = generate(cfg)
    assert verify(root) == []
    meta, stats = folder.load_metadata(root), folder.load_stats(root)
    P = len(PRESSURE_LEVELS_HPA)
    assert meta["levels"]["values"] == [float(p) for p in PRESSURE_LEVELS_HPA]
    assert (
        len(stats["T"]["mean"]) == P and len(stats["velocity"]["rms"]) == P and isinstance(stats["ps"]["mean"], float)
    )
    assert 150 < min(stats["T"]["mean"]) and max(stats["T"]["mean"]) < 340
    ds = WindowDataset(root, "train", n_in=1, n_out=1)
    assert ds.layout.n_channels == 5 * P + 1  # T x P, ps, tracer x P, velocity_x/y/z x P
    item = ds[0]
    assert item["x"].shape == (ds.layout.n_channels, 16, 32) and torch.isfinite(item["x"]).all()
    ds.close()


def test_rollout_metrics_per_level(leveled):
    ds = api.open_dataset(leveled, "test", n_in=2)
    model = api.Forecaster(_Persistence(ds.layout.n_channels), ds.layout, n_in=2, name="persistence")
    res = evaluate(model, ds, n_steps=2, spectra_leads=(1,), sample=False)["results"]
    rmse = res["metrics"]["rmse"]
    for lev, p in enumerate(tl.LEVELS):
        tag = f"{p:g}hPa"
        # persistence error after k frames: k (C_l + D_l z), area RMS k sqrt(C_l^2 + D_l^2 / 3)
        want = [k * math.sqrt(tl.C[lev] ** 2 + tl.D[lev] ** 2 / 3.0) for k in (1, 2)]
        np.testing.assert_allclose(rmse[f"T_{tag}"], want, rtol=1e-4)
        # wind: u error k DW cos(lat), area RMS k DW sqrt(2/3); v stays 0
        np.testing.assert_allclose(rmse[f"u_{tag}"], [k * tl.DW * math.sqrt(2 / 3) for k in (1, 2)], rtol=1e-4)
        assert res["units"][f"T_{tag}"] == "K" and f"u_{tag}" in res["spectra"]["pred"]
    assert "ps" in rmse and "T" not in rmse
    ds.close()


def test_train_checkpoint_keeps_levels(leveled, tmp_path):
    result = train(train_cfg(leveled, tmp_path / "run"))
    layout = layout_from_checkpoint(load_checkpoint(result["last"]))
    ds = api.open_dataset(leveled, "test")
    assert layout.channels == ds.layout.channels and layout.levels["values"] == tl.LEVELS
    fc = api.rollout(api.load_model(result["last"], dataset=ds), ds, n_steps=1)
    assert fc.fields["T"].shape[-3:] == (L, 9, 16) and fc.fields["ps"].shape[-2:] == (9, 16)
    assert api.to_xarray(fc)["T"].dims[-3:] == ("level", "lat", "lon")
    ds.close()


def test_report_maps_pick_one_level(leveled, tmp_path):
    ds = api.open_dataset(leveled, "test", n_in=2)
    model = api.Forecaster(_Persistence(ds.layout.n_channels), ds.layout, n_in=2, name="persistence")
    fc = api.rollout(model, ds, n_steps=1, max_inits=1)
    out = plot_maps(api.to_xarray(fc, include_truth=True), tmp_path / "maps.png", leads=(1,), level=850.0)
    assert out.is_file() and out.stat().st_size > 0
    ds.close()
