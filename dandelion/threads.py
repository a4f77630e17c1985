"""CPU threads of a job: torch's intra-op threads set to the cores the process may use, without oversubscription.

torch's default is the machine's physical cores, whatever the process's CPU affinity (``taskset``, a container's
cpuset) or cgroup quota allows, plus an inter-op pool and, in training, DataLoader workers each with their own threads:
on a busy or restricted machine the threads then wait on each other (the quickstart took 28 minutes with the default
on a loaded 2-core machine, 1.2 with ``OMP_NUM_THREADS=1``, issue #70). :func:`set_cpu_threads` is what every
``dandelion-*`` job calls before its work (:func:`dandelion.cli.common.run`):

* ``threads=N`` (the job's key) wins, then ``OMP_NUM_THREADS``;
* otherwise the usable cores (:func:`usable_cores`: the affinity mask, capped by a cgroup v2 ``cpu.max`` quota) minus
  the DataLoader workers (each worker runs one torch thread), at least one;
* the inter-op pool gets one thread (our jobs run one graph at a time).
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import torch

__all__ = ["usable_cores", "set_cpu_threads"]

log = logging.getLogger(__name__)


def usable_cores() -> int:
    """The cores this process may run on: ``os.sched_getaffinity`` (``os.cpu_count`` where it does not exist), capped
    by a cgroup v2 CPU quota (``/sys/fs/cgroup/cpu.max``, rounded up)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:
        n = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def set_cpu_threads(threads=None, workers: int = 0) -> int:
    """Set torch's intra-op threads (and one inter-op thread) for a job; returns the intra-op count.

    Parameters
    ----------
    threads : int or None
        An explicit count (the job's ``threads=`` key); None: ``OMP_NUM_THREADS`` if set, else :func:`usable_cores`
        minus ``workers``.
    workers : DataLoader worker processes the job starts (``trainer.num_workers``).

    Raises
    ------
    ValueError
        For a ``threads`` that is not a positive integer.
    """
    if threads is not None:
        if isinstance(threads, bool) or int(threads) != threads or int(threads) < 1:
            raise ValueError(f"threads={threads!r} must be a positive integer (or null: the cores this job may use)")
        n, why = int(threads), "threads="
    elif os.environ.get("OMP_NUM_THREADS", "").strip().isdigit() and int(os.environ["OMP_NUM_THREADS"]) > 0:
        n, why = int(os.environ["OMP_NUM_THREADS"]), "OMP_NUM_THREADS"
    else:
        cores = usable_cores()
        n, why = max(1, cores - max(0, int(workers or 0))), f"{cores} usable cores, {int(workers or 0)} loader workers"
    torch.set_num_threads(n)
    try:  # only possible before the first inter-op work of the process
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    log.info("torch threads: %d (%s)", n, why)
    return n
