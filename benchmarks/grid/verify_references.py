"""Recompute the persistence and linear-AR references (and the oracle where it applies) of benchmark datasets on
the data now on disk and compare them with the committed reference JSONs: a check that a regenerated dataset is
the one the committed cells were scored on (identical references need identical test and train splits).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/grid/verify_references.py held_suarez_32x64 [KEY ...] [--write]
        [--equivalent-within=TOL] [--scale=cpu] [--transfer]

Prints, per key and reference, the committed and recomputed next-step and 1:20 VRMSE, whether every
summary is identical, and the largest relative difference. With ``--write`` the committed JSONs are replaced
by the recomputed ones (which then carry ``data_files_sha256``). With ``--equivalent-within=TOL``, a dataset
whose references all differ by at most TOL relative (round-off of a regeneration on another CPU) gets the
pair of data versions (the committed references' ``data_files_sha256`` and the data now on disk) recorded in
``results_dir/<key>/data_equivalence.json``, which the leaderboard cites instead of warning about the two
versions. With ``--transfer``, persistence is also recomputed on each of the key's zero-shot transfer test sets
on disk (configs/transfer.yaml) and compared with its committed ``transfer/<fine key>/persistence.json`` (never
written). Exits 1 if any reference differs (beyond TOL when given).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from omegaconf import OmegaConf

from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.grid.cells import (
    data_digest,
    data_equivalences,
    equivalence_path,
    load_cells,
    max_relative_difference,
)
from dandelion.benchmarks.grid.references import references_of
from dandelion.datasets.folder import is_complete
from dandelion.runtime import machine, write_json_atomic


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/grid/verify_references.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("keys", nargs="+", metavar="KEY", help="dataset keys of the scale, e.g. held_suarez_32x64")
    parser.add_argument(
        "--write", action="store_true", help="replace the committed reference JSONs by the recomputed ones"
    )
    parser.add_argument(
        "--equivalent-within",
        type=float,
        default=None,
        metavar="TOL",
        help="record the two data versions as equivalent when every reference differs by at most TOL relative",
    )
    parser.add_argument("--scale", default="cpu", help="benchmark scale config (default: cpu)")
    parser.add_argument(
        "--transfer", action="store_true", help="also recompute persistence on the key's transfer test sets on disk"
    )
    args = parser.parse_args(argv)
    for key in args.keys:
        if key.startswith("scale="):
            parser.error(f"{key!r} is not a dataset key: write --{key}")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    write, tol, keys = args.write, args.equivalent_within, args.keys
    cfg = B.compose("benchmark", [f"scale={args.scale}"])
    OmegaConf.set_struct(cfg, False)
    committed = Path(str(cfg.scale.results_dir))
    if not write:
        cfg.scale.results_dir = tempfile.mkdtemp()
    bad = 0
    for key in keys:
        spec = B.dataset_spec(cfg, key)
        path = spec["path"]
        worst, old_digests = {}, set()
        for name, fn in references_of(spec["dataset"]).items():  # the oracle too where the scenario has a flow
            old = json.loads((committed / key / f"{name}.json").read_text())
            new = fn(cfg, key, path)
            worst[name] = max_relative_difference(old, new)
            old_digests.add(old.get("data_files_sha256"))
            print(
                f"{key} {name}: next step {old['next_step']['vrmse']['mean']:.6g} -> "
                f"{new['next_step']['vrmse']['mean']:.6g}, "
                f"1:20 {old['rollout_mean']['vrmse']['mean']:.6g} -> {new['rollout_mean']['vrmse']['mean']:.6g}, "
                f"{'identical' if worst[name] == 0 else 'DIFFERENT'} (largest relative difference {worst[name]:.2e}), "
                f"data_files_sha256 {old.get('data_files_sha256')} -> {new['data_files_sha256']}",
                flush=True,
            )
        within = tol is not None and max(worst.values()) <= tol
        bad += not (max(worst.values()) == 0 or within)
        now = data_digest(path)
        if within and None in old_digests:
            print(
                f"{key}: the committed references carry no data_files_sha256 (made before it was recorded): no pair of "
                "versions to record",
                flush=True,
            )
        if within and len(old_digests) == 1 and None not in old_digests and now not in old_digests:
            entry = {
                "definition": "data_files_sha256",
                "versions": sorted({*old_digests, now}),
                "max_relative_difference": worst,
                "tolerance": tol,
                "evidence": (
                    "persistence and linear AR references (train and test splits) recomputed on the new version"
                ),
                "machine": machine("cpu")["cpu"],
                "date": time.strftime("%Y-%m-%d"),
                "command": "benchmarks/grid/verify_references.py " + " ".join(argv),
            }
            keep = [e for e in data_equivalences(committed, key) if set(e["versions"]) != set(entry["versions"])]
            write_json_atomic(equivalence_path(committed, key), {"equivalences": [*keep, entry]})
            print(
                f"{key}: versions {entry['versions']} recorded as equivalent in {equivalence_path(committed, key)}",
                flush=True,
            )
        if args.transfer:
            bad += _check_transfer_sets(args.scale, key, committed, tol)
    return 1 if bad else 0


def _check_transfer_sets(scale: str, key: str, committed: Path, tol: float | None) -> int:
    """Persistence recomputed on each transfer test set of ``key`` on disk against the committed one; returns the
    number that differ (beyond ``tol`` when given)."""
    from dandelion.benchmarks.transfer.sets import check_test_ids, fine_datasets
    from dandelion.benchmarks.transfer.zero_shot import persistence_on

    cfg = B.compose("transfer", [f"scale={scale}"])
    if key not in cfg.transfer.datasets:
        print(f"{key}: no transfer test sets in configs/transfer.yaml, skipped", flush=True)
        return 0
    cells = [c for c in load_cells(committed) if c["dataset_key"] == key]
    if not cells:
        print(
            f"{key}: no finished cell in {committed} to take the evaluation settings from: "
            "run dandelion-benchmark first",
            flush=True,
        )
        return 1
    cell, bad = cells[0], 0  # the evaluation settings, as dandelion-transfer takes them
    for fd in fine_datasets(cfg, key):
        done = committed / "transfer" / fd["key"] / "persistence.json"
        if not is_complete(fd["path"]) or not done.exists():
            print(f"{fd['key']}: not on disk or never scored, skipped", flush=True)
            continue
        check_test_ids(fd)  # raises, naming the ids, when a regenerated set holds other test trajectories
        old = json.loads(done.read_text())
        with tempfile.TemporaryDirectory() as tmp:
            new = persistence_on(fd, tmp, dict(cell["evaluation"]), int((cell.get("trainer") or {}).get("n_in", 4)))
        worst = max_relative_difference(old, new)
        bad += not (worst == 0 or (tol is not None and worst <= tol))
        print(
            f"{fd['key']} persistence: next step {old['next_step']['vrmse']['mean']:.6g} -> "
            f"{new['next_step']['vrmse']['mean']:.6g}, "
            f"1:20 {old['rollout_mean']['vrmse']['mean']:.6g} -> {new['rollout_mean']['vrmse']['mean']:.6g}, "
            f"{'identical' if worst == 0 else 'DIFFERENT'} (largest relative difference {worst:.2e})",
            flush=True,
        )
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
