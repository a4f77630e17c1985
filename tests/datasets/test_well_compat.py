"""Datasets written by dandelion-generate open with the Well's own loader (the_well.data.WellDataset)."""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest
import torch
import yaml

from dandelion.datasets import folder, storage
from dandelion.datasets.generate import generate
from dandelion.datasets.verify import verify
from dandelion.datasets.well_format import WELL_STATS_KEYS, add_well_metadata
from dandelion.runtime import write_yaml_atomic
from dandelion.sphere import SphereGrid

the_well = pytest.importorskip("the_well.data")
from the_well.data.normalization import ZScoreNormalization  # noqa: E402

SETS = {
    "solid_body": {"nlat": 16, "nlon": 32, "n_trajectories": 4, "n_frames": 5},
    "galewsky": {
        "nlat": 16,
        "nlon": 32,
        "lmax": 10,
        "n_trajectories": 3,
        "n_frames": 3,
        "spinup_days": 0.25,
        "frame_hours": 4.0,
    },
}


@pytest.fixture(scope="module", params=sorted(SETS))
def generated(request, tmp_path_factory):
    name = request.param
    root = generate(
        {
            "dataset": {"name": name, "path": str(tmp_path_factory.mktemp(name) / "d"), **SETS[name]},
            "batch_size": 4,
            "progress": False,
        }
    )
    return root


def _bool(x) -> bool:
    return isinstance(x, (bool, np.bool_))


def test_files_carry_what_the_wells_format_asks_for(generated):
    for path in sorted(generated.glob("*/traj_*.h5")):
        with h5py.File(path, "r") as f:
            for p in f.attrs["simulation_parameters"]:
                assert p in f.attrs and float(f.attrs[p]) == float(f["scalars"][p][()])
            dims = f["dimensions"]
            assert len(dims.attrs["spatial_dims"]) == f.attrs["n_spatial_dims"]
            for d in list(dims.attrs["spatial_dims"]) + ["time"]:
                assert _bool(dims[d].attrs["sample_varying"]) and _bool(dims[d].attrs["time_varying"])
            for name in f["scalars"].attrs["field_names"]:
                assert _bool(f["scalars"][name].attrs["sample_varying"]) and _bool(
                    f["scalars"][name].attrs["time_varying"]
                )
            for group in ("t0_fields", "t1_fields", "t2_fields"):
                for name in f[group].attrs["field_names"]:
                    d = f[group][name]
                    assert _bool(d.attrs["sample_varying"]) and _bool(d.attrs["time_varying"])
                    assert len(d.attrs["dim_varying"]) == len(dims.attrs["spatial_dims"])
            bcs = {b.attrs["bc_type"]: b for b in f["boundary_conditions"].values()}
            assert set(bcs) == {"PERIODIC", "OPEN"}
            assert list(bcs["PERIODIC"].attrs["associated_dims"]) == ["lon"]
            assert list(bcs["OPEN"].attrs["associated_dims"]) == ["lat"]
            for b in bcs.values():
                (dim,) = b.attrs["associated_dims"]
                assert (
                    b["mask"].shape == dims[dim].shape and b["mask"][0] and b["mask"][-1] and not b["mask"][1:-1].any()
                )
                assert _bool(b.attrs["sample_varying"]) and _bool(b.attrs["time_varying"])


def test_wells_loader_sample_equals_our_arrays(generated):
    train = folder.list_split(generated, "train")
    ds = the_well.WellDataset(path=str(generated / "train"), n_steps_input=2, n_steps_output=1)
    assert len(ds.files_paths) == len(train)
    meta = folder.load_metadata(generated)
    scalar = [n for n, s in meta["fields"].items() if s["kind"] == "scalar"]
    vector = [n for n, s in meta["fields"].items() if s["kind"] == "vector"]
    # the Well flattens t0 fields, then each t1 field's components in the file's order (ours: u east, v north; the
    # Well names them after spatial_dims, <name>_lat and <name>_lon, but the data are the stored components)
    assert ds.metadata.field_names[0] == scalar
    assert ds.metadata.field_names[1] == [f"{v}_{d}" for v in vector for d in ("lat", "lon")]
    T = storage.read_fields(train[0])[scalar[0]].shape[0]
    per_file = T - 2  # windows of 2 in + 1 out
    for index in (0, len(ds) - 1):
        file_index, t0 = divmod(index, per_file)
        ours = storage.read_fields(train[file_index])
        sample = ds[index]
        frames = torch.cat([sample["input_fields"], sample["output_fields"]]).numpy()  # (3, nlat, nlon, C)
        expected = [ours[n][t0 : t0 + 3] for n in scalar] + [
            ours[n][t0 : t0 + 3, ..., c] for n in vector for c in (0, 1)
        ]
        np.testing.assert_array_equal(frames, np.stack(expected, -1))  # same latitude order (north first), same bytes
        lat = sample["space_grid"][:, 0, 0].numpy()
        np.testing.assert_allclose(lat, np.degrees(SphereGrid(meta["nlat"], meta["nlon"], meta["grid"]).lat.numpy()))
        # boundary conditions per spatial dim (lat, lon): OPEN (1) at both ends, PERIODIC (2) at both ends
        assert sample["boundary_conditions"].tolist() == [[1, 1], [2, 2]]
        # simulation parameters come back as constant scalars
        with h5py.File(train[file_index], "r") as f:
            params = [float(f["scalars"][p][()]) for p in f["scalars"].attrs["field_names"]]
        if params:
            np.testing.assert_allclose(sample["constant_scalars"].numpy(), params)


