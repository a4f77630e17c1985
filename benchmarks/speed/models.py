"""``dandelion-bench target=models``: time and memory of every model side by side, with ratios to Dandelion.

For every (preset, resolution, batch size, dtype) group, all models of ``models.names`` are built in
ONE process (same seed, same input batch) and measured with :mod:`dandelion.benchmarks.speed.measure`:

* ``forward_s`` / ``train_step_s``: medians over ``models.n_repeat`` INTERLEAVED repeats (repeat r
  measures every model once, the order rotated by r, so a change of the machine's load during the
  run touches all models alike), after ``models.n_warmup`` untimed calls of each. The forward runs
  in eval mode under ``torch.no_grad``; the training step is forward + MSE + backward + AdamW step.
  The clock (``clock`` in each row): on the CPU the process CPU time (the machine may be shared;
  with ``threads=1`` this is the single core's time), on CUDA the synchronised wall time. Both
  clocks are kept (``*_cpu_s``, ``*_wall_s``) with every repeat;
* ``saved_activation_bytes``: the bytes autograd keeps for backward in one training forward
  (unique storages, parameters and buffers excluded);
* ``train_step_peak_bytes`` / ``forward_peak_bytes``: the peak memory allocated above the memory
  already allocated before the call (CUDA: ``torch.cuda.max_memory_allocated``; CPU: the torch
  profiler's allocator events); ``*_per_sample`` divides by the batch size;
* ``ratio_to_dandelion`` (and ``ratio_to_sfno``, ``ratio_to_flower2d`` when those are measured): every model's
  number over that model's in the same group;
* ``largest_batch`` (CUDA; on the CPU only with a simulated capacity ``models.cpu_capacity_mib``):
  the largest batch whose training step runs, found by :func:`search_largest` from a first guess
  ``free memory / peak per sample`` and checked by real training steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from dandelion.baselines.table import PRESET_RESOLUTIONS, parameter_table
from dandelion.benchmarks.speed.measure import (
    autocast,
    median,
    model_step,
    peak_bytes,
    saved_activation_bytes,
    sync,
    timed,
    train_step,
)
from dandelion.compiled import compile_failures
from dandelion.registry import build_model, count_parameters
from dandelion.warp import TangentWarpS2

__all__ = ["measure_group", "add_ratios", "search_largest", "largest_batch", "bench_models"]

#: Fields of a row that get a ratio to Dandelion.
RATIO_FIELDS = {
    "forward": "forward_s",
    "train_step": "train_step_s",
    "saved_activations": "saved_activation_bytes",
    "train_step_peak": "train_step_peak_bytes",
    "forward_peak": "forward_peak_bytes",
}


#: The registry names of Dandelion (stock and cost-matched): the rows that take its checkpointing and kernel options.
DANDELIONS = ("dandelion", "dandelion_fast")


def _oom(err: BaseException) -> bool:
    msg = str(err).lower()
    return isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in msg or "alloc_failed" in msg


def search_largest(
    fits: Callable[[int], bool], guess: int, max_batch: int, max_tries: int = 8, rtol: float = 0.05
) -> dict:
    """Largest batch ``b <= max_batch`` with ``fits(b)`` for a monotone predicate, in few calls.

    Starts at ``guess``; while it fits, grows by 25 % once (a good guess is close), then doubles
    (until the first failure or ``max_batch``),
    then bisects between the largest fitting and the smallest failing batch until they are within
    ``max(1, rtol * largest)`` or ``max_tries`` calls are spent.

    Returns
    -------
    dict: ``largest_batch`` (int, or None if not even the smallest tried batch fits),
    ``smallest_failing_batch`` (int or None), ``converged`` (bool: the bracket is within the
    tolerance or ``max_batch`` fits), ``tries`` (list of ``[batch, fits]``).

    Raises
    ------
    ValueError
        If ``max_batch < 1`` or ``max_tries < 1``.
    """
    if max_batch < 1 or max_tries < 1:
        raise ValueError(f"need max_batch >= 1 and max_tries >= 1, got {max_batch}, {max_tries}")
    lo, hi, tries = 0, None, []
    b = max(1, min(int(guess), int(max_batch)))
    converged = False
    for _ in range(max_tries):
        ok = bool(fits(b))
        tries.append([b, ok])
        if ok:
            lo = b
        else:
            hi = b
        if hi is None:
            if lo >= max_batch:
                converged = True
                break
            b = min(int(max_batch), max(lo + 1, int(lo * (1.25 if len(tries) == 1 else 2.0))))
        else:
            if hi - lo <= max(1, int(rtol * lo)):
                converged = True
                break
            b = (lo + hi) // 2
    return {"largest_batch": lo or None, "smallest_failing_batch": hi, "converged": converged, "tries": tries}


def largest_batch(
    model: torch.nn.Module,
    opt,
    in_channels: int,
    nlat: int,
    nlon: int,
    dtype: str,
    *,
    per_sample_bytes: int,
    step_s: float,
    batch: int,
    max_batch: int = 4096,
    max_step_s: float = 20.0,
    cpu_capacity_bytes: int | None = None,
    max_tries: int = 8,
) -> dict:
    """Largest training batch of ``model`` at ``nlat x nlon`` on its device (see :func:`search_largest`).

    On CUDA a batch fits when its training step runs without running out of memory. On the CPU
    (a dry run of the GPU check) it fits when the step's measured peak stays within
    ``cpu_capacity_bytes`` (a simulated device). The first guess is ``free / per_sample_bytes``;
    batches whose predicted step time (``step_s * b / batch``) exceeds ``max_step_s`` are not tried
    (``max_batch_by_time`` in the result).

    Raises
    ------
    ValueError
        On the CPU without ``cpu_capacity_bytes``.
    """
    device = next(model.parameters()).device
    if device.type == "cuda":
        sync(device)
        torch.cuda.empty_cache()
        free = torch.cuda.mem_get_info(device)[0]
    elif cpu_capacity_bytes:
        free = int(cpu_capacity_bytes)
    else:
        raise ValueError(
            "the largest batch is measured on CUDA; on the CPU give a simulated capacity (models.cpu_capacity_mib)"
        )
    by_time = max(1, int(max_step_s * batch / max(step_s, 1e-9)))
    cap = min(int(max_batch), by_time)
    model.train()

    def fits(b: int) -> bool:
        x = None
        try:
            x = torch.randn(b, in_channels, nlat, nlon, device=device)
            if device.type == "cuda":
                train_step(model, x, opt, dtype)
                sync(device)
                return True
            return peak_bytes(lambda x=x: train_step(model, x, opt, dtype), device) <= free
        except RuntimeError as err:
            if not _oom(err):
                raise
            return False
        finally:
            del x
            model.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()

    guess = int(0.9 * free / max(per_sample_bytes, 1))
    res = search_largest(fits, guess, cap, max_tries=max_tries)
    res.update(
        free_bytes_at_start=int(free),
        first_guess=guess,
        max_batch=int(max_batch),
        max_batch_by_time=by_time,
        simulated_capacity=device.type != "cuda",
    )
    return res


def _build(name: str, spec: dict, device: torch.device) -> torch.nn.Module:
    overrides = {}
    if name == "disco" and spec.get("disco_optimized_kernel") is not None:
        overrides["optimized_kernel"] = bool(spec["disco_optimized_kernel"])
    if name in DANDELIONS and spec.get("checkpoint_blocks"):
        overrides["checkpoint_blocks"] = True
    if name in DANDELIONS and spec.get("compile_kernels"):
        overrides["compile_kernels"] = True
    if name in DANDELIONS and spec.get("warp_kernel"):
        overrides["warp_kernel"] = str(spec["warp_kernel"])
    torch.manual_seed(0)
    return build_model(
        name,
        spec["preset"],
        spec["in_channels"],
        spec["out_channels"],
        spec["nlat"],
        spec["nlon"],
        spec["grid"],
        **overrides,
    ).to(device)


def warp_kernel_ran(model: torch.nn.Module, device: torch.device) -> str | None:
    """The sampling kernel the model's warps run on ``device`` (``triton``, ``cpp`` or ``eager``; None: no warps)."""
    warps = [m for m in model.modules() if isinstance(m, TangentWarpS2)]
    if not warps:
        return None
    if warps[0].uses_triton(device):
        return "triton"
    return "cpp" if warps[0].uses_cpp(device, torch.float32) else "eager"


