"""Rollout evaluation, the Python API and the rollout/export/report CLIs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import xarray as xr

from dandelion import api
from dandelion import metrics as M
from dandelion.checkpoint import save_checkpoint
from dandelion.cli.common import compose_config as compose
from dandelion.cli.export import export
from dandelion.cli.report import report
from dandelion.cli.rollout import rollout
from dandelion.evaluation.scoring import evaluate
from dandelion.registry import _REGISTRY, register_model

N_FRAMES = 10
N_IN = 2


class _Oracle(nn.Module):
    """Returns the true next normalised frame: finds the input's last frame among the stored ones."""

    resolution_dependent = False

    def __init__(self, path, split, n_channels):
        super().__init__()
        data = api.open_dataset(path, split, n_in=N_IN)
        frames = [
            data.layout.encode(
                {k: torch.as_tensor(np.asarray(v)) for k, v in data.read_frames(f, 0, data.n_frames[f]).items()}
            ).float()
            for f in range(len(data.files))
        ]
        self.frames = torch.stack(frames)  # (n_traj, T, C, nlat, nlon)
        self.C = n_channels

    def forward(self, x):
        last = x[:, -self.C :]
        flat = self.frames.flatten(2)
        d = ((flat[None] - last.flatten(1)[:, None, None]) ** 2).sum(-1)  # (B, n_traj, T)
        idx = d.flatten(1).argmin(1)
        traj, t = idx // self.frames.shape[1], idx % self.frames.shape[1]
        return self.frames[traj, t + 1]


class _Persistence(nn.Module):
    """Repeats the last input frame (resolution-free); one dummy parameter so that it has a device."""

    resolution_dependent = False

    def __init__(self, n_channels):
        super().__init__()
        self.C = n_channels
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x):
        return x[:, -self.C :] * self.scale


def _oracle_builder(preset, in_channels, out_channels, nlat, nlon, grid, path=None, split="test"):
    return _Oracle(path, split, out_channels)


def _persistence_builder(preset, in_channels, out_channels, nlat, nlon, grid, **kw):
    return _Persistence(out_channels)


for _name, _b in (("_test_oracle", _oracle_builder), ("_test_persistence", _persistence_builder)):
    if _name not in _REGISTRY:
        register_model(_name)(_b)


def _checkpoint(file, data, name, grid=None, fields=None, **overrides):
    layout = data.layout.to_dict()
    if fields is not None:
        layout["fields"] = fields
        layout["stats"] = {k: v for k, v in layout["stats"].items() if k in fields}
    C = data.layout.n_channels
    g = grid or data.grid.to_dict()
    model = (_oracle_builder if name == "_test_oracle" else _persistence_builder)(
        None, N_IN * C, C, g["nlat"], g["nlon"], g["grid"], **overrides
    )
    spec = {"name": name, "preset": "tiny", "in_channels": N_IN * C, "out_channels": C, "overrides": overrides}
    return save_checkpoint(
        file,
        model=model,
        config={"trainer": {"n_in": N_IN}},
        stats=layout["stats"],
        grid=g,
        step=0,
        epoch=0,
        extra={"model_spec": spec, "layout": layout},
    )


@pytest.fixture
def tiny(make_tiny_dataset, tmp_path):
    path = make_tiny_dataset(
        tmp_path / "data", nlat=9, nlon=16, n_frames=N_FRAMES, splits={"train": [0, 1], "valid": [2], "test": [3, 4]}
    )
    return path, api.open_dataset(path, "test", n_in=N_IN)


def test_oracle_gives_zero_error(tiny, tmp_path):
    path, data = tiny
    ckpt = _checkpoint(tmp_path / "oracle.pt", data, "_test_oracle", path=str(path))
    model = api.load_model(ckpt, dataset=data)
    n_steps = 4
    res = evaluate(model, data, n_steps=n_steps, spectra_leads=[1, 4])["results"]
    # every valid init of both test trajectories: i = n_in-1 .. T-1-n_steps
    assert res["n_forecasts"] == 2 * (N_FRAMES - N_IN - n_steps + 1)
    for var, curve in res["metrics"]["vrmse"].items():
        assert len(curve) == n_steps and max(curve) < 1e-5, var
    for var in ("h", "u", "v"):
        assert max(res["metrics"]["rmse"][var]) < 1e-3 * res["climatology"]["h"] / 1000 + 1e-3, var
        assert min(res["metrics"]["acc"][var]) > 1 - 1e-6, var
    np.testing.assert_allclose(res["spectra"]["pred"]["h"], res["spectra"]["true"]["h"], rtol=1e-4)


