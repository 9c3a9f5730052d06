"""The C library's heap: freed pages given back to the system.

glibc keeps the memory a process frees, for its next allocations: blocks below its mmap threshold, which it
raises to the size of each large block freed (up to 32 MiB), so most column arrays of an analysis end in
the heap. Python's objects do not come from there (pymalloc maps arenas of its own), so 50,000 run verdicts
built after the columns of 1,000 nodes were freed add to the peak instead of reusing that memory.
"""

from __future__ import annotations

import functools
from typing import Any


def return_freed_memory() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim: every arena, whole free pages,
    ~1 ms for 100 MiB of heap); elsewhere nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    """malloc_trim from the C library this process runs on (not glibc: None)."""
    import ctypes

    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None
