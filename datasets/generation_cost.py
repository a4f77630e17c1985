"""The cost of making a dataset: one record per finished batch of :mod:`dandelion.datasets.generate`, summed.

Each batch writes ``<dataset>/.generation_cost/ids_<first>-<last>.json`` (atomically) with its process CPU-seconds
(``time.process_time``: every thread of the process), wall seconds, torch threads and machine. The folder is hidden,
so a dataset folder holding it is not refused as foreign, and it is not part of the checksums. A resumed or
multi-rank generation adds its batches' records, so the sum covers every piece.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from dandelion.runtime import machine, write_json_atomic

__all__ = ["COST_DIR", "record_batch_cost", "generation_cost"]

#: Folder (hidden, so not a foreign file; not checksummed) of the per-batch cost records of :func:`_run`.
COST_DIR = ".generation_cost"


def record_batch_cost(root: Path, batch: list[int], clock: tuple[float, float]) -> None:
    """Write the cost of one finished batch: process CPU-seconds (every thread of this process) and wall seconds
    since ``clock``, with the threads and the machine, as ``root/.generation_cost/ids_<first>-<last>.json``."""
    cpu, wall = time.process_time() - clock[0], time.perf_counter() - clock[1]
    rec = {
        "ids": [int(i) for i in batch],
        "cpu_seconds": float(cpu),
        "wall_seconds": float(wall),
        "threads": int(torch.get_num_threads()),
        "machine": machine(),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json_atomic(root / COST_DIR / f"ids_{batch[0]}-{batch[-1]}.json", rec)


def generation_cost(root) -> dict:
    """The dataset's generation cost from its per-batch records: ``cpu_seconds`` and ``cpu_minutes`` (summed
    process CPU time of the batches that finished, on every rank and in every resumed piece), ``wall_seconds``
    (summed per batch), ``batches``, ``trajectories``, ``threads`` and ``cpus`` (the distinct values met).

    A batch interrupted before it finished is recomputed when the run resumes and only that finished run is counted,
    so the figure is what making the dataset costs, not the work an interruption wasted. A folder made before the
    records existed has none: ``cpu_seconds`` is then None."""
    recs = []
    for f in sorted((Path(root) / COST_DIR).glob("ids_*.json")):
        try:
            recs.append(json.loads(f.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # a torn record (the write is atomic, so only a foreign file): not counted
    cpu = sum(float(r["cpu_seconds"]) for r in recs) if recs else None
    return {
        "cpu_seconds": cpu,
        "cpu_minutes": None if cpu is None else cpu / 60.0,
        "wall_seconds": sum(float(r["wall_seconds"]) for r in recs) if recs else None,
        "batches": len(recs),
        "trajectories": sum(len(r["ids"]) for r in recs),
        "threads": sorted({int(r["threads"]) for r in recs}),
        "cpus": sorted({str((r.get("machine") or {}).get("cpu")) for r in recs}),
    }
