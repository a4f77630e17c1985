"""Resident memory of a long job: freed heap pages given back to the system between units of work.

glibc's allocator keeps the memory a process frees in its heap for later requests, and raises its mmap threshold to
the largest block freed so far (up to 32 MB), so that a job allocating and freeing the same few large arrays again
and again (a rollout batch, its decoded fields, a netCDF write) holds, after the first round, a heap of free pages
the size of one round's arrays on top of what it uses: +116 MB free of 307 MB after the first 8-forecast, 40-step
batch of a 64x128 export (``mallinfo2``; benchmarks/speed/README.md). :func:`release_free_memory` asks the allocator to
return them (``malloc_trim(0)``, which also releases whole free pages inside the heap); the next round takes them
back from the system at the cost of page faults, small next to a rollout.

A no-op where the C library is not glibc (macOS, musl): there the allocator has its own policy.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["release_free_memory"]


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


def release_free_memory() -> bool:
    """Return the heap's free pages to the system (glibc ``malloc_trim(0)``). True where the allocator was asked
    (glibc), False where it is not glibc's. Live memory is untouched."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
