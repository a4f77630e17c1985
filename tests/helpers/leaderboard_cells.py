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
