"""Training-step cost of Dandelion against the baselines, measured side by side in ONE process.

Usage::

    OMP_NUM_THREADS=1 python -m dandelion.benchmarks.dandelion_cost --models dandelion sfno flower2d disco \\
        --preset small --nlat 64 --nlon 128 --batch 4 --rounds 5
    OMP_NUM_THREADS=1 python -m dandelion.benchmarks.dandelion_cost --models dandelion --preset paper --batch 1 --rounds 3
    OMP_NUM_THREADS=1 python -m dandelion.benchmarks.dandelion_cost --models dandelion --profile

One thread. The models are built once and their steps are INTERLEAVED (round r runs every model once),
so a load change of a shared machine touches every model alike; times are process CPU time
(``time.process_time``) of forward (no_grad) and of a training step (forward + MSE + backward +
AdamW step), medians over the rounds. ``saved_mib_per_sample`` is the memory autograd keeps for
backward: the bytes of the unique storages handed to ``torch.autograd.graph.saved_tensors_hooks``
during one training forward (parameters excluded), divided by the batch. ``--profile`` prints the
torch profiler's table of one training step per model (self CPU time by operator).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import dandelion

__all__ = ["saved_activation_bytes", "measure_models"]


def saved_activation_bytes(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the unique storages saved for backward by one forward of ``model(x)`` (parameters excluded)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = model(x)
    del y
    return sum(seen.values())


def _step(model, opt, x):
    y = model(x)
    loss = y.float().square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def measure_models(names, preset="small", nlat=64, nlon=128, batch=4, rounds=5, grid="equiangular", forward=True) -> list[dict]:
    """Interleaved CPU-time medians (see module docstring); one dict per model."""
    torch.manual_seed(0)
    models = {n: dandelion.build_model(n, preset, 16, 4, nlat, nlon, grid) for n in names}
    x = torch.randn(batch, 16, nlat, nlon)
    opts = {n: torch.optim.AdamW(m.parameters(), lr=1e-12) for n, m in models.items()}
    fwd = {n: [] for n in names}
    stp = {n: [] for n in names}
    for n, m in models.items():  # warm-up
        _step(m, opts[n], x)
    for _ in range(rounds):
        for n, m in models.items():
            if forward:
                with torch.no_grad():
                    c0 = time.process_time()
                    m(x)
                    fwd[n].append(time.process_time() - c0)
            c0 = time.process_time()
            _step(m, opts[n], x)
            stp[n].append(time.process_time() - c0)
    rows = []
    for n, m in models.items():
        rows.append(dict(model=n, preset=preset, nlat=nlat, nlon=nlon, batch=batch,
                         forward_ms=1e3 * statistics.median(fwd[n]) if forward else None,
                         step_ms=1e3 * statistics.median(stp[n]),
                         saved_mib_per_sample=saved_activation_bytes(m, x) / batch / 2**20,
                         n_parameters=sum(p.numel() for p in m.parameters())))
    return rows


def profile(name, preset="small", nlat=64, nlon=128, batch=4, rows=30):
    torch.manual_seed(0)
    m = dandelion.build_model(name, preset, 16, 4, nlat, nlon, "equiangular")
    x = torch.randn(batch, 16, nlat, nlon)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-12)
    _step(m, opt, x)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        _step(m, opt, x)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["dandelion", "sfno", "flower2d", "disco"])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--nlat", type=int, default=64)
    ap.add_argument("--nlon", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.profile:
        for n in a.models:
            print(f"== {n}")
            profile(n, a.preset, a.nlat, a.nlon, a.batch)
        return
    rows = measure_models(a.models, a.preset, a.nlat, a.nlon, a.batch, a.rounds)
    ref = next((r for r in rows if r["model"] == "dandelion"), None)
    print(f"{'model':10s} {'fwd ms':>8s} {'step ms':>8s} {'step/dand':>9s} {'saved MiB/sample':>16s} {'params':>10s}")
    for r in rows:
        ratio = r["step_ms"] / ref["step_ms"] if ref else float("nan")
        fwd = f"{r['forward_ms']:8.1f}" if r["forward_ms"] is not None else f"{'-':>8s}"
        print(f"{r['model']:10s} {fwd} {r['step_ms']:8.1f} {ratio:9.2f} {r['saved_mib_per_sample']:16.1f} {r['n_parameters']:10d}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
