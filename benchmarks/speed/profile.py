"""``dandelion-bench target=profile``: where Dandelion's time goes, and the bytes its warps must move.

For every preset of ``profile.presets``, one Dandelion model at ``profile.nlat x profile.nlon``:

* the totals of :func:`dandelion.benchmarks.speed.models.measure_group` (forward, training step,
  saved activations, peak memory);
* ``split`` (:func:`split_times`), measured by isolation: one forward records the inputs of every leaf operation of
  interest, then each is re-run alone, forward and forward+backward, and its times are summed into a category:
  ``warp_sampling`` (the sampling of :meth:`dandelion.warp.TangentWarpS2._warp`, the layer's sampling with its index
  arithmetic), ``displacement_mlp`` (the warps' displacement networks), ``pooling`` (spectral down/up sampling),
  ``norm`` (area-weighted normalisations) and ``pointwise`` (every other 1x1 map and GELU). The categories' sum is
  reported next to the total; the difference is glue (residual adds, concatenations, Python). CPU: process CPU time;
  CUDA: synchronised wall time;
* ``warp_roofline`` (:func:`warp_roofline`): for every :class:`dandelion.warp.TangentWarpS2` layer,
  the bytes its forward must move in float32 (B batch, C channels, N = nlat*nlon points, H heads):
  ``gather_bytes = 4*4*B*C*N`` (4 bilinear neighbours per channel and point, no cache reuse; the
  compulsory read is ``value_bytes = 4*B*C*N``), ``output_bytes = 4*B*C*N``,
  ``pad_bytes = 2*4*B*C*(nlat+2)*(nlon+1)`` (ghost-row padded image written and read),
  ``displacement_bytes = 4*B*H*N*6`` (displacements read, fractional indices written, sampling grid
  read), and ``time_at_bandwidth = total / bandwidth`` next to the layer's measured forward time,
  with the bandwidth of the device measured by :func:`memory_bandwidth`.
"""

from __future__ import annotations

import time

import torch

from dandelion.benchmarks.speed.measure import median, sync
from dandelion.benchmarks.speed.models import _build, measure_group
from dandelion.norm import AreaNormS2
from dandelion.spectral_pooling import SpectralResample
from dandelion.warp import TangentWarpS2

__all__ = ["CATEGORIES", "split_times", "memory_bandwidth", "warp_roofline", "bench_profile"]

CATEGORIES = ("warp_sampling", "displacement_mlp", "pooling", "norm", "pointwise")


def _time(fn, device: torch.device, n_repeat: int) -> float:
    """Median seconds of ``fn`` after one warm-up: process CPU time on the CPU, synchronised wall time on CUDA."""
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    fn()
    ts = []
    for _ in range(n_repeat):
        sync(device)
        t0 = clock()
        fn()
        sync(device)
        ts.append(clock() - t0)
    return median(ts)


def _category(mod: torch.nn.Module, mlp_parts: set) -> str | None:
    if isinstance(mod, SpectralResample):
        return "pooling"
    if isinstance(mod, AreaNormS2):
        return "norm"
    if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear, torch.nn.GELU)) and mod not in mlp_parts:
        return "pointwise"
    return None


