"""configs/model/<name>.yaml list every preset hyper-parameter (null = the preset's value), and a key set on the
command line (``model.width=32``, no ``+``) reaches the model."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

import pytest
import yaml

from dandelion.cli.common import compose_config
from dandelion.cli.train import build_trainer, model_spec_from_config
from dandelion.registry import available_models, build_model, count_parameters, preset_keys
from dandelion.runtime import plain

_SPEC = {"name", "preset", "overrides"}
_MODELS = sorted(p.name.removesuffix(".yaml") for p in resources.files("dandelion.configs.model").iterdir())
_MODELS = [m for m in _MODELS if m in available_models()]


def _yaml(name: str) -> dict:
    return yaml.safe_load(resources.files("dandelion.configs.model").joinpath(f"{name}.yaml").read_text())


def test_every_registered_model_has_a_config():
    assert {m for m in available_models() if not m.startswith("_")} <= set(_MODELS)  # "_": registered by tests


@pytest.mark.parametrize("name", _MODELS)
def test_yaml_lists_every_preset_key_and_only_constructor_keys(name):
    cfg = _yaml(name)
    keys = set(cfg) - _SPEC
    preset, extra = preset_keys(name)
    missing = sorted(set(preset) - keys)
    assert not missing, f"configs/model/{name}.yaml lacks the preset keys {missing}"
    unknown = sorted(keys - set(preset) - set(extra))
    assert not unknown, f"configs/model/{name}.yaml lists {unknown}, which no preset of {name} accepts"
    assert all(cfg[k] is None for k in keys), "a listed key must be null (= the preset's value)"
    assert cfg["overrides"] == {}


@pytest.mark.parametrize("name", _MODELS)
def test_every_listed_key_has_a_comment(name):
    text = resources.files("dandelion.configs.model").joinpath(f"{name}.yaml").read_text()
    for line in text.splitlines():
        if line and not line.startswith(("#", " ", "name:")):
            assert "#" in line, f"configs/model/{name}.yaml: {line.split(':')[0]} has no comment"


def test_null_keys_leave_the_spec_unchanged():
    cfg = compose_config("train", ["model=sfno", "model.preset=tiny"])
    assert model_spec_from_config(plain(cfg.model)) == {"name": "sfno", "preset": "tiny", "overrides": {}}


def test_a_key_set_without_plus_becomes_an_override():
    cfg = compose_config("train", ["model=dandelion", "model.preset=tiny", "model.width=8", "+model.overrides.heads=2"])
    spec = model_spec_from_config(plain(cfg.model))
    assert spec["overrides"] == {"width": 8, "heads": 2}
    # the explicit overrides dict wins over a listed key
    cfg = compose_config("train", ["model=dandelion", "model.width=8", "+model.overrides.width=12"])
    assert model_spec_from_config(plain(cfg.model))["overrides"] == {"width": 12}


def test_width_set_on_the_command_line_reaches_the_trained_model(make_tiny_dataset, tmp_path):
    data = make_tiny_dataset(tmp_path / "data", nlat=9, nlon=16)
    over = ["model=dandelion", "model.preset=tiny", "model.width=8", "trainer=quick", "device=cpu"]
    cfg = compose_config("train", [f"dataset.path={data}", f"run_dir={tmp_path / 'run'}", *over])
    trainer = build_trainer(cfg)
    c_in, c_out = trainer.model_spec["in_channels"], trainer.model_spec["out_channels"]
    built = {w: count_parameters(build_model("dandelion", "tiny", c_in, c_out, 9, 16, width=w)) for w in (8, 16)}
    assert built[8] != built[16]
    assert count_parameters(trainer.model) == built[8]


def test_cfg_job_prints_the_model_keys():
    out = subprocess.run(
        [sys.executable, "-m", "dandelion.cli.train", "model=disco", "--cfg", "job"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    model = yaml.safe_load(out)["model"]
    assert set(preset_keys("disco")[0]) <= set(model)


def test_help_imports_neither_torch_nor_the_jobs():
    code = (
        "import sys, contextlib, io\n"
        "from dandelion.cli import launch\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    launch.train(['--help'])\n"
        "assert 'Config groups' in out.getvalue(), out.getvalue()\n"
        "heavy = [m for m in ('torch', 'dandelion.cli.train', 'dandelion.cli.common') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_baselines_package_does_not_import_its_table_module():
    # runpy warns when `python -m dandelion.baselines.table` finds the module imported by its package
    code = "import sys, dandelion.baselines; assert 'dandelion.baselines.table' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
