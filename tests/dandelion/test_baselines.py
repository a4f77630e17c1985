"""Baselines: interface, gradients, parameter matching, checkpoints and the resolution guard."""

from __future__ import annotations

import io
import re

import pytest
import torch
import torch.nn as nn

import dandelion
from dandelion.baselines import PRESET_RESOLUTIONS, count_real_parameters, parameter_count
from dandelion.baselines.flower2d import SelfWarp2d
from dandelion.grid_guard import allow_grid_change
from dandelion.registry import build_model, unwrap_model, unwrap_state_dict

BASELINES = ["sfno", "disco", "flower2d", "s2transformer", "fno"]
RESOLUTION_FREE = ["disco", "flower2d", "s2transformer", "fno"]
GRIDS = ["equiangular", "legendre-gauss"]
C_IN, C_OUT = 16, 4


def _build(name, nlat=32, nlon=64, grid="equiangular", preset="tiny", seed=0):
    torch.manual_seed(seed)
    return dandelion.build_model(name, preset, C_IN, C_OUT, nlat, nlon, grid)


def _roundtrip(state_dict) -> dict:
    buf = io.BytesIO()
    torch.save(state_dict, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("shape", [(32, 64), (64, 128)])
@pytest.mark.parametrize("name", BASELINES)
def test_shape_and_finite_gradients(name, shape, grid):
    nlat, nlon = shape
    model = _build(name, nlat, nlon, grid)
    x = torch.randn(1, C_IN, nlat, nlon, requires_grad=True)
    y = model(x)
    assert y.shape == (1, C_OUT, nlat, nlon)
    assert torch.isfinite(y).all()
    y.square().mean().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


@pytest.mark.parametrize("name", BASELINES)
def test_registered_with_truthful_resolution_flag(name):
    assert name in dandelion.available_models()
    small, large = _build(name, 32, 64), _build(name, 64, 128)
    shapes_small = {k: v.shape for k, v in small.state_dict().items() if torch.is_tensor(v)}
    shapes_large = {k: v.shape for k, v in large.state_dict().items() if torch.is_tensor(v)}
    # resolution_dependent must say whether the weight shapes change with the grid
    assert small.resolution_dependent == (shapes_small != shapes_large)


def test_disco_tables_are_not_in_the_state_dict():
    keys = _build("disco").state_dict().keys()
    assert not [k for k in keys if "psi" in k]


@pytest.mark.parametrize("preset", ["tiny", "small", "paper"])
@pytest.mark.parametrize("name", BASELINES)
def test_parameter_count_matches_dandelion(name, preset):
    if "dandelion" not in dandelion.available_models():
        pytest.skip("dandelion model not registered yet (dandelion/model.py)")
    nlat, nlon = PRESET_RESOLUTIONS[preset]
    ref = parameter_count("dandelion", preset, nlat, nlon)["n_parameters"]
    n = parameter_count(name, preset, nlat, nlon)["n_parameters"]
    assert abs(n / ref - 1.0) <= 0.10, f"{name}/{preset}: {n} parameters vs dandelion {ref}"


def test_complex_parameters_count_twice():
    sfno = _build("sfno")
    n_complex = sum(p.numel() for p in sfno.parameters() if p.is_complex())
    assert n_complex > 0
    assert count_real_parameters(sfno) == sum(p.numel() for p in sfno.parameters()) + n_complex


def test_speed_helper_and_parameter_table_count_the_same_real_scalars():
    """``dandelion-bench`` rows (speed tables) and ``parameter_count`` (parameter tables) quote one number for SFNO."""
    from dandelion.benchmarks.speed.models import measure_group

    sfno = _build("sfno")
    n_real = sum(p.numel() * (2 if p.is_complex() else 1) for p in sfno.parameters())
    spec = {
        "preset": "tiny",
        "nlat": 32,
        "nlon": 64,
        "grid": "equiangular",
        "batch": 1,
        "dtype": "fp32",
        "device": "cpu",
        "in_channels": C_IN,
        "out_channels": C_OUT,
        "n_warmup": 0,
        "n_repeat": 1,
    }
    (row,) = measure_group(["sfno"], spec)
    assert row["n_parameters"] == n_real == parameter_count("sfno", "tiny", 32, 64)["n_parameters"]


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("name", BASELINES)
def test_state_dict_roundtrip_bit_identical(name, grid):
    a = _build(name, grid=grid, seed=0).eval()
    b = _build(name, grid=grid, seed=1).eval()
    x = torch.randn(2, C_IN, 32, 64)
    b.load_state_dict(_roundtrip(a.state_dict()), strict=True)
    with torch.no_grad():
        assert torch.equal(a(x), b(x))


@pytest.mark.parametrize("name", BASELINES)
def test_sequential_and_compile_wrappers_load_strict(name):
    a = _build(name, seed=0).eval()
    wrapped = torch.compile(nn.Sequential(a))  # lazy: nothing is compiled until called
    assert unwrap_model(wrapped) is a
    b = _build(name, seed=1).eval()
    b_wrapped = nn.Sequential(b)
    unwrap_model(b_wrapped).load_state_dict(_roundtrip(unwrap_model(wrapped).state_dict()), strict=True)
    x = torch.randn(1, C_IN, 32, 64)
    with torch.no_grad():
        assert torch.equal(a(x), b_wrapped(x))


@pytest.fixture(scope="module")
def gloo_group(tmp_path_factory):
    import torch.distributed as dist

    if dist.is_initialized():  # another test module already made one: reuse it
        yield
        return
    store = dist.FileStore(str(tmp_path_factory.mktemp("gloo") / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("name", BASELINES)
def test_ddp_wrapper_loads_strict(name, gloo_group):
    a = _build(name, seed=0)
    ddp = nn.parallel.DistributedDataParallel(a)
    assert unwrap_model(ddp) is a
    saved = _roundtrip(ddp.state_dict())  # keys carry "module."
    b = _build(name, seed=1).eval()
    b.load_state_dict(unwrap_state_dict(saved), strict=True)
    ddp_b = nn.parallel.DistributedDataParallel(_build(name, seed=2))
    unwrap_model(ddp_b).load_state_dict(_roundtrip(unwrap_model(ddp).state_dict()), strict=True)
    x = torch.randn(1, C_IN, 32, 64)
    a.eval(), ddp_b.eval()
    with torch.no_grad():
        assert torch.equal(a(x), b(x))
        assert torch.equal(a(x), ddp_b(x))


@pytest.mark.parametrize(
    "saved_shape, new_shape",
    [
        ((32, 64), (64, 128)),  # weight shapes differ
        ((32, 64), (34, 64)),  # same weight shapes (lmax 16 for both): must still be refused
    ],
)
def test_sfno_refuses_another_resolution(saved_shape, new_shape):
    a = _build("sfno", *saved_shape)
    b = _build("sfno", *new_shape)
    with pytest.raises(ValueError) as err:
        b.load_state_dict(_roundtrip(a.state_dict()))
    msg = str(err.value)
    assert f"({saved_shape[0]}, {saved_shape[1]}, 'equiangular')" in msg
    assert f"({new_shape[0]}, {new_shape[1]}, 'equiangular')" in msg


@pytest.mark.parametrize("name", RESOLUTION_FREE)
def test_resolution_free_models_load_at_another_resolution(name):
    a = _build(name, 32, 64)
    b = _build(name, 64, 128, seed=1)
    b.load_state_dict(_roundtrip(a.state_dict()), strict=True)
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        if torch.is_tensor(va):
            assert torch.equal(va, vb), k


@pytest.mark.parametrize("name", BASELINES)
def test_grid_type_mismatch_refused_unless_allowed(name):
    a = _build(name, grid="equiangular")
    b = _build(name, grid="legendre-gauss", seed=1)
    sd = _roundtrip(a.state_dict())
    with pytest.raises(ValueError, match="grid type differs"):
        b.load_state_dict(sd)
    with allow_grid_change(b):
        b.load_state_dict(sd)
    assert b.grid_guard_strict


def test_disco_torch_kernels_match_optimized():
    model = _build("disco").eval()
    if not model.optimized_kernel:
        pytest.skip("torch-harmonics' compiled DISCO kernels are not installed")
    x = torch.randn(1, C_IN, 32, 64)
    with torch.no_grad():
        y_opt = model(x)
        model.use_torch_kernels()
        y_torch = model(x)
    assert not model.optimized_kernel
    torch.testing.assert_close(y_torch, y_opt, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(5, 12), (8, 16)])
def test_flower_warp_identity_and_periodic_shift(shape):
    """Zero displacement returns the values; a displacement of k columns is a periodic roll by k."""
    torch.manual_seed(0)
    nlat, nlon = shape
    warp = SelfWarp2d(8, 2, 4).double()
    x = torch.randn(2, 8, nlat, nlon, dtype=torch.float64)
    v = warp.value(x)
    torch.testing.assert_close(warp(x), v, rtol=0, atol=1e-12)
    for k in (1, 3, -2):
        with torch.no_grad():
            warp.disp[-1].bias.zero_()
            warp.disp[-1].bias[0::2] = 2.0 * k / nlon  # normalised: 2 = one full turn in longitude
        torch.testing.assert_close(warp(x), torch.roll(v, -k, dims=-1), rtol=0, atol=1e-10)
    # half a row towards the last row: average of neighbouring rows, zero beyond the last row
    with torch.no_grad():
        warp.disp[-1].bias.zero_()
        warp.disp[-1].bias[1::2] = 1.0 / (nlat - 1)
    out = warp(x)
    torch.testing.assert_close(out[..., :-1, :], 0.5 * (v[..., :-1, :] + v[..., 1:, :]), rtol=0, atol=1e-10)
    torch.testing.assert_close(out[..., -1, :], 0.5 * v[..., -1, :], rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "name, overrides, match",
    [
        ("sfno", {"lmax": 99}, "lmax=99"),
        ("disco", {"theta_cutoff": -1.0}, "theta_cutoff"),
        ("flower2d", {"heads": 5}, "divisible"),
        ("flower2d", {"not_a_key": 1}, "unknown override"),
        ("s2transformer", {"num_heads": 5}, "num_heads=5"),
        ("s2transformer", {"attention_cutoff": 4.0}, "attention_cutoff"),
        ("fno", {"n_modes": (8,)}, "n_modes"),
        ("fno", {"domain_padding": (1.5, 0.0)}, "domain_padding"),
    ],
)
def test_bad_configuration_raises(name, overrides, match):
    with pytest.raises(ValueError, match=match):
        dandelion.build_model(name, "tiny", C_IN, C_OUT, 32, 64, "equiangular", **overrides)


@pytest.mark.parametrize(
    "name, reason",
    [("disco", r"2\*\*\(levels-1\)"), ("flower2d", r"2\*\*\(levels-1\)"), ("s2transformer", "scale_factor=")],
)
def test_bad_nlon_raises(name, reason):
    with pytest.raises(ValueError, match="nlon=63") as e:
        dandelion.build_model(name, "tiny", C_IN, C_OUT, 32, 63, "equiangular")
    assert re.search(reason, str(e.value)), str(e.value)  # the divisor's origin in this model


def test_parameter_table_rows():
    from dandelion.baselines import parameter_table

    rows = parameter_table(resolutions={"tiny": (32, 64)})
    names = [r["model"] for r in rows]
    assert set(BASELINES) <= set(names)
    for r in rows:
        assert r["n_parameters"] > 0 and r["preset"] == "tiny" and (r["nlat"], r["nlon"]) == (32, 64)
        if "dandelion" in names:
            ref = next(x for x in rows if x["model"] == "dandelion")["n_parameters"]
            assert r["ratio_to_dandelion"] == pytest.approx(r["n_parameters"] / ref)


def test_disco_switches_kernels_when_moved_to_cuda(monkeypatch):
    """The move hook (``_apply``) rebuilds the DISCO layers on the torch path, keeping the weights.

    Without a GPU, the CUDA check is patched to True and the move is a no-op ``.to("cpu")``.
    """
    from dandelion.baselines.disco import DiscoUNet

    model = _build("disco").eval()
    if not model.optimized_kernel:
        pytest.skip("torch-harmonics' compiled DISCO kernels are not installed")
    weights = {k: v.clone() for k, v in model.state_dict().items() if torch.is_tensor(v)}
    x = torch.randn(1, C_IN, 32, 64)
    with torch.no_grad():
        y_opt = model(x)
    monkeypatch.setattr(DiscoUNet, "_on_cuda", lambda self: True)
    with pytest.warns(UserWarning, match="pure-torch"):
        model.to("cpu")
    assert not model.optimized_kernel
    assert all(not getattr(m, "optimized_kernel", False) for m in model.modules() if m is not model)
    for k, v in model.state_dict().items():
        if torch.is_tensor(v):
            assert torch.equal(v, weights[k]), k
    with torch.no_grad():
        torch.testing.assert_close(model(x), y_opt, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", BASELINES)
def test_odd_row_grid(name):
    """An odd number of rows (as 721x1440) works: zero-padded/ceil-halved levels."""
    model = _build(name, 33, 64)
    assert model(torch.randn(1, C_IN, 33, 64)).shape == (1, C_OUT, 33, 64)


def test_a_misspelt_override_gets_a_did_you_mean():
    with pytest.raises(ValueError, match="did you mean 'width'"):
        build_model("dandelion", "tiny", 16, 4, 32, 64, "equiangular", widht=8)