def split_times(model: torch.nn.Module, x: torch.Tensor, n_repeat: int = 3) -> dict:
    """Forward and forward+backward seconds per category of :data:`CATEGORIES` (see the module docstring).

    Returns ``{category: {"forward_s", "forward_backward_s", "calls"}}``. The network's forward alone: the step's
    sampling of the newest frame by a model with advected persistence (``advect_state``; one warp of the frame's
    channels, timed in the training step of :func:`dandelion.benchmarks.speed.measure.model_step`) is not split here.
    """
    calls: list[tuple[str, object, tuple]] = []
    warps = [m for m in model.modules() if isinstance(m, TangentWarpS2)]
    mlps = {w.offset for w in warps if isinstance(getattr(w, "offset", None), torch.nn.Module)}
    mlp_parts = {p for m in mlps for p in m.modules()}
    hooks = []
    for mod in model.modules():
        cat = "displacement_mlp" if mod in mlps else _category(mod, mlp_parts)
        if cat is not None:
            hooks.append(
                mod.register_forward_hook(
                    lambda m, inp, out, cat=cat: calls.append((cat, m, tuple(t.detach() for t in inp)))
                )
            )
    patched = []
    for w in warps:  # the layer's forward calls _warp(values, d) with d (B*heads, 2, nlat, nlon)
        if callable(getattr(type(w), "_warp", None)):
            orig = w._warp

            def recording(values, d, _orig=orig):
                calls.append(("warp_sampling", _orig, (values.detach(), d.detach())))
                return _orig(values, d)

            w._warp = recording
            patched.append(w)
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
        for w in patched:
            del w._warp  # back to the class method
    out = {c: {"forward_s": 0.0, "forward_backward_s": 0.0, "calls": 0} for c in CATEGORIES}
    for cat, fn, inputs in calls:

        def fwd(fn=fn, inputs=inputs):
            with torch.no_grad():
                fn(*inputs)

        leaves = tuple(t.clone().requires_grad_(t.is_floating_point()) for t in inputs)

        def fwd_bwd(fn=fn, leaves=leaves):
            y = fn(*leaves)
            y.backward(torch.ones_like(y))

        out[cat]["forward_s"] += _time(fwd, x.device, n_repeat)
        out[cat]["forward_backward_s"] += _time(fwd_bwd, x.device, n_repeat)
        out[cat]["calls"] += 1
    model.zero_grad(set_to_none=True)
    return out


