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