def test_persistence_matches_hand_computed_errors(tiny, tmp_path):
    """Lead k of a forecast from frame i is compared with frame i + k: persistence error = |f(i) - f(i+k)|."""
    path, data = tiny
    model = api.load_model(_checkpoint(tmp_path / "p.pt", data, "_test_persistence"), dataset=data)
    n_steps = 3
    fc = api.rollout(model, data, n_steps=n_steps, init_stride=2)
    assert fc.fields["h"].shape == (2, len(fc.init_index), n_steps, 9, 16)
    np.testing.assert_array_equal(fc.init_index, np.arange(N_IN - 1, N_FRAMES - n_steps, 2))
    raw = data.read_frames(0, 0, N_FRAMES)
    i = fc.init_index[1]
    for k in range(1, n_steps + 1):
        np.testing.assert_allclose(fc.truth["h"][0, 1, k - 1], raw["h"][i + k])
        np.testing.assert_allclose(fc.fields["h"][0, 1, k - 1], raw["h"][i], rtol=1e-5)
    res = evaluate(model, data, n_steps=n_steps, init_stride=2)["results"]
    expected = [
        np.mean(
            [
                M.area_weighted_rmse(
                    torch.as_tensor(fc.fields["h"][:, :, k], dtype=torch.float64),
                    torch.as_tensor(fc.truth["h"][:, :, k], dtype=torch.float64),
                    data.grid,
                ).numpy()
            ]
        )
        for k in range(n_steps)
    ]
    np.testing.assert_allclose(res["metrics"]["rmse"]["h"], expected, rtol=1e-6)
    assert res["metrics"]["rmse"]["h"][0] > 0


def test_mismatched_grid_and_fields_refused(tiny, tmp_path):
    path, data = tiny
    other = {"nlat": 17, "nlon": 32, "grid": "equiangular"}
    ckpt = _checkpoint(tmp_path / "g.pt", data, "_test_persistence", grid=other)
    with pytest.raises(ValueError, match="nlat, nlon differ"):
        api.load_model(ckpt, dataset=data)
    # a resolution-free model may be run at another resolution when asked
    model = api.load_model(ckpt, dataset=data, allow_resolution_change=True)
    assert model.grid.shape == data.grid.shape
    lg = _checkpoint(
        tmp_path / "lg.pt", data, "_test_persistence", grid={"nlat": 9, "nlon": 16, "grid": "legendre-gauss"}
    )
    with pytest.raises(ValueError, match="grid differ"):
        api.load_model(lg, dataset=data)
    wrong = _checkpoint(tmp_path / "f.pt", data, "_test_persistence", fields={"h": "scalar"})
    with pytest.raises(ValueError, match="fields"):
        api.load_model(wrong, dataset=data)


def test_too_many_steps_names_the_fix(tiny, tmp_path):
    path, data = tiny
    model = api.load_model(_checkpoint(tmp_path / "p.pt", data, "_test_persistence"), dataset=data)
    with pytest.raises(ValueError, match="fewer steps"):
        api.rollout(model, data, n_steps=N_FRAMES)


def test_rollout_export_report_cli_in_process(tiny, tmp_path):
    path, data = tiny
    ckpt = _checkpoint(tmp_path / "run" / "best.pt", data, "_test_persistence")
    out = tmp_path / "roll"
    cfg = compose(
        "rollout",
        [
            f"checkpoint={ckpt}",
            "dataset=galewsky",
            f"dataset.path={path}",
            "n_steps=3",
            f"output_dir={out}",
            "save_forecasts=true",
            "include_truth=true",
            "spectra_leads=[1,3]",
            "progress=false",
        ],
    )
    r = rollout(cfg)
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["summary"]["next_step"]["vrmse"]["h"] == pytest.approx(r["results"]["metrics"]["vrmse"]["h"][0])
    assert "mean_1_3" in saved["summary"]
    lines = (out / "metrics.csv").read_text().splitlines()
    assert lines[0].startswith("lead_step") and len(lines) > 10
    for f in ("forecasts.nc", "sample_forecast.nc", "maps.png", "vrmse_vs_lead.png", "spectra.png", "spectra.csv"):
        assert (out / f).stat().st_size > 0, f
    with xr.open_dataset(out / "forecasts.nc") as ds:
        assert ds.h.dims == ("trajectory", "init_time", "lead_time", "lat", "lon")
        # init_time + lead_time is the time of the true frame, and the truth stored there is that frame (lat flipped)
        seconds = ((ds.init_time + ds.lead_time) - np.datetime64("2000-01-01")).values / np.timedelta64(1, "s")
        times = data.times(0)
        raw = data.read_frames(0, 0, N_FRAMES)["h"]
        assert list(ds.trajectory.values) == data.trajectory_ids
        for a in range(ds.sizes["init_time"]):
            for k in range(ds.sizes["lead_time"]):
                frame = int(np.flatnonzero(times == seconds[a, k])[0])
                np.testing.assert_array_equal(ds.h_truth.values[0, a, k], raw[frame][::-1])
        assert frame == N_FRAMES - 1  # the last forecast ends on the last frame
    with pytest.raises(FileExistsError):
        rollout(cfg)

    nc = tmp_path / "exp.nc"
    cfg = compose("export", [f"checkpoint={ckpt}", f"dataset.path={path}", f"output={nc}", "n_steps=2", "max_inits=2"])
    e = export(cfg)
    assert e["n_forecasts"] == 4 and nc.exists()
    with pytest.raises(FileExistsError):
        export(cfg)

    cfg = compose("report", [f"rollouts=[{out}]", f"output_dir={tmp_path / 'rep'}"])
    paths = report(cfg)
    assert all(Path(p).stat().st_size > 0 for p in paths.values())


