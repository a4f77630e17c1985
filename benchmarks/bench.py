"""``dandelion-bench target=models|solvers``: speed and peak memory of every model and solver, as JSON.

``target=models``: for every model, preset, resolution, batch size and dtype, the forward time, the
training-step time and the peak memory, measured with the shared helper
:func:`dandelion.benchmarks.speed.time_model` (medians after warm-up; on CUDA synchronised, peak =
``max_memory_allocated``; on the CPU peak = growth of the process's peak RSS, so every measurement
runs in a fresh Python process when ``fresh_process=true``). ``dtype=bf16`` runs the model under
``torch.autocast(bfloat16)`` (CUDA). ``models.disco_optimized_kernel=false`` builds DISCO with the
pure-torch kernels (the JSON says which was used). Also the parameter table of every preset
(:func:`dandelion.baselines.table.parameter_table`) and the **roofline context of the warp**:

* the measured memory bandwidth of the device: a copy of a large float32 tensor,
  ``bandwidth = 2 * bytes / time`` (read + write);
* for every :class:`dandelion.warp.TangentWarpS2` layer of the Dandelion model at that size (found by
  forward hooks), the bytes its forward must move in float32 (B batch, C channels, N = nlat*nlon
  points, H heads):

  - ``gather_bytes = 4 * 4 * B * C * N``: bilinear sampling reads 4 neighbours per channel and point
    (the upper bound with no cache reuse; ``value_bytes = 4 * B * C * N`` is the compulsory read);
  - ``output_bytes = 4 * B * C * N``;
  - ``pad_bytes = 2 * 4 * B * C * (nlat + 2) * (nlon + 1)``: the ghost-row padded image written and read;
  - ``displacement_bytes = 4 * B * H * N * (2 + 2 + 2)``: the displacements (d_e, d_n) read, the
    fractional indices (row, col) written, the sampling grid (2 per point) read;

  ``time_at_bandwidth = total / bandwidth`` (the floor a memory-bound kernel cannot beat) next to
  the layer's measured forward time (hooks, synchronised), and their ratio. A training step moves
  roughly three times the forward traffic (backward of the gather scatters into 4 neighbours).

``target=solvers``: every dataset scenario (``dandelion.datasets`` registry: its solver with the
dataset card's physics) at a chosen grid and band limit, batches of B trajectories: seconds of set-up
and seconds of wall time per simulated time unit (``s`` or non-dimensional) over ``solvers.frames``
frames, plus per frame; with ``solvers.galewsky_reference.enabled`` also
:func:`dandelion.benchmarks.solver_speed.solver_speed` (our Galewsky solver against torch-harmonics'
example shallow-water solver, seconds per simulated day per trajectory).

Every JSON carries the machine (CPU model, cores, load average, GPU name), the versions and the
settings. Use::

    dandelion-bench target=models            # -> benchmarks/results/cpu/bench_models.json
    dandelion-bench target=solvers           # -> benchmarks/results/cpu/bench_solvers.json
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from dandelion.cli import check_choice, check_device, check_positive, run

__all__ = ["bench", "bench_models", "bench_solvers", "measure_model", "measure_solver", "memory_bandwidth", "warp_roofline", "main"]


# ---------------------------------------------------------------------------------------------- helpers
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def memory_bandwidth(device="cpu", mib: int = 256, n_repeat: int = 5) -> dict:
    """Measured memory bandwidth: median time of ``dst.copy_(src)`` for a float32 tensor of ``mib`` MiB.

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
        _sync(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        _sync(device)
        ts.append(time.perf_counter() - t0)
    ts.sort()
    t = ts[len(ts) // 2]
    del src, dst
    return {"bytes": 4 * n, "seconds": t, "bandwidth_bytes_per_s": 2 * 4 * n / t}


def warp_roofline(model: torch.nn.Module, x: torch.Tensor, bandwidth: float, n_repeat: int = 3) -> list[dict]:
    """Bytes each warp layer of ``model`` moves in one forward pass on ``x`` and the time that implies.

    See the module docstring for the byte counts. ``measured_forward_s`` is the median over
    ``n_repeat`` forward passes (after one warm-up) of the layer's own time, taken by forward
    pre/post hooks with device synchronisation.
    """
    from dandelion.warp import TangentWarpS2

    layers = [(name, m) for name, m in model.named_modules() if isinstance(m, TangentWarpS2)]
    if not layers:
        return []
    device = x.device
    times: dict = {name: [] for name, _ in layers}
    shapes: dict = {}
    start: dict = {}
    handles = []
    for name, m in layers:
        def pre(mod, inp, name=name):
            _sync(device)
            start[name] = time.perf_counter()
            shapes[name] = tuple(inp[0].shape)

        def post(mod, inp, out, name=name):
            _sync(device)
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
        n = nlat * nlon
        f = 4  # float32 bytes: the warp samples in float32 at least, also under autocast
        by = {"value_bytes": f * b * c * n, "gather_bytes": 4 * f * b * c * n, "output_bytes": f * b * c * n,
              "pad_bytes": 2 * f * b * c * (nlat + 2) * (nlon + 1), "displacement_bytes": f * b * m.heads * n * 6}
        total = by["gather_bytes"] + by["output_bytes"] + by["pad_bytes"] + by["displacement_bytes"]
        compulsory = by["value_bytes"] + by["output_bytes"] + by["pad_bytes"] + by["displacement_bytes"]
        measured = sorted(times[name][1:])[len(times[name][1:]) // 2] if len(times[name]) > 1 else None
        rows.append({"layer": name, "batch": b, "channels": c, "heads": m.heads, "nlat": nlat, "nlon": nlon, **by,
                     "total_bytes": total, "compulsory_bytes": compulsory,
                     "time_at_bandwidth_s": total / bandwidth, "compulsory_time_at_bandwidth_s": compulsory / bandwidth,
                     "measured_forward_s": measured,
                     "measured_over_bandwidth_time": (measured / (total / bandwidth)) if measured else None})
    return rows


def measure_model(spec: dict) -> dict:
    """One measurement in this process: build ``spec["model"]`` and time it (see the module docstring).

    ``spec`` keys: model, preset, nlat, nlon, grid, batch, dtype (fp32 | bf16), device, in_channels,
    out_channels, n_warmup, n_repeat, threads, disco_optimized_kernel, roofline, bandwidth (bytes/s or None).
    """
    from dandelion.baselines.common import count_real_parameters
    from dandelion.benchmarks.speed import time_model
    from dandelion.registry import build_model

    device = torch.device(spec.get("device", "cpu"))
    if device.type == "cpu" and spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    dtype = str(spec.get("dtype", "fp32"))
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"dtype={dtype!r}: use fp32 or bf16")
    overrides = {}
    if spec["model"] == "disco" and spec.get("disco_optimized_kernel") is not None:
        overrides["optimized_kernel"] = bool(spec["disco_optimized_kernel"])
    torch.manual_seed(0)
    model = build_model(spec["model"], spec["preset"], int(spec["in_channels"]), int(spec["out_channels"]), int(spec["nlat"]),
                        int(spec["nlon"]), spec.get("grid", "equiangular"), **overrides).to(device)
    x = torch.randn(int(spec["batch"]), int(spec["in_channels"]), int(spec["nlat"]), int(spec["nlon"]), device=device)
    ctx = torch.autocast(device_type=device.type, dtype=torch.bfloat16) if dtype == "bf16" else contextlib.nullcontext()
    row = {k: spec[k] for k in ("model", "preset", "nlat", "nlon", "batch", "dtype") if k in spec}
    row["grid"] = spec.get("grid", "equiangular")
    if spec["model"] == "disco":
        row["disco_optimized_kernel"] = overrides.get("optimized_kernel", "preset default")
    with ctx:
        row.update(time_model(model, x, n_warmup=int(spec.get("n_warmup", 1)), n_repeat=int(spec.get("n_repeat", 3))))
    row["n_parameters_real"] = count_real_parameters(model)
    row["resolution_dependent"] = bool(getattr(model, "resolution_dependent", True))
    row["threads"] = torch.get_num_threads()
    if spec.get("roofline") and spec.get("bandwidth"):
        with ctx:
            row["warp_roofline"] = warp_roofline(model, x, float(spec["bandwidth"]), n_repeat=int(spec.get("n_repeat", 3)))
        if row["warp_roofline"]:
            r = row["warp_roofline"]
            row["warp_total_bytes"] = sum(v["total_bytes"] for v in r)
            row["warp_time_at_bandwidth_s"] = sum(v["time_at_bandwidth_s"] for v in r)
            row["warp_measured_forward_s"] = sum(v["measured_forward_s"] or 0.0 for v in r)
    return row


def measure_solver(spec: dict) -> dict:
    """Time one scenario's solver for a batch: set-up seconds, seconds per simulated unit and per frame.

    ``spec`` keys: scenario, nlat, nlon, grid, lmax (or None), batch, frames, device, threads.
    """
    from dandelion.benchmarks.benchmark import compose
    from dandelion.datasets.generate import build_scenario

    device = torch.device(spec.get("device", "cpu"))
    if device.type == "cpu" and spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    over = [f"dataset={spec['scenario']}", "dataset.path=unused", f"dataset.nlat={spec['nlat']}", f"dataset.nlon={spec['nlon']}",
            f"dataset.grid={spec.get('grid', 'equiangular')}"]
    if spec.get("lmax") is not None:
        over.append(f"dataset.lmax={int(spec['lmax'])}")
    dcfg = OmegaConf.to_container(compose("generate", over).dataset, resolve=True)
    scenario = build_scenario(dcfg)
    b = int(spec["batch"])
    ids = [i % scenario.n_sweep for i in range(b)]
    params = [scenario.parameters(i) for i in ids]
    tensors = {k: torch.tensor([p[k] for p in params], dtype=torch.float64, device=device) for k in params[0]}
    _sync(device)
    t0 = time.perf_counter()
    sim = scenario.build_simulation(tensors, lmax=scenario.solver_lmax, device=device)
    _sync(device)
    setup = time.perf_counter() - t0
    span = float(spec.get("frames", 1)) * float(scenario.dt_frame())
    t_start = float(sim.time)
    _sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    sim.advance_to(t_start + span)
    _sync(device)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"scenario": spec["scenario"], "nlat": int(spec["nlat"]), "nlon": int(spec["nlon"]), "grid": spec.get("grid", "equiangular"),
            "solver_lmax": int(scenario.solver_lmax), "reduced": bool(scenario.reduced), "batch": b, "device": str(device),
            "time_units": str(getattr(scenario, "time_units", "")), "dt_frame": float(scenario.dt_frame()), "simulated": span,
            "setup_s": setup, "wall_s": wall, "seconds_per_time_unit": wall / span, "seconds_per_frame": wall / float(spec.get("frames", 1)),
            "seconds_per_frame_per_trajectory": wall / float(spec.get("frames", 1)) / b,
            "process_cpu_s": cpu, "threads": torch.get_num_threads()}


def _run(kind: str, spec: dict, fresh: bool, timeout_s: float | None) -> dict:
    if not fresh:
        try:
            return (measure_model if kind == "model" else measure_solver)(spec)
        except Exception as err:  # recorded, the table goes on
            return {**spec, "error": f"{type(err).__name__}: {err}"}
    cmd = [sys.executable, "-m", "dandelion.benchmarks.bench", "--single", kind, json.dumps(spec)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {**spec, "error": f"timed out after {timeout_s} s"}
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not lines:
        return {**spec, "error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def _header(cfg) -> dict:
    from dandelion.benchmarks.benchmark import machine, versions

    return {"target": str(cfg.target), "machine": machine(str(cfg.device)), "versions": versions(),
            "settings": OmegaConf.to_container(cfg, resolve=True), "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def bench_models(cfg, save=None) -> dict:
    """``target=models``: every (model, preset, resolution, batch, dtype); see the module docstring.

    ``save(out)`` (optional) is called after every measurement, so a job killed at a time limit keeps
    the rows measured so far."""
    m = cfg.models
    out = _header(cfg)
    device = str(cfg.device)
    if "bf16" in list(m.dtypes) and not device.startswith("cuda"):
        raise ValueError("models.dtypes contains bf16, which is measured under CUDA autocast only: use device=cuda or dtypes=[fp32]")
    if m.get("parameter_table", True):
        from dandelion.baselines.table import PRESET_RESOLUTIONS, parameter_table

        res = {str(p): PRESET_RESOLUTIONS[str(p)] for p in m.presets}  # each measured preset at its own resolution
        out["parameter_table"] = parameter_table(resolutions=res, models=list(m.names), in_channels=int(m.in_channels),
                                                 out_channels=int(m.out_channels))
    bw = None
    if m.get("roofline", True):
        if cfg.threads and device == "cpu":
            torch.set_num_threads(int(cfg.threads))
        out["bandwidth"] = memory_bandwidth(device, int(m.get("bandwidth_mib", 256)))
        bw = out["bandwidth"]["bandwidth_bytes_per_s"]
    rows = out["rows"] = []
    for preset in m.presets:
        for nlat, nlon in m.resolutions:
            for batch in m.batch_sizes:
                for dtype in m.dtypes:
                    for name in m.names:
                        spec = {"model": str(name), "preset": str(preset), "nlat": int(nlat), "nlon": int(nlon), "grid": str(m.grid),
                                "batch": int(batch), "dtype": str(dtype), "device": device, "in_channels": int(m.in_channels),
                                "out_channels": int(m.out_channels), "n_warmup": int(m.n_warmup), "n_repeat": int(m.n_repeat),
                                "threads": cfg.threads, "disco_optimized_kernel": m.get("disco_optimized_kernel"),
                                "roofline": bool(m.get("roofline", True)) and name == "dandelion", "bandwidth": bw}
                        t0 = time.perf_counter()
                        row = _run("model", spec, bool(cfg.fresh_process), cfg.get("timeout_s"))
                        rows.append(row)
                        if save:
                            save(out)
                        msg = row.get("error") or (f"forward {row['forward_s'] * 1e3:.1f} ms, train step {row['train_step_s'] * 1e3:.1f} ms, "
                                                   f"peak {row['peak_memory_bytes'] / 2**20:.0f} MiB")
                        print(f"[bench] {name} {preset} {nlat}x{nlon} B={batch} {dtype}: {msg} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def bench_solvers(cfg, save=None) -> dict:
    """``target=solvers``: every scenario and batch size; see the module docstring (``save`` as in :func:`bench_models`)."""
    s = cfg.solvers
    out = _header(cfg)
    rows = out["rows"] = []
    for name in s.scenarios:
        lmax = s.get("lmax")
        if lmax is None:
            lmax = (s.get("lmax_by_scenario") or {}).get(name)
        for batch in s.batch_sizes:
            spec = {"scenario": str(name), "nlat": int(s.nlat), "nlon": int(s.nlon), "grid": str(s.grid), "lmax": lmax,
                    "batch": int(batch), "frames": int(s.frames), "device": str(cfg.device), "threads": cfg.threads}
            t0 = time.perf_counter()
            row = _run("solver", spec, bool(cfg.fresh_process), cfg.get("timeout_s"))
            rows.append(row)
            if save:
                save(out)
            msg = row.get("error") or (f"{row['seconds_per_frame']:.2f} s per frame ({row['dt_frame']:g} {row['time_units']}), "
                                       f"set-up {row['setup_s']:.2f} s")
            print(f"[bench] {name} lmax={row.get('solver_lmax', lmax)} B={batch}: {msg} ({time.perf_counter() - t0:.0f} s)", flush=True)
    ref = s.get("galewsky_reference") or {}
    if ref.get("enabled", False):  # engineer A's comparison with torch-harmonics' example solver
        try:
            from dandelion.benchmarks.solver_speed import solver_speed
        except ImportError as err:
            out["galewsky_vs_torch_harmonics"] = {"error": f"dandelion.benchmarks.solver_speed not available: {err}"}
        else:
            t0 = time.perf_counter()
            try:
                out["galewsky_vs_torch_harmonics"] = solver_speed(lmax_list=tuple(ref.lmax), batches=tuple(ref.batches), days=float(ref.days),
                                                                  device=str(cfg.device), schemes=tuple(ref.schemes))
            except Exception as err:  # recorded; the rows above stand
                out["galewsky_vs_torch_harmonics"] = {"error": f"{type(err).__name__}: {err}"}
            print(f"[bench] galewsky vs torch-harmonics ({time.perf_counter() - t0:.0f} s)", flush=True)
        if save:
            save(out)
    return out


def bench(cfg) -> dict:
    """The ``dandelion-bench`` job; writes the JSON (atomically) and returns its content."""
    from dandelion.benchmarks.benchmark import write_json_atomic

    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    target = str(cfg.target)
    if target not in ("models", "solvers"):
        raise ValueError(f"target={target!r}: use target=models or target=solvers")
    device = str(cfg.device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device} but CUDA is not available: use device=cpu")
    path = cfg.get("output") or Path("benchmarks/results") / ("gpu" if device.startswith("cuda") else "cpu") / f"bench_{target}.json"
    save = lambda o: write_json_atomic(path, {**o, "partial": True})  # noqa: E731
    out = (bench_models if target == "models" else bench_solvers)(cfg, save=save)
    out["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["partial"] = False
    write_json_atomic(path, out)
    print(f"[bench] wrote {path}")
    return out


def main(argv: list[str] | None = None) -> None:
    """``dandelion-bench target=models|solvers [device=..] [output=..] [models.* / solvers.* overrides]`` (``--help``)."""
    if argv is None and len(sys.argv) >= 4 and sys.argv[1] == "--single":  # one measurement in a fresh process (internal)
        spec = json.loads(sys.argv[3])
        row = measure_model(spec) if sys.argv[2] == "model" else measure_solver(spec)
        print(json.dumps(row, default=str))
        return
    run("dandelion-bench", "bench", bench, check=check, argv=argv)


def check(cfg, overrides=()) -> None:
    """What ``dandelion-bench`` checks before measuring: the target, the device, the thread count."""
    check_choice(cfg.get("target", "models"), ("models", "solvers"), "target")
    check_device(cfg.get("device", "cpu"))
    check_positive(cfg, ["threads", "timeout_s"])


if __name__ == "__main__":
    main()
