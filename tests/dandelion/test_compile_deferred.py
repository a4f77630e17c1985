"""dandelion/compiled.py's compile_deferred: torch.compile made on a function's first call, not when it is wrapped,
so that importing torch-harmonics (which wraps a method at import) does not import torch's compiler stack; and the
jobs' imports (export, checkpoint loading, building Dandelion) stay free of it (docs/jobs/export.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from dandelion.compiled import compile_deferred


class FakeCompile:
    """A torch.compile that records its calls and returns ``fn`` scaled by 10 (or raises ``error``)."""

    def __init__(self, error: Exception | None = None):
        self.calls, self.error = [], error

    def __call__(self, fn, **options):
        self.calls.append(options)
        if self.error is not None:
            raise self.error
        return lambda *a, **k: 10 * fn(*a, **k)


def _double(x):
    return 2 * x


@pytest.mark.parametrize(
    "error, expected",
    [
        (None, 60),  # compiled on the first call
        (RuntimeError("torch.compile is not supported on Python 3.15+"), 6),  # refused: eager, as torch-harmonics
    ],
)
def test_compile_is_made_on_the_first_call_once(monkeypatch, error, expected):
    fake = FakeCompile(error)
    monkeypatch.setattr(torch, "compile", fake)
    with compile_deferred():
        wrapped = torch.compile(_double, dynamic=True)
        decorated = torch.compile(mode="default")(_double)
    assert torch.compile is fake and fake.calls == []  # restored, and nothing compiled yet
    assert [wrapped(3), wrapped(3)] == [expected, expected] and fake.calls == [{"dynamic": True}]
    assert decorated(3) == expected and fake.calls[-1] == {"mode": "default"}
    assert wrapped.__name__ == "_double"


def test_another_compile_error_is_raised_at_the_first_call(monkeypatch):
    monkeypatch.setattr(torch, "compile", FakeCompile(RuntimeError("no C++ compiler")))
    with compile_deferred():
        wrapped = torch.compile(_double)
    with pytest.raises(RuntimeError, match="no C\\+\\+ compiler"):
        wrapped(3)


def test_a_module_is_compiled_at_once(monkeypatch):
    fake = FakeCompile()
    monkeypatch.setattr(torch, "compile", fake)
    with compile_deferred():
        torch.compile(torch.nn.Identity())
    assert len(fake.calls) == 1


def test_the_export_job_and_dandelion_import_no_compiler_stack():
    """A fresh process that imports dandelion-export's job, loads checkpoints' modules and builds Dandelion has not
    imported torch's compiler (torch._dynamo, torch._inductor, triton) nor the baselines, and torch.compile is torch's
    own again."""
    code = (
        "import sys, json, torch\n"
        "import dandelion.cli.export, dandelion.checkpoint, dandelion.export.stream\n"
        "from dandelion.registry import build_model\n"
        "build_model('dandelion', preset='tiny', nlat=16, nlon=32)\n"
        "print(json.dumps({'loaded': [m for m in ('torch._dynamo', 'torch._inductor', 'triton', 'dandelion.baselines')"
        " if m in sys.modules], 'compile': torch.compile.__module__}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"loaded": [], "compile": "torch"}
