"""Storage: HDF5 layout round trip, deterministic bytes, damaged files, area-weighted statistics, splits."""

import hashlib
import math

import numpy as np
import pytest

from dandelion.datasets import folder, statistics, storage
from dandelion.runtime import write_json_atomic
from dandelion.sphere import SphereGrid

FIELDS = {
    "h": {"kind": "scalar", "units": "m", "long_name": "height"},
    "velocity": {"kind": "vector", "units": "m/s", "long_name": "wind", "components": ["u", "v"]},
}


def write(path, grid, frames, *, tid=0, times=None, scalars=None):
    """frames: list of dicts {h: (nlat, nlon), velocity: (nlat, nlon, 2)}."""
    times = np.arange(len(frames), dtype=float) * 10.0 if times is None else times
    with storage.TrajectoryWriter(
        path,
        dataset_name="test",
        grid=grid,
        lmax=grid.lmax,
        trajectory_id=tid,
        times=times,
        time_units="s",
        scalars=scalars or {"u_max": (80.0, "m/s"), "seed": (1.0, "1")},
        fields=FIELDS,
    ) as w:
        for k, fr in enumerate(frames):
            w.write_frame(k, fr)
    return path


def random_frames(grid, T, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {"h": rng.standard_normal(grid.shape), "velocity": rng.standard_normal(grid.shape + (2,))} for _ in range(T)
    ]


@pytest.mark.parametrize(
    "nlat, nlon, grid_name", [(16, 32, "equiangular"), (8, 16, "legendre-gauss"), (9, 18, "equiangular")]
)
def test_round_trip_and_schema(tmp_path, nlat, nlon, grid_name):
    grid = SphereGrid(nlat, nlon, grid_name)
    frames = random_frames(grid, 3)
    p = write(tmp_path / "traj_000005.h5", grid, frames, tid=5)
    assert not storage.temp_path(p).exists()
    with storage.open_trajectory(p, check_data=True) as f:
        a = f.attrs
        assert (a["dataset_name"], a["grid_type"], a["grid"]) == ("test", "spherical", grid_name)
        assert (a["nlat"], a["nlon"], a["lmax"], a["n_spatial_dims"], a["n_trajectories"], a["trajectory_id"]) == (
            nlat,
            nlon,
            grid.lmax,
            2,
            1,
            5,
        )
        assert list(a["simulation_parameters"]) == ["u_max", "seed"] and a["time_units"] == "s"
        lat, lon = f["dimensions/lat"][()], f["dimensions/lon"][()]
        assert lat.dtype == np.float64 and np.all(np.diff(lat) < 0)  # row 0 northernmost
        np.testing.assert_allclose(lat, np.degrees(grid.lat.numpy()))
        np.testing.assert_allclose(lon, 360.0 * np.arange(nlon) / nlon)
        assert list(f["dimensions"].attrs["spatial_dims"]) == ["lat", "lon"]
        np.testing.assert_array_equal(f["dimensions/time"][()], [0.0, 10.0, 20.0])
        assert f["scalars/u_max"][()] == 80.0 and f["scalars/u_max"].shape == ()
        assert list(f["scalars"].attrs["field_names"]) == ["u_max", "seed"]
        h, vel = f["t0_fields/h"], f["t1_fields/velocity"]
        assert h.shape == (1, 3, nlat, nlon) and h.dtype == np.float32 and h.chunks == (1, 1, nlat, nlon)
        assert vel.shape == (1, 3, nlat, nlon, 2) and vel.chunks == (1, 1, nlat, nlon, 2)
        assert list(vel.attrs["component_names"]) == ["u", "v"] and vel.attrs["units"] == "m/s"
        assert h.compression == "gzip" and h.shuffle
        assert bool(h.attrs["time_varying"]) and bool(h.attrs["sample_varying"])
        assert len(f["t2_fields"]) == 0
    out = storage.read_fields(p)
    for k, fr in enumerate(frames):
        np.testing.assert_array_equal(out["h"][k], fr["h"].astype(np.float32))
        np.testing.assert_array_equal(out["velocity"][k], fr["velocity"].astype(np.float32))


def test_same_data_same_bytes(tmp_path):
    grid = SphereGrid(16, 32)
    a = write(tmp_path / "a.h5", grid, random_frames(grid, 4))
    b = write(tmp_path / "b.h5", grid, random_frames(grid, 4))
    assert folder.sha256_file(a) == folder.sha256_file(b)


