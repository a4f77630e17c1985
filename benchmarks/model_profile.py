"""Speed profile of the Dandelion presets: totals from :func:`time_model` and the time split.

Usage::

    OMP_NUM_THREADS=1 python -m dandelion.benchmarks.model_profile --presets paper small --nlat 64 --nlon 128
    python -m dandelion.benchmarks.model_profile --device cuda --nlat 256 --nlon 512 --json out.json

Each preset is measured in a fresh subprocess (so the CPU peak-RSS growth reported by
:func:`~dandelion.benchmarks.speed.time_model` belongs to that preset alone).

The split is measured by isolation: one forward pass records the inputs of every leaf operation
of interest, then each is re-run alone, forward and forward+backward, and its times are summed
into a category:

* ``warp_sampling``: displacement -> index conversion, ghost padding, ``grid_sample``
  (:meth:`TangentWarpS2.warp`);
* ``displacement_mlp``: the warps' pointwise displacement MLPs;
* ``pooling``: spectral down/up sampling (SHTs);
* ``norm``: area-weighted normalisations;
* ``pointwise``: every other 1x1 map (value projections, W, lift, fuse, level projections, head)
  and GELUs.

On CPU the split is measured in process CPU time (``time.process_time``), which a machine shared
with other jobs disturbs less than wall-clock time; on CUDA in synchronised wall time. The
categories' sum is reported next to the measured total; the difference is glue (residual adds,
concatenations, Python).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch

from dandelion.benchmarks.speed import _sync, time_model

CATEGORIES = ("warp_sampling", "displacement_mlp", "pooling", "norm", "pointwise")


def _time(fn, device, n_repeat):
    """Median seconds of ``fn``: process CPU time on CPU (robust on a shared machine), synchronised wall time on CUDA."""
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    fn()  # warm-up
    ts = []
    for _ in range(n_repeat):
        _sync(device)
        t0 = clock()
        fn()
        _sync(device)
        ts.append(clock() - t0)
    return sorted(ts)[len(ts) // 2]


def split_times(model: torch.nn.Module, x: torch.Tensor, n_repeat: int = 3) -> dict:
    """Forward and forward+backward seconds per category (see module docstring)."""
    from dandelion.norm import AreaNormS2
    from dandelion.pooling import _SpectralResample
    from dandelion.warp import TangentWarpS2

    calls: list[tuple[str, object, tuple]] = []
    hooks = []
    mlp_modules = set()
    for mod in model.modules():
        if isinstance(mod, TangentWarpS2):
            mlp_modules.add(mod.offset)
    for mod in model.modules():
        if mod in mlp_modules:
            cat = "displacement_mlp"
        elif isinstance(mod, _SpectralResample):
            cat = "pooling"
        elif isinstance(mod, AreaNormS2):
            cat = "norm"
        elif isinstance(mod, (torch.nn.Conv2d, torch.nn.GELU)) and not any(mod in set(m.modules()) for m in mlp_modules):
            cat = "pointwise"
        else:
            continue
        hooks.append(mod.register_forward_hook(lambda m, inp, out, cat=cat: calls.append((cat, m, tuple(t.detach() for t in inp)))))
    originals = {}
    for mod in model.modules():
        if isinstance(mod, TangentWarpS2):
            orig = mod.warp
            originals[mod] = orig

            def recording(values, d_e, d_n, _orig=orig):
                calls.append(("warp_sampling", _orig, (values.detach(), d_e.detach(), d_n.detach())))
                return _orig(values, d_e, d_n)

            mod.warp = recording
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
        for mod in originals:
            del mod.warp  # back to the class method
    device = x.device
    out = {c: {"forward_s": 0.0, "forward_backward_s": 0.0, "calls": 0} for c in CATEGORIES}
    for cat, fn, inputs in calls:
        def fwd(fn=fn, inputs=inputs):
            with torch.no_grad():
                fn(*inputs)

        leaves = tuple(t.clone().requires_grad_(t.is_floating_point()) for t in inputs)

        def fwd_bwd(fn=fn, leaves=leaves):
            y = fn(*leaves)
            y.backward(torch.ones_like(y))

        out[cat]["forward_s"] += _time(fwd, device, n_repeat)
        out[cat]["forward_backward_s"] += _time(fwd_bwd, device, n_repeat)
        out[cat]["calls"] += 1
    model.zero_grad(set_to_none=True)
    return out


def profile_one(preset: str, nlat: int, nlon: int, grid: str, batch: int, in_channels: int, out_channels: int, device: str, n_repeat: int, split: bool) -> dict:
    from dandelion import build_model

    dev = torch.device(device)
    torch.manual_seed(0)
    model = build_model("dandelion", preset, in_channels, out_channels, nlat, nlon, grid).to(dev)
    x = torch.randn(batch, in_channels, nlat, nlon, device=dev)
    res = {"preset": preset, "nlat": nlat, "nlon": nlon, "grid": grid, "batch": batch, "threads": torch.get_num_threads()}
    res.update(time_model(model, x, n_warmup=1, n_repeat=n_repeat))
    if split:
        res["split"] = split_times(model, x, n_repeat=n_repeat)
    return res


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", nargs="+", default=["paper", "small"])
    p.add_argument("--nlat", type=int, default=64)
    p.add_argument("--nlon", type=int, default=128)
    p.add_argument("--grid", default="equiangular")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--in-channels", type=int, default=16)
    p.add_argument("--out-channels", type=int, default=4)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-split", action="store_true")
    p.add_argument("--json", default=None, help="write the results to this file")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    common = dict(nlat=a.nlat, nlon=a.nlon, grid=a.grid, batch=a.batch, in_channels=a.in_channels, out_channels=a.out_channels, device=a.device, n_repeat=a.repeat, split=not a.no_split)
    if a.one:
        print(json.dumps(profile_one(a.presets[0], **common)))
        return []
    results = []
    for preset in a.presets:
        cmd = [sys.executable, "-m", "dandelion.benchmarks.model_profile", "--one", "--presets", preset]
        for k in ("nlat", "nlon", "grid", "batch", "device", "repeat"):
            cmd += [f"--{k}", str(getattr(a, k))]
        cmd += ["--in-channels", str(a.in_channels), "--out-channels", str(a.out_channels)] + (["--no-split"] if a.no_split else [])
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        results.append(r)
        _print(r)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


def _print(r: dict) -> None:
    print(f"{r['preset']}: {r['n_parameters'] / 1e6:.2f}M params, {r['nlat']}x{r['nlon']} {r['grid']}, batch {r['batch']}, {r['device']}, {r['threads']} thread(s)")
    print(f"  forward {r['forward_s'] * 1e3:.1f} ms (CPU time {r['forward_cpu_s'] * 1e3:.1f} ms), train step {r['train_step_s'] * 1e3:.1f} ms (CPU time {r['train_step_cpu_s'] * 1e3:.1f} ms), peak memory {r['peak_memory_bytes'] / 2**20:.0f} MiB")
    if "split" in r:
        tf = sum(v["forward_s"] for v in r["split"].values())
        tb = sum(v["forward_backward_s"] for v in r["split"].values())
        for c, v in r["split"].items():
            print(f"  {c:18s} fwd {v['forward_s'] * 1e3:8.1f} ms ({100 * v['forward_s'] / tf:4.1f}%)   fwd+bwd {v['forward_backward_s'] * 1e3:8.1f} ms ({100 * v['forward_backward_s'] / tb:4.1f}%)   {v['calls']} calls")
        print(f"  sum of categories: fwd {tf * 1e3:.1f} ms, fwd+bwd {tb * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
