"""The spherical-transformer and FNO baselines: construction, the libraries' layers, kernels and precision."""

from __future__ import annotations

import pytest
import torch
from torch_harmonics import NeighborhoodAttentionS2

import dandelion
from dandelion.baselines.s2transformer import S2Transformer, _Float32Attention

C_IN, C_OUT = 16, 4


@pytest.mark.parametrize("shape", [(32, 64), (64, 128)])
@pytest.mark.parametrize("name", ["s2transformer", "fno"])
@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_build_both_grids_and_forward(name, preset, shape):
    torch.manual_seed(0)
    model = dandelion.build_model(name, preset, C_IN, C_OUT, *shape)
    assert not model.resolution_dependent
    with torch.no_grad():
        y = model(torch.randn(2, C_IN, *shape))
    assert y.shape == (2, C_OUT, *shape) and torch.isfinite(y).all()
    with pytest.raises(ValueError, match="expected input"):
        model(torch.randn(2, C_IN, shape[0], shape[1] // 2))


def test_s2transformer_uses_torch_harmonics_neighbourhood_attention():
    model = dandelion.build_model("s2transformer", "tiny", C_IN, C_OUT, 32, 64)
    attn = [m for m in model.modules() if isinstance(m, NeighborhoodAttentionS2)]
    assert len(attn) == len(model.blocks) == 4
    assert all(a.theta_cutoff == pytest.approx(2 * torch.pi / 16) for a in attn)  # radians, fixed by the preset
    assert model.internal_shape == (16, 32)
    # the radius does not follow the grid: the same disk on a finer grid
    fine = dandelion.build_model("s2transformer", "tiny", C_IN, C_OUT, 64, 128)
    assert [m.theta_cutoff for m in fine.modules() if isinstance(m, NeighborhoodAttentionS2)] == [
        a.theta_cutoff for a in attn
    ]


def test_s2transformer_attention_runs_in_float32_under_autocast():
    torch.manual_seed(0)
    model = dandelion.build_model("s2transformer", "tiny", 8, C_OUT, 16, 32)
    wrapped = [m for m in model.modules() if isinstance(m, _Float32Attention)]
    assert len(wrapped) == len(model.blocks)
    x = torch.randn(2, model.blocks[0].self_attn.attn.in_channels, *model.internal_shape)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = wrapped[0](x.bfloat16())
    assert y.dtype == torch.float32
    with torch.no_grad():
        torch.testing.assert_close(y, wrapped[0].attn(x.bfloat16().float()))


def test_s2transformer_torch_kernels_match_compiled():
    torch.manual_seed(0)
    model = dandelion.build_model("s2transformer", "tiny", 8, C_OUT, 16, 32).eval()
    if not model.optimized_kernel:
        pytest.skip("torch-harmonics' compiled kernels are not installed")
    weights = {k: v.clone() for k, v in model.state_dict().items() if torch.is_tensor(v)}
    x = torch.randn(1, 8, 16, 32)
    with torch.no_grad():
        y_opt = model(x)
        model.use_torch_kernels()
        y_torch = model(x)
    assert not model.optimized_kernel
    assert all(not getattr(m, "optimized_kernel", False) for m in model.modules())
    for k, v in model.state_dict().items():
        if torch.is_tensor(v):
            assert torch.equal(v, weights[k]), k
    torch.testing.assert_close(y_torch, y_opt, rtol=1e-4, atol=1e-5)


def test_s2transformer_switches_kernels_when_moved_to_cuda(monkeypatch):
    """Without a GPU, parameters are reported as on CUDA and the move is a no-op ``.to("cpu")``."""
    model = dandelion.build_model("s2transformer", "tiny", 8, C_OUT, 16, 32)
    if not model.optimized_kernel:
        pytest.skip("torch-harmonics' compiled kernels are not installed")
    monkeypatch.setattr("dandelion.baselines.s2transformer._attention_cuda_available", lambda: False)
    monkeypatch.setattr(S2Transformer, "_on_cuda", lambda self: True)
    with pytest.warns(UserWarning, match="pure-torch"):
        model.to("cpu")
    assert not model.optimized_kernel
    assert all(not getattr(m, "optimized_kernel", False) for m in model.modules())
    assert model(torch.randn(1, 8, 16, 32)).shape == (1, C_OUT, 16, 32)


def test_fno_is_neuraloperators_fno():
    """Same numbers as ``neuralop.models.FNO`` with the model's arguments and weights."""
    from neuralop.models import FNO

    torch.manual_seed(0)
    model = dandelion.build_model("fno", "tiny", C_IN, C_OUT, 32, 64).eval()
    ref = FNO(**model.fno_kwargs).eval()
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("_extra_state")}
    ref.load_state_dict(state, strict=True)
    x = torch.randn(2, C_IN, 32, 64)
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref(model.position(x)), rtol=0, atol=0)
    assert "_metadata" not in model.state_dict()  # neuraloperator's BaseModel entry is not carried
    assert any(p.is_complex() for p in model.parameters())


def test_fno_latitude_is_zero_padded_not_periodic():
    """The presets' latitude padding weakens the wrap of the 2-D FFT from the last row to the first one."""
    torch.manual_seed(0)
    padded = dandelion.build_model("fno", "tiny", C_IN, C_OUT, 32, 64).eval()
    torch.manual_seed(0)
    periodic = dandelion.build_model("fno", "tiny", C_IN, C_OUT, 32, 64, domain_padding=(0.0, 0.0)).eval()
    periodic.load_state_dict(padded.state_dict())
    x = torch.randn(1, C_IN, 32, 64)
    dx = torch.zeros_like(x)
    dx[..., -1, :] = 1.0

    def top_row_response(m):
        with torch.no_grad():
            return (m(x + dx) - m(x))[..., 0, :].abs().mean()

    assert top_row_response(padded) < top_row_response(periodic)


def test_s2transformer_class_checks_its_radii():
    with pytest.raises(ValueError, match="theta_cutoff"):
        S2Transformer(C_IN, C_OUT, 32, 64, theta_cutoff=2.0, scale_factor=2)
