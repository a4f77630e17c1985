"""A tiny pointwise model registered as ``"_pointwise_test"``, for tests where the model is not the point.

Import this module (or pass ``plugins=[tiny_model]`` with ``tests/helpers`` on ``PYTHONPATH``) to register it.
"""

import atexit
import os
from pathlib import Path

import torch
import torch.nn as nn

from dandelion.registry import register_model
from dandelion.training.trainer import parameter_hash


class PointwiseTest(nn.Module):
    """``x -> W2 gelu(W1 x)`` per grid point, (B, in_channels, nlat, nlon) -> (B, out_channels, nlat, nlon)."""

    resolution_dependent = False

    def __init__(self, in_channels, out_channels, width=8, resolution_dependent=False):
        super().__init__()
        self.resolution_dependent = bool(resolution_dependent)  # a test may pretend weights depend on the grid
        self.net = nn.Sequential(nn.Conv2d(in_channels, width, 1), nn.GELU(), nn.Conv2d(width, out_channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@register_model("_pointwise_test")
def build_pointwise_test(
    preset="tiny", in_channels=16, out_channels=4, nlat=32, nlon=64, grid="equiangular", **overrides
):
    model = PointwiseTest(in_channels, out_channels, **overrides)
    BUILT.append(model)
    return model


# Test probe: with DANDELION_TEST_HASH_DIR set, every process writes the parameter hash of the last
# model it built to DIR/rank<RANK>.txt when it exits (used by the torchrun test, one file per rank).
BUILT: list = []


def _write_hash():
    out = os.environ.get("DANDELION_TEST_HASH_DIR")
    if out and BUILT:
        Path(out, f"rank{os.environ.get('RANK', '0')}.txt").write_text(parameter_hash(BUILT[-1]))


def _register_probe():
    if os.environ.get("DANDELION_TEST_HASH_DIR"):
        atexit.register(_write_hash)


_register_probe()
