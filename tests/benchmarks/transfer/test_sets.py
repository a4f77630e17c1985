"""Zero-shot transfer test sets: the fine datasets the transfer protocol scores on.

Physics: a test set at the coarse band limit on a finer grid holds the coarse fields sampled finer (spectral
interpolation of the coarse data agrees to float32 storage precision); the initial state does not depend on
the band limit; Galewsky's hyperviscosity and Held-Suarez's hyperdiffusion are held fixed in physical units;
finite-volume coarse cells are the same solver run and fine cells refine it.
"""

import json

import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
import torch
from small_generation import generate_folder
from torch_harmonics import InverseRealSHT, InverseRealVectorSHT, RealSHT, RealVectorSHT

from dandelion.benchmarks.transfer import zero_shot as T
from dandelion.datasets.folder import load_metadata
from dandelion.datasets.galewsky import GalewskyScenario
from dandelion.datasets.storage import open_trajectory


def _frames(path, tid, field):
    split = next(s for s in ("train", "valid", "test") if (path / s / f"traj_{tid:06d}.h5").exists())
    with open_trajectory(path / split / f"traj_{tid:06d}.h5") as f:
        group = "t0_fields" if field in f["t0_fields"] else "t1_fields"
        return torch.tensor(f[group][field][0], dtype=torch.float64)


def test_coarse_band_is_the_coarse_data_sampled_finer_and_the_initial_state_is_band_limit_free(tmp_path):
    coarse_cfg = {
        "name": "cahn_hilliard",
        "nlat": 16,
        "nlon": 32,
        "lmax": 12,
        "n_trajectories": 10,
        "n_frames": 3,
        "dt_frame": 1.0,
    }
    coarse = generate_folder(tmp_path / "coarse", coarse_cfg, splits=["test"])
    meta = load_metadata(coarse)
    tid = json.loads((coarse / "splits.json").read_text())["test"][0]
    a = T.fine_dataset_config(meta, 32, 64, "coarse_band")
    b = T.fine_dataset_config(meta, 32, 64, "fine_band")
    assert (a["lmax"], a["output_lmax"], b["lmax"]) == (12, 8, 24)  # solver lmax kept / stored band of 16x32 / scaled
    fa, fb = generate_folder(tmp_path / "a", a, ["test"]), generate_folder(tmp_path / "b", b, ["test"])
    assert (
        json.loads((fa / "splits.json").read_text())["test"] == json.loads((coarse / "splits.json").read_text())["test"]
    )
    assert load_metadata(fa)["output_lmax"] == 8 and load_metadata(fa)["lmax"] == 8 and load_metadata(fb)["lmax"] == 16
    L = load_metadata(coarse)["lmax"]
    analysis = RealSHT(16, 32, lmax=L, mmax=L, grid="equiangular").double()
    up = InverseRealSHT(32, 64, lmax=L, mmax=L, grid="equiangular").double()
    c = _frames(coarse, tid, "phi")
    interp = up(analysis(c))
    err = (interp - _frames(fa, tid, "phi")).abs().max() / c.abs().max()
    assert err < 1e-5, f"coarse-band test set differs from the spectrally interpolated coarse data by {err:.2e}"
    # frame 0 is the initial state: its degrees below the coarse band limit do not depend on the band limit
    fine0 = RealSHT(32, 64, lmax=L, mmax=L, grid="equiangular").double()(_frames(fb, tid, "phi")[0])
    assert torch.allclose(fine0, analysis(c[0]), atol=1e-6 * float(c[0].abs().max()))
    assert (_frames(fb, tid, "phi")[1:] - _frames(fa, tid, "phi")[1:]).abs().max() > 1e-4  # new small scales do act


def test_galewsky_fine_band_keeps_the_hyperviscosity_in_physical_units():
    coarse = GalewskyScenario({"nlat": 32, "nlon": 64, "lmax": 32, "n_trajectories": 20})
    meta = {**coarse.describe(), "config": {"dataset": dict(coarse.cfg)}}
    nu4 = coarse.solver_settings()["hyperviscosity_m4_per_s"]
    for nlat in (64, 128):
        fine = GalewskyScenario(T.fine_dataset_config(meta, nlat, 2 * nlat, "fine_band"))
        assert fine.solver_lmax == nlat
        assert fine.solver_settings()["hyperviscosity_m4_per_s"] == pytest.approx(nu4, rel=1e-12)
        band = GalewskyScenario(T.fine_dataset_config(meta, nlat, 2 * nlat, "coarse_band"))
        assert band.solver_settings() == coarse.solver_settings() and band.stored_lmax == coarse.stored_lmax


def test_generate_refuses_an_unknown_split(tmp_path):
    with pytest.raises(ValueError, match="splits"):
        generate_folder(tmp_path / "x", {"name": "solid_body"}, splits=["tset"])
    assert not (tmp_path / "x").exists()


