"""Where does Dandelion lose under zero-shot resolution transfer? Score a cell's checkpoint on a finer transfer test
set twice: with every pooling kept at the band limit it had on the trained grid (``Dandelion(pool_lmax=...)``, the
convention of SFNO's fixed ``lmax``; the transfer protocol's rule since 2026-12-02) and with each pooling at the band
limit of the finer level grids (the band limits double with the grid; the protocol's rule before).

    OMP_NUM_THREADS=1 .venv/bin/python tools/transfer_band_probe.py held_suarez_32x64 --grid 64x128 \
        --variant coarse_band --seeds 0 1 2 [--scale cpu] [--output FILE]

Needs the cells' checkpoints and the transfer test sets on this machine (``dandelion-transfer scale=cpu
retrain_missing=true 'only.datasets=[KEY]'`` makes both). Prints next-step and rollout-mean (1:n_steps of the cell's
evaluation) area-weighted VRMSE per seed and treatment; ``--output`` writes them as JSON (atomically). Exits 2, before
scoring anything, when a cell, checkpoint or test set is missing or the grid is not configured.
"""
import argparse
import sys
import time
from pathlib import Path

import torch

from dandelion.benchmarks import benchmark as B
from dandelion.benchmarks.cells import load_cells, metric_summaries
from dandelion.benchmarks.transfer import transfer_forecaster, transfer_rule
from dandelion.benchmarks.transfer_retrain import score, selected_checkpoint
from dandelion.benchmarks.transfer_report import VARIANTS
from dandelion.benchmarks.transfer_sets import _parse_grid, check_test_ids, fine_datasets
from dandelion.checkpoint import config_from_checkpoint, load_checkpoint
from dandelion.datasets.folder import is_complete
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.registry import build_model, import_plugins
from dandelion.runtime import machine, versions, write_json_atomic


def grid_pool_lmax(ckpt: dict, nlat: int, nlon: int) -> list[int]:
    """The pooling band limits of the checkpoint's Dandelion built by default on ``nlat x nlon``: every degree the
    level grids resolve (a ``pool_lmax`` the checkpoint was trained with is dropped)."""
    spec, g = ckpt["extra"]["model_spec"], ckpt["grid"]
    model = build_model(spec["name"], spec["preset"], int(spec["in_channels"]), int(spec["out_channels"]), int(nlat), int(nlon),
                        str(g["grid"]), **{k: v for k, v in dict(spec.get("overrides") or {}).items() if k != "pool_lmax"})
    return list(model.pool_lmax)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="tools/transfer_band_probe.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("key", help="dataset key of the scale (the trained grid), e.g. held_suarez_32x64")
    parser.add_argument("--grid", default="64x128", help="finer grid of the transfer test set, NLATxNLON (default 64x128)")
    parser.add_argument("--variant", default="coarse_band", choices=list(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the scale's seeds")
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--output", default=None, help="JSON file for the scores")
    return parser.parse_args(argv)


def _fail(msg: str) -> int:
    print(msg, file=sys.stderr)
    return 2


def main(argv) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    cfg = B.compose("transfer", [f"scale={args.scale}"])
    import_plugins(list(cfg.scale.get("plugins") or []))
    hint = f"dandelion-transfer scale={args.scale} retrain_missing=true 'only.datasets=[{args.key}]'"
    if args.key not in cfg.transfer.datasets:
        return _fail(f"{args.key!r} is not in configs/transfer.yaml: choose from {list(cfg.transfer.datasets)}")
    try:
        fds = fine_datasets(cfg, args.key)
        cells = {int(c["seed"]): c for c in load_cells(cfg.scale.results_dir) if c["dataset_key"] == args.key and c["model"] == "dandelion"}
    except FileNotFoundError as err:
        return _fail(f"{err}: run {hint}")
    want = _parse_grid(args.grid)
    match = [fd for fd in fds if (int(fd["nlat"]), int(fd["nlon"])) == want and fd["variant"] == args.variant]
    if not match:
        return _fail(f"no {args.variant} test set at {args.grid} for {args.key} in configs/transfer.yaml: it has "
                     f"{sorted({(fd['nlat'], fd['nlon'], fd['variant']) for fd in fds})}")
    fd = match[0]
    if not is_complete(fd["path"]):
        return _fail(f"the test set {fd['path']} is missing or incomplete: run {hint}")
    check_test_ids(fd)
    seeds = list(args.seeds) if args.seeds is not None else [int(k) for k in cfg.scale.seeds]
    for seed in seeds:  # everything checked before anything is scored
        if seed not in cells:
            return _fail(f"{args.key}: no finished Dandelion cell for seed {seed} (have {sorted(cells)}): run dandelion-benchmark scale={args.scale} first")
        if not Path(selected_checkpoint(cells[seed])).exists():
            return _fail(f"{args.key} dandelion seed {seed}: checkpoint {selected_checkpoint(cells[seed])} is not on this machine: {hint} retrains it")
    rows = []
    for seed in seeds:
        cell, ck = cells[seed], selected_checkpoint(cells[seed])
        ckpt = load_checkpoint(ck)
        if int(config_from_checkpoint(ckpt).get("seed", seed)) != seed:
            return _fail(f"cell {cell.get('_path')} is seed {seed} but its checkpoint {ck} was trained with another seed")
        e = dict(cell["evaluation"])
        data = WindowDataset(fd["path"], e.get("split", "test"), n_in=int((cell.get("trainer") or {}).get("n_in", 4)), n_out=1)
        pool = list(transfer_rule(ckpt)["overrides"]["pool_lmax"])  # the protocol's rule: what the leaderboard scores
        for treatment, over in (("grid_bands", {"pool_lmax": grid_pool_lmax(ckpt, data.grid.nlat, data.grid.nlon)}), ("trained_bands", {"pool_lmax": pool})):
            t0 = time.perf_counter()
            fc, _ = transfer_forecaster(ck, data, ckpt=ckpt, overrides=over)
            s = metric_summaries(score(fc, data, e))
            row = {"seed": seed, "treatment": treatment, "pool_lmax": list(fc.model.pool_lmax), "trained_pool_lmax": pool,
                   "next_step": s["next_step"]["vrmse"]["mean"], "rollout_mean": s["rollout_mean"]["vrmse"]["mean"],
                   "n_steps": int(e["n_steps"]), "seconds": time.perf_counter() - t0}
            rows.append(row)
            print(f"{fd['key']} dandelion seed {seed} {treatment} (pool_lmax {row['pool_lmax']}): next step {row['next_step']:.4f}, "
                  f"1:{row['n_steps']} {row['rollout_mean']:.4f}", flush=True)
    if args.output:
        write_json_atomic(args.output, {"dataset_key": args.key, "fine_key": fd["key"], "rows": rows, "metric": "area-weighted VRMSE",
                                        "command": "tools/transfer_band_probe.py " + " ".join(argv), "versions": versions(),
                                        "machine": machine("cpu"), "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
