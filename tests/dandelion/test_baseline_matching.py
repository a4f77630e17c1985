"""Parameter matching on every leaderboard grid, SFNO's width rule, the table, and checkpoint round trips."""

from __future__ import annotations

import pytest
import torch

import dandelion
from dandelion.baselines import LEADERBOARD_GRIDS, format_parameter_table, parameter_table_per_grid
from dandelion.baselines.sfno import SFNO_PRESETS, sfno_band_limit, sfno_parameter_count
from dandelion.baselines.table import BENCHMARK_MODELS
from dandelion.checkpoint import load_checkpoint, model_from_checkpoint, save_checkpoint
from dandelion.registry import count_parameters

BASELINES = [n for n in BENCHMARK_MODELS if n != "dandelion"]
C_IN, C_OUT = 16, 4


def _count(name, preset, nlat, nlon, grid="equiangular", **overrides):
    return count_parameters(dandelion.build_model(name, preset, C_IN, C_OUT, nlat, nlon, grid, **overrides))


def test_every_registered_baseline_is_in_the_table():
    assert {"sfno", "disco", "flower2d", "s2transformer", "fno"} <= set(BASELINES)
    assert set(BENCHMARK_MODELS) <= set(dandelion.available_models())


@pytest.mark.parametrize("shape", LEADERBOARD_GRIDS)
@pytest.mark.parametrize("preset", ["tiny", "small"])
@pytest.mark.parametrize("name", BASELINES)
def test_parameter_band_on_every_leaderboard_grid(name, preset, shape):
    """Each model is built on the grid itself (no shortcut through a probe grid)."""
    ref = _count("dandelion", preset, *shape)
    n = _count(name, preset, *shape)
    assert 0.9 <= n / ref <= 1.1, f"{name}/{preset} at {shape}: {n} parameters vs dandelion {ref} ({n / ref:.3f}x)"


def test_table_prints_every_model_preset_and_grid():
    rows = parameter_table_per_grid()
    seen = {(r["model"], r["preset"], (r["nlat"], r["nlon"])) for r in rows}
    expected = {(m, p, g) for m in BENCHMARK_MODELS for p in ("tiny", "small") for g in LEADERBOARD_GRIDS}
    assert seen == expected
    text = format_parameter_table(rows)
    for r in rows:
        assert f"{r['n_parameters']:,}" in text
    sfno = {(r["preset"], r["nlat"]): r["n_parameters"] for r in rows if r["model"] == "sfno"}
    assert sfno[("small", 32)] == _count("sfno", "small", 32, 64)


@pytest.mark.parametrize(
    "shape, grid, overrides",
    [
        ((32, 64), "equiangular", {}),
        ((64, 128), "legendre-gauss", {}),
        ((16, 32), "equiangular", {"normalization_layer": "instance_norm", "lmax": 5}),
        ((32, 64), "legendre-gauss", {"normalization_layer": "instance_norm"}),
        ((32, 64), "equiangular", {"mlp_ratio": 1.5, "num_layers": 2, "position_channels": False}),
        ((32, 64), "equiangular", {"embed_dim": 5, "lmax": 9}),
    ],
)
def test_sfno_closed_form_count_is_the_built_count(shape, grid, overrides):
    model = dandelion.build_model("sfno", "tiny", C_IN, C_OUT, *shape, grid, **overrides)
    cfg = {**SFNO_PRESETS["tiny"], **overrides}
    e = model.sfno.embed_dim
    assert count_parameters(model) == sfno_parameter_count(
        e,
        model.lmax,
        C_IN,
        C_OUT,
        num_layers=cfg["num_layers"],
        mlp_ratio=cfg["mlp_ratio"],
        position_channels=cfg["position_channels"],
        normalization_layer=cfg["normalization_layer"],
    )


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_sfno_width_follows_the_band_limit(preset):
    cfg = SFNO_PRESETS[preset]
    at_ref = dandelion.build_model("sfno", preset, C_IN, C_OUT, *cfg["matched_at"])
    assert at_ref.sfno.embed_dim == cfg["matched_embed_dim"]  # the reference point is reproduced
    coarse = dandelion.build_model("sfno", preset, C_IN, C_OUT, 16, 32)
    assert coarse.lmax < at_ref.lmax or preset == "tiny"
    widths = {}
    for nlat, nlon in [(16, 32), (32, 64), (34, 64), (64, 128)]:
        m = dandelion.build_model("sfno", preset, C_IN, C_OUT, nlat, nlon)
        widths.setdefault(m.lmax, set()).add(m.sfno.embed_dim)
    assert all(len(w) == 1 for w in widths.values()), widths  # one width per band limit
    by_l = sorted((lmax, w.pop()) for lmax, w in widths.items())
    assert all(a[1] >= b[1] for a, b in zip(by_l, by_l[1:]))  # a higher band limit never widens the model


def test_sfno_layer_norm_needs_an_explicit_width():
    with pytest.raises(ValueError, match="embed_dim"):
        dandelion.build_model("sfno", "tiny", C_IN, C_OUT, 32, 64, normalization_layer="layer_norm")
    m = dandelion.build_model("sfno", "tiny", C_IN, C_OUT, 32, 64, normalization_layer="layer_norm", embed_dim=6)
    assert m.sfno.embed_dim == 6


def test_sfno_explicit_width_is_kept_on_every_grid():
    for shape in [(32, 64), (64, 128)]:
        assert dandelion.build_model("sfno", "small", C_IN, C_OUT, *shape, embed_dim=20).sfno.embed_dim == 20
    assert sfno_band_limit(64, 128, "equiangular", 2) == 2 * sfno_band_limit(32, 64, "equiangular", 2)


@pytest.mark.parametrize("name", BASELINES)
def test_checkpoint_round_trip(name, tmp_path):
    """``save_checkpoint`` then ``model_from_checkpoint`` rebuilds the model with the same outputs."""
    torch.manual_seed(0)
    model = dandelion.build_model(name, "tiny", C_IN, C_OUT, 32, 64, "equiangular").eval()
    spec = {"name": name, "preset": "tiny", "in_channels": C_IN, "out_channels": C_OUT, "overrides": {}}
    grid = {"nlat": 32, "nlon": 64, "grid": "equiangular"}
    path = save_checkpoint(
        tmp_path / "ckpt.pt", model=model, config={}, stats={}, grid=grid, step=3, epoch=0, extra={"model_spec": spec}
    )
    ckpt = load_checkpoint(path)  # weights_only=True
    torch.manual_seed(1)
    again = model_from_checkpoint(ckpt)
    x = torch.randn(2, C_IN, 32, 64)
    with torch.no_grad():
        assert torch.equal(model(x), again(x))
    if model.resolution_dependent:
        with pytest.raises(ValueError, match="resolution"):
            model_from_checkpoint(ckpt, nlat=64, nlon=128, allow_resolution_change=True)
    else:
        moved = model_from_checkpoint(ckpt, nlat=64, nlon=128, allow_resolution_change=True)
        assert moved(torch.randn(1, C_IN, 64, 128)).shape == (1, C_OUT, 64, 128)