def _two_frame_writer(p, grid):
    """A writer of a two-frame trajectory file ``p`` (no scalars) on ``grid``."""
    return storage.TrajectoryWriter(
        p,
        dataset_name="t",
        grid=grid,
        lmax=8,
        trajectory_id=0,
        times=[0.0, 1.0],
        time_units="s",
        scalars={},
        fields=FIELDS,
    )


def test_failed_write_leaves_no_file(tmp_path):
    grid = SphereGrid(16, 32)
    p = tmp_path / "traj_000000.h5"
    with pytest.raises(RuntimeError):
        with _two_frame_writer(p, grid) as w:
            w.write_frame(0, random_frames(grid, 1)[0])
            raise RuntimeError("solver died")
    assert not p.exists() and not storage.temp_path(p).exists()
    w = _two_frame_writer(p, grid)
    w.write_frame(0, random_frames(grid, 1)[0])
    with pytest.raises(ValueError, match="only 1 of 2 frames"):
        w.close()
    assert not p.exists()


def _damage(path, how):
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif how == "flip_data":  # a byte inside the last compressed chunk
        data[-200] ^= 0xFF
        path.write_bytes(bytes(data))
    elif how == "garbage":
        path.write_bytes(b"not an hdf5 file at all" * 10)


@pytest.mark.parametrize("how", ["truncate", "flip_data", "garbage"])
def test_damaged_file_error_names_file(tmp_path, how):
    grid = SphereGrid(16, 32)
    p = write(tmp_path / "traj_000003.h5", grid, random_frames(grid, 3), tid=3)
    _damage(p, how)
    with pytest.raises(storage.CorruptFileError, match="traj_000003.h5"):
        f = storage.open_trajectory(p, check_data=True)
        f.close()


def test_missing_file_and_missing_metadata(tmp_path):
    with pytest.raises(FileNotFoundError, match="traj_000001.h5"):
        storage.open_trajectory(tmp_path / "traj_000001.h5")
    with pytest.raises(FileNotFoundError, match="dataset.yaml"):
        folder.load_metadata(tmp_path)
    with pytest.raises(FileNotFoundError, match="stats.yaml"):
        folder.load_stats(tmp_path)
    with pytest.raises(FileNotFoundError, match="splits.json"):
        folder.list_split(tmp_path, "train")


@pytest.mark.parametrize("n", [3, 5, 7, 8, 9, 10, 11, 960])
def test_splits_partition(tmp_path, n):
    s = folder.make_splits(n, seed=42)
    ids = s["train"] + s["valid"] + s["test"]
    assert sorted(ids) == list(range(n))  # a partition: no trajectory in two splits
    assert all(s["counts"][k] >= 1 for k in ("train", "valid", "test"))  # no empty split, however small
    perm = np.random.default_rng(42).permutation(n)
    if n >= 8:  # the reference rule of docs/datasets/README.md
        assert s["counts"] == {
            "train": round(0.8 * n),
            "valid": round(0.1 * n),
            "test": n - round(0.8 * n) - round(0.1 * n),
        }
    assert set(s["train"]) == set(perm[: s["counts"]["train"]].tolist())
    write_json_atomic(tmp_path / "splits.json", s)
    assert folder.list_split(tmp_path, "valid") == [tmp_path / "valid" / f"traj_{i:06d}.h5" for i in s["valid"]]
    assert folder.list_split(tmp_path, "val") == folder.list_split(tmp_path, "valid")
    with pytest.raises(ValueError, match="unknown split 'training'"):
        folder.list_split(tmp_path, "training")


@pytest.mark.parametrize("n", [1, 2])
def test_splits_of_one_or_two_trajectories_are_train_only(n):
    s = folder.make_splits(n)
    assert s["counts"] == {"train": n, "valid": 0, "test": 0}


