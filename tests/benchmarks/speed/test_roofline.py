"""``dandelion-bench target=roofline``: op counts against hand counts, fake tensors against real ones, the pricing."""

from __future__ import annotations

from importlib import resources

import pytest
import torch
from omegaconf import OmegaConf

from dandelion.benchmarks.speed import bench as B
from dandelion.benchmarks.speed.measure import saved_activation_bytes
from dandelion.benchmarks.speed.roofline import DEVICES, count_step, op_seconds
from dandelion.registry import build_model


def _cfg(**over):
    cfg = OmegaConf.load(str(resources.files("dandelion.configs") / "bench.yaml"))
    cfg.pop("hydra", None)
    cfg.pop("defaults", None)
    cfg.target = "roofline"
    for k, v in over.items():
        OmegaConf.update(cfg, k, v, merge=False)
    return cfg


class _Linear(torch.nn.Module):
    """``y = x W^T + b`` on the last axis of a (B, C, nlat, nlon) input (forward: one addmm after a reshape)."""

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.lin = torch.nn.Linear(c_in, c_out)

    def forward(self, x):
        return self.lin(x.flatten(1))


@pytest.mark.parametrize("fake", [True, False])
def test_a_linear_layer_counts_its_hand_counted_flops_and_bytes(fake):
    b, c, nlat, nlon, c_out = 3, 2, 4, 8, 5
    n = c * nlat * nlon
    model = _Linear(n, c_out)
    counter, saved = count_step(model, torch.randn(b, c, nlat, nlon), "fp32", fake=fake)
    addmm = counter.ops[("forward", "addmm")]
    assert addmm["calls"] == 1
    assert addmm["flops"] == 2 * b * n * c_out
    # reads x (b x n), W^T (n x c_out), the bias; writes y (b x c_out); float32
    assert addmm["bytes"] == 4 * (b * n + n * c_out + c_out + b * c_out)
    # backward: dW = dy^T x (no dx: the input needs no gradient)
    assert counter.ops[("backward", "mm")]["flops"] == 2 * b * n * c_out
    # saved: the flattened input for dW and the output for the loss's square (the weight is a parameter: excluded)
    assert saved == 4 * (b * n + b * c_out)


@pytest.mark.parametrize(("name", "dtype"), [("sfno", "fp32"), ("dandelion", "fp32"), ("dandelion", "bf16")])
def test_fake_tensors_count_what_real_tensors_count(name, dtype):
    torch.manual_seed(0)
    model = build_model(name, "tiny", 4, 2, 8, 16, "equiangular")
    x = torch.randn(2, 4, 8, 16)
    fake, saved_fake = count_step(model, x, dtype, fake=True)
    real, saved_real = count_step(model, x, dtype, fake=False)
    assert {k: (r["calls"], r["flops"], r["bytes"]) for k, r in fake.ops.items()} == {
        k: (r["calls"], r["flops"], r["bytes"]) for k, r in real.ops.items()
    }
    # the loss saves the float32 output for its square's derivative; the model's forward saves the rest
    assert saved_fake == saved_real == saved_activation_bytes(model.train(), x, dtype) + 4 * 2 * 2 * 8 * 16


def test_an_op_is_priced_at_the_slower_of_its_compute_and_its_memory():
    dev = DEVICES["h200"]
    assert op_seconds(0, 43 * 10**9, True, dev) == pytest.approx(0.01)  # 43 GB at 4.3 TB/s
    assert op_seconds(4 * 10**12, 1, True, dev) == pytest.approx(0.01)  # 4 TFLOP at 400 TFLOP/s in bf16
    assert op_seconds(4 * 10**12, 1, False, dev) == pytest.approx(0.08)  # at 50 TFLOP/s in fp32
    assert op_seconds(4 * 10**12, 43 * 10**9, True, DEVICES["h100"]) > op_seconds(4 * 10**12, 43 * 10**9, True, dev)


def test_bench_roofline_writes_rows_whose_estimate_is_the_sum_of_its_ops(tmp_path):
    cfg = _cfg(
        **{
            "roofline.names": ["sfno", "dandelion"],
            "roofline.preset": "tiny",
            "roofline.nlat": 8,
            "roofline.nlon": 16,
            "roofline.batch": 2,
            "roofline.top": 1000,
            "output": str(tmp_path / "r.json"),
        }
    )
    out = B.bench(cfg)
    assert (tmp_path / "r.json").exists() and not out["partial"]
    assert [r["model"] for r in out["rows"]] == ["sfno", "dandelion"]
    for row in out["rows"]:
        assert row["flops"] == row["forward_flops"] + row["backward_flops"] + row["optimizer"]["flops"]
        ops = row["top_ops_by_bytes"]
        assert sum(o["bytes"] for o in ops) == row["forward_bytes"] + row["backward_bytes"]
        opt = op_seconds(row["optimizer"]["flops"], row["optimizer"]["bytes"], False, DEVICES["h200"])
        assert row["estimated_step_s"]["h200"] == pytest.approx(sum(o["seconds"] for o in ops) + opt)
        assert row["estimated_step_s"]["h100"] > row["estimated_step_s"]["h200"]


def test_a_misspelt_roofline_device_or_model_fails_before_counting():
    from dandelion.cli.checks import UsageError

    with pytest.raises(UsageError, match="roofline.devices"):
        B.check(_cfg(**{"roofline.devices": ["h300"]}))
    with pytest.raises(UsageError, match="roofline.names"):
        B.check(_cfg(**{"roofline.names": ["dandelon"]}))
