"""Training from Python alone (dandelion.training): no hydra, no omegaconf, exact resume, options checked by name."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiny_model  # noqa: F401  (registers "_pointwise_test")
import torch
import yaml
from train_config import train_cfg

from dandelion.checkpoint import load_checkpoint
from dandelion.cli.train import train as cli_train
from dandelion.training import OptionError, Trainer, TrainOptions, train

ROOT = Path(__file__).resolve().parents[2]

# The subprocess: a registered model (by spec, on folders) and a plain nn.Module (on WindowDataset objects), each
# trained 10 steps straight and 5 + resume to 10; the plan (12 steps capped at max_steps=10) is the same in every run,
# so the interrupted run stops at step 5, in the middle of epoch 1, and the resumed one continues the same schedule.
SCRIPT = r"""
import json, sys
from pathlib import Path

import torch

from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.training import TrainOptions, model_channels, parameter_hash, train

data, out = Path(sys.argv[1]), Path(sys.argv[2])
options = TrainOptions(
    batch_size=4, epochs=3, finetune={"epochs": 1}, warmup_steps=2, num_workers=0, max_steps=10, progress=False
)
report = {}

def runs(tag, make_model, train_data, valid_data):
    common = dict(options=options, seed=7, device="cpu")
    straight = train(make_model(), train_data, valid_data, run_dir=out / tag / "straight", **common)
    first = train(make_model(), train_data, valid_data, run_dir=out / tag / "resumed", stop_at_step=5, **common)
    resumed = train(
        make_model(), train_data, valid_data, run_dir=out / tag / "resumed", resume=out / tag / "resumed" / "last.pt",
        **common,
    )
    model, history = resumed  # unpacks as (model, history)
    report[tag] = {
        "steps": [r.summary["step"] for r in (straight, first, resumed)],
        "stopped": [r.summary["stopped"] for r in (straight, first, resumed)],
        "hashes": [parameter_hash(r.model) for r in (straight, first, resumed)],
        "history_steps": [h["step"] for h in history],
        "val_loss": [straight.history[-1]["val_loss"], history[-1]["val_loss"]],
    }

runs("spec", lambda: {"name": "dandelion", "preset": "tiny"}, data, None)

train_windows = WindowDataset(data, "train", n_in=4, n_out=1)
valid_windows = WindowDataset(data, "valid", n_in=4, n_out=1)
cin, cout = model_channels(train_windows, n_in=4)

def module():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(cin, 8, 1), torch.nn.GELU(), torch.nn.Conv2d(8, cout, 1))

