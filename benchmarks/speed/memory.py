"""``dandelion-bench target=memory``: saved activations per training phase and the micro-batch plan that fits a GPU.

For every model of ``memory.names`` at the configured preset and grid, the activations a training step saves per
sample are counted on fake tensors (:func:`dandelion.training.memory.saved_bytes_per_sample`: bytes do not depend
on the device) for each phase's rollout length (``memory.phases``: ``n_out`` of the pretrain and of the fine-tune),
Dandelion's warps on ``memory.warp_kernel`` (``triton``, what CUDA runs), and the plan of
:func:`dandelion.training.memory.plan_micro_batch` is made against the budget the trainer would
take on a device of ``memory.device_gib`` free memory: ``fraction * (device - 4 x parameter bytes)`` (the
weights, their gradients and AdamW's two moments in float32; :func:`dandelion.training.memory.device_budget`).
Each row: the whole batch's saved activations, the micro-batch and count, whether block checkpointing had to be
turned on, and the peak saved activations of a micro-batch; a markdown table is printed (the one in
``benchmarks/speed/README.md``). Use::

    dandelion-bench target=memory                                   # paper, 256x512, batch 16, bf16, 78 GiB
    dandelion-bench target=memory memory.device_gib=139             # an H200
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from dandelion.registry import build_model, count_parameters
from dandelion.training.memory import plan_micro_batch, saved_bytes_per_sample
from dandelion.warp import set_warp_kernel

__all__ = ["memory_rows", "bench_memory", "markdown"]

GIB, MIB = 2**30, 2**20


def memory_rows(name: str, m) -> list[dict]:
    """The rows of one model (one per phase) for the ``memory`` config section ``m``."""
    torch.manual_seed(0)
    nlat, nlon, c_in, c_out = int(m.nlat), int(m.nlon), int(m.in_channels), int(m.out_channels)
    model = build_model(name, str(m.preset), c_in, c_out, nlat, nlon, str(m.grid))
    if m.get("warp_kernel"):  # Dandelion's warps as the priced device runs them (counted on the CPU)
        set_warp_kernel(model, str(m.warp_kernel))
    n_par = count_parameters(model)
    budget = int(float(m.fraction) * (float(m.device_gib) * GIB - 16 * n_par))
    amp, batch = str(m.dtype) == "bf16", int(m.batch)
    rows = []
    for n_out in m.phases:
        t0 = time.perf_counter()
        if hasattr(model, "checkpoint_blocks"):
            model.checkpoint_blocks = False
        per = saved_bytes_per_sample(model, (c_in, nlat, nlon), int(n_out), amp)

        def checkpointed(n=int(n_out)):
            model.checkpoint_blocks = True
            return saved_bytes_per_sample(model, (c_in, nlat, nlon), n, amp)

        row = {
            "model": name,
            "preset": str(m.preset),
            "nlat": nlat,
            "nlon": nlon,
            "dtype": str(m.dtype),
            "n_out": int(n_out),
            "batch": batch,
            "n_parameters": n_par,
            "saved_bytes_per_sample": per,
            "whole_batch_bytes": per * batch,
            "budget_bytes": budget,
        }
        try:
            plan = plan_micro_batch(
                batch,
                per,
                budget,
                checkpointed_bytes=checkpointed if hasattr(model, "checkpoint_blocks") else None,
                what=name,
            )
            row.update(plan=plan.as_dict(), peak_saved_bytes=plan.micro_batch * plan.per_sample_bytes, fits=True)
        except MemoryError as err:
            row.update(error=str(err), fits=False)
        row["count_s"] = time.perf_counter() - t0
        rows.append(row)
    return rows


def markdown(rows: list[dict], device_gib: float) -> str:
    """The table of ``rows`` (one line per model and phase)."""
    head = (
        "| model | phase (n_out) | saved MiB/sample | whole batch GiB | micro-batch x n | checkpointing | "
        f"peak saved GiB (budget) | fits {device_gib:g} GiB |\n|---|---|---:|---:|---|---|---:|---|\n"
    )
    lines = []
    for r in rows:
        phase = "pretrain" if r["n_out"] == 1 else "fine-tune"
        if "plan" in r:
            p = r["plan"]
            mb = f"{p['micro_batch']} x {p['n_micro']}"
            ck = "on" if p["checkpoint_blocks"] else "off"
            peak = f"{r['peak_saved_bytes'] / GIB:.1f} ({r['budget_bytes'] / GIB:.1f})"
        else:
            mb, ck, peak = "-", "-", f"- ({r['budget_bytes'] / GIB:.1f})"
        lines.append(
            f"| {r['model']} | {phase} ({r['n_out']}) | {r['saved_bytes_per_sample'] / MIB:,.0f} | "
            f"{r['whole_batch_bytes'] / GIB:.1f} | {mb} | {ck} | {peak} | {'yes' if r['fits'] else 'NO'} |"
        )
    return head + "\n".join(lines) + "\n"


def bench_memory(m, device: str, save: Callable[[dict], None] | None = None, out: dict | None = None) -> dict:
    """``target=memory``: the rows of every model of ``m.names`` and the markdown table (printed, and in ``out``)."""
    out = {} if out is None else out
    rows = out.setdefault("rows", [])
    for name in m.names:
        try:
            new = memory_rows(str(name), m)
        except Exception as err:  # recorded; the other models are counted
            new = [{"model": str(name), "error": f"{type(err).__name__}: {err}", "fits": False}]
        rows.extend(new)
        if save:
            save(out)
        for r in new:
            if "plan" in r:
                print(
                    f"[memory] {r['model']} n_out={r['n_out']}: {r['saved_bytes_per_sample'] / MIB:,.0f} MiB/sample, "
                    f"{r['plan']['reason']}",
                    flush=True,
                )
            else:
                print(f"[memory] {r['model']}: {r.get('error')}", flush=True)
    out["table"] = markdown([r for r in rows if "saved_bytes_per_sample" in r], float(m.device_gib))
    print(out["table"], flush=True)
    return out
