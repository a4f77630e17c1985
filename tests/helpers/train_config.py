"""The training configuration the trainer tests share (tests/conftest.py puts tests/helpers on sys.path)."""

from dandelion.cli.common import compose_config as compose


def train_cfg(data, run_dir, *overrides):
    """``train.yaml`` composed for the tiny pointwise test model (``import tiny_model`` first) with the quick
    trainer on CPU, reading ``data`` and writing ``run_dir``; ``overrides`` are more hydra overrides."""
    return compose(
        "train",
        [
            f"dataset.path={data}",
            f"run_dir={run_dir}",
            "model.name=_pointwise_test",
            "model.preset=tiny",
            "trainer=quick",
            "device=cpu",
            "trainer.progress=false",
            *overrides,
        ],
    )