def test_galewsky_coarse_band_velocity_is_the_coarse_velocity_sampled_finer(tmp_path):
    """The vector field too: the coarse velocity's vector-harmonic synthesis at the finer grid is the coarse-band
    velocity."""
    coarse = generate_folder(
        tmp_path / "coarse",
        {
            "name": "galewsky",
            "nlat": 16,
            "nlon": 32,
            "lmax": 16,
            "n_trajectories": 10,
            "n_frames": 3,
            "spinup_days": 0.25,
        },
        splits=["test"],
    )
    fine = generate_folder(
        tmp_path / "a", T.fine_dataset_config(load_metadata(coarse), 32, 64, "coarse_band"), ["test"]
    )
    tid = json.loads((coarse / "splits.json").read_text())["test"][0]
    L = load_metadata(coarse)["lmax"]

    def colat_lon(uv):  # (T, nlat, nlon, 2) eastward/northward -> (T, 2, nlat, nlon) colatitude/longitude components
        return torch.stack([-uv[..., 1], uv[..., 0]], 1)

    c, f = colat_lon(_frames(coarse, tid, "velocity")), colat_lon(_frames(fine, tid, "velocity"))
    up = InverseRealVectorSHT(32, 64, lmax=L, mmax=L, grid="equiangular").double()(
        RealVectorSHT(16, 32, lmax=L, mmax=L, grid="equiangular").double()(c)
    )
    assert (up - f).abs().max() / f.abs().max() < 1e-5


def test_finite_volume_coarse_cells_are_the_same_solver_run_and_fine_cells_refine_it(tmp_path):
    """Shock caps (finite volume, no band limit): the coarse-cells test set on a finer grid is the coarse solver run
    remapped there (the depth's integral over the remap's cells, i.e. the mass, equals the coarse set's frame by frame
    to float32 storage precision); the fine-cells set runs the solver on cells refined with the grid (ny doubled), which
    conserves the same mass up to the initial cell averages but resolves other fields."""
    from dandelion.solvers.fv_geometry import CalhounHelzelGrid
    from dandelion.solvers.fv_remap import ConservativeRemap
    from dandelion.sphere import SphereGrid

    coarse_cfg = {
        "name": "shock_caps",
        "nlat": 8,
        "nlon": 16,
        "K": [4],
        "delta": [1.0],
        "seeds": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        "n_frames": 4,
    }
    coarse = generate_folder(tmp_path / "coarse", coarse_cfg, splits=["test"])
    meta = load_metadata(coarse)
    a, b = T.fine_dataset_config(meta, 16, 32, "coarse_band"), T.fine_dataset_config(meta, 16, 32, "fine_band")
    assert (a["ny"], b["ny"]) == (8, 16) and a.get("lmax") is None and "output_lmax" not in a
    fa, fb = generate_folder(tmp_path / "a", a, ["test"]), generate_folder(tmp_path / "b", b, ["test"])
    assert (
        T.solver_resolution(load_metadata(fa)) == "8x16 cells"
        and T.solver_resolution(load_metadata(fb)) == "16x32 cells"
    )
    tid = json.loads((coarse / "splits.json").read_text())["test"][0]

    def mass(path, nlat, ny):
        return ConservativeRemap(CalhounHelzelGrid(ny), SphereGrid(nlat, 2 * nlat, "equiangular")).integral(
            _frames(path, tid, "h")
        )

    m0, ma, mb = mass(coarse, 8, 8), mass(fa, 16, 8), mass(fb, 16, 16)
    assert float(((ma - m0) / m0).abs().max()) < 1e-6  # the same run, stored finer
    assert float(((mb - m0) / m0).abs().max()) < 1e-2 and float(((mb - mb[0]) / mb[0]).abs().max()) < 1e-6  # conserved
    ha, hb = _frames(fa, tid, "h"), _frames(fb, tid, "h")
    assert float((hb[1:] - ha[1:]).abs().max()) > 1e-3 * float(ha.abs().max())  # refined cells resolve other fields


def test_held_suarez_fine_band_keeps_the_hyperdiffusion_rate_per_degree():
    """Held-Suarez's del^8 e-folding time is set at the truncation degree: the fine band (twice the band limit) must
    damp every degree the coarse solver has at the coarse rate (the solver's own rates compared), and the coarse band
    keeps the coarse solver settings, also when the coarse config leaves lmax to its default."""
    from dandelion.datasets.held_suarez import HeldSuarezScenario

    def rates(cfg):
        s = HeldSuarezScenario({**cfg, "n_trajectories": 1, "n_levels": 3})
        return s.build_simulation(
            {k: torch.tensor([v]) for k, v in s.parameters(0).items()}, lmax=s.solver_lmax, device="cpu"
        )._hd_rate[:, 0]

    for base in ({"nlat": 32, "nlon": 64, "lmax": 22}, {"nlat": 64, "nlon": 128}):
        coarse = HeldSuarezScenario({**base, "n_trajectories": 1, "n_levels": 3})
        meta = {**coarse.describe(), "config": {"dataset": dict(coarse.cfg, lmax=base.get("lmax"))}}
        fine_cfg = T.fine_dataset_config(meta, 2 * base["nlat"], 2 * base["nlon"], "fine_band")
        L = coarse.solver_lmax
        assert fine_cfg["lmax"] == 2 * L
        r0, r1 = rates({**meta["config"]["dataset"], "lmax": L}), rates(fine_cfg)
        assert torch.allclose(r1[:L], r0, rtol=1e-10) and float(r1[L:].min()) > float(r0.max())
        band = T.fine_dataset_config(meta, 2 * base["nlat"], 2 * base["nlon"], "coarse_band")
        assert band["lmax"] == L and band.get("hyperdiffusion_days", 0.1) == meta["config"]["dataset"].get(
            "hyperdiffusion_days", 0.1
        )
