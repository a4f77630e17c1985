"""Memory that fits (dandelion.training.memory): accumulation equals one big batch; the plan follows the budget."""

from __future__ import annotations

import copy

import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
import torch

from dandelion.registry import build_model
from dandelion.step import next_frame
from dandelion.training import Trainer
from dandelion.training.memory import (
    accumulate,
    per_rank_batch,
    plan_micro_batch,
    saved_activation_bytes,
    saved_bytes_per_sample,
)


def _loss(model):
    def fn(x, y):  # a step of the increment target (Dandelion's presets move the newest frame: next_frame)
        return (next_frame(model, x, 2, torch.ones(2, dtype=x.dtype)) - y).square().mean()

    return fn


@pytest.mark.parametrize(
    ("name", "micro", "rtol"), [("dandelion", 2, 1e-10), ("dandelion", 3, 1e-10), ("sfno", 1, 1e-6)]
)
def test_accumulated_micro_batches_step_like_one_batch(name, micro, rtol):
    """One AdamW step after micro-batches (even and uneven splits) gives the parameters of one big batch (float64;
    SFNO's spherical transforms stay float32, hence the float32-level tolerance)."""
    torch.manual_seed(0)
    big = build_model(name, "tiny", 4, 2, 8, 16).double()
    small = copy.deepcopy(big)
    x, y = torch.randn(5, 4, 8, 16, dtype=torch.float64), torch.randn(5, 2, 8, 16, dtype=torch.float64)
    out = {}
    for tag, model, m in (("big", big, 5), ("small", small, micro)):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        opt.zero_grad(set_to_none=True)
        out[tag] = accumulate(model, x, y, m, _loss(model))
        opt.step()
    torch.testing.assert_close(out["small"], out["big"], rtol=rtol, atol=1e-3 * rtol)
    for (k, a), b in zip(big.named_parameters(), small.parameters()):
        torch.testing.assert_close(b, a, rtol=rtol, atol=1e-3 * rtol, msg=k)
    assert any(
        not torch.equal(a, b)
        for a, b in zip(big.parameters(), build_model(name, "tiny", 4, 2, 8, 16).double().parameters())
    )


def test_the_trainer_steps_alike_with_and_without_micro_batches(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data", n_frames=8)
    common = dict(batch_size=4, epochs=1, finetune={"epochs": 0}, num_workers=0, progress=False, seed=3, device="cpu")
    whole = Trainer("_pointwise_test", data, run_dir=tmp_path / "a", **common)
    split = Trainer("_pointwise_test", data, run_dir=tmp_path / "b", micro_batch=1, **common)
    assert whole.memory[1].n_micro == 1 and split.memory[1].n_micro == 4
    batch = next(iter(whole._loader(whole.train_sets[0], range(4))))
    losses = [t.train_step(batch) for t in (whole, split)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-6)
    for a, b in zip(whole.bare_model.parameters(), split.bare_model.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
    whole.close()
    split.close()


@pytest.mark.parametrize("advect", [True, False])  # the presets' step, and the stock network's
def test_saved_bytes_per_sample_counts_what_a_real_forward_saves(advect):
    torch.manual_seed(0)
    model = build_model("dandelion", "tiny", 4, 2, 8, 16, advect_state=advect)
    resident = list(model.parameters()) + list(model.buffers())
    x = torch.randn(1, 4, 8, 16)

    def step():  # the stock estimate counts the network alone
        return (next_frame(model, x, 2, torch.ones(2)) if advect else model(x)).float().square().mean()

    real = saved_activation_bytes(step, resident)
    assert saved_bytes_per_sample(model, (4, 8, 16), 1) == real
    # two steps save about twice one step (the second step's input is the first's output)
    two = saved_bytes_per_sample(model, (4, 8, 16), 2)
    assert 1.8 * real < two < 2.2 * real


def test_the_micro_batch_shrinks_with_the_budget_and_checkpointing_is_the_last_resort():
    torch.manual_seed(0)
    model = build_model("dandelion", "tiny", 4, 2, 16, 32)
    s = saved_bytes_per_sample(model, (4, 16, 32), 4)
    sizes = [plan_micro_batch(16, s, int(f * 16 * s)).micro_batch for f in (1.0, 0.5, 0.26, 0.1, 1 / 16)]
    assert sizes == [16, 8, 4, 1, 1]
    plan = plan_micro_batch(16, s, 3 * s)
    assert plan.micro_batch == 3 and plan.n_micro == 6 and not plan.checkpoint_blocks

    def checkpointed():
        model.checkpoint_blocks = True
        return saved_bytes_per_sample(model, (4, 16, 32), 4)

    plan = plan_micro_batch(16, s, s // 2, checkpointed_bytes=checkpointed)
    assert plan.checkpoint_blocks and model.checkpoint_blocks and plan.per_sample_bytes < s // 2
    with pytest.raises(MemoryError, match="per sample, more than the memory budget") as err:
        plan_micro_batch(16, s, s // 1000, checkpointed_bytes=checkpointed)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("batch", "world", "per_rank"), [(16, 1, 16), (16, 8, 2), (12, 4, 3)])
def test_the_configured_batch_is_global(batch, world, per_rank):
    assert per_rank_batch(batch, world) == per_rank


def test_a_global_batch_that_does_not_divide_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"trainer.batch_size=10 is the global batch and must divide by the 4 ranks"):
        per_rank_batch(10, 4)


class _DataDependent(torch.nn.Module):
    """A model whose forward branches on a value (fake tensors cannot run it)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 2, 1)

    def forward(self, x):
        return self.conv(x) if float(x.sum()) > 0 else -self.conv(x)


def test_a_model_that_cannot_be_counted_trains_the_whole_batch_with_a_warning():
    from types import SimpleNamespace

    from dandelion.training.memory import plan_phases

    options = SimpleNamespace(micro_batch=None, memory_budget_gib=1.0, amp=False)
    with pytest.warns(UserWarning, match="could not be counted.*set trainer.micro_batch"):
        plans = plan_phases(_DataDependent(), torch.device("cpu"), 8, (4, 8, 16), [{"n_out": 1}], options)
    assert plans[1].micro_batch == 8 and plans[1].n_micro == 1
