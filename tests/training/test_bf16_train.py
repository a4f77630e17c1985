"""bf16 autocast in the training loop (trainer.amp=true) and the rollout (amp=true) on CPU, for every model."""

import math

import pytest
import torch
from train_config import train_cfg

from dandelion.checkpoint import load_checkpoint, load_model
from dandelion.cli.train import build_trainer
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.forecast import forecast

MODELS = ["dandelion", "sfno", "disco", "flower2d"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    import tiny_dataset

    return tiny_dataset.make_tiny_dataset(tmp_path_factory.mktemp("bf16") / "data", nlat=16, nlon=32, n_frames=8)


@pytest.mark.parametrize("name", MODELS)
def test_training_and_rollout_under_bf16_autocast_on_cpu(data, tmp_path, name):
    cfg = train_cfg(
        data,
        tmp_path / "run",
        "dataset=solid_body",
        f"model.name={name}",
        "trainer.amp=true",
        "trainer.max_steps=2",
        "trainer.finetune.epochs=0",
    )
    trainer = build_trainer(cfg)
    before = {k: v.clone() for k, v in trainer.bare_model.state_dict().items() if torch.is_tensor(v)}
    grads = []
    step = trainer.optimizer.step

    def checking_step(*args, **kwargs):  # every gradient is finite when the optimiser applies it
        grads.append(all(p.grad is None or torch.isfinite(p.grad).all() for p in trainer.bare_model.parameters()))
        return step(*args, **kwargs)

    trainer.optimizer.step = checking_step
    dtypes = []
    # the network's last layer (Dandelion's presets append a float32 displacement to the model's output)
    last = getattr(trainer.bare_model, "head", None) if name == "dandelion" else None
    (last or trainer.bare_model).register_forward_hook(lambda module, inputs, output: dtypes.append(output.dtype))
    try:
        result = trainer.fit()
    finally:
        trainer.close()
    assert result["step"] == 2 and grads == [True, True]
    assert dtypes and set(dtypes) == {torch.bfloat16}  # the network did run under autocast
    assert math.isfinite(result["train_loss"]) and math.isfinite(result["val_loss"])
    after = {k: v for k, v in load_checkpoint(result["last"])["model"].items() if torch.is_tensor(v)}
    assert all(torch.isfinite(v).all() for v in after.values() if v.is_floating_point() or v.is_complex())
    assert any(not torch.equal(before[k], after[k]) for k in before)

    ds = WindowDataset(data, "test", n_in=4, n_out=1)
    model = load_model(result["last"], dataset=ds)
    full = forecast(model, ds, n_steps=2, max_inits=1, keep_truth=False)
    half = forecast(model, ds, n_steps=2, max_inits=1, keep_truth=False, amp=True)
    for field, a in full.fields.items():
        b = half.fields[field]
        assert b.dtype == a.dtype and torch.isfinite(torch.as_tensor(b)).all()
        err = float(((b - a) ** 2).mean() ** 0.5 / (a.std() + 1e-12))
        assert err < 0.1, f"{name}/{field}: bf16 rollout departs from float32 by {err:.3f} of the field's spread"