runs("module", module, train_windows, valid_windows)
report["loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in ("hydra", "omegaconf"))
print("REPORT " + json.dumps(report))
"""


@pytest.fixture
def data(make_tiny_dataset, tmp_path):
    # 3 train trajectories of 8 frames: 12 windows 4-in 1-out (3 batches of 4), 9 windows 4-in 2-out (3 batches)
    return make_tiny_dataset(tmp_path / "data", nlat=16, nlon=32, n_frames=8)


def test_python_only_training_resumes_bit_exactly_without_hydra(data, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(data), str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    report = json.loads(proc.stdout.split("REPORT ", 1)[1])
    assert report["loaded"] == []  # neither hydra nor omegaconf was imported, not even indirectly
    for tag in ("spec", "module"):
        r = report[tag]
        assert r["steps"] == [10, 5, 10] and r["stopped"] == ["max_steps", "stop_at_step", "max_steps"]
        straight, first, resumed = r["hashes"]
        assert resumed == straight  # bit-exact: 5 steps, checkpoint, resume, 5 steps == 10 steps
        assert first != straight  # the interrupted run really stopped earlier
        assert r["val_loss"][0] == r["val_loss"][1]
        assert r["history_steps"][-1] == 10 and 5 in r["history_steps"]  # the checkpoint's records come back
        a = load_checkpoint(tmp_path / "runs" / tag / "straight" / "last.pt")
        b = load_checkpoint(tmp_path / "runs" / tag / "resumed" / "last.pt")
        assert a["optimizer"]["param_groups"][0]["lr"] == b["optimizer"]["param_groups"][0]["lr"]
        for k, s in a["optimizer"]["state"].items():
            assert all(torch.equal(s[n], b["optimizer"]["state"][k][n]) for n in s)
        run = tmp_path / "runs" / tag / "resumed"
        assert sorted(p.name for p in run.iterdir()) == [
            "best.pt",
            "config.yaml",
            "last.pt",
            "metrics.jsonl",
            "result.json",
        ]
        assert yaml.safe_load((run / "config.yaml").read_text())["trainer"]["max_steps"] == 10


def test_import_dandelion_and_the_notebook_api_load_no_hydra():
    code = (
        "import sys, dandelion, dandelion.training, dandelion.evaluation, dandelion.export, dandelion.api; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('hydra', 'omegaconf')]; "
        "assert not bad, bad"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_options_have_the_names_and_defaults_of_the_trainer_config():
    default = yaml.safe_load((ROOT / "configs" / "trainer" / "default.yaml").read_text())
    assert TrainOptions().to_dict() == default
    quick = yaml.safe_load((ROOT / "configs" / "trainer" / "quick.yaml").read_text())
    quick.pop("defaults")
    assert set(quick) <= set(TrainOptions.names())
    assert TrainOptions.from_dict(quick).to_dict() == {**default, **quick}


@pytest.mark.parametrize(
    "changes,named",
    [
        ({"lr": -1}, "lr=-1: the learning rate"),
        ({"lr": float("nan")}, "lr=nan"),
        ({"batch_size": 0}, "batch_size=0"),
        ({"n_in": 2.5}, "n_in=2.5"),
        ({"target": "residual"}, "target='residual'"),
        ({"inputs": "deltas"}, "inputs='deltas'"),
        ({"finetune": {"epochs": 1, "n_out": 1}}, "finetune.n_out=1"),
        ({"finetune": {"epoch": 1}}, "finetune.epoch"),
        ({"betas": (0.9, 1.5)}, "betas="),
        ({"amp": "yes"}, "amp='yes'"),
        ({"max_steps": 0}, "max_steps=0"),
        ({"max_minutes": -5}, "max_minutes=-5"),
        ({"resume_schedule": "sometimes"}, "resume_schedule='sometimes'"),
        ({"warmup_steps": -1}, "warmup_steps=-1"),
        ({"lrr": 1e-3}, "lrr: did you mean lr?"),
    ],
)
def test_a_bad_option_is_refused_in_one_line_naming_it(changes, named):
    with pytest.raises(ValueError) as err:
        TrainOptions().replace(**changes)
    assert named in str(err.value) and "\n" not in str(err.value)
    # the trainer checks its options before it opens any data (this folder does not exist)
    with pytest.raises(ValueError) as err:
        Trainer("dandelion", "/nonexistent/folder", **changes)
    assert named in str(err.value)


def test_command_line_names_carry_the_trainer_prefix():
    with pytest.raises(OptionError, match=r"^trainer\.lr=-1: ") as err:
        TrainOptions.from_dict({"lr": -1}, prefix="trainer.")
    assert err.value.name == "lr"
    with pytest.raises(ValueError, match=r"trainer\.lrr: did you mean trainer\.lr\?"):
        TrainOptions.from_dict({"lrr": 1}, prefix="trainer.")


def test_bad_model_and_data_arguments_are_named(data, tmp_path):
    with pytest.raises(TypeError, match="train_data=int"):
        Trainer("dandelion", 123, run_dir=tmp_path / "r")
    with pytest.raises(TypeError, match="model=int"):
        Trainer(5, data, run_dir=tmp_path / "r")
    with pytest.raises(ValueError, match="unknown keys presett"):
        Trainer({"name": "dandelion", "presett": "tiny"}, data, run_dir=tmp_path / "r")
    with pytest.raises(ValueError, match="train_data is not set"):
        Trainer("dandelion", None)


def test_the_command_line_job_and_the_python_api_train_the_same_parameters(data, tmp_path):
    """dandelion-train is a thin wrapper: the same configuration through hydra and through Python, same bits."""
    via_cli = cli_train(train_cfg(data, tmp_path / "cli", "seed=3", "trainer.max_steps=4"))
    quick = yaml.safe_load((ROOT / "configs" / "trainer" / "quick.yaml").read_text())
    quick.pop("defaults")
    result = train(
        {"name": "_pointwise_test", "preset": "tiny"},
        data,
        options=TrainOptions.from_dict(quick),
        run_dir=tmp_path / "py",
        seed=3,
        device="cpu",
        max_steps=4,
        progress=False,
    )
    trained = load_checkpoint(via_cli["last"])["model"]
    assert result.summary["step"] == via_cli["step"] == 4
    assert all(torch.equal(trained[k], v.cpu()) for k, v in result.model.state_dict().items())
    assert result.summary["val_loss"] == via_cli["val_loss"]
    cli_cfg = yaml.safe_load((tmp_path / "cli" / "config.yaml").read_text())
    py_cfg = yaml.safe_load((tmp_path / "py" / "config.yaml").read_text())
    assert py_cfg["trainer"] == cli_cfg["trainer"] and py_cfg["model"] == cli_cfg["model"]
    assert [r["step"] for r in result.history] == [
        json.loads(line)["step"] for line in (tmp_path / "cli" / "metrics.jsonl").read_text().splitlines()
    ]


def test_train_data_folder_needs_its_valid_split(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data", n_frames=8, splits={"train": [0, 1], "test": [2]})
    with pytest.raises((FileNotFoundError, ValueError), match="valid"):
        Trainer("_pointwise_test", data, run_dir=tmp_path / "r", device="cpu")


def test_close_leaves_the_callers_window_datasets_open(data, tmp_path):
    from dandelion.datasets.torch_dataset import WindowDataset

    train_windows = WindowDataset(data, "train", n_in=4, n_out=1)
    valid_windows = WindowDataset(data, "valid", n_in=4, n_out=1)
    trainer = Trainer(
        "_pointwise_test",
        train_windows,
        valid_windows,
        run_dir=tmp_path / "r",
        device="cpu",
        batch_size=4,
        num_workers=0,
        max_steps=2,
        progress=False,
    )
    opened = [ds for ds in trainer.train_sets if ds is not train_windows]  # the fine-tune windows (2 out)
    assert opened and trainer.valid_set is valid_windows
    assert trainer.fit()["step"] == 2
    opened[0][0]  # the trainer's own windows hold a handle too
    handles = [h for ds in (train_windows, valid_windows, *opened) for h in ds._handles.values()]
    ours = [h for ds in (train_windows, valid_windows) for h in ds._handles.values()]
    assert ours and len(handles) > len(ours)
    trainer.close()
    assert all(bool(h) for h in ours), "Trainer.close() closed the HDF5 files of the caller's datasets"
    assert not any(bool(h) for h in handles if not any(h is o for o in ours))  # the ones it opened are closed
    assert train_windows[0]["x"].shape[0] == valid_windows[0]["x"].shape[0]
