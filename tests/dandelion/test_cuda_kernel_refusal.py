"""DISCO and S2 attention on CUDA without torch-harmonics' CUDA kernels: refused on large grids, opt-in builds.

No GPU is needed: the models' CUDA check (``_on_cuda``) is patched to True and the move is a no-op
``.to("cpu")``; the grid limit is lowered so that the models stay tiny (the check compares the data grid's
points with the module's ``TORCH_PATH_MAX_POINTS``).
"""

from __future__ import annotations

import pytest
import torch

import dandelion
from dandelion.baselines import disco as disco_mod
from dandelion.baselines import s2transformer as s2_mod

CASES = [
    ("disco", disco_mod, disco_mod.DiscoUNet, "DISCO path"),
    ("s2transformer", s2_mod, s2_mod.S2Transformer, "attention"),
]


def _no_cuda_kernels(monkeypatch, cls):
    monkeypatch.setattr(cls, "_on_cuda", lambda self: True)
    monkeypatch.setattr(disco_mod, "cuda_kernels_available", lambda: False)
    monkeypatch.setattr(s2_mod, "cuda_kernels_available", lambda: False)
    monkeypatch.setattr(s2_mod, "_attention_cuda_available", lambda: False)


@pytest.mark.parametrize(("name", "mod", "cls", "path"), CASES)
def test_a_large_grid_on_cuda_without_cuda_kernels_is_refused_in_one_line(monkeypatch, name, mod, cls, path):
    model = dandelion.build_model(name, "tiny", 4, 2, 16, 32)
    monkeypatch.setattr(mod, "TORCH_PATH_MAX_POINTS", 16 * 32 - 1)
    _no_cuda_kernels(monkeypatch, cls)
    with pytest.raises(ValueError) as err:
        model.to("cpu")
    msg = str(err.value)
    assert "\n" not in msg
    assert f"pure-torch {path}" in msg and "16x32" in msg
    assert "build_torch_harmonics_cuda.py" in msg and "allow_slow_kernels=true" in msg


@pytest.mark.parametrize(("name", "mod", "cls", "path"), CASES)
def test_the_explicit_opt_in_builds_and_runs_the_torch_path(monkeypatch, name, mod, cls, path):
    model = dandelion.build_model(name, "tiny", 4, 2, 16, 32, allow_slow_kernels=True)
    monkeypatch.setattr(mod, "TORCH_PATH_MAX_POINTS", 16 * 32 - 1)
    _no_cuda_kernels(monkeypatch, cls)
    with pytest.warns(UserWarning, match="pure-torch") if model.optimized_kernel else _nothing():
        model.to("cpu")
    assert not model.optimized_kernel
    assert model(torch.randn(1, 4, 16, 32)).shape == (1, 2, 16, 32)


@pytest.mark.parametrize(("name", "mod", "cls", "path"), CASES)
def test_with_cuda_kernels_the_compiled_layers_stay(monkeypatch, name, mod, cls, path):
    model = dandelion.build_model(name, "tiny", 4, 2, 16, 32)
    if not model.optimized_kernel:
        pytest.skip("torch-harmonics' compiled kernels are not installed")
    monkeypatch.setattr(mod, "TORCH_PATH_MAX_POINTS", 1)
    monkeypatch.setattr(cls, "_on_cuda", lambda self: True)
    monkeypatch.setattr(disco_mod, "cuda_kernels_available", lambda: True)
    monkeypatch.setattr(s2_mod, "cuda_kernels_available", lambda: True)
    monkeypatch.setattr(s2_mod, "_attention_cuda_available", lambda: True)
    model.to("cpu")
    assert model.optimized_kernel
    assert any(getattr(m, "optimized_kernel", False) for m in model.modules() if m is not model)


def _nothing():
    import contextlib

    return contextlib.nullcontext()
