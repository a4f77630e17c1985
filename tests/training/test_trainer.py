"""dandelion-train: CLI through hydra's compose API, checkpoints, statistics errors, exact resume.

The model is a tiny pointwise network (tests/helpers/tiny_model.py) because the model is not the point.
"""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
import torch
import yaml
from train_config import fit_from_scratch, train_cfg

from dandelion.checkpoint import layout_from_checkpoint, load_checkpoint, model_from_checkpoint
from dandelion.cli.common import compose_config as compose
from dandelion.cli.train import _check_torchrun_argv, build_trainer, train
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.forecast import next_frame, rollout
from dandelion.metrics import area_weighted_mse, loss_weights
from dandelion.training.schedule import EpochSampler, WarmupCosine
from dandelion.training.trainer import parameter_hash

HELPERS = Path(__file__).resolve().parents[1] / "helpers"


_cfg = train_cfg


@pytest.fixture
def data(make_tiny_dataset, tmp_path):
    return make_tiny_dataset(tmp_path / "data", n_frames=8)


def test_cli_compose_trains_and_writes_loadable_checkpoints(data, tmp_path):
    result = train(_cfg(data, tmp_path / "run"))
    # 3 train trajectories of 8 frames: 12 windows (3 batches of 4) 4-in 1-out, 9 windows (3 batches) 4-in 2-out
    assert result["step"] == 6 and result["stopped"] == "done"
    for name in ("best", "last"):
        ckpt = torch.load(result[name], weights_only=True)  # plain types and tensors only
        assert (
            isinstance(ckpt["config_yaml"], str)
            and yaml.safe_load(ckpt["config_yaml"])["model"]["name"] == "_pointwise_test"
        )
        assert ckpt["grid"] == {"nlat": 9, "nlon": 16, "grid": "equiangular"}
        assert set(ckpt["stats"]) == {"h", "velocity"} and "torch" in ckpt["versions"]
    # the reloaded final model reproduces the validation loss the trainer reported
    ckpt = load_checkpoint(result["last"])
    model = model_from_checkpoint(ckpt)
    valid = WindowDataset(data, "valid", n_in=4, n_out=1)
    assert layout_from_checkpoint(ckpt).channels == valid.layout.channels
    # trainer=quick: val_max_batches=2 of 4, which holds this valid split's windows (so either val_subset reads all)
    assert len(valid) <= 2 * 4
    batches = [valid[i] for i in range(len(valid))]
    x = torch.stack([b["x"] for b in batches])
    y = torch.stack([b["y"][:, :] for b in batches])[:, 0]
    scale = valid.layout.increment_scale()
    with torch.no_grad():
        pred = next_frame(
            model,
            x,
            valid.layout.n_channels,
            scale if ckpt["extra"]["target"] == "increment" else None,
            scale if ckpt["extra"]["inputs"] == "differences" else None,
        )
        w = loss_weights(valid.grid).float()
        if ckpt["extra"]["target"] == "increment":  # the loss is in units of the normalised increment
            w = w / scale.float().reshape(-1, 1, 1) ** 2
        loss = area_weighted_mse(pred, y, w).item()
    assert loss == pytest.approx(result["val_loss"], rel=1e-5)
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count("\n") == 2


def test_stats_lacking_a_field_fail_training_naming_it(data, tmp_path):
    stats = yaml.safe_load((data / "stats.yaml").read_text())
    del stats["h"]
    (data / "stats.yaml").write_text(yaml.safe_dump(stats))
    with pytest.raises(ValueError, match="'h'") as err:
        train(_cfg(data, tmp_path / "run"))
    assert str(data / "stats.yaml") in str(err.value) and "regenerate" in str(err.value)


def test_missing_dataset_path_is_explained(tmp_path):
    cfg = compose("train", ["model.name=_pointwise_test", f"run_dir={tmp_path}", "device=cpu"])
    with pytest.raises(ValueError, match="dataset.path"):
        train(cfg)


