"""A benchmark cell record of the shape the leaderboard reads, for the leaderboard's tests (tests/conftest.py puts
tests/helpers on sys.path)."""


def leaderboard_cell(key: str, model: str, seed: int, nxt: float, r20: float, curve: list[float]) -> dict:
    """A cell of dataset ``key`` (``<name>_<nlat>x<nlon>``): next-step and 1:20 VRMSE ``nxt``, ``r20`` and the
    per-lead VRMSE ``curve``."""
    nlat = int(key.split("_")[-1].split("x")[0])
    return {
        "dataset_key": key,
        "dataset": key.rsplit("_", 1)[0],
        "model": model,
        "seed": seed,
        "n_parameters": 1000,
        "preset": "small",
        "lr": 1e-3,
        "steps": 1200,
        "minutes": {"train_wall": 1.0},
        "nlat": nlat,
        "nlon": 2 * nlat,
        "evaluation": {"n_steps": 20},
        "next_step": {"vrmse": {"mean": nxt}},
        "rollout_mean": {"vrmse": {"mean": r20}},
        "curves": {"vrmse": {"mean": curve}},
    }


def full_cell(key: str, model: str, seed: int, nxt: float, r20: float, curve: list[float], **fields) -> dict:
    """:func:`leaderboard_cell` with what a whole ``leaderboard.md`` reads besides the scores (schema, sweep and run,
    trainer, machine, versions, commands), and ``fields`` over it (e.g. ``protocol_hash``, ``trainer_resolved``,
    ``train_cpu_seconds``)."""
    run = {"lr": 1e-3, "val_loss": 0.1, "val_vrmse": 0.1, "train_loss": 0.1, "steps": 10, "minutes": 1.0}
    return {
        **leaderboard_cell(key, model, seed, nxt, r20, curve),
        "schema": "dandelion-benchmark-cell/1",
        "reduced": True,
        "selection": "lowest valid loss",
        "sweep": [{**run, "curve": []}],
        "lr_selection": {"sweep_seed": 0, "inside": True},
        "run": run,
        "trainer": {"n_in": 4, "batch_size": 8, "epochs": 1, "max_batches_per_epoch": 5},
        "lead_time": list(range(1, len(curve) + 1)),
        "lead_time_hours": None,
        "machine": {"cpu": "test cpu", "cores": 2, "gpu": None},
        "versions": {"torch": "x", "torch_harmonics": "y"},
        "commands": {"benchmark": "dandelion-benchmark scale=cpu", "train": ["dandelion-train a"], "rollout": "r"},
        **fields,
    }


#: A per-lead VRMSE curve that never passes VRMSE 1: no 1:20 column of such cells is saturated.
SLOW = [0.01 * k for k in range(1, 21)]


def budget_cells(
    scores: dict, cost: float, key: str, seeds=(0, 1, 2), spread: float = 0.001, curve: list[float] = SLOW
) -> list[dict]:
    """Cells of ``key`` for the budget axis's tests: model -> (next step, 1:20) for seed 0, each further seed
    ``spread`` higher (seed k: value + k * spread); ``cost`` CPU-seconds per run times 1 + 0.01 k."""
    out = []
    for m, (nxt, r20) in scores.items():
        for k in seeds:
            c = leaderboard_cell(key, m, k, nxt + spread * k, r20 + spread * k, curve)
            c["train_cpu_seconds"] = cost * (1 + 0.01 * k)
            out.append(c)
    return out


def budget(label: str, steps: int, cells: list[dict], models, keys, seeds=(0, 1, 2), **fields) -> dict:
    """One budget as :func:`dandelion.benchmarks.leaderboard.budget_axis.judge_key` reads it: scale ``scale_<label>``
    asking every model of ``models`` for ``seeds`` at every key of ``keys``; ``fields`` over it (``references``,
    ``stale_cells``, ``equivalences``, ``expected``)."""
    return {
        "label": label,
        "scale": f"scale_{label}",
        "results_dir": f"results/scale_{label}",
        "cells": cells,
        "references": {},
        "expected": {k: {m: list(seeds) for m in models} for k in keys},
        "steps": steps,
        **fields,
    }