def memory_bandwidth(device="cpu", mib: int = 256, n_repeat: int = 5) -> dict:
    """Measured memory bandwidth: median wall time of ``dst.copy_(src)`` for a float32 tensor of ``mib`` MiB.

    Returns ``{"bytes": copy size, "seconds": median, "bandwidth_bytes_per_s": 2 * bytes / seconds}``
    (a copy reads and writes every byte).
    """
    device = torch.device(device)
    n = int(mib) * 2**20 // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    ts = []
    for _ in range(n_repeat):
        sync(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        sync(device)
        ts.append(time.perf_counter() - t0)
    t = median(ts)
    return {"bytes": 4 * n, "seconds": t, "bandwidth_bytes_per_s": 2 * 4 * n / t}


def warp_roofline(model: torch.nn.Module, x: torch.Tensor, bandwidth: float, n_repeat: int = 3) -> list[dict]:
    """Bytes each warp layer of ``model`` moves in one forward on ``x`` and the time that implies.

    See the module docstring for the byte counts; ``measured_forward_s`` is the median over
    ``n_repeat`` forwards (after one warm-up) of the layer's own wall time, taken by forward pre/post
    hooks with device synchronisation.
    """
    layers = [(name, m) for name, m in model.named_modules() if isinstance(m, TangentWarpS2)]
    device = x.device
    times: dict = {name: [] for name, _ in layers}
    shapes, start, handles = {}, {}, []
    for name, m in layers:

        def pre(mod, inp, name=name):
            sync(device)
            start[name] = time.perf_counter()
            shapes[name] = tuple(inp[0].shape)

        def post(mod, inp, out, name=name):
            sync(device)
            times[name].append(time.perf_counter() - start[name])

        handles += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
    try:
        with torch.no_grad():
            for _ in range(1 + n_repeat):
                model(x)
    finally:
        for h in handles:
            h.remove()
    rows = []
    for name, m in layers:
        b, c, nlat, nlon = shapes[name]
        n, f = nlat * nlon, 4  # float32 bytes: the warp samples in float32 at least, also under autocast
        by = {
            "value_bytes": f * b * c * n,
            "gather_bytes": 4 * f * b * c * n,
            "output_bytes": f * b * c * n,
            "pad_bytes": 2 * f * b * c * (nlat + 2) * (nlon + 1),
            "displacement_bytes": f * b * m.heads * n * 6,
        }
        total = by["gather_bytes"] + by["output_bytes"] + by["pad_bytes"] + by["displacement_bytes"]
        compulsory = total - by["gather_bytes"] + by["value_bytes"]
        measured = median(times[name][1:])
        rows.append(
            {
                "layer": name,
                "batch": b,
                "channels": c,
                "heads": m.heads,
                "nlat": nlat,
                "nlon": nlon,
                **by,
                "total_bytes": total,
                "compulsory_bytes": compulsory,
                "time_at_bandwidth_s": total / bandwidth,
                "compulsory_time_at_bandwidth_s": compulsory / bandwidth,
                "measured_forward_s": measured,
                "measured_over_bandwidth_time": measured / (total / bandwidth),
            }
        )
    return rows


def bench_profile(p, device: str, save=None, out: dict | None = None) -> dict:
    """``target=profile``: every preset of the ``profile`` config section ``p`` (see the module docstring)."""
    out = {} if out is None else out
    rows = out.setdefault("rows", [])
    if p.get("roofline", True):
        out["bandwidth"] = memory_bandwidth(device, int(p.get("bandwidth_mib", 256)))
    for preset in p.presets:
        spec = {
            "preset": str(preset),
            "nlat": int(p.nlat),
            "nlon": int(p.nlon),
            "grid": str(p.grid),
            "batch": int(p.batch),
            "dtype": "fp32",
            "device": device,
            "in_channels": int(p.in_channels),
            "out_channels": int(p.out_channels),
            "n_warmup": 1,
            "n_repeat": int(p.n_repeat),
            "disco_optimized_kernel": None,
            "compile_kernels": bool(p.get("compile_kernels", False)),
        }
        row = measure_group(["dandelion"], spec)[0]
        row.pop("ratio_to_dandelion", None)
        model = build_dandelion(spec, device)
        x = torch.randn(spec["batch"], spec["in_channels"], spec["nlat"], spec["nlon"], device=device)
        if p.get("split", True):
            row["split"] = split_times(model, x, n_repeat=int(p.n_repeat))
            row["split_sum_forward_s"] = sum(v["forward_s"] for v in row["split"].values())
            row["split_sum_forward_backward_s"] = sum(v["forward_backward_s"] for v in row["split"].values())
        if "bandwidth" in out:
            row["warp_roofline"] = warp_roofline(
                model, x, out["bandwidth"]["bandwidth_bytes_per_s"], n_repeat=int(p.n_repeat)
            )
        rows.append(row)
        if save:
            save(out)
        _print(row)
    return out


def build_dandelion(spec: dict, device: str) -> torch.nn.Module:
    """The Dandelion model of ``spec`` (preset, channels, grid, options) on ``device``, seed 0.

    Built as the models bench builds it.
    """
    return _build("dandelion", spec, device)


def _print(r: dict) -> None:
    if "train_step_s" not in r:
        print(f"[bench] profile {r['preset']}: {r.get('error')}", flush=True)
        return
    print(
        f"[bench] profile {r['preset']} {r['nlat']}x{r['nlon']} B={r['batch']}: "
        f"forward {r['forward_s'] * 1e3:.1f} ms, "
        f"train step {r['train_step_s'] * 1e3:.1f} ms ({r['clock']})",
        flush=True,
    )
    if "split" in r:
        tf, tb = r["split_sum_forward_s"] or 1.0, r["split_sum_forward_backward_s"] or 1.0
        for c, v in r["split"].items():
            print(
                f"[bench]   {c:17s} fwd {v['forward_s'] * 1e3:8.1f} ms ({100 * v['forward_s'] / tf:4.1f}%)  fwd+bwd "
                f"{v['forward_backward_s'] * 1e3:8.1f} ms ({100 * v['forward_backward_s'] / tb:4.1f}%)  "
                f"{v['calls']} calls",
                flush=True,
            )
