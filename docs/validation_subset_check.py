"""How far a capped validation's loss is from the loss over the whole valid split (docs/decisions.md, "Benchmark v2:
the validation windows"; outside CI).

Loads a finished training run (its ``config.yaml`` and ``last.pt``) and prints its next-step loss (the trainer's
area-weighted MSE in the target's normalised units) over the capped validation windows under both rules of
``trainer.val_subset`` (:func:`dandelion.training.schedule.validation_indices`; the mean over the windows of the last
5 pretraining epochs' validations, as ``valid_over_train`` takes them), over the whole valid split, and over the whole
train split (the model in eval mode).

Usage (the run behind the record's numbers, a Cahn-Hilliard 32x64 Dandelion cell made with the first-windows rule)::

    python docs/validation_subset_check.py data/benchmark/cpu_v2/runs/cahn_hilliard_32x64/dandelion/seed1/<t...>/lr1e-3
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import torch
import yaml

from dandelion.training.inputs import open_windows
from dandelion.training.trainer import Trainer


def losses(run_dir: Path) -> dict[str, float]:
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    opts = {k: v for k, v in cfg["trainer"].items() if k not in ("progress", "tensorboard")}
    opts.pop("val_subset", None)
    scratch = tempfile.mkdtemp(prefix="validation_subset_check_")  # the trainer's run folder, thrown away
    trainer = Trainer(cfg["model"], cfg["dataset"]["path"], None, opts, run_dir=scratch, seed=cfg["seed"],
                      device="cpu", resume=str(run_dir / "last.pt"))  # fmt: skip
    out, train_windows = {}, None
    try:
        last5 = range(int(cfg["trainer"]["epochs"]) - 5, int(cfg["trainer"]["epochs"]))  # the last pretraining epochs
        for subset in ("first", "spread"):
            trainer.options = trainer.options.replace(val_subset=subset)
            out[f"capped_{subset}"] = sum(trainer.validate(e)["val_loss"] for e in last5) / len(last5)
        trainer.options = trainer.options.replace(val_max_batches=None)
        out["whole_valid"] = trainer.validate()["val_loss"]
        t = trainer.options
        train_windows = open_windows(cfg["dataset"]["path"], "train", t.n_in, 1, t.stride, "train")
        trainer.valid_set = train_windows
        out["whole_train"] = trainer.validate()["val_loss"]
    finally:
        trainer.close()
        if train_windows is not None:
            train_windows.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    for k, v in losses(a.run_dir).items():
        print(f"{k:>14}: {v:.4f}")


if __name__ == "__main__":
    main()
