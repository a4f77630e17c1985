"""The fused warp as one C++ kernel each way on the CPU: exponential map, pole-aware ghost rows, bilinear sampling.

:class:`CppWarpSample` computes what :class:`~dandelion.warp.sample.WarpSample` computes (the warp index of
:mod:`dandelion.warp.index`, then bilinear sampling of the ghost-padded image of
:mod:`dandelion.warp.padding`) in one pass over memory per head, as the Triton kernel does on CUDA
(:mod:`dandelion.warp.triton_sample`): no index tensors, no padded image, no ``grid_sample``. The source,
``dandelion/warp/csrc/warp_cpu.cpp``, ships with the package and is compiled on first use by
:func:`torch.utils.cpp_extension.load` (ninja and a C++ compiler; ``-O3 -march=native``, OpenMP over the heads;
about a minute once, cached afterwards under ``TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``).
Where it cannot be built (no compiler, no ninja) :func:`load` warns once and the warps run the eager path.

Float32 and float64; values, displacements and the sampler's tables in one dtype (the layer casts as the eager
path does). The float32 index arithmetic uses polynomial ``sin``, ``cos`` and ``atan2`` (Cephes; about 1-2 units
in the last place, so that it vectorises), float64 the C library's. Agreement with the eager sampler: equal to
float32 rounding; zero displacement is the identity bit for bit; the gradients differ only at the measure-zero
points where a sample lies exactly on the south ghost row's lower edge or rounds onto the periodic column,
where the eager sampler differentiates through the zero border that the padded image carries. The backward
scatters the value gradient per head without atomics (deterministic for any thread count) and recomputes the
index and its Jacobian instead of saving them: it saves only the displacements and, where they need a gradient, a
channels-last copy of the values (the layout its channel loops read; the size of the values).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import torch

from ..sphere import SphereGrid
from .sample import WarpSample
from .sampler import SphereSampler

__all__ = ["HEADERS", "SOURCE", "STALE_LOCK_S", "CppWarpSample", "clear_stale_lock", "load", "usable"]

#: the kernel's source and the header it includes, shipped as package data
SOURCE = Path(__file__).with_name("csrc") / "warp_cpu.cpp"
HEADERS = (SOURCE.with_name("warp_index.h"),)

_STATE: dict = {}


def _cpu_flags() -> str:
    """The CPU's instruction-set flags (``-march=native`` builds for different CPUs must not share a folder)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        return platform.processor()


def _flags() -> tuple[list[str], list[str]]:
    cflags = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math"]
    if sys.platform.startswith("linux"):  # OpenMP over the heads (macOS's clang ships no OpenMP)
        return cflags + ["-fopenmp"], ["-fopenmp"]
    return cflags, []


def _build_name(source: bytes, cflags: list[str]) -> str:
    """The build's name: a hash of the source, the flags, torch's version and the CPU, so that checkouts with
    other sources, other torch builds and other CPUs sharing one cache folder never rebuild each other's."""
    key = "\n".join([" ".join(cflags), torch.__version__, platform.machine(), _cpu_flags()]).encode()
    return "dandelion_warp_cpu_" + hashlib.sha1(source + key).hexdigest()[:12]


def load() -> str | None:
    """The path of the compiled library (built on the first call of the process, from the cache afterwards), or None.

    Loading registers the CPU kernels of the ops below. The source is copied into the build folder first, so
    that the build's command line does not depend on where the package is installed (an editable checkout and
    a wheel reuse one build). A build failure (no C++ compiler, no ninja, a compiler error) is warned about
    once per process, with the error; the caller then runs the eager warp.
    """
    if "module" not in _STATE:
        _STATE["module"] = None
        try:
            _STATE["module"] = _build()
        except Exception as err:  # noqa: BLE001 - any build failure falls back to the eager warp, with a warning
            warnings.warn(
                f"the fused C++ warp kernel could not be built ({type(err).__name__}: {str(err)[:300]}); Dandelion's "
                "warps run the eager path on the CPU (it needs ninja and a C++ compiler; kernel='eager' chooses the "
                "eager path without trying)",
                RuntimeWarning,
                stacklevel=3,
            )
    return _STATE["module"]


#: seconds after which a build folder's lock counts as left by an interrupted build (a build takes a minute or two)
STALE_LOCK_S = 1800.0


