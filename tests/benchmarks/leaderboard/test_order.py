"""leaderboard.md opens with the headline table and ends with provenance and commands (a synthetic results folder)."""

import json

from omegaconf import OmegaConf

from dandelion.benchmarks.grid.cells import CELL_SCHEMA, cell_path, reference_path
from dandelion.benchmarks.leaderboard import markdown as MD
from dandelion.benchmarks.leaderboard import render as LB

#: (dataset, model) -> (next-step VRMSE, 1:20 VRMSE) of seed 0; seed 1 adds 0.001 to both
SCORES = {
    ("galewsky_32x64", "dandelion"): (0.0050, 0.0170),
    ("galewsky_32x64", "sfno"): (0.0030, 0.0200),
    ("shock_caps_32x64", "dandelion"): (0.0290, 0.8200),
    ("shock_caps_32x64", "sfno"): (0.0380, 0.6650),
}


def _summary(v: float) -> dict:
    return {"vrmse": {"h": v, "mean": v}, "vrmse_well": {"h": v, "mean": v}}


def _cell(key: str, model: str, seed: int, nxt: float, r20: float) -> dict:
    run = {"lr": 1e-3, "val_loss": 0.1, "val_vrmse": 0.1, "train_loss": 0.1, "steps": 10, "minutes": 1.0}
    return {
        "schema": CELL_SCHEMA,
        "protocol_hash": "p" + key[:3],
        "dataset_key": key,
        "dataset": key.split("_32")[0],
        "nlat": 32,
        "nlon": 64,
        "reduced": True,
        "model": model,
        "preset": "small",
        "seed": seed,
        "n_parameters": 1000,
        "lr": 1e-3,
        "selection": "lowest valid loss",
        "sweep": [{**run, "curve": []}],
        "lr_selection": {"sweep_seed": 0, "inside": True},
        "run": run,
        "trainer": {"n_in": 4, "batch_size": 8, "epochs": 1, "max_batches_per_epoch": 5},
        "trainer_resolved": {"target": "increment", "inputs": "differences"},
        "target": "increment",
        "steps": 10,
        "evaluation": {"n_steps": 20},
        "next_step": _summary(nxt),
        "rollout_mean": _summary(r20),
        "curves": {"vrmse": {"h": [nxt] * 3, "mean": [nxt] * 3}},
        "lead_time": [1, 2, 3],
        "lead_time_hours": None,
        "minutes": {"train_wall": 1.0},
        "machine": {"cpu": "test cpu", "cores": 2, "gpu": None},
        "versions": {"torch": "x", "torch_harmonics": "y"},
        "commands": {"benchmark": "dandelion-benchmark scale=cpu", "train": ["dandelion-train a"], "rollout": "r"},
    }


def test_headline_first_provenance_and_commands_last(tmp_path):
    for (key, model), (nxt, r20) in SCORES.items():
        for seed in (0, 1):
            path = cell_path(tmp_path, key, model, seed)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(_cell(key, model, seed, nxt + 0.0004 * seed, r20 + 0.0004 * seed)))
        ref = {"protocol_hash": "p" + key[:3], "next_step": _summary(0.5), "rollout_mean": _summary(0.9)}
        reference_path(tmp_path, key, "persistence").write_text(json.dumps(ref))
    LB.leaderboard(OmegaConf.create({"scale": "cpu", "results_dir": str(tmp_path), "plots": False}))
    md = (tmp_path / "leaderboard.md").read_text()
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings[:2] == [MD.VERDICT, MD.HEADLINE]  # the answer comes first: in words, then the table
    assert headings[-2:] == [MD.PROVENANCE, MD.COMMANDS]  # provenance and commands last
    before_headline = md.split(MD.HEADLINE)[0]
    assert "At 32x64 (2 datasets, 2 seeds per model, t_0.975,1 = 12.7)" in before_headline
    assert "Protocol (scale" not in before_headline and "dandelion-benchmark" not in before_headline
    assert "Protocol (scale `cpu`)" in md.split(MD.PROVENANCE)[1].split(MD.COMMANDS)[0]
    assert "test cpu" in md.split(MD.PROVENANCE)[1]  # the machine is named in the provenance
    # the headline: datasets as rows, models as columns (dandelion first), mean over the two seeds, best in bold
    table = [line for line in md.split(MD.HEADLINE)[1].split("\n## ")[0].splitlines() if line.startswith("|")]
    assert table[0] == "| dataset | dandelion | sfno | *persistence* |"
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table[2:]}
    # (at least 4 significant figures: 0.0052 is printed 0.005200, 0.0172 as 0.01720); two seeds 0.0004 apart:
    # t_0.975,1 sqrt(2 * 0.000283^2 / 2) = 0.0036, so Galewsky's gaps (0.002, 0.003) are ties and shock caps' are not
    assert rows["galewsky_32x64"] == ["**0.005200** / **0.01720**", "**0.003200** / **0.02020**", "*0.5000* / *0.9000*"]
    assert rows["shock_caps_32x64"] == ["**0.02920** / 0.8202", "0.03820 / **0.6652**", "*0.5000* / *0.9000*"]
