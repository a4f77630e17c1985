"""A benchmark training run under ``torchrun``: ``dandelion-benchmark ... nproc_per_node=N``.

With ``nproc_per_node`` set (>= 2), each training run of a cell is started as ``torchrun --standalone
--nproc_per_node N -m dandelion.cli.train <the run's overrides>`` (one node, N ranks, DDP;
:class:`dandelion.training.Trainer`) instead of in the benchmark's own process; evaluation stays in the
benchmark's process. The protocol does not change with N: ``trainer.batch_size`` is the global batch, split
evenly over the ranks (refused in one line when N does not divide it), so the steps, the batches and the
learning rate are those of one device, and the cell's fingerprint is the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

__all__ = ["train_under_torchrun"]


def train_under_torchrun(overrides: list[str], run_dir: Path, nproc: int) -> dict:
    """Train one run with ``nproc`` ranks on this node; returns its ``result.json``.

    Raises
    ------
    FloatingPointError
        When the run diverged (the trainer's non-finite loss, seen in a rank's output), as the in-process run does.
    RuntimeError
        In one line for any other failure: the exit status and the last line of the ranks' output.
    """
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={int(nproc)}"]
    cmd += ["-m", "dandelion.cli.train", *overrides]
    p = subprocess.run(cmd, capture_output=True, text=True)
    text = p.stdout + p.stderr
    sys.stdout.write(p.stdout)
    if p.returncode:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        bad = next((ln for ln in lines if "FloatingPointError" in ln), None)
        if bad is not None:
            raise FloatingPointError(bad.split("FloatingPointError:", 1)[-1].strip())
        why = next((ln for ln in lines if ": error: " in ln), lines[-1] if lines else "no output")  # the CLI's line
        raise RuntimeError(f"torchrun with {nproc} ranks failed (exit {p.returncode}): {why}")
    return json.loads((Path(run_dir) / "result.json").read_text())
