"""What a cell keeps of each training run besides its losses, and how a reader gets it from any cell.

Every run record of a cell (each ``sweep`` entry, the selected ``run``) and the cell itself carry

* ``valid_over_train`` (:func:`valid_over_train`): the generalisation gap, from the run's validation curve;
* ``train_cpu_seconds``: the process CPU-seconds the run's training took, summed over its resumes
  (:class:`dandelion.training.cost.TrainCost`; None when a checkpoint older than the count was resumed, or the run
  diverged before it could report);
* ``train_threads``: ``torch.get_num_threads()`` during the training (a list where resumed parts differed).

The cell's top level holds the selected run's values, and ``sweep_cpu_seconds``: the CPU-seconds of every run of the
learning-rate sweep, recorded once, on the cell of the seed that ran it (``sweep_cpu_seconds_on_seed``; null on the
cells of the seeds that reused its rate: :func:`cell_sweep_cpu_seconds`), and ``stability`` (:func:`stability_summary`:
how many test forecasts blew up, by lead). Cells made before these fields existed lack them: readers use
:func:`cell_valid_over_train` (recomputed from the kept curve) and :func:`cell_cpu_seconds` (None: missing), never a
rewritten cell file. The budget study (:mod:`dandelion.benchmarks.budget.report`) uses the same ratio.
"""

from __future__ import annotations

import math

__all__ = [
    "GAP_EPOCHS",
    "valid_over_train",
    "cost_fields",
    "cell_valid_over_train",
    "cell_cpu_seconds",
    "cell_sweep_cpu_seconds",
    "stability_summary",
]

GAP_EPOCHS = 5  # last pretraining epochs over which valid_over_train compares the two losses


def valid_over_train(rec: dict, n_epochs: int = GAP_EPOCHS) -> float | None:
    """Generalisation gap of a run: the mean validation loss over the last ``n_epochs`` pretraining epochs of
    ``rec["curve"]`` divided by the mean training loss over the same epochs (both the area-weighted next-step MSE of
    :class:`~dandelion.training.trainer.Trainer`; the training loss is the epoch's mean over its batches). Epochs
    whose either loss is missing or not finite are left out before the last ``n_epochs`` are taken.

    Near 1: the model fits unseen trajectories as well as the ones it trains on, so a longer budget is the lever.
    Growing with the budget: it memorises its training trajectories, and more data is the lever. None without such
    epochs (or with a training loss that is not positive).
    """
    pre = [
        c
        for c in rec.get("curve") or []
        if c.get("phase") == "pretrain"
        and all(c.get(k) is not None and math.isfinite(c[k]) for k in ("train_loss", "val_loss"))
    ][-n_epochs:]
    if not pre:
        return None
    train = sum(c["train_loss"] for c in pre)
    return sum(c["val_loss"] for c in pre) / train if train > 0 else None


def cost_fields(run: dict) -> dict:
    """The fields a run record adds to its losses: ``valid_over_train`` (from ``run["curve"]``),
    ``train_cpu_seconds`` and ``train_threads`` (from the trainer's summary; None where it has none)."""
    cpu = run.get("train_cpu_seconds")
    return {
        "valid_over_train": valid_over_train(run),
        "train_cpu_seconds": None if cpu is None or not math.isfinite(float(cpu)) else float(cpu),
        "train_threads": run.get("train_threads"),
    }


def cell_valid_over_train(cell: dict) -> float | None:
    """A cell's ``valid_over_train``: recorded, or (a cell made before it was recorded) computed from the selected
    run's curve."""
    if cell.get("valid_over_train") is not None:
        return float(cell["valid_over_train"])
    return valid_over_train(cell.get("run") or {})


def cell_cpu_seconds(cell: dict) -> float | None:
    """A cell's ``train_cpu_seconds`` (the selected run's, at the top level or in ``run``); None when the cell was made
    before the count was recorded, or its run's total is unknown."""
    v = cell.get("train_cpu_seconds", (cell.get("run") or {}).get("train_cpu_seconds"))
    return None if v is None or not math.isfinite(float(v)) else float(v)


def cell_sweep_cpu_seconds(cell: dict) -> float | None:
    """The CPU-seconds of the learning-rate sweep this cell ran itself: its ``sweep_cpu_seconds`` when the cell is the
    sweep seed's (``sweep_cpu_seconds_on_seed``, else ``lr_selection.sweep_seed``, equals its seed), else None (the
    sweep is counted on that seed's cell), so that a sum over cells counts every sweep once."""
    on = cell.get("sweep_cpu_seconds_on_seed", (cell.get("lr_selection") or {}).get("sweep_seed", cell.get("seed")))
    v = cell.get("sweep_cpu_seconds")
    if on is None or int(on) != int(cell.get("seed", -1)) or v is None or not math.isfinite(float(v)):
        return None
    return float(v)


def stability_summary(stability: dict | None) -> dict | None:
    """What a cell keeps of a rollout's ``stability`` (:mod:`dandelion.evaluation.scoring`): the blow-up threshold,
    the forecasts, how many blew up within the rollout and by each lead, and the first lead with one; None without
    it."""
    if not stability:
        return None
    keys = ("threshold_vrmse", "n_forecasts", "n_unstable", "unstable_by_lead", "first_unstable_lead_step")
    return {k: stability.get(k) for k in keys}