def clear_stale_lock(folder: Path) -> bool:
    """Remove ``folder/lock`` when it is older than :data:`STALE_LOCK_S` (warned about); True if one was removed.

    torch.utils.cpp_extension waits, without a time limit, for the lock of a build that another process runs; a
    build killed before it released its lock would leave every later process waiting forever.
    """
    lock = Path(folder) / "lock"
    try:
        age = time.time() - lock.stat().st_mtime
    except OSError:
        return False
    if age <= STALE_LOCK_S:
        return False
    warnings.warn(
        f"removing {lock}, left {age / 60:.0f} minutes ago by an interrupted build of the C++ warp kernel",
        RuntimeWarning,
        stacklevel=2,
    )
    lock.unlink(missing_ok=True)
    return True


def _build() -> str:
    # torch.utils.cpp_extension imports setuptools and logs a CUDA_HOME notice on import: only when building
    quiet = logging.getLogger("torch.utils.cpp_extension")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        quiet.setLevel(level)
    cflags, ldflags = _flags()
    files = {path.name: path.read_bytes() for path in (SOURCE, *HEADERS)}
    name = _build_name(b"".join(files.values()), cflags)
    folder = Path(cpp_extension._get_build_directory(name, verbose=False))  # private: TORCH_EXTENSIONS_DIR's rules
    clear_stale_lock(folder)
    for file, text in files.items():
        copy = folder / file
        if not copy.exists() or copy.read_bytes() != text:
            tmp = folder / f".{file}.{os.getpid()}.tmp"
            tmp.write_bytes(text)
            os.replace(tmp, copy)  # atomic: processes building at once write the same bytes
    return cpp_extension.load(
        name=name,
        sources=[str(folder / SOURCE.name)],
        extra_cflags=cflags,
        extra_ldflags=ldflags,
        build_directory=str(folder),
        is_python_module=False,
        verbose=False,
    )


def _tables(sampler) -> list[torch.Tensor]:
    """The sampler's per-grid tables in the kernel's argument order."""
    return [
        sampler.sin_colat,
        sampler.cos_colat,
        sampler.colat,
        sampler.row_table,
        sampler.row_inv_step,
        sampler.bin_row,
    ]


def _grid(sampler) -> list[int]:
    """The sampler's integers: ghost rows, bins, the eager path's padded image size and whether rows are uniform."""
    return [sampler.gn, sampler.gs, sampler.nbins, sampler.hp, sampler.wp, int(sampler.uniform_rows)]


def _scalars(sampler) -> list[float]:
    """The sampler's scalars in double precision, as the eager path uses them: ``1/step``, ``nlon/(2 pi)``,
    ``1/bin width`` (``kernel_constants`` would carry the rounding of the dtype the sampler was built in)."""
    return [sampler.inv_step, sampler.nlon / (2 * math.pi), sampler.inv_bin_width]


# The two kernels as torch ops, so that dispatch-level tools (the roofline meter; FakeTensorMode) see each as ONE op
# reading its inputs and writing its outputs (as the Triton kernels, dandelion/warp/triton_sample.py). The schemas
# and fake kernels are defined here, once per process; the compiled library adds the CPU kernels when loaded.
if not globals().get("_OPS_DEFINED", False):
    _LIBRARY = torch.library.Library("dandelion", "FRAGMENT")
    _LIBRARY.define(
        "warp_sample_cpu(Tensor values, Tensor d, Tensor[] tables, int[] grid, float[] scalars, bool keep) "
        "-> (Tensor, Tensor)"
    )
    _LIBRARY.define(
        "warp_sample_cpu_backward(Tensor grad, Tensor values_cl, Tensor d, Tensor[] tables, int[] grid, "
        "float[] scalars, bool need_v, bool need_d) -> (Tensor, Tensor)"
    )

    @torch.library.register_fake("dandelion::warp_sample_cpu", lib=_LIBRARY)
    def _(values, d, tables, grid, scalars, keep):
        n, c, nlat, nlon = values.shape
        return torch.empty_like(values), (values.new_empty(n, nlat, nlon, c) if keep else values.new_empty(0))

    @torch.library.register_fake("dandelion::warp_sample_cpu_backward", lib=_LIBRARY)
    def _(grad, values_cl, d, tables, grid, scalars, need_v, need_d):
        g_values = torch.empty_like(grad) if need_v else grad.new_empty(0)
        return g_values, (torch.empty_like(d) if need_d else d.new_empty(0))

    _OPS_DEFINED = True