def measure_group(names: list[str], spec: dict) -> list[dict]:
    """Measure every model of ``names`` in one process for one group (see the module docstring).

    ``spec`` keys: preset, nlat, nlon, grid, batch, dtype (fp32 | bf16), device, in_channels,
    out_channels, n_warmup, n_repeat, disco_optimized_kernel (None = the preset's choice),
    checkpoint_blocks (Dandelion's activation checkpointing, default False), compile_kernels (Dandelion's
    torch.compile'd warp-index and norm kernels, default False), warp_kernel (Dandelion's sampling kernel, None =
    auto; the kernel that ran is recorded per row), largest_batch (bool), max_batch, max_step_s,
    max_tries, cpu_capacity_mib (None).

    Returns one row per model; a model that fails to build or run gets a row with ``error``.
    """
    device = torch.device(spec["device"])
    dtype, b = str(spec["dtype"]), int(spec["batch"])
    base = {k: spec[k] for k in ("preset", "nlat", "nlon", "grid", "batch", "dtype")}
    base.update(
        device=str(device),
        threads=torch.get_num_threads(),
        clock="process_cpu_time" if device.type == "cpu" else "cuda_synchronized_wall_time",
    )
    torch.manual_seed(1)
    x = torch.randn(b, int(spec["in_channels"]), int(spec["nlat"]), int(spec["nlon"]), device=device)
    rows, live = {}, {}
    for name in names:
        row = rows[name] = {"model": name, **base}
        t_build = time.perf_counter()
        try:
            model = _build(name, spec, device)
            if name == "disco":
                kernel = spec.get("disco_optimized_kernel")
                row["disco_optimized_kernel"] = "preset default" if kernel is None else bool(kernel)
                if kernel is not None and not kernel:
                    row["note"] = (
                        "torch-harmonics' pure-torch DISCO kernels (optimized_kernel=False), not its compiled kernels"
                    )
            if name in DANDELIONS:
                row["checkpoint_blocks"] = bool(spec.get("checkpoint_blocks", False))
                row["compile_kernels"] = bool(spec.get("compile_kernels", False))
                row["warp_kernel"] = warp_kernel_ran(model, device)
            row["n_parameters"] = count_parameters(model)
            row["resolution_dependent"] = bool(getattr(model, "resolution_dependent", True))
            opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6)
            for _ in range(max(1, int(spec["n_warmup"]))):  # at least one: AdamW's state exists before timing
                _forward(model, x, dtype)
                model.train()
                train_step(model, x, opt, dtype)
            live[name] = (model, opt)
        except Exception as err:  # recorded; the other models are measured
            row["error"] = f"{type(err).__name__}: {err}"
        # progress, so a run cut at a time limit still tells where its time went
        print(f"[bench] {name}: built and warmed up in {time.perf_counter() - t_build:.1f} s", flush=True)
    clocks = {
        n: {"forward_cpu_s": [], "forward_wall_s": [], "train_step_cpu_s": [], "train_step_wall_s": []} for n in live
    }
    order = list(live)
    for r in range(int(spec["n_repeat"])):
        k = r % len(order) if order else 0
        for name in order[k:] + order[:k]:
            model, opt = live[name]
            try:
                c, w = timed(lambda model=model: _forward(model, x, dtype), device)
                clocks[name]["forward_cpu_s"].append(c)
                clocks[name]["forward_wall_s"].append(w)
                model.train()
                c, w = timed(lambda model=model, opt=opt: train_step(model, x, opt, dtype), device)
                clocks[name]["train_step_cpu_s"].append(c)
                clocks[name]["train_step_wall_s"].append(w)
            except Exception as err:
                rows[name]["error"] = f"{type(err).__name__}: {err}"
                live.pop(name)
                order.remove(name)
    for name, (model, opt) in live.items():
        row, ck = rows[name], clocks[name]
        main = "cpu" if device.type == "cpu" else "wall"
        row["forward_s"] = median(ck[f"forward_{main}_s"])
        row["train_step_s"] = median(ck[f"train_step_{main}_s"])
        for k, v in ck.items():
            row[k] = median(v)
            row[k[:-2] + "_repeats_s"] = v
        try:
            model.train()
            row["saved_activation_bytes"] = saved_activation_bytes(model, x, dtype)
            row["train_step_peak_bytes"] = peak_bytes(
                lambda model=model, opt=opt: train_step(model, x, opt, dtype), device
            )
            row["forward_peak_bytes"] = peak_bytes(lambda model=model: _forward(model, x, dtype), device)
            for k in ("saved_activation_bytes", "train_step_peak_bytes", "forward_peak_bytes"):
                row[k.replace("_bytes", "_bytes_per_sample")] = row[k] / b
            if spec.get("largest_batch") and (device.type == "cuda" or spec.get("cpu_capacity_mib")):
                cap = spec.get("cpu_capacity_mib")
                row["largest_batch"] = largest_batch(
                    model,
                    opt,
                    int(spec["in_channels"]),
                    int(spec["nlat"]),
                    int(spec["nlon"]),
                    dtype,
                    per_sample_bytes=int(row["train_step_peak_bytes_per_sample"]),
                    step_s=row["train_step_wall_s"],
                    batch=b,
                    max_batch=int(spec.get("max_batch") or 4096),
                    max_step_s=float(spec.get("max_step_s") or 20.0),
                    cpu_capacity_bytes=int(cap * 2**20) if cap else None,
                    max_tries=int(spec.get("max_tries") or 8),
                )
        except Exception as err:
            row["error"] = f"{type(err).__name__}: {err}"
    out = list(rows.values())
    if spec.get("compile_kernels"):  # a compiler failure switched the kernels to eager: say so in the rows
        for name in DANDELIONS:
            if name in rows:
                rows[name]["compile_kernels_failed"] = compile_failures()
    add_ratios(out)
    return out


