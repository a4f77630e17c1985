"""Measurement primitives of ``dandelion-bench``: clocks, one training step, saved activations, peak memory.

Every number of ``dandelion-bench`` (and of the GPU check) is taken with these functions, so the
models, the presets and the devices are measured the same way:

* time: :func:`timed` returns the process CPU time (``time.process_time``: all threads of this
  process summed, what a computation costs on a CPU shared with other jobs) and the wall time of
  one call; on CUDA the call is bracketed by ``torch.cuda.synchronize`` and the wall time is the
  number that counts;
* a forward (:func:`model_step`): the network, and for a model with advected persistence (Dandelion's presets,
  ``advect_state``) also the move of the newest input frame along its displacement, as a training step does
  (:func:`dandelion.step.next_frame`), so that sampling is timed and its activations counted;
* a training step (:func:`train_step`): that forward, mean-square loss against zeros, backward, one
  AdamW step and ``zero_grad(set_to_none=True)``; under ``dtype="bf16"`` forward and loss run in
  ``torch.autocast(bfloat16)``;
* saved activations (:func:`saved_activation_bytes`): the bytes autograd keeps for the backward
  pass of one forward, collected with :func:`torch.autograd.graph.saved_tensors_hooks` and summed
  over UNIQUE storages (a view shares its base's storage and is counted once); storages of the
  model's parameters and buffers are left out (they are resident anyway);
* peak memory (:func:`peak_bytes`): the largest amount of memory allocated during a call above what
  was allocated when it began. On CUDA ``torch.cuda.max_memory_allocated`` (after
  ``reset_peak_memory_stats``) minus ``memory_allocated`` at the start; on the CPU the running sum of
  the allocation and free events of torch's CPU allocator recorded by the torch profiler
  (``profile_memory=True``), whose maximum is the peak. Both count tensor memory only (not the
  Python interpreter, not the CUDA context, not allocator caches). The profiler's own log lines
  (libkineto's ``USDT:``/``STAGE:`` markers, and its failed GPU count on a machine without one) are held
  back from stderr; anything else written there meanwhile is passed on when the call ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import torch
from torch.profiler import ProfilerActivity, profile

from dandelion.registry import unwrap_model
from dandelion.step import next_frame

__all__ = [
    "sync",
    "median",
    "timed",
    "autocast",
    "model_step",
    "train_step",
    "saved_activation_bytes",
    "peak_bytes",
    "tensor_bytes",
]

#: The dtypes ``dandelion-bench`` measures: float32, and bfloat16 autocast (CUDA only).
DTYPES = ("fp32", "bf16")


def sync(device: torch.device | str) -> None:
    """Wait for the device's queued work (CUDA); no-op on the CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median(values: list[float]) -> float:
    """Median of a non-empty list (the mean of the two middle values for an even length).

    Raises
    ------
    ValueError
        If ``values`` is empty.
    """
    if not values:
        raise ValueError("median of an empty list: measure at least one repeat (n_repeat >= 1)")
    s = sorted(float(v) for v in values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def timed(fn: Callable[[], object], device: torch.device | str) -> tuple[float, float]:
    """Run ``fn()`` once; returns ``(process_cpu_seconds, wall_seconds)``, synchronised on CUDA."""
    sync(device)
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    sync(device)
    return time.process_time() - c0, time.perf_counter() - t0


def autocast(device: torch.device | str, dtype: str):
    """The context of a measurement: ``torch.autocast(bfloat16)`` for ``bf16``, nothing for ``fp32``.

    Raises
    ------
    ValueError
        If ``dtype`` is not ``fp32`` or ``bf16``.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}: use one of {DTYPES}")
    if dtype == "bf16":
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def model_step(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``model(x)``; for a model with advected persistence (``advects_state``) the step's output instead:
    the newest frame (the last ``C`` input channels, ``C`` = output channels less the three of the displacement)
    moved along the displacement plus the increment (:func:`dandelion.step.next_frame` with unit scales), shape
    ``(B, C, nlat, nlon)``. The model may be wrapped (DDP, ``torch.compile``)."""
    core = unwrap_model(model)
    if not getattr(core, "advects_state", False):
        return model(x)
    c = core.out_channels
    return next_frame(model, x, c, torch.ones(c, device=x.device))


def train_step(model: torch.nn.Module, x: torch.Tensor, opt: torch.optim.Optimizer | None, dtype: str = "fp32") -> None:
    """One training step on ``x``: forward (:func:`model_step`), MSE against zeros, backward, optimiser step,
    gradients freed."""
    with autocast(x.device, dtype):
        loss = model_step(model, x).float().square().mean()
    loss.backward()
    if opt is not None:
        opt.step()
        opt.zero_grad(set_to_none=True)


def tensor_bytes(t: torch.Tensor) -> dict[int, int]:
    """``{storage address: bytes}`` of the storages behind ``t`` (values and indices of a sparse tensor)."""
    if t.layout == torch.sparse_coo:
        return {**tensor_bytes(t._indices()), **tensor_bytes(t._values())}
    if t.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        parts = (t.values(),) + (
            (t.crow_indices(), t.col_indices())
            if t.layout in (torch.sparse_csr, torch.sparse_bsr)
            else (t.ccol_indices(), t.row_indices())
        )
        out: dict[int, int] = {}
        for p in parts:
            out.update(tensor_bytes(p))
        return out
    s = t.untyped_storage()
    return {s.data_ptr(): s.nbytes()} if s.nbytes() else {}


def saved_activation_bytes(model: torch.nn.Module, x: torch.Tensor, dtype: str = "fp32") -> int:
    """Bytes autograd saves for the backward pass of ``model(x)`` (unique storages, parameters excluded).

    Parameters
    ----------
    model : torch.nn.Module
        In the mode it is in (train mode for a training step).
    x : torch.Tensor
        The input batch (its own storage counts when a layer saves it).
    dtype : str
        ``fp32`` or ``bf16`` (autocast).

    Returns
    -------
    int : bytes of the distinct storages of every tensor packed by autograd during one forward, minus
    the storages of ``model``'s parameters and buffers. The graph is freed before returning.
    """
    resident: set[int] = set()
    for t in list(model.parameters()) + list(model.buffers()):
        resident.update(tensor_bytes(t.detach()))
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen.update(tensor_bytes(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast(x.device, dtype):
        y = model_step(model, x)
    del y
    return int(sum(n for ptr, n in seen.items() if ptr not in resident))


def _cpu_peak(events: list[tuple[int, int]]) -> int:
    """Largest running sum of ``(time, bytes)`` allocation (+) and free (-) events, in time order."""
    cur = peak = 0
    for _, n in sorted(events, key=lambda e: e[0]):
        cur += n
        peak = max(peak, cur)
    return int(peak)


def peak_bytes(fn: Callable[[], object], device: torch.device | str) -> int:
    """Peak memory allocated by torch during ``fn()`` above the amount allocated when it began (bytes).

    On CUDA: ``max_memory_allocated - memory_allocated`` at the start (peak statistics reset
    first). On the CPU: the maximum running sum of the CPU allocator's allocation and free events
    recorded by ``torch.profiler.profile(profile_memory=True)`` (tensors freed after allocated count
    down; the CPU allocator does not cache, so this is memory really taken from the system).

    Raises
    ------
    RuntimeError
        If the profiler records no memory events on the CPU (a torch build whose profiler has no
        memory tracing): a silent 0 would be wrong. A probe allocation made before ``fn`` tells
        this apart from a call that allocates nothing.
    """
    device = torch.device(device)
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        sync(device)
        return int(torch.cuda.max_memory_allocated(device) - base)
    if device.type != "cpu":
        raise ValueError(f"peak memory is measured on cpu and cuda, not {device.type}")
    with _without_profiler_log():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            probe = torch.empty(64, dtype=torch.uint8)
            del probe
            fn()
        events = sorted(
            ((e.start_ns(), int(e.nbytes())) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
            key=lambda e: e[0],
        )
    if len(events) < 2:
        raise RuntimeError(
            "the torch profiler recorded no memory events: this torch build cannot measure CPU peak memory"
        )
    return _cpu_peak(events[2:])  # the probe's allocation and free come first


# libkineto's log lines ("USDT:<time> <pid>:<tid> <file>:<line>] profiler_start"): markers of every profile, and
# the failed GPU count of a CUDA build on a machine without a GPU. Its errors and warnings pass.
_KINETO_NOISE = re.compile(r"^(USDT|STAGE|INFO|VERBOSE):\S+ \S+ \d+:\d+ \S+\] |^ERROR:.*\] gpuGetDeviceCount failed")


@contextlib.contextmanager
def _without_profiler_log() -> Iterator[None]:
    """Hold back what is written to file descriptor 2 meanwhile (libkineto writes there, below Python), then pass
    it on to stderr without the profiler's own log lines (:data:`_KINETO_NOISE`)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            text = held.read().decode(errors="replace")
            kept = "".join(line for line in text.splitlines(keepends=True) if not _KINETO_NOISE.match(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()
