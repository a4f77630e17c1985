"""What a training run cost the machine: process CPU-seconds and the torch threads, summed over resumes.

:class:`TrainCost` is the clock of :class:`dandelion.training.trainer.Trainer`. It counts the process CPU time
(:func:`time.process_time`: user and system time of every thread of the process) spent inside
:meth:`~dandelion.training.trainer.Trainer.fit`, training steps and validations both; model building and data
opening before ``fit`` are not counted. Each checkpoint stores the running total (``extra.train_cpu_seconds``), so a
run interrupted and resumed from its ``last.pt`` reports the CPU time of the work its checkpoints hold: the steps
lost after the last checkpoint and redone after the resume are counted once, as they were spent once more. Under
torchrun the total is summed over the ranks. DataLoader worker processes (``num_workers > 0``) are other processes
and are not counted; on a GPU the number says how busy the host was, not what the kernels cost.

A checkpoint written before the clock existed holds no total: the run's total is then unknown, and stays None
(``null`` in ``result.json``) through every later resume rather than a number that misses the first part.
"""

from __future__ import annotations

import time

import torch

__all__ = ["TrainCost"]


class TrainCost:
    """The running CPU-time total of one training run (one per :class:`~dandelion.training.trainer.Trainer`).

    Attributes: ``before`` (the CPU-seconds of the earlier parts of a resumed run, this rank's share; None when a
    checkpoint without the field was resumed: the total is unknown), ``threads`` (the distinct
    ``torch.get_num_threads()`` values of every part trained so far, sorted; an old checkpoint's are not known).
    """

    def __init__(self):
        self.before: float | None = 0.0
        self.threads: list[int] = []
        self._t0: float | None = None

    def restore(self, extra: dict, rank: int = 0) -> None:
        """Continue from a checkpoint's ``extra`` (:func:`dandelion.training.resume.resume`): rank 0 carries the
        stored total (a sum over the ranks of the earlier parts), the other ranks start from 0; a checkpoint
        without ``train_cpu_seconds`` (older, or saved with the total unknown) makes the total unknown."""
        saved = extra.get("train_cpu_seconds")
        self.before = None if saved is None else (float(saved) if rank == 0 else 0.0)
        self.threads = sorted({int(t) for t in extra.get("train_threads") or []})

    def start(self) -> None:
        """Start counting (at the top of ``fit``), recording the torch threads this part trains with."""
        self._t0 = time.process_time()
        self.threads = sorted({*self.threads, torch.get_num_threads()})

    def stop(self) -> None:
        """Stop counting (at the end of ``fit``): the part's time joins ``before``, so a second ``fit`` adds to it."""
        if self._t0 is not None and self.before is not None:
            self.before += time.process_time() - self._t0
        self._t0 = None

    def seconds(self, dist=None) -> float | None:
        """The run's CPU-seconds so far, summed over the ranks of ``dist`` (a collective under torchrun: every rank
        calls it at the same points; a :class:`dandelion.runtime.ProcessGroup`, None: this process only); None
        when the total is unknown."""
        if self.before is None:  # the same on every rank: they all resumed the same checkpoint
            return None
        mine = self.before + (0.0 if self._t0 is None else time.process_time() - self._t0)
        return float(dist.all_sum([mine])[0]) if dist is not None else mine

    def state(self, dist=None) -> dict:
        """What a checkpoint's ``extra`` keeps (a collective, as :meth:`seconds`)."""
        return {"train_cpu_seconds": self.seconds(dist), "train_threads": list(self.threads)}

    def summary(self, dist=None) -> dict:
        """The fields of a run's ``result.json``: ``train_cpu_seconds`` (None: unknown) and ``train_threads`` (an int
        when every part trained with the same count, else the sorted list of counts; None before any part)."""
        t = self.threads
        return {"train_cpu_seconds": self.seconds(dist), "train_threads": t[0] if len(t) == 1 else (t or None)}