def test_schedule_and_sampler_are_pure_functions():
    f = WarmupCosine(warmup_steps=4, total_steps=20, min_ratio=0.1)
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert f(4) == 1.0 and f(12) == pytest.approx(0.55) and f(20) == pytest.approx(0.1)
    a = EpochSampler(10, seed=3, epoch=2).indices
    assert a == EpochSampler(10, seed=3, epoch=2).indices and a != EpochSampler(10, seed=3, epoch=1).indices
    assert sorted(a) == list(range(10)) and EpochSampler(10, seed=3, epoch=2, start=4).indices == a[4:]
    shards = [EpochSampler(11, seed=0, epoch=0, rank=r, world_size=2).indices for r in (0, 1)]
    assert len(shards[0]) == len(shards[1]) == 6 and set(shards[0] + shards[1]) == set(range(11))


def test_rollout_feeds_predictions_back():
    """Window shifting of the autoregressive phase: the oldest frame leaves, the prediction enters."""
    x = torch.tensor([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1)  # n_in = 3 frames of C = 1 channel
    last_plus_one = lambda x: x[:, -1:] + 1  # noqa: E731
    assert rollout(last_plus_one, x, 4, 1).flatten().tolist() == [4.0, 5.0, 6.0, 7.0]
    oldest = lambda x: x[:, :1]  # noqa: E731
    assert rollout(oldest, x, 5, 1).flatten().tolist() == [1.0, 2.0, 3.0, 1.0, 2.0]


def test_training_reduces_the_validation_loss(data, tmp_path):
    before, result = fit_from_scratch(data, tmp_path / "run", "trainer.target=frame")
    assert result["step"] == 18 and result["val_loss"] < 0.5 * before
    assert result["best_val_loss"] <= result["val_loss"]


def test_budget_knobs_stop_with_checkpoints(data, tmp_path):
    result = train(_cfg(data, tmp_path / "run", "trainer.max_minutes=1e-9"))
    assert result["stopped"] == "max_minutes" and result["step"] == 1 and Path(result["last"]).is_file()
    again = train(_cfg(data, tmp_path / "run2", f"resume={result['last']}", "trainer.max_steps=1"))
    assert again["step"] == 1 and again["stopped"] == "max_steps" and not math.isnan(again["val_loss"])


def test_resume_refuses_another_model(data, tmp_path):
    """Same weight shapes, different model (an override changed): resuming would silently train another model."""
    result = train(_cfg(data, tmp_path / "run", "trainer.max_steps=1"))
    with pytest.raises(ValueError, match="overrides"):
        build_trainer(
            _cfg(data, tmp_path / "run2", f"resume={result['last']}", "+model.overrides.resolution_dependent=true")
        )


def test_tensorboard_on_request(data, tmp_path):
    try:
        import torch.utils.tensorboard  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="tensorboard"):
            train(_cfg(data, tmp_path / "run", "trainer.tensorboard=true", "trainer.max_steps=1"))
    else:
        train(_cfg(data, tmp_path / "run", "trainer.tensorboard=true", "trainer.max_steps=1"))
        assert any((tmp_path / "run" / "tensorboard").iterdir())


def _state(path):
    ckpt = load_checkpoint(path)
    return ckpt["model"], ckpt["optimizer"], ckpt["step"]