@pytest.mark.parametrize("grid_name, nlat", [("equiangular", 17), ("legendre-gauss", 10)])
def test_area_weighted_stats_match_hand_computed(tmp_path, grid_name, nlat):
    """h = a_j + b_k z^2 and a solid-body wind u = c_k cos(lat), v = 0: the area means of z^2, z^4 and
    1 - z^2 over the sphere are 1/3, 1/5 and 2/3, so every statistic has a closed form."""
    grid = SphereGrid(nlat, 2 * nlat, grid_name)
    z = np.cos(grid.colat.numpy())[:, None] * np.ones((1, grid.nlon))
    coslat = np.sin(grid.colat.numpy())[:, None] * np.ones((1, grid.nlon))
    a = [1.5, -2.0]
    b = [0.0, 3.0, 4.0, 10.0]
    c = [5.0, 6.0, 2.0, 1.0]
    files = []
    for j, aj in enumerate(a):
        frames = [{"h": aj + bk * z**2, "velocity": np.stack([ck * coslat, 0 * z], -1)} for bk, ck in zip(b, c)]
        files.append(write(tmp_path / f"traj_{j:06d}.h5", grid, frames, tid=j))
    st = statistics.compute_stats(files, FIELDS)

    A, Bk = np.array(a)[:, None], np.array(b)[None, :]
    mean = np.mean(A + Bk / 3)
    m2 = np.mean(A**2 + 2 * A * Bk / 3 + Bk**2 / 5)
    db = np.diff(b)
    dmean = np.mean(db) / 3
    dm2 = np.mean(db**2) / 5
    rms = math.sqrt(np.mean(np.square(c)) * 2 / 3)
    drms = math.sqrt(np.mean(np.diff(c) ** 2) * 2 / 3)
    assert st["h"]["kind"] == "scalar" and st["velocity"]["kind"] == "vector"
    np.testing.assert_allclose(st["h"]["mean"], mean, rtol=1e-6)
    np.testing.assert_allclose(st["h"]["std"], math.sqrt(m2 - mean**2), rtol=1e-6)
    np.testing.assert_allclose(st["h"]["delta_mean"], dmean, rtol=1e-6)
    np.testing.assert_allclose(st["h"]["delta_std"], math.sqrt(dm2 - dmean**2), rtol=1e-6)
    np.testing.assert_allclose(st["velocity"]["rms"], rms, rtol=1e-6)
    np.testing.assert_allclose(st["velocity"]["delta_rms"], drms, rtol=1e-6)
    # plain (unweighted) averages would differ: the pole rows are over-counted
    assert abs(np.mean(a[0] + b[3] * z**2) - (a[0] + b[3] / 3)) > 1e-2


def test_stats_refuse_empty_and_mixed_grids(tmp_path):
    with pytest.raises(ValueError, match="train split is empty"):
        statistics.compute_stats([], FIELDS)
    g1, g2 = SphereGrid(16, 32), SphereGrid(8, 16)
    f1 = write(tmp_path / "a.h5", g1, random_frames(g1, 2))
    f2 = write(tmp_path / "b.h5", g2, random_frames(g2, 2))
    with pytest.raises(ValueError, match="one dataset has one grid"):
        statistics.compute_stats([f1, f2], FIELDS)


def test_checksums_round_trip(tmp_path):
    (tmp_path / "x").write_text("hello")
    folder.write_checksums(tmp_path, ["x"])
    assert folder.read_checksums(tmp_path) == {"x": hashlib.sha256(b"hello").hexdigest()}
    lines = (tmp_path / "checksums.sha256").read_text().splitlines()
    assert lines[0] == f"{hashlib.sha256(b'hello').hexdigest()}  x"  # sha256sum format
    assert lines[1:] == ["# size 5  x"] and folder.read_sizes(tmp_path) == {"x": 5}  # a comment for sha256sum -c
    (tmp_path / "checksums.sha256").write_text(lines[0] + "\n")  # a folder written before sizes were recorded
    assert folder.read_sizes(tmp_path) is None and folder.read_checksums(tmp_path) == {
        "x": hashlib.sha256(b"hello").hexdigest()
    }


def test_a_mask_of_the_wrong_shape_is_a_damaged_file(make_tiny_dataset, tmp_path):
    import h5py

    root = make_tiny_dataset(tmp_path / "data", masked=True, n_frames=3)
    path = sorted((root / "train").glob("*.h5"))[0]
    with storage.open_trajectory(path) as f:  # a correct mask passes
        assert storage.read_mask(f).shape == (f.attrs["nlat"], f.attrs["nlon"])
    with h5py.File(path, "r+") as f:
        del f["mask"]["wet"]
        f["mask"].create_dataset("wet", data=np.ones((3, 4), dtype=np.uint8))
    with pytest.raises(storage.CorruptFileError, match=r"mask/wet is of shape \(3, 4\)"):
        storage.open_trajectory(path)


def test_a_refused_mask_leaves_no_temporary_file(tmp_path):
    grid = SphereGrid(8, 16)
    p = tmp_path / "traj_000000.h5"
    with pytest.raises(ValueError, match="mask must be an ocean fraction"):
        storage.TrajectoryWriter(
            p,
            dataset_name="t",
            grid=grid,
            lmax=4,
            trajectory_id=0,
            times=[0.0, 1.0],
            time_units="s",
            scalars={},
            fields=FIELDS,
            mask=np.ones((3, 3)),
        )
    assert not storage.temp_path(p).exists()
    assert list(tmp_path.iterdir()) == []