def _forward(model: torch.nn.Module, x: torch.Tensor, dtype: str) -> None:
    model.eval()
    with torch.no_grad(), autocast(x.device, dtype):
        model_step(model, x)


def add_ratios(rows: list[dict], refs: tuple[str, ...] = ("dandelion", "sfno", "flower2d")) -> None:
    """Add ``ratio_to_<ref>`` (model / ``ref`` for each field of :data:`RATIO_FIELDS`) to every row, in place, for
    every model of ``refs`` measured in the group (``ratio_to_dandelion`` always, None where Dandelion is missing).

    A ratio is None where either number is missing or the reference's is zero; a model's ratios to itself are 1.
    """
    for name in refs:
        ref = next((r for r in rows if r.get("model") == name), None)
        if ref is None and name != "dandelion":
            continue
        for r in rows:
            r[f"ratio_to_{name}"] = {
                k: (r[f] / ref[f]) if ref is not None and r.get(f) is not None and ref.get(f) else None
                for k, f in RATIO_FIELDS.items()
            }


def bench_models(m, device: str, save: Callable[[dict], None] | None = None, out: dict | None = None) -> dict:
    """``target=models``: every (preset, resolution, batch, dtype) group of the ``models`` config section ``m``.

    ``out`` (the JSON header) receives ``parameter_table`` and ``rows``; ``save(out)`` is called
    after every group, so a run stopped at a time limit keeps the groups measured so far.
    """
    out = {} if out is None else out
    names = [str(n) for n in m.names]
    if m.get("parameter_table", True):
        res = {str(p): PRESET_RESOLUTIONS[str(p)] for p in m.presets if str(p) in PRESET_RESOLUTIONS}
        out["parameter_table"] = parameter_table(
            resolutions=res, models=names, in_channels=int(m.in_channels), out_channels=int(m.out_channels)
        )
    rows = out.setdefault("rows", [])
    for preset in m.presets:
        for nlat, nlon in m.resolutions:
            for batch in m.batch_sizes:
                for dtype in m.dtypes:
                    spec = {
                        "preset": str(preset),
                        "nlat": int(nlat),
                        "nlon": int(nlon),
                        "grid": str(m.grid),
                        "batch": int(batch),
                        "dtype": str(dtype),
                        "device": device,
                        "in_channels": int(m.in_channels),
                        "out_channels": int(m.out_channels),
                        "n_warmup": int(m.n_warmup),
                        "n_repeat": int(m.n_repeat),
                        "disco_optimized_kernel": m.get("disco_optimized_kernel"),
                        "checkpoint_blocks": bool(m.get("checkpoint_blocks", False)),
                        "compile_kernels": bool(m.get("compile_kernels", False)),
                        "warp_kernel": m.get("warp_kernel"),
                        "largest_batch": bool(m.get("largest_batch", False))
                        and str(dtype) in [str(d) for d in m.get("largest_batch_dtypes", ["fp32"])],
                        "max_batch": m.get("max_batch"),
                        "max_step_s": m.get("max_step_s"),
                        "max_tries": m.get("max_tries"),
                        "cpu_capacity_mib": m.get("cpu_capacity_mib"),
                    }
                    t0 = time.perf_counter()
                    group = measure_group(names, spec)
                    rows.extend(group)
                    if save:
                        save(out)
                    for r in group:
                        print(f"[bench] {_line(r)}", flush=True)
                    print(
                        f"[bench] group {preset} {nlat}x{nlon} B={batch} {dtype}: {time.perf_counter() - t0:.0f} s",
                        flush=True,
                    )
    return out


def _line(r: dict) -> str:
    head = f"{r['model']:28s} {r['preset']} {r['nlat']}x{r['nlon']} B={r['batch']} {r['dtype']}"
    if "train_step_s" not in r:
        return f"{head}: {r.get('error')}"
    q = r["ratio_to_dandelion"]

    def f(v):
        return "-" if v is None else f"{v:.2f}x"

    mem = (
        f", saved {r['saved_activation_bytes_per_sample'] / 2**20:.1f} MiB/sample, peak "
        f"{r['train_step_peak_bytes_per_sample'] / 2**20:.1f} MiB/sample"
        if "train_step_peak_bytes" in r
        else ""
    )
    lb = f", largest batch {r['largest_batch']['largest_batch']}" if isinstance(r.get("largest_batch"), dict) else ""
    err = f" [error: {r['error']}]" if r.get("error") else ""
    return (
        f"{head}: forward {r['forward_s'] * 1e3:.1f} ms ({f(q['forward'])}), step {r['train_step_s'] * 1e3:.1f} ms "
        f"({f(q['train_step'])}){mem}{lb}{err}"
    )
