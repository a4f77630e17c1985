"""WindowDataset and ChannelLayout: windows, Cartesian lift, normalisation, lazy files, errors."""

import pickle

import h5py
import numpy as np
import pytest
import torch
import yaml
from tiny_dataset import analytic_fields, compute_stats

from dandelion.channels import ChannelLayout
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.metrics import loss_weights
from dandelion.sphere import SphereGrid

STATS = {"h": {"kind": "scalar", "mean": 3.0, "std": 2.0}, "velocity": {"kind": "vector", "rms": 5.0}}
FIELDS = {"h": "scalar", "velocity": "vector"}


def _data(make_tiny_dataset, tmp_path, **kw):
    return make_tiny_dataset(tmp_path / "data", **kw)


@pytest.mark.parametrize("grid,nlat,nlon", [("equiangular", 9, 16), ("legendre-gauss", 8, 16), ("equiangular", 17, 32)])
def test_lift_project_round_trip_and_tangent(grid, nlat, nlon):
    g = SphereGrid(nlat, nlon, grid)
    layout = ChannelLayout(FIELDS, STATS, g)
    uv = torch.randn(2, 3, nlat, nlon, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    xyz = layout.lift(uv)
    assert xyz.shape == (2, 3, 3, nlat, nlon)
    # tangent: orthogonal to the position vector, pole rows included
    assert torch.allclose((xyz * g.xyz).sum(-3), torch.zeros((), dtype=torch.float64), atol=1e-15)
    # |u e + v n| = |(u, v)|: the lift is an isometry
    assert torch.allclose((xyz**2).sum(-3), (uv**2).sum(-1), rtol=1e-14, atol=0)
    assert torch.allclose(layout.project(xyz), uv, rtol=0, atol=1e-14)
    # encode/decode round trip with normalisation
    fields = {"h": torch.randn(2, 3, nlat, nlon, dtype=torch.float64), "velocity": uv}
    enc = layout.encode(fields)
    assert enc.shape == (2, 3, 4, nlat, nlon) and layout.channels == ["h", "velocity_x", "velocity_y", "velocity_z"]
    dec = layout.decode(enc)
    for k in fields:
        assert torch.allclose(dec[k], fields[k], rtol=0, atol=1e-13)


def test_project_drops_radial_component():
    g = SphereGrid(9, 16)
    layout = ChannelLayout(FIELDS, STATS, g)
    uv = torch.randn(9, 16, 2, dtype=torch.float64)
    assert torch.allclose(layout.project(layout.lift(uv) + 7.0 * g.xyz), uv, atol=1e-13)


def test_vector_normalisation_is_one_scale_and_rotation_covariant():
    """A uniform wind across the pole: Cartesian channels are constant; one RMS scale, no per-component mean."""
    g = SphereGrid(9, 16)
    layout = ChannelLayout(FIELDS, STATS, g)
    c = torch.tensor([1.0, -2.0, 0.0], dtype=torch.float64)[:, None, None]  # constant vector, tangent at both poles
    vel = c - (c * g.xyz).sum(0) * g.xyz  # its tangent part everywhere
    uv = torch.stack([(vel * g.east).sum(0), (vel * g.north).sum(0)], -1)
    enc = layout.encode({"h": torch.zeros(9, 16, dtype=torch.float64), "velocity": uv})
    # at the poles the tangent part is c itself, in every column, although u and v flip with the column
    for row in (0, -1):
        assert torch.allclose(
            enc[1:, row, :], c[:, 0] / STATS["velocity"]["rms"] * torch.ones(1, 16, dtype=torch.float64), atol=1e-14
        )
        assert uv[row, :, 0].std() > 0.5


def test_loss_weights_mean_one():
    for g in (SphereGrid(9, 16), SphereGrid(8, 16, "legendre-gauss")):
        w = loss_weights(g)
        assert w.shape == (g.nlat, 1) and torch.isclose(w.mean(), torch.tensor(1.0, dtype=torch.float64))
        assert torch.allclose(w, w.flip(0)) and (w >= 0).all()


def test_items_match_analytic_fields(make_tiny_dataset, tmp_path):
    path = _data(make_tiny_dataset, tmp_path, n_frames=9)
    ds = WindowDataset(path, "train", n_in=3, n_out=2, stride=2)
    assert len(ds) == 3 * ((9 - 5) // 2 + 1)
    C = ds.layout.n_channels
    for i in (0, len(ds) - 1):
        item = ds[i]
        assert item["x"].shape == (3 * C, 9, 16) and item["y"].shape == (2, C, 9, 16)
        assert item["x"].dtype == torch.float32 and item["y"].dtype == torch.float32
        truth = analytic_fields(ds.grid, item["traj"], 9)
        frames = torch.cat([item["x"].reshape(3, C, 9, 16), item["y"]]).double()
        dec = ds.layout.decode(frames)
        t = slice(item["t0"], item["t0"] + 5)
        np.testing.assert_allclose(dec["h"].numpy(), truth["h"][t], rtol=1e-5)
        np.testing.assert_allclose(
            dec["velocity"].numpy(), truth["velocity"][t], atol=1e-4 * np.abs(truth["velocity"]).max()
        )
    assert {ds[i]["t0"] for i in range(3)} == {0, 2, 4}


def test_train_split_is_normalised(make_tiny_dataset, tmp_path):
    """Over the train split, area-weighted: h has mean 0 and std 1; velocity has RMS magnitude 1."""
    path = _data(make_tiny_dataset, tmp_path, n_frames=6)
    ds = WindowDataset(path, "train", n_in=1, n_out=1, stride=1)
    w = loss_weights(ds.grid).float()
    items = [ds[i] for i in range(len(ds))]
    frames = torch.stack([it["x"] for it in items] + [it["y"][0] for it in items if it["t0"] == 4])  # every frame once
    assert frames.shape[0] == 3 * 6
    mean = lambda a: (a * w).mean((-2, -1)).mean()  # noqa: E731
    assert abs(mean(frames[:, 0])) < 1e-5 and abs(mean(frames[:, 0] ** 2) - 1) < 1e-5
    assert abs(mean((frames[:, 1:] ** 2).sum(1)) - 1) < 1e-5


def test_stats_come_from_train_split_only(make_tiny_dataset, tmp_path):
    path = _data(make_tiny_dataset, tmp_path)
    ds_test = WindowDataset(path, "test")
    train_files = WindowDataset(path, "train").files
    want = compute_stats(train_files, ds_test.grid)
    assert ds_test.layout.stats["h"]["mean"] == pytest.approx(want["h"]["mean"], rel=1e-12)
    other = compute_stats(ds_test.files, ds_test.grid)
    assert abs(other["h"]["mean"] - want["h"]["mean"]) > 1e-3
    # changing the test split leaves the statistics unchanged
    path2 = make_tiny_dataset(tmp_path / "data2", splits={"train": [0, 1, 2], "valid": [3], "test": [7, 8]})
    assert WindowDataset(path2, "test").layout.stats == ds_test.layout.stats


def test_errors_name_the_problem(make_tiny_dataset, tmp_path):
    path = _data(make_tiny_dataset, tmp_path)
    with pytest.raises((ValueError, KeyError, FileNotFoundError), match="bogus"):
        WindowDataset(path, "bogus")
    with pytest.raises(ValueError, match="n_in"):
        WindowDataset(path, "train", n_in=0)
    with pytest.raises(ValueError, match="frames"):
        WindowDataset(path, "train", n_in=8, n_out=8)
    # statistics lacking a field
    stats = yaml.safe_load((path / "stats.yaml").read_text())
    del stats["velocity"]
    (path / "stats.yaml").write_text(yaml.safe_dump(stats))
    with pytest.raises(ValueError, match=r"(?s)velocity.*regenerate") as err:
        WindowDataset(path, "train")
    assert "stats.yaml" in str(err.value)
    # a field missing from one file
    path = make_tiny_dataset(tmp_path / "data3")
    victim = path / "valid" / "traj_000003.h5"
    with h5py.File(victim, "a") as h:
        del h["t0_fields/h"]
    with pytest.raises(ValueError, match=r"'h'.*traj_000003\.h5"):
        WindowDataset(path, "valid")
    # latitudes stored south to north: refused, not silently flipped
    victim = path / "test" / "traj_000004.h5"
    with h5py.File(victim, "a") as h:
        h["dimensions/lat"][...] = h["dimensions/lat"][()][::-1]
    with pytest.raises(ValueError, match=r"traj_000004\.h5.*lat"):
        WindowDataset(path, "test")


def test_workers_give_identical_batches_and_no_handle_is_pickled(make_tiny_dataset, tmp_path):
    path = _data(make_tiny_dataset, tmp_path)
    ds = WindowDataset(path, "train", n_in=2, n_out=2)
    assert not ds._handles
    ds[0]  # opens a handle in this process
    clone = pickle.loads(pickle.dumps(ds))  # h5py handles cannot be pickled: they must be dropped
    assert not clone._handles and torch.equal(clone[3]["x"], ds[3]["x"])

    def batches(workers):
        loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=False, num_workers=workers)
        return list(loader)

    b0, b2 = batches(0), batches(2)
    assert len(b0) == len(b2) == -(-len(ds) // 4)
    for a, b in zip(b0, b2):
        for k in ("x", "y", "traj", "t0"):
            assert torch.equal(a[k], b[k])
    ds.close()
