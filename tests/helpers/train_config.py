"""The training configuration the trainer tests share (tests/conftest.py puts tests/helpers on sys.path)."""

from dandelion.cli.common import compose_config as compose
from dandelion.cli.train import build_trainer


def train_argv(data, run_dir, *overrides) -> list[str]:
    """The command-line overrides of :func:`train_cfg` (for ``dandelion-train``'s ``main``)."""
    return [
        f"dataset.path={data}",
        f"run_dir={run_dir}",
        "model.name=_pointwise_test",
        "model.preset=tiny",
        "trainer=quick",
        "device=cpu",
        "trainer.progress=false",
        *overrides,
    ]


def train_cfg(data, run_dir, *overrides):
    """``train.yaml`` composed for the tiny pointwise test model (``import tiny_model`` first) with the quick
    trainer on CPU, reading ``data`` and writing ``run_dir``; ``overrides`` are more hydra overrides."""
    return compose("train", train_argv(data, run_dir, *overrides))


def fit_from_scratch(data, run_dir, *overrides) -> tuple[float, dict]:
    """Train the tiny model 6 epochs at lr 1e-2 (one warm-up step, no fine-tuning) with ``overrides``; return the
    validation loss of the random initialisation and the fit's result."""
    trainer = build_trainer(
        train_cfg(
            data,
            run_dir,
            *overrides,
            "trainer.lr=1e-2",
            "trainer.epochs=6",
            "trainer.finetune.epochs=0",
            "trainer.warmup_steps=1",
        )
    )
    before = trainer.validate()["val_loss"]
    result = trainer.fit()
    trainer.close()
    return before, result