def test_wells_normalisation_uses_the_well_keys_we_write(generated):
    stats = yaml.safe_load((generated / "stats.yaml").read_text())
    meta = folder.load_metadata(generated)
    for name in meta["fields"]:
        assert stats[name]["kind"] == meta["fields"][name]["kind"]  # our entries stay
    for key in ("mean", "std", "mean_delta", "std_delta", "rms", "rms_delta"):
        assert set(stats[key]) == set(meta["fields"])
    train = folder.list_split(generated, "train")
    grid = SphereGrid(meta["nlat"], meta["nlon"], meta["grid"])
    w = grid.weights.numpy() / (4 * math.pi)
    name = next(n for n, s in meta["fields"].items() if s["kind"] == "scalar")
    frames = np.concatenate([storage.read_fields(p)[name] for p in train]).astype(np.float64)
    area_mean = (frames * w).sum((-2, -1)).mean()
    assert stats["mean"][name] == pytest.approx(area_mean, rel=1e-6, abs=1e-9)
    assert stats["std"][name] == pytest.approx(
        math.sqrt((((frames - area_mean) ** 2) * w).sum((-2, -1)).mean()), rel=1e-6, abs=1e-9
    )

    raw = the_well.WellDataset(path=str(generated / "train"), n_steps_input=2, n_steps_output=1)[0]["input_fields"]
    ds = the_well.WellDataset(
        path=str(generated / "train"),
        normalization_path=str(generated / "stats.yaml"),
        use_normalization=True,
        normalization_type=ZScoreNormalization,
        n_steps_input=2,
        n_steps_output=1,
    )
    got = ds[0]["input_fields"]
    mean = [stats["mean"][n] for n in meta["fields"] if meta["fields"][n]["kind"] == "scalar"]
    std = [stats["std"][n] for n in meta["fields"] if meta["fields"][n]["kind"] == "scalar"]
    for n, s in meta["fields"].items():
        if s["kind"] == "vector":
            mean += list(stats["mean"][n])
            std += list(stats["std"][n])
    expected = (raw.double() - torch.tensor(mean, dtype=torch.float64)) / torch.tensor(std, dtype=torch.float64).clamp(
        min=1e-4
    )
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)


def test_folders_made_before_get_the_wells_metadata(tmp_path):
    """A folder whose files predate the boundary_conditions group is brought up to the Well's format in place:
    data and our statistics unchanged, checksums still verify, the Well's loader then reads it."""
    root = generate(
        {
            "dataset": {"name": "solid_body", "path": str(tmp_path / "old"), **SETS["solid_body"]},
            "batch_size": 4,
            "progress": False,
        }
    )
    files = sorted(root.glob("*/traj_*.h5"))
    for path in files:  # as an earlier dandelion-generate wrote them
        with h5py.File(path, "r+") as f:
            del f["boundary_conditions"]
            for p in f.attrs["simulation_parameters"]:
                del f.attrs[p]
    old_stats = folder.load_stats(root)
    write_yaml_atomic(root / "stats.yaml", {k: v for k, v in old_stats.items() if k not in WELL_STATS_KEYS})
    folder.write_checksums(
        root, [p.relative_to(root).as_posix() for p in files] + ["dataset.yaml", "splits.json", "stats.yaml"]
    )
    assert verify(root) == []
    with pytest.raises(KeyError):
        the_well.WellDataset(path=str(root / "train"), n_steps_input=2, n_steps_output=1)
    before = {p: storage.read_fields(p) for p in files}
    ours = folder.load_stats(root)
    assert not set(WELL_STATS_KEYS) & set(ours)

    changed = add_well_metadata(root)
    assert sorted(changed) == files
    assert verify(root) == []
    for p in files:
        after = storage.read_fields(p)
        assert all(np.array_equal(after[k], before[p][k]) for k in after)
    assert (
        folder.load_stats(root) == old_stats
    )  # ours unchanged, the Well's keys as dandelion-generate writes them today
    ds = the_well.WellDataset(path=str(root / "train"), n_steps_input=2, n_steps_output=1)
    assert ds[0]["boundary_conditions"].tolist() == [[1, 1], [2, 2]]
    assert add_well_metadata(root) == []  # nothing left to do


def test_well_stats_of_a_masked_dataset_cover_wet_points_only(make_tiny_dataset, tmp_path):
    """Land holds a placeholder: the Well's mean/std must not move when it changes, and agree with our
    (wet-only) per-field statistics of the same files."""
    from dandelion.datasets.statistics import compute_stats
    from dandelion.datasets.well_format import well_stats

    root = make_tiny_dataset(tmp_path / "data", masked=True, n_frames=4)
    meta = folder.load_metadata(root)
    files = sorted((root / "train").glob("*.h5"))
    before = well_stats(files, meta["fields"])
    ours = compute_stats(files, meta["fields"])
    assert before["mean"]["h"] == pytest.approx(ours["h"]["mean"], rel=1e-9)
    assert before["std"]["h"] == pytest.approx(ours["h"]["std"], rel=1e-9)
    for p in files:  # a different placeholder on land
        with h5py.File(p, "r+") as f:
            land = ~np.asarray(f["mask"]["wet"][()], dtype=bool)
            assert land.any()
            h = f["t0_fields"]["h"][()]
            h[..., land] = 1e6
            f["t0_fields"]["h"][...] = h
    after = well_stats(files, meta["fields"])
    for key in WELL_STATS_KEYS:
        assert after[key]["h"] == pytest.approx(before[key]["h"], rel=1e-9), key
