"""The effective clock and availability of CPUs without a PMU (native/clock/ts_clock_cpus.c on the one clock
routine, native/common/ts_clock.c; via ctypes).

On every probe CPU at once, one pinned thread times short chunks of a dependent integer-add chain (N dependent
adds take N cycles). A disturbed chunk only reads slow, so the clock is the rate of the first-quartile chunk
time (the 75th-percentile chunk rate), and the time the chunks would have taken at that rate / the wall time
they took is the share of the time the CPU actually ran the loop (the rest went to the host or to others).
See native/clock/ts_clock_cpus.h.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from tailscope.native import NativeMissingError, native_library

# Defaults of the per-trial measurement: 9 chunks of 0.3 M adds, ~70 us each at 4.4 GHz, ~0.6 ms per call
# with all probe CPUs measured in parallel (bench/bench_evidence.py measures the cost).
CHUNKS = 9
ADDS = 300_000


@dataclass(frozen=True)
class ClockReading:
    cpu: int
    effective_hz: float
    available_fraction: float


@cache
def _lib() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(native_library("tailscope_clock")))
    lib.ts_clock_measure.argtypes = [
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
        ctypes.POINTER(ctypes.c_double),
        ctypes.POINTER(ctypes.c_double),
    ]
    lib.ts_clock_measure.restype = ctypes.c_int
    return lib


def prepare() -> None:
    """Load the library and find the TSC frequency now (a 20 ms calibration where CPUID does not give it)."""
    cpus = sorted(os.sched_getaffinity(0))
    if cpus:
        measure(cpus[:1], chunks=1, adds=1000)


def measure(cpus: Sequence[int], chunks: int = CHUNKS, adds: int = ADDS) -> list[ClockReading]:
    """One reading per CPU (measured in parallel); a CPU that could not be pinned is left out, and so is
    everything when the native library is not installed (the rows are then absent, never zero)."""
    n = len(cpus)
    if n == 0:
        return []
    try:
        lib = _lib()
    except (NativeMissingError, OSError):
        return []
    ids = (ctypes.c_int * n)(*cpus)
    hz = (ctypes.c_double * n)()
    avail = (ctypes.c_double * n)()
    err = lib.ts_clock_measure(ids, n, chunks, adds, hz, avail)
    if err:
        return []
    return [ClockReading(cpu, hz[i], avail[i]) for i, cpu in enumerate(cpus) if hz[i] > 0]
