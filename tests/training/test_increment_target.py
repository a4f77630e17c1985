"""trainer.target=increment and trainer.inputs=differences (dandelion/cli/train.py).

Checks the scale against the data it comes from, the channel order of the scale for level and vector
fields, that a zero output is persistence, that the difference window is an invertible re-expression
of the frames, and that checkpoints carry both choices to every rollout.
"""

import math

import numpy as np
import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
import torch
from train_config import fit_from_scratch, train_cfg

from dandelion import api
from dandelion.channels import ChannelLayout
from dandelion.checkpoint import load_checkpoint
from dandelion.cli.train import build_trainer, train
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.forecast import difference_window, next_frame, rollout
from dandelion.sphere import SphereGrid

_cfg = train_cfg


@pytest.fixture
def data(make_tiny_dataset, tmp_path):
    return make_tiny_dataset(tmp_path / "data", n_frames=8)


def test_scaled_increments_of_the_train_split_have_unit_rms(data):
    """The scale makes the normalised one-step differences of the train split unit-RMS, field by field."""
    ds = WindowDataset(data, "train", n_in=1, n_out=1)
    layout, s = ds.layout, ds.layout.increment_scale()
    w = ds.grid.weights.double()  # (nlat, 1) quadrature weights, sum 4 pi
    diffs = []
    for f in range(len(ds.files)):
        raw = {
            k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in ds.read_frames(f, 0, ds.n_frames[f]).items()
        }
        x = layout.encode(raw).double()  # (T, C, nlat, nlon)
        diffs.append((x[1:] - x[:-1]) / s.reshape(1, -1, 1, 1))
    d = torch.cat(diffs)
    area = lambda a: float((a * w).sum((-2, -1)).mean() / w.sum() / d.shape[-1])  # noqa: E731
    ih = layout.channels.index("h")
    assert math.sqrt(area(d[:, ih] ** 2)) == pytest.approx(1.0, rel=1e-4)
    iv = [layout.channels.index(f"velocity_{c}") for c in "xyz"]
    assert math.sqrt(area((d[:, iv] ** 2).sum(1))) == pytest.approx(1.0, rel=1e-4)
    ds.close()


def test_scale_follows_the_channel_order_of_level_and_vector_fields():
    grid = SphereGrid(8, 16, "equiangular")
    levels = {"values": [250.0, 500.0, 850.0], "units": "hPa", "fields": ["T", "velocity"]}
    stats = {
        "T": {
            "kind": "scalar",
            "mean": [220.0, 250.0, 280.0],
            "std": [5.0, 10.0, 20.0],
            "delta_mean": [0.0, 0.0, 0.0],
            "delta_std": [1.0, 3.0, 2.0],
        },
        "ps": {"kind": "scalar", "mean": 1e5, "std": 800.0, "delta_mean": 30.0, "delta_std": 40.0},  # RMS 50
        "velocity": {"kind": "vector", "rms": [30.0, 15.0, 8.0], "delta_rms": [3.0, 3.0, 4.0]},
    }
    layout = ChannelLayout({"T": "scalar", "ps": "scalar", "velocity": "vector"}, stats, grid, levels=levels)
    s = dict(zip(layout.channels, layout.increment_scale().tolist()))
    assert len(s) == layout.n_channels == 3 + 1 + 9
    assert (
        s["T_500hPa"] == pytest.approx(0.3)
        and s["T_850hPa"] == pytest.approx(0.1)
        and s["ps"] == pytest.approx(50.0 / 800.0)
    )
    for c in "xyz":
        assert s[f"velocity_{c}_250hPa"] == pytest.approx(0.1) and s[f"velocity_{c}_850hPa"] == pytest.approx(0.5)


def test_missing_delta_statistics_are_named():
    grid = SphereGrid(8, 16, "equiangular")
    layout = ChannelLayout({"h": "scalar"}, {"h": {"kind": "scalar", "mean": 0.0, "std": 1.0}}, grid)
    with pytest.raises(ValueError, match="delta_mean.*'h'.*trainer.target=frame"):
        layout.increment_scale()
    # a field that never changes: scale 0, its channel is persistence
    still = ChannelLayout(
        {"h": "scalar"}, {"h": {"kind": "scalar", "mean": 0.0, "std": 1.0, "delta_mean": 0.0, "delta_std": 0.0}}, grid
    )
    assert still.increment_scale().tolist() == [0.0]


