"""bf16 autocast on CPU for every registered model: finite outputs and gradients, spectral transforms in float32."""

from __future__ import annotations

import pytest
import torch

import dandelion
from dandelion.baselines.sfno import Float32Transform

MODELS = ["dandelion", "sfno", "disco", "flower2d", "s2transformer", "fno"]
C_IN, C_OUT, NLAT, NLON = 8, 4, 16, 32


@pytest.mark.parametrize("name", MODELS)
def test_bf16_autocast_cpu_finite_outputs_and_gradients(name):
    torch.manual_seed(0)
    model = dandelion.build_model(name, "tiny", C_IN, C_OUT, NLAT, NLON, "equiangular")
    x = torch.randn(2, C_IN, NLAT, NLON, requires_grad=True)
    extra = 3 if getattr(model, "advects_state", False) else 0  # Dandelion's presets: the displacement's channels
    with torch.no_grad():
        ref = model(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = model(x)
    assert y.shape == (2, C_OUT + extra, NLAT, NLON)
    # the network's own channels (the displacement stays float32 by design: test_advection.py)
    ref, y = ref[:, :C_OUT], y[:, :C_OUT]
    assert torch.isfinite(y).all()
    # bf16 keeps about 3 significant digits: the output follows the float32 one to a few per cent of its spread
    err = (y.float() - ref).square().mean().sqrt() / ref.std()
    assert err < 0.1, f"{name}: bf16 output departs from float32 by {err:.3f} of its spread"
    y.float().square().mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


def test_sfno_transforms_run_in_float32_under_autocast():
    torch.manual_seed(0)
    model = dandelion.build_model("sfno", "tiny", C_IN, C_OUT, NLAT, NLON, "equiangular")
    wrapped = [m for m in model.modules() if isinstance(m, Float32Transform)]
    assert len(wrapped) == 4  # trans_down, itrans_up, trans, itrans
    down = model.sfno.trans_down
    x = torch.randn(3, NLAT, NLON)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        coeffs = down(x)
    assert coeffs.dtype == torch.complex64
    assert torch.equal(coeffs, down.transform(x))  # the very numbers of a float32 transform
    # every spectral convolution of the network uses the wrapped transforms
    for block in model.sfno.blocks:
        assert isinstance(block.global_conv.forward_transform, Float32Transform)
        assert isinstance(block.global_conv.inverse_transform, Float32Transform)