@pytest.mark.parametrize("entry", ["rollout", "export"])
def test_cli_subprocess_smoke(tiny, tmp_path, entry):
    """One real process per entry point; the persistence model is registered in the fresh process by a plugin module."""
    path, data = tiny
    ckpt = _checkpoint(tmp_path / "run" / "best.pt", data, "_test_persistence")
    plug = tmp_path / "plug"
    plug.mkdir()
    (plug / "e2_persistence_plugin.py").write_text(
        "import torch.nn as nn\nfrom dandelion.registry import register_model\n"
        "class P(nn.Module):\n    resolution_dependent = False\n"
        "    def __init__(self, c):\n        super().__init__()\n        self.c = c\n"
        "        self.scale = nn.Parameter(__import__('torch').ones(()))\n"
        "    def forward(self, x):\n        return x[:, -self.c:] * self.scale\n"
        "register_model('_test_persistence')(\n"
        "    lambda preset, in_channels, out_channels, nlat, nlon, grid, **kw: P(out_channels)\n)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(plug), "OMP_NUM_THREADS": "1"}
    bindir = Path(sys.executable).parent
    if entry == "rollout":
        args = [
            str(bindir / "dandelion-rollout"),
            f"checkpoint={ckpt}",
            f"dataset.path={path}",
            "n_steps=2",
            "max_inits=1",
            f"output_dir={tmp_path / 'o'}",
            "plots=false",
            "progress=false",
            "plugins=[e2_persistence_plugin]",
        ]
        target = tmp_path / "o" / "metrics.json"
    else:
        args = [
            str(bindir / "dandelion-export"),
            f"checkpoint={ckpt}",
            f"dataset.path={path}",
            "n_steps=2",
            "max_inits=1",
            f"output={tmp_path / 'f.nc'}",
            "plugins=[e2_persistence_plugin]",
        ]
        target = tmp_path / "f.nc"
    p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert target.exists()


def test_stability_counts_blown_up_forecasts_and_gives_the_median(tiny, tmp_path):
    """Persistence never blows up, and its median VRMSE per lead is the median over forecasts of the per-forecast
    VRMSE (mean over variables) computed here from the forecasts themselves; a network that multiplies its state
    by 1000 every step blows up every forecast at the first lead."""
    path, data = tiny
    model = api.load_model(_checkpoint(tmp_path / "p.pt", data, "_test_persistence"), dataset=data)
    n_steps = 3
    res = evaluate(model, data, n_steps=n_steps)["results"]
    st = res["stability"]
    assert st["n_unstable"] == 0 and st["unstable_by_lead"] == [0] * n_steps and st["first_unstable_lead_step"] is None
    fc = api.rollout(model, data, n_steps=n_steps)
    per_fc = []
    w = torch.as_tensor(data.grid.weights, dtype=torch.float64)  # (nlat, 1) quadrature weights, sum 4 pi
    for name, comp in (("h", None), ("velocity", 0), ("velocity", 1)):  # the tiny dataset: h and the (u, v) components
        p, t = (torch.as_tensor(np.asarray(f[name]), dtype=torch.float64) for f in (fc.fields, fc.truth))
        if comp is not None:
            p, t = p[..., comp], t[..., comp]
        mean = lambda f: (f * w).sum((-2, -1)) / w.sum() / f.shape[-1]  # noqa: E731  area mean
        var = mean((t - mean(t)[..., None, None]) ** 2) + M.WELL_EPS
        per_fc.append(torch.sqrt(mean((p - t) ** 2) / var).flatten(0, 1).numpy())  # (forecasts, n_steps)
    np.testing.assert_allclose(st["median_vrmse"], np.median(np.mean(per_fc, 0), axis=0), rtol=1e-5)

    model.model.scale.data.fill_(1000.0)
    st = evaluate(model, data, n_steps=n_steps)["results"]["stability"]
    assert st["n_unstable"] == st["n_forecasts"] == res["n_forecasts"]
    assert st["first_unstable_lead_step"] == 1 and st["unstable_by_lead"] == [st["n_forecasts"]] * n_steps


def test_stability_counts_a_forecast_from_its_first_blow_up_on():
    """A forecast that exceeds the threshold once stays counted at later leads (even where its VRMSE dips again),
    a non-finite one counts too, and the median is over all forecasts with non-finite values ranked highest."""
    from dandelion.evaluation.scoring import UNSTABLE_VRMSE, _stability

    big = 2 * UNSTABLE_VRMSE
    v = np.array(
        [
            [0.1, 0.2, 0.3],
            [0.1, big, 0.5],  # blows up at lead 2, dips below the threshold at lead 3
            [0.2, 0.3, float("nan")],  # not finite at lead 3
            [0.3, 0.4, 0.6],
        ]
    )
    st = _stability(v)
    assert st["unstable_by_lead"] == [0, 1, 2] and st["n_unstable"] == 2 and st["first_unstable_lead_step"] == 2
    assert st["median_vrmse"] == pytest.approx([0.15, 0.35, 0.55])
