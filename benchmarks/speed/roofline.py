"""``dandelion-bench target=roofline``: FLOPs, bytes and saved activations of one training step, priced on a GPU.

No GPU is needed. One training step (forward under the chosen autocast dtype, mean-square loss, backward;
the AdamW update added analytically) of a registered model is run under a
:class:`~torch.utils._python_dispatch.TorchDispatchMode` (:class:`OpCounter`) that sees every aten op
(and every custom op, such as torch-harmonics' DISCO and attention kernels) below autograd and autocast,
and records per op:

* ``flops``: :data:`torch.utils.flop_counter.flop_registry`'s formula (matmuls, convolutions, attention
  and their backwards: 2 FLOPs per multiply-add); ops without a formula (elementwise, FFTs, gathers,
  custom kernels) count 0 FLOPs and are priced by their bytes alone (``ops_without_flop_formula``);
* ``bytes``: the sizes (elements x item size) of the op's tensor inputs read plus its tensor outputs
  written. A view (``func.is_view``, and ``_unsafe_view``, a view by another name) moves nothing; an
  allocation (``empty``, ``new_empty``) writes nothing; an in-place op reads and writes its target.
  An expanded input (stride 0) is counted at its storage size, not its view's. Caches and fusion are
  ignored: each op goes to memory, as an eager GPU run does.

By default the step runs on fake tensors (:class:`torch._subclasses.fake_tensor.FakeTensorMode`: shapes
and dtypes are propagated, no arithmetic is done), so a 256x512 paper-preset step of any batch takes
seconds on a CPU and the counts are exact at the configured batch (``fake=false`` runs real tensors; the
two agree, ``tests/benchmarks/speed/test_roofline.py``).

Time of an op on a device (:data:`DEVICES`): ``max(flops / peak, bytes / bandwidth)`` with the bf16
tensor-core peak where an input is bf16/fp16 and the fp32 peak otherwise (the roofline model, Williams,
Waterman & Patterson, CACM 52(4), 2009); the step's estimate is the sum over ops: a lower bound (no
launch overhead, no loader, no atomics contention, no fusion) of an eager step. The device figures are
effective (sustained) numbers, not data-sheet peaks: H200 4.3 TB/s of 4.8 nominal HBM3e and 400 bf16
TFLOP/s dense of 989 nominal (the figures of issue #68); H100 SXM 3.0 TB/s of 3.35 nominal HBM3 (the
same 90 % of nominal) and the same 400 bf16 TFLOP/s (the same GH100 compute); fp32 (no TF32) 50 TFLOP/s
of 67 nominal on both.

Saved activations: the unique storages packed by :func:`torch.autograd.graph.saved_tensors_hooks` in
the forward, parameters and buffers excluded (as :func:`dandelion.benchmarks.speed.measure.saved_activation_bytes`,
keyed by storage identity so that fake tensors count too).

Committed roofline JSONs live in ``benchmarks/results/speed/roofline_<preset>_<nlat>x<nlon>_<dtype>_<date>.json``
(``output=`` names the file; the default is the git-ignored run folder). Use::

    dandelion-bench target=roofline                                       # paper, 256x512, batch 16, bf16, H200
    dandelion-bench target=roofline 'roofline.names=[dandelion]' roofline.top=30 roofline.checkpoint_blocks=true
    dandelion-bench target=roofline roofline.preset=small roofline.nlat=64 roofline.nlon=128 roofline.dtype=fp32
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from dandelion.benchmarks.speed.measure import autocast, model_step
from dandelion.registry import build_model, count_parameters
from dandelion.warp import set_warp_kernel

__all__ = ["DEVICES", "OpCounter", "op_seconds", "count_step", "price", "roofline_model", "bench_roofline"]

#: Effective device figures (see the module docstring): bandwidth in bytes/s, peaks in FLOP/s, memory in bytes.
DEVICES: dict[str, dict] = {
    "h200": {
        "name": "NVIDIA H200 (SXM, 141 GB HBM3e)",
        "bandwidth": 4.3e12,
        "bf16_flops": 400e12,
        "fp32_flops": 50e12,
        "memory_bytes": 139 * 2**30,
        "source": "effective: 4.3 of 4.8 TB/s nominal, 400 of 989 bf16 dense TFLOP/s nominal (issue #68)",
    },
    "h100": {
        "name": "NVIDIA H100 SXM (80 GB HBM3)",
        "bandwidth": 3.0e12,
        "bf16_flops": 400e12,
        "fp32_flops": 50e12,
        "memory_bytes": 78 * 2**30,
        "source": "effective: 3.0 of 3.35 TB/s nominal (90 % as H200's), 400 of 989 bf16 dense TFLOP/s nominal",
    },
}

#: Ops that allocate without writing (their output is written by the next op).
_ALLOCATIONS = {"empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided"}
#: Ops that return a view of their input without being marked as views in their schema.
_UNMARKED_VIEWS = {"_unsafe_view", "lift_fresh", "alias"}
_LOW = (torch.bfloat16, torch.float16)


def _nbytes(t: torch.Tensor) -> int:
    n = t.numel() * t.element_size()
    if n and 0 in t.stride():  # an expanded tensor reads its storage, not its view
        n = min(n, t.untyped_storage().nbytes())
    return int(n)


class OpCounter(TorchDispatchMode):
    """Records every op dispatched below autograd: ``ops[(phase, name)] = {calls, flops, bytes, low_precision_flops}``.

    ``phase`` is the attribute of that name at the time of the call (``forward`` / ``backward``, set by
    the caller). ``low_precision_flops`` are the FLOPs of calls with a bf16/fp16 input. ``no_formula`` holds the
    names of ops that moved bytes but have no FLOP formula.
    """

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.ops: dict[tuple[str, str], dict] = {}
        self.no_formula: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if not outs or func.is_view:
            return out
        packet = func._overloadpacket
        name = str(packet).removeprefix("aten.")
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        flops = int(flop_registry[packet](*args, **kwargs, out_val=out)) if packet in flop_registry else 0
        moved = (
            0
            if name in _ALLOCATIONS or name in _UNMARKED_VIEWS
            else sum(_nbytes(t) for t in ins) + sum(_nbytes(t) for t in outs)
        )
        if not flops and moved and packet not in flop_registry:
            self.no_formula.add(name)
        rec = self.ops.setdefault(
            (self.phase, name), {"calls": 0, "flops": 0, "bytes": 0, "low_precision_flops": 0, "calls_bytes": []}
        )
        rec["calls"] += 1
        rec["flops"] += flops
        rec["bytes"] += moved
        low = any(t.dtype in _LOW for t in ins)
        rec["low_precision_flops"] += flops if low else 0
        rec["calls_bytes"].append((flops, moved, low))
        return out


def op_seconds(flops: int, nbytes: int, low_precision: bool, device: dict) -> float:
    """Roofline time of one op call: ``max(flops / peak, bytes / bandwidth)`` in seconds (see the module docstring)."""
    peak = device["bf16_flops"] if low_precision else device["fp32_flops"]
    return max(flops / peak, nbytes / device["bandwidth"])


def _storage_key(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return (s._cdata, s.nbytes())


def count_step(
    model: torch.nn.Module, x: torch.Tensor, dtype: str = "bf16", *, fake: bool = True
) -> tuple[OpCounter, int]:
    """Count one training step of ``model`` on the batch ``x`` (shape ``(B, C_in, nlat, nlon)``).

    Forward under ``autocast(dtype)`` (``fp32`` | ``bf16``), MSE against zeros, backward; with ``fake`` the
    step runs on fake tensors (the model's real parameters are converted on entry; nothing is computed).

    Returns
    -------
    (OpCounter, int): the op records (phases ``forward`` and ``backward``) and the bytes of the activations
    saved for the backward (unique storages, parameters and buffers excluded; the loss's float32 copy of the
    output included).
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    model.train()
    resident = {_storage_key(t.detach())[0] for t in list(model.parameters()) + list(model.buffers())}
    saved: set[tuple[int, int]] = set()

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.add(_storage_key(t))
        return t

    counter = OpCounter()
    outer = FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext()
    with outer:
        xx = torch.empty(x.shape, dtype=x.dtype) if fake else x
        # the fake copies of the parameters and buffers (made once here, memoised, held until the end) are resident
        fakes = [outer.from_tensor(t) for t in list(model.parameters()) + list(model.buffers())] if fake else []
        resident |= {_storage_key(t)[0] for t in fakes}
        with counter:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast("cpu", dtype):
                loss = model_step(model, xx).float().square().mean()
            saved_bytes = sum(n for key, n in saved if key not in resident)
            counter.phase = "backward"
            loss.backward()
    del fakes
    model.zero_grad(set_to_none=True)
    return counter, int(saved_bytes)


def price(counter: OpCounter, device: dict) -> dict[tuple[str, str], float]:
    """Seconds of every ``(phase, op)`` on ``device`` (sum of :func:`op_seconds` over its calls)."""
    return {
        key: sum(op_seconds(f, b, low, device) for f, b, low in rec["calls_bytes"]) for key, rec in counter.ops.items()
    }


def roofline_model(name: str, spec: dict, devices: dict[str, dict]) -> dict:
    """The roofline row of one model (``spec``: preset, nlat, nlon, grid, batch, dtype, in_channels,
    out_channels, fake, top, disco_optimized_kernel, checkpoint_blocks, warp_kernel: the sampling kernel of
    Dandelion's warps, ``triton`` as on CUDA (priced as one op each way, its inputs read and outputs written),
    ``eager`` the PyTorch path, null the CPU's choice).

    Totals are for the whole batch and per sample (divided by the batch; exact, the step ran at that batch).
    The AdamW update is added analytically: fp32 parameters, gradients and two moments read, parameters and
    moments written (7 x 4 bytes per parameter), 10 FLOPs per parameter.
    """
    overrides = {}
    if name == "disco" and spec.get("disco_optimized_kernel") is not None:
        overrides["optimized_kernel"] = bool(spec["disco_optimized_kernel"])
    if name in ("dandelion", "dandelion_fast") and spec.get("checkpoint_blocks"):
        overrides["checkpoint_blocks"] = True
    t0 = time.perf_counter()
    torch.manual_seed(0)
    b, nlat, nlon = int(spec["batch"]), int(spec["nlat"]), int(spec["nlon"])
    c_in, c_out = int(spec["in_channels"]), int(spec["out_channels"])
    model = build_model(name, spec["preset"], c_in, c_out, nlat, nlon, spec["grid"], **overrides)
    if spec.get("warp_kernel"):  # the warps' kernel on the priced device (the count runs on the CPU)
        set_warp_kernel(model, str(spec["warp_kernel"]))
    x = torch.zeros(b, int(spec["in_channels"]), nlat, nlon)
    counter, saved = count_step(model, x, str(spec["dtype"]), fake=bool(spec.get("fake", True)))
    n_par = count_parameters(model)
    opt_flops, opt_bytes = 10 * n_par, 28 * n_par
    row = {
        "model": name,
        **{k: spec[k] for k in ("preset", "nlat", "nlon", "grid", "batch", "dtype")},
        "warp_kernel": spec.get("warp_kernel"),
        "n_parameters": n_par,
        "fake_tensors": bool(spec.get("fake", True)),
        "saved_activation_bytes": saved,
        "saved_activation_bytes_per_sample": saved / b,
        "optimizer": {"flops": opt_flops, "bytes": opt_bytes},
        "ops_without_flop_formula": sorted(counter.no_formula),
    }
    for phase in ("forward", "backward"):
        recs = [r for (p, _), r in counter.ops.items() if p == phase]
        row[f"{phase}_flops"] = sum(r["flops"] for r in recs)
        row[f"{phase}_bytes"] = sum(r["bytes"] for r in recs)
    row["flops"] = row["forward_flops"] + row["backward_flops"] + opt_flops
    row["bytes"] = row["forward_bytes"] + row["backward_bytes"] + opt_bytes
    row["flops_per_sample"] = (row["flops"] - opt_flops) / b
    row["bytes_per_sample"] = (row["bytes"] - opt_bytes) / b
    row["estimated_step_s"], row["estimated_forward_s"] = {}, {}
    for dev_name, dev in devices.items():
        secs = price(counter, dev)
        row["estimated_step_s"][dev_name] = sum(secs.values()) + op_seconds(opt_flops, opt_bytes, False, dev)
        row["estimated_forward_s"][dev_name] = sum(t for (p, _), t in secs.items() if p == "forward")
    first = next(iter(devices.values()))
    secs = price(counter, first)
    ops = [
        {"phase": p, "op": n, "calls": r["calls"], "flops": r["flops"], "bytes": r["bytes"], "seconds": secs[(p, n)]}
        for (p, n), r in counter.ops.items()
    ]
    ops.sort(key=lambda o: -o["bytes"])
    row["top_ops_by_bytes"] = ops[: int(spec.get("top", 15))]
    row["count_s"] = time.perf_counter() - t0
    return row


def bench_roofline(r, device: str, save: Callable[[dict], None] | None = None, out: dict | None = None) -> dict:
    """``target=roofline``: one row per model of ``r.names`` (the ``roofline`` config section ``r``).

    The step is counted on the CPU whatever ``device`` says (the counts do not depend on it); the estimated
    step time is printed for every device of ``r.devices`` (keys of :data:`DEVICES`).

    Raises
    ------
    ValueError
        For a device name not in :data:`DEVICES`.
    """
    out = {} if out is None else out
    unknown = [d for d in r.devices if str(d) not in DEVICES]
    if unknown:
        raise ValueError(f"roofline.devices={unknown}: use names of {sorted(DEVICES)}")
    devices = {str(d): DEVICES[str(d)] for d in r.devices}
    out["devices"] = devices
    rows = out.setdefault("rows", [])
    spec = {
        k: r.get(k)
        for k in (
            "preset",
            "nlat",
            "nlon",
            "grid",
            "batch",
            "dtype",
            "in_channels",
            "out_channels",
            "fake",
            "top",
            "disco_optimized_kernel",
            "checkpoint_blocks",
            "warp_kernel",
        )
    }
    for name in r.names:
        try:
            row = roofline_model(str(name), spec, devices)
        except Exception as err:  # recorded; the other models are counted
            row = {"model": str(name), "error": f"{type(err).__name__}: {err}"}
        rows.append(row)
        if save:
            save(out)
        _print(row, devices, int(spec.get("top") or 15))
    return out


def _print(row: dict, devices: dict, top: int) -> None:
    if "error" in row:
        print(f"[roofline] {row['model']}: {row['error']}", flush=True)
        return
    b = row["batch"]
    est = ", ".join(f"{d} {s * 1e3:.0f} ms" for d, s in row["estimated_step_s"].items())
    print(
        f"[roofline] {row['model']} {row['preset']} {row['nlat']}x{row['nlon']} B={b} {row['dtype']}: "
        f"{row['n_parameters']:,} parameters, {row['flops_per_sample'] / 1e9:.1f} GFLOP and "
        f"{row['bytes_per_sample'] / 1e9:.1f} GB per sample (fwd+bwd), saved "
        f"{row['saved_activation_bytes_per_sample'] / 2**20:.0f} MiB per sample; estimated step {est} "
        f"(counted in {row['count_s']:.1f} s)",
        flush=True,
    )
    first = next(iter(devices))
    for o in row["top_ops_by_bytes"][:top]:
        print(
            f"[roofline]     {o['phase']:8s} {o['op']:40s} {o['calls']:5d} calls {o['bytes'] / b / 1e9:8.2f} GB/sample "
            f"{o['flops'] / b / 1e9:8.1f} GFLOP/sample {o['seconds'] * 1e3:8.2f} ms on {first}",
            flush=True,
        )
