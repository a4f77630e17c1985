"""dandelion/heap.py: freed heap pages returned to the system (glibc), live memory untouched, a no-op elsewhere."""

from __future__ import annotations

import platform

import numpy as np
import pytest

from dandelion import heap


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_free_pages_are_released_on_glibc_and_live_arrays_keep_their_values():
    live = [np.full(1 << 16, float(i)) for i in range(64)]  # small blocks from the heap, between freed ones
    freed = [np.ones(1 << 16) for _ in range(64)]
    del freed
    assert heap.release_free_memory() is True
    for i, a in enumerate(live):
        assert a.shape == (1 << 16,) and np.all(a == float(i))


def test_without_malloc_trim_nothing_is_asked(monkeypatch):
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.release_free_memory() is False
