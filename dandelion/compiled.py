"""``torch.compile`` in Dandelion: optional compiled kernels, and compiling deferred to a function's first call.

With ``compile_kernels=True`` on :class:`~dandelion.model.Dandelion`, the warp index and its Jacobian
(:func:`dandelion.warp.index.index_of_warp`) and the area norms (:mod:`dandelion.norm`) run through
:func:`call_compiled`, which fuses their chains of elementwise passes into a few loops; that path equals the
eager one up to rounding only, so it is off by default. A compiler failure gives one warning and the eager path.

:func:`compile_deferred`: torch-harmonics (0.9) wraps a method of ``SpectralConvS2`` in ``torch.compile`` when it is
imported (``torch_harmonics.utils.compile_if_supported``), and ``torch.compile`` imports torch's compiler stack
(``torch._inductor``, triton, sympy) as soon as it is called, before anything is compiled: about 170 MB resident
and a second of start-up in every job, none of which compiles unless asked (docs/jobs/export.md). Inside
:func:`compile_deferred` the call is made on the wrapped function's first call instead, which is when
``torch.compile`` compiles anyway; :mod:`dandelion.sphere` imports torch-harmonics inside it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings

import torch

__all__ = ["call_compiled", "compile_failures", "compile_deferred"]

#: How torch begins the RuntimeError with which torch.compile refuses an interpreter (Python 3.15+ for torch 2.14):
#: torch-harmonics then runs the function eagerly, and so does a deferred compile.
_REFUSAL = "torch.compile is not supported on Python"

#: torch.compile'd kernels, built on first use (one per function). Arguments are passed detached
#: (the autograd Functions around them own the gradients), so the cache does not split on
#: ``requires_grad`` or freeze parameter shapes: a kernel compiles once per U-Net level's grid and
#: dtype (the sampler's tables have static shapes) and serves any batch. Past torch._dynamo's
#: recompile limit (8 per function, e.g. many resolutions in one process) dynamo runs the function
#: eagerly. ``_COMPILE_FAILED`` turns every kernel off for the process after a compiler failure
#: (no C++ compiler, an unsupported device), with one warning.
_COMPILED: dict = {}
_COMPILE_FAILED: list = []


def compile_failures() -> list[str]:
    """The compiler failures of this process (``"Error: message"``; at most one: the first turns compiling off)."""
    return list(_COMPILE_FAILED)


def _out_of_memory(err: BaseException) -> bool:
    return isinstance(err, getattr(torch, "OutOfMemoryError", ())) or "out of memory" in str(err).lower()


def call_compiled(fn, *args):
    """``fn(*args)`` through ``torch.compile(fn, dynamic=True)``, or None when compilation is unavailable.

    The compiled code fuses a chain of elementwise passes and reductions into a few loops; its
    values differ from ``fn``'s eager ones by rounding only (operations fused and reordered). The
    first failure (for example no C++ compiler for the CPU backend) is warned about once, with the
    error, and every later call returns None at once: the caller then runs the eager ``fn``. Out of
    memory is re-raised (it is not a compiler failure). Inside an outer ``torch.compile`` this
    returns None, so the outer trace sees the eager function.

    Raises
    ------
    torch.OutOfMemoryError (or the device's out-of-memory RuntimeError)
        Unchanged.
    """
    if _COMPILE_FAILED or torch.compiler.is_compiling():
        return None
    args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    try:
        compiled = _COMPILED.get(fn)
        if compiled is None:
            compiled = _COMPILED[fn] = torch.compile(fn, dynamic=True)
        return compiled(*args)
    except Exception as err:  # noqa: BLE001 - any compiler failure falls back to the exact eager path
        if _out_of_memory(err):
            raise
        _COMPILE_FAILED.append(f"{type(err).__name__}: {err}")
        warnings.warn(
            f"compile_kernels: torch.compile failed ({type(err).__name__}: {str(err)[:300]}); using the eager "
            "kernels for the rest of this process (install a C++ compiler for the CPU, or set "
            "compile_kernels=false)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


@contextlib.contextmanager
def compile_deferred():
    """Within the block, ``torch.compile(fn, **options)`` of a plain function returns a wrapper that calls
    ``torch.compile(fn, **options)`` on its first call and the compiled function from then on (decorator form too);
    a module or other callable is compiled at once, as before. ``torch.compile`` is restored on leaving the block.
    Where torch refuses to compile on this Python (``RuntimeError`` starting with :data:`_REFUSAL`), the wrapper
    runs ``fn`` eagerly, as torch-harmonics does; any other error of ``torch.compile`` is raised at that first call.
    """
    real = torch.compile
    torch.compile = functools.partial(_deferred, real)
    try:
        yield
    finally:
        torch.compile = real


def _deferred(compile_fn, model=None, **options):
    if model is None:  # @torch.compile(mode=...): the function comes next
        return functools.partial(_deferred, compile_fn, **options)
    if not inspect.isfunction(model):
        return compile_fn(model, **options)
    compiled = None

    @functools.wraps(model)
    def call(*args, **kwargs):
        nonlocal compiled
        if compiled is None:
            try:
                compiled = compile_fn(model, **options)
            except RuntimeError as err:
                if not str(err).startswith(_REFUSAL):
                    raise
                compiled = model
        return compiled(*args, **kwargs)

    return call
