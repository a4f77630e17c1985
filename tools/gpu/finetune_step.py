#!/usr/bin/env python3
"""One fine-tune training step at a GPU scale's batch: the micro-batch plan, its step time and peak memory, as JSON.

    python tools/gpu/finetune_step.py --out step.json [--model dandelion] [--preset paper] [--nlat 256 --nlon 512]
        [--batch 16] [--n-out 4] [--device cuda] [--budget-gib G]

The model (``--in-channels`` 16, ``--out-channels`` 4: Galewsky's 4 frames in, one frame out) is built on the device,
the trainer's plan is made (:func:`dandelion.training.memory.plan_phases`: micro-batches from the saved activations
and the device's free memory, or ``--budget-gib``; block checkpointing where one sample does not fit), then one
step of the trainer's kind runs: bf16 autocast, an ``n_out``-step rollout (:func:`dandelion.forecast.rollout`), the
mean-square loss, gradients accumulated over the micro-batches (:func:`dandelion.training.memory.accumulate`), one
AdamW step. Recorded: the plan, the step's seconds (after one untimed step) and its peak memory above the start
(:func:`dandelion.benchmarks.speed.measure.peak_bytes`) next to the device's total memory. Exit status 0 when the
step ran, 1 when it failed (the error is in the JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="dandelion")
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--nlat", type=int, default=256)
    ap.add_argument("--nlon", type=int, default=512)
    ap.add_argument("--in-channels", type=int, default=16)
    ap.add_argument("--out-channels", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--n-out", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-gib", type=float, default=None)
    a = ap.parse_args(argv)

    import torch

    from dandelion.benchmarks.speed.measure import peak_bytes, sync
    from dandelion.forecast import rollout
    from dandelion.registry import build_model
    from dandelion.training.memory import accumulate, plan_phases

    rec: dict = {"settings": vars(a), "ok": False}
    out = Path(a.out)
    try:
        device = torch.device(a.device)
        torch.manual_seed(0)
        model = build_model(a.model, a.preset, a.in_channels, a.out_channels, a.nlat, a.nlon, "equiangular").to(device)
        options = SimpleNamespace(micro_batch=None, memory_budget_gib=a.budget_gib, amp=True)
        t0 = time.perf_counter()
        plan = plan_phases(model, device, a.batch, (a.in_channels, a.nlat, a.nlon), [{"n_out": a.n_out}], options)
        rec["plan"] = plan[a.n_out].as_dict()
        rec["plan_s"] = time.perf_counter() - t0
        print(f"[finetune_step] plan: {plan[a.n_out].reason}", flush=True)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
        x = torch.randn(a.batch, a.in_channels, a.nlat, a.nlon, device=device)
        y = torch.randn(a.batch, a.n_out, a.out_channels, a.nlat, a.nlon, device=device)

        ones = torch.ones(a.out_channels, device=device)  # unit increment scales (Dandelion's presets advect)

        def loss_fn(xb, yb):
            with torch.autocast(device.type, dtype=torch.bfloat16):
                pred = rollout(model, xb, a.n_out, a.out_channels, ones)  # target increment, as trained
            return (pred.float() - yb).square().mean()

        def step():
            opt.zero_grad(set_to_none=True)
            accumulate(model, x, y, plan[a.n_out].micro_batch, loss_fn)
            opt.step()

        step()  # AdamW's state and the kernels' first calls
        sync(device)
        t0 = time.perf_counter()
        step()
        sync(device)
        rec["step_s"] = time.perf_counter() - t0
        rec["peak_bytes"] = peak_bytes(step, device)
        if device.type == "cuda":
            rec["device_total_bytes"] = torch.cuda.mem_get_info(device)[1]
            rec["gpu"] = torch.cuda.get_device_name(device)
        rec["ok"] = True
        total = rec.get("device_total_bytes")
        print(
            f"[finetune_step] {a.model} {a.preset} {a.nlat}x{a.nlon} batch {a.batch} n_out {a.n_out}: "
            f"{rec['step_s']:.2f} s, peak {rec['peak_bytes'] / 2**30:.1f} GiB"
            + (f" of {total / 2**30:.1f} GiB" if total else ""),
            flush=True,
        )
    except Exception as err:  # recorded: the check goes on
        rec["error"] = f"{type(err).__name__}: {err}"
        print(f"[finetune_step] error: {rec['error']}", flush=True)
    out.write_text(json.dumps(rec, indent=1) + "\n")
    return 0 if rec["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