class CppWarpSample(torch.autograd.Function):
    """``apply(values, d, sampler)``: :class:`~dandelion.warp.sample.WarpSample` as one C++ kernel each way.

    ``values (N, C, nlat, nlon)`` and displacements ``d (N, 2, nlat, nlon)`` (east, north; radians) on the CPU, in
    the dtype of ``sampler`` (the grid's :class:`~dandelion.warp.sampler.SphereSampler`: float32, or float64 after
    ``.double()``). Returns ``(N, C, nlat, nlon)``. Saves only ``d`` and, where ``d`` needs a gradient, the values
    channels last ``(N, nlat, nlon, C)``. Differentiable once. The
    kernels run as the custom ops ``torch.ops.dandelion.warp_sample_cpu`` and ``warp_sample_cpu_backward``; the
    first call builds or loads them (:func:`load`).

    Raises RuntimeError where the kernels cannot be built, and (from the kernel) for tensors off the CPU or of
    another dtype than the sampler's tables.
    """

    @staticmethod
    def forward(ctx, values, d, sampler):
        if load() is None:  # builds or loads the kernels on first use (cached)
            raise RuntimeError("the fused C++ warp kernel could not be built (see the warning); use kernel='eager'")
        values, d = values.contiguous(), d.contiguous()
        keep = ctx.needs_input_grad[1]  # the displacement gradient reads the values, channels last
        out, values_cl = torch.ops.dandelion.warp_sample_cpu(
            values, d, _tables(sampler), _grid(sampler), _scalars(sampler), keep
        )
        ctx.save_for_backward(values_cl, d)
        ctx.sampler = sampler
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        values_cl, d = ctx.saved_tensors
        s = ctx.sampler
        need_v, need_d = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if not (need_v or need_d):
            return None, None, None
        g_values, g_d = torch.ops.dandelion.warp_sample_cpu_backward(
            grad.contiguous(), values_cl, d, _tables(s), _grid(s), _scalars(s), need_v, need_d
        )
        return (g_values if need_v else None), (g_d if need_d else None), None


def usable() -> bool:
    """Whether the C++ kernels build here and agree with the eager node (checked once per process).

    The check runs forward and backward on tiny equiangular and Legendre-Gauss grids (both row maps; odd and
    even ``nlon``) and compares values and both gradients with :class:`~dandelion.warp.sample.WarpSample` (to
    1e-4 of their largest entry). A failure is warned about once and the caller (``kernel="auto"``) runs the
    eager path. It runs outside any active dispatch mode and saved-tensor hooks (fake tensors, the roofline
    meter's op counter and its count of saved activations).
    """
    if "usable" not in _STATE:
        _STATE["usable"] = load() is not None and _check()
    return _STATE["usable"]


def _check() -> bool:
    from torch.utils._python_dispatch import _disable_current_modes  # private: the check must see real tensors

    # identity hooks shadow any saved-tensor hooks of the caller (the roofline meter's count of saved activations)
    shield = torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
    try:
        with _disable_current_modes(), shield, torch.enable_grad(), torch.autocast("cpu", enabled=False):
            for grid, nlon in (("equiangular", 12), ("legendre-gauss", 11)):
                sampler = SphereSampler(SphereGrid(6, nlon, grid))
                gen = torch.Generator().manual_seed(0)
                v, d, w = (torch.randn(2, c, 6, nlon, generator=gen) for c in (3, 2, 3))
                v, d = v.requires_grad_(), (0.5 * d).requires_grad_()
                got, want = CppWarpSample.apply(v, d, sampler), WarpSample.apply(v, d, sampler)
                got = (got, *torch.autograd.grad(got, (v, d), w))
                want = (want, *torch.autograd.grad(want, (v, d), w))
                for name, a, b in zip(("values", "value gradient", "displacement gradient"), got, want):
                    err = float((a - b).detach().abs().max())
                    if not err <= 1e-4 * float(b.detach().abs().max()):
                        raise RuntimeError(f"the {name} disagree with the eager warp's by {err:.3g} on a {grid} grid")
    except Exception as err:  # noqa: BLE001 - any failure falls back to the eager warp, with a warning
        warnings.warn(
            f"the fused C++ warp kernel failed its check ({type(err).__name__}: {str(err)[:300]}); Dandelion's "
            "warps run the eager path on the CPU (kernel='eager' to choose it, kernel='cpp' to raise instead)",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return True