def test_zero_output_is_persistence_and_rollout_accumulates():
    x = torch.randn(2, 3 * 4, 5, 6)  # n_in = 3 frames of C = 4 channels
    s = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)
    zero = lambda x: torch.zeros_like(x[:, :4])  # noqa: E731
    assert torch.equal(next_frame(zero, x, 4, s), x[:, -4:])
    one = lambda x: torch.ones_like(x[:, :4])  # noqa: E731
    out = rollout(one, x, 3, 4, s)  # each step adds s
    for k in range(3):
        assert torch.allclose(out[:, k], x[:, -4:] + (k + 1) * s.float().reshape(1, 4, 1, 1))
    assert torch.equal(next_frame(one, x, 4, None), one(x))  # target=frame: the output itself


def test_difference_window_is_an_invertible_re_expression():
    C, n_in = 3, 4
    x = torch.randn(2, n_in * C, 5, 6, dtype=torch.float64)
    s = torch.tensor([0.5, 0.0, 2.0], dtype=torch.float64)  # a zero scale is read as 1
    d = difference_window(x, C, s)
    last = x[:, -C:]
    assert torch.equal(d[:, -C:], last)
    s1 = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64).reshape(1, C, 1, 1)
    for k in range(n_in - 1):  # frame k back from the window: last + scale * difference
        assert torch.allclose(last + s1 * d[:, k * C : (k + 1) * C], x[:, k * C : (k + 1) * C], rtol=0, atol=1e-12)
    assert torch.equal(difference_window(last, C, s), last)  # one frame in: nothing to difference
    first = lambda z: z[:, :C]  # noqa: E731  (a "network" returning what it sees of the oldest frame)
    assert torch.allclose(next_frame(first, x, C, None, s), (x[:, :C] - last) / s1, atol=1e-12)


def test_checkpoint_carries_the_target_and_inputs_to_rollouts(data, tmp_path):
    result = train(_cfg(data, tmp_path / "run", "trainer.target=increment", "trainer.inputs=differences"))
    ckpt = load_checkpoint(result["last"])
    assert ckpt["extra"]["target"] == "increment" and ckpt["extra"]["inputs"] == "differences"
    ds = api.open_dataset(data, "test")
    fc = api.load_model(result["last"], dataset=ds)
    assert fc.target == "increment" and fc.inputs == "differences"
    x = WindowDataset(data, "test", n_in=4, n_out=1)[0]["x"][None]
    C = fc.layout.n_channels
    s = fc.layout.increment_scale().float()
    with torch.no_grad():
        expected = x[:, -C:] + s.reshape(1, -1, 1, 1) * fc.model(difference_window(x, C, s))
        assert torch.allclose(fc(x), expected, atol=1e-6)
    # a checkpoint from before the options (no extra.target / extra.inputs) predicted frames from frames
    del ckpt["extra"]["target"], ckpt["extra"]["inputs"]
    legacy = tmp_path / "legacy.pt"
    torch.save(ckpt, legacy)
    old = api.load_model(legacy, dataset=ds)
    assert (old.target, old.inputs) == ("frame", "frames")
    with torch.no_grad():
        assert torch.equal(old(x), old.model(x))
    # resuming with another target or input form is refused, naming the fix
    with pytest.raises(ValueError, match="trainer.target=increment"):
        build_trainer(_cfg(data, tmp_path / "run2", f"resume={result['last']}", "trainer.target=frame"))
    with pytest.raises(ValueError, match="trainer.inputs=differences"):
        build_trainer(_cfg(data, tmp_path / "run2", f"resume={result['last']}", "trainer.inputs=frames"))
    with pytest.raises(ValueError, match="trainer.target='residual'"):
        build_trainer(_cfg(data, tmp_path / "run3", "trainer.target=residual"))
    with pytest.raises(ValueError, match="trainer.inputs='deltas'"):
        build_trainer(_cfg(data, tmp_path / "run3", "trainer.inputs=deltas"))


def test_increment_training_lowers_the_validation_loss(data, tmp_path):
    """The increment target trains: a few steps lower the valid loss from the random initialisation."""
    before, result = fit_from_scratch(data, tmp_path / "run", "trainer.target=increment")
    assert result["val_loss"] < before
