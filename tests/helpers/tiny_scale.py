"""Overrides of the ``scale=cpu`` protocol shrunk to a few steps, for the benchmark and transfer job tests
(tests/conftest.py puts tests/helpers on sys.path: ``from tiny_scale import tiny_scale_overrides``)."""

from pathlib import Path


def tiny_scale_overrides(tmp_path: Path, models: str, lrs: str) -> list[str]:
    """The cpu scale with results and work folders under ``tmp_path``, the comma-separated ``models`` (plugin
    ``tiny_model`` loaded), seed 0, learning rates ``lrs`` (sweep and ladder), one epoch of two batches of 2 (one
    fine-tuning epoch, one warm-up step, one validation batch), and 3-step evaluations from every second frame."""
    return [
        "scale=cpu",
        f"scale.results_dir={tmp_path / 'results'}",
        f"scale.work_dir={tmp_path / 'work'}",
        f"scale.models=[{models}]",
        "scale.seeds=[0]",
        f"scale.lr_sweep=[{lrs}]",
        f"scale.lr_ladder=[{lrs}]",
        "scale.plugins=[tiny_model]",
        "scale.trainer.epochs=1",
        "scale.trainer.max_batches_per_epoch=2",
        "scale.trainer.batch_size=2",
        "scale.trainer.finetune.epochs=1",
        "scale.trainer.warmup_fraction=0.25",  # one warm-up step of the four
        "scale.trainer.val_max_batches=1",
        "scale.evaluation.n_steps=3",
        "scale.evaluation.init_stride=2",
        "scale.evaluation.batch_size=4",
    ]