def test_resume_is_bit_identical(data, tmp_path):
    """4 steps straight == 2 steps, save, resume, 2 steps (parameters, optimiser state, learning rate)."""
    common = [
        "trainer.batch_size=4",
        "trainer.max_batches_per_epoch=null",
        "trainer.max_steps=4",
        "trainer.warmup_steps=1",
    ]
    # 3 train trajectories x 4 windows = 12 windows: 3 batches per epoch; step 4 is in the fine-tune phase
    straight = train(_cfg(data, tmp_path / "a", *common))
    first = train(_cfg(data, tmp_path / "b", *common, "trainer.stop_at_step=2"))
    assert first["step"] == 2 and first["stopped"] == "stop_at_step"
    cfg = _cfg(data, tmp_path / "c", *common, f"resume={first['last']}")
    trainer = build_trainer(cfg)
    params = list(trainer.model.parameters())
    assert all(p is q for p, q in zip(trainer.optimizer.param_groups[0]["params"], params))
    assert len(trainer.optimizer.param_groups[0]["params"]) == len(params)
    assert all(p in trainer.optimizer.state for p in params)  # Adam moments attached to the model's own tensors
    resumed = trainer.fit()
    trainer.close()
    assert straight["step"] == resumed["step"] == 4
    m1, o1, _ = _state(straight["last"])
    m2, o2, _ = _state(resumed["last"])
    assert m1.keys() == m2.keys() and all(torch.equal(m1[k], m2[k]) for k in m1)
    assert o1["param_groups"][0]["lr"] == o2["param_groups"][0]["lr"]
    for k, s in o1["state"].items():
        assert all(torch.equal(s[n], o2["state"][k][n]) for n in s)
    # and the interrupted run really was different at step 2
    m0, _, _ = _state(first["last"])
    assert not all(torch.equal(m0[k], m1[k]) for k in m1)


@pytest.mark.parametrize("allow,dependent,ok", [(False, False, False), (True, False, True), (True, True, False)])
def test_model_from_checkpoint_resolution_change(data, tmp_path, allow, dependent, ok):
    result = train(
        _cfg(data, tmp_path / "run", "trainer.max_steps=1", f"+model.overrides.resolution_dependent={dependent}")
    )
    ckpt = load_checkpoint(result["last"])
    assert model_from_checkpoint(ckpt).resolution_dependent is dependent
    if ok:
        model = model_from_checkpoint(ckpt, nlat=17, nlon=32, allow_resolution_change=allow)
        assert model(torch.zeros(1, 16, 17, 32)).shape == (1, 4, 17, 32)
    else:
        with pytest.raises(ValueError, match=r"(resolution|grid).*17"):
            model_from_checkpoint(ckpt, nlat=17, nlon=32, allow_resolution_change=allow)


def test_dandelion_train_under_torchrun_two_ranks(data, tmp_path):
    """The subprocess smoke test of the ``dandelion-train`` entry point, run by ``torchrun`` as 2 CPU ranks (gloo).

    Each rank writes the hash of its final parameters (tests/helpers/tiny_model.py probe): they must agree,
    and equal rank 0's last.pt in the one shared run directory.
    """
    bindir = Path(sys.executable).parent
    hashes = tmp_path / "hashes"
    hashes.mkdir()
    env = {**os.environ, "PYTHONPATH": str(HELPERS), "OMP_NUM_THREADS": "1", "DANDELION_TEST_HASH_DIR": str(hashes)}
    run = tmp_path / "ddp"
    cmd = [
        str(bindir / "torchrun"),
        "--standalone",
        "--nproc_per_node=2",
        str(bindir / "dandelion-train"),
        f"dataset.path={data}",
        f"run_dir={run}",
        "model.name=_pointwise_test",
        "plugins=[tiny_model]",
        "trainer=quick",
        "trainer.max_steps=3",
        "trainer.batch_size=2",
        "device=cpu",
        "trainer.progress=false",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=400)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert sorted(p.name for p in hashes.iterdir()) == ["rank0.txt", "rank1.txt"]
    h0, h1 = (hashes / "rank0.txt").read_text(), (hashes / "rank1.txt").read_text()
    assert h0 == h1
    ckpt = load_checkpoint(run / "last.pt")
    assert ckpt["step"] == 3 and ckpt["extra"]["world_size"] == 2 and (run / "best.pt").is_file()
    model = model_from_checkpoint(ckpt)
    assert parameter_hash(model) == h0
    # one run directory for all ranks: nothing else was created next to it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "ddp", "hashes"]


def test_torchrun_requires_an_agreed_run_dir(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit, match="run_dir"):
        _check_torchrun_argv(["dataset.path=x"])
    _check_torchrun_argv(["dataset.path=x", "run_dir=runs/a"])
    monkeypatch.setenv("WORLD_SIZE", "1")
    _check_torchrun_argv(["dataset.path=x"])
