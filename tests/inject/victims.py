"""Victim workloads for the live injector tests: each measures its own progress in a window on one CPU.

Each test alternates control windows (no injection) and injected windows in the same test, so a machine busy
with other work slows both alike and the ratio still shows the injector's effect.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


@contextmanager
def pinned(cpu: int) -> Iterator[None]:
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


def busy_loop(seconds: float) -> float:
    """Loop iterations per second of wall time (falls with the share of the CPU this thread gets)."""
    n, t0 = 0, time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        for _ in range(2000):
            n += 1
    return n / (time.monotonic() - t0)


def copy_rate(nbytes: int) -> Callable[[float], float]:
    """Bytes per second copied between two arrays of nbytes (memory bandwidth when nbytes >> LLC)."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)

    def measure(seconds: float) -> float:
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            np.copyto(dst, src)
            n += 1
        return 2 * nbytes * n / (time.monotonic() - t0)

    return measure


def switches() -> int:
    """Involuntary context switches of this process so far (/proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("nonvoluntary_ctxt_switches"):
                return int(line.split()[1])
    raise AssertionError("no nonvoluntary_ctxt_switches in /proc/self/status")


def median(values: list[float]) -> float:
    return statistics.median(values)


def thp_kib(mib: int) -> int:
    """AnonHugePages (KiB) a fresh process gets for a MADV_HUGEPAGE allocation of `mib` MiB."""
    code = (
        "import mmap, re\n"
        f"n = {mib} << 20\n"
        "m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
        "m.madvise(mmap.MADV_HUGEPAGE)\n"
        "for i in range(0, n, 4096): m[i] = 1\n"
        "t = open('/proc/self/smaps_rollup').read()\n"
        "print(re.search(r'AnonHugePages:\\s+(\\d+)', t).group(1))\n"
    )
    return int(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )


def vmstat(name: str) -> int:
    """A /proc/vmstat counter (a name this kernel does not have is a failure, not 0)."""
    for line in Path("/proc/vmstat").read_text().splitlines():
        key, value = line.split()
        if key == name:
            return int(value)
    raise AssertionError(name)
