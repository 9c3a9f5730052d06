"""Measuring whether the machine is quiet enough for a test that compares quiet and disturbed trials."""

from __future__ import annotations

import pytest

_AVAILABILITY = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
wall0, cpu0 = time.perf_counter(), time.thread_time()
while time.perf_counter() - wall0 < float(sys.argv[2]):
    pass
print((time.thread_time() - cpu0) / (time.perf_counter() - wall0))
"""


def cpu_availability(cpu: int, seconds: float = 0.5) -> float:
    """Share of wall time a pinned busy loop got on `cpu`: about 1.0 on a quiet CPU, 0.5 when one other
    CPU-bound process shares it (what `stress-ng --cpu 2` does to every CPU of a 2-core machine)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _AVAILABILITY, str(cpu), str(seconds)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


def require_quiet_cpus(cpus: list[int], minimum: float = 0.85) -> dict[int, float]:
    """Skip (reporting the measured disturbance) when another process already competes for `cpus`: a test
    whose assertion compares quiet trials with disturbed ones cannot be judged on a machine that is busy
    throughout. Returns the availability per CPU (print it)."""
    measured = {cpu: cpu_availability(cpu) for cpu in cpus}
    busy = {cpu: a for cpu, a in measured.items() if a < minimum}
    if busy:
        shown = ", ".join(f"CPU {c} {a:.0%}" for c, a in sorted(busy.items()))
        pytest.skip(
            f"machine busy before the test: a pinned loop got only {shown} of wall time "
            f"(needs >= {minimum:.0%}); "
            "the quiet/disturbed contrast this test judges cannot be measured here"
        )
    return measured
