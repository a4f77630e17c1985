"""Speed and memory of one model: forward time, training-step time, peak memory, parameter count.

One helper, :func:`time_model`, shared by ``dandelion-bench``, the baselines and the model profiles
(INTERFACES.md, "Shared speed helper"), so every number in a report is measured the same way.
"""

from __future__ import annotations

import resource
import sys
import time

import torch

from dandelion.registry import count_parameters

__all__ = ["time_model", "count_parameters"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _maxrss_bytes() -> int:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss) if sys.platform == "darwin" else int(rss) * 1024


def time_model(model: torch.nn.Module, x: torch.Tensor, n_warmup: int = 1, n_repeat: int = 3) -> dict:
    """Time a model's forward pass and a full training step on one input batch.

    The training step is forward, a mean-square loss against zeros, backward and one AdamW step
    (lr 1e-12, so the weights hardly move; the model's parameters ARE updated, pass a copy if that
    matters). Times are medians over ``n_repeat`` runs after ``n_warmup`` untimed runs; on CUDA every
    timed region is bracketed by ``torch.cuda.synchronize``.

    Parameters
    ----------
    model : torch.nn.Module
        Any model taking ``x``; it is used on the device and dtype it already has.
    x : torch.Tensor of shape (B, in_channels, nlat, nlon)
        Input batch, on the model's device.
    n_warmup, n_repeat : int
        Untimed and timed repetitions (``n_repeat >= 1``).

    Returns
    -------
    dict with
        ``forward_s`` : float, median seconds of one forward pass under ``torch.no_grad``;
        ``train_step_s`` : float, median seconds of forward + backward + optimizer step;
        ``peak_memory_bytes`` : int. On CUDA, ``torch.cuda.max_memory_allocated`` during the
            training steps (the peak statistics are reset first). On CPU, the growth of the process's
            peak resident set size (``resource.getrusage(...).ru_maxrss``) over the whole measurement;
            that is a high-water mark of the PROCESS, so it reads 0 when an earlier, larger
            computation in the same process already set the peak: measure in a fresh process (or
            the largest case first) for a meaningful CPU number;
        ``n_parameters`` : int, trainable REAL scalars (a complex parameter counts twice;
            :func:`dandelion.registry.count_parameters`, the count of the parameter tables);
        ``device`` : str;
        ``forward_cpu_s``, ``train_step_cpu_s`` : float, the same medians in CPU time of this
            process (``time.process_time``, all threads summed): on a CPU shared with other jobs
            these are closer to the cost of the computation than the wall-clock times.

    Raises
    ------
    ValueError
        If ``n_repeat < 1`` or ``n_warmup < 0``.
    """
    if n_repeat < 1 or n_warmup < 0:
        raise ValueError(f"need n_repeat >= 1 and n_warmup >= 0, got n_repeat={n_repeat}, n_warmup={n_warmup}")
    device = x.device
    was_training = model.training
    rss0 = _maxrss_bytes()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)

    # forward only
    model.eval()
    fwd, fwd_cpu = [], []
    with torch.no_grad():
        for i in range(n_warmup + n_repeat):
            _sync(device)
            t0, c0 = time.perf_counter(), time.process_time()
            model(x)
            _sync(device)
            if i >= n_warmup:
                fwd.append(time.perf_counter() - t0)
                fwd_cpu.append(time.process_time() - c0)

    # training step
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-12) if params else None
    steps, steps_cpu = [], []
    for i in range(n_warmup + n_repeat):
        _sync(device)
        t0, c0 = time.perf_counter(), time.process_time()
        y = model(x)
        loss = y.float().square().mean()
        loss.backward()
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        _sync(device)
        if i >= n_warmup:
            steps.append(time.perf_counter() - t0)
            steps_cpu.append(time.process_time() - c0)
    del y, loss, opt

    if device.type == "cuda":
        peak = int(torch.cuda.max_memory_allocated(device))
    else:
        peak = max(0, _maxrss_bytes() - rss0)
    model.train(was_training)
    return {
        "forward_s": _median(fwd),
        "train_step_s": _median(steps),
        "peak_memory_bytes": peak,
        "n_parameters": count_parameters(model),
        "device": str(device),
        "forward_cpu_s": _median(fwd_cpu),
        "train_step_cpu_s": _median(steps_cpu),
    }


def _median(ts: list[float]) -> float:
    return float(sorted(ts)[len(ts) // 2])
