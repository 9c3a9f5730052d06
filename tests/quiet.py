"""Measuring whether the machine is quiet enough for a test that compares quiet and disturbed trials, and
the co-runner that disturbs them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

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


def cpu_share(seconds: float = 0.3) -> float:
    """The mean share of wall time that busy loops pinned to each CPU this process may use got, all measured
    at once: by how much the machine's load stretches CPU-bound work now (1.0 quiet; 1 / the share is the
    factor). A test that times a run takes it just before and just after, and derives its limit from it."""
    cpus = sorted(os.sched_getaffinity(0))[:8]
    argv = [sys.executable, "-c", _AVAILABILITY]
    procs = [subprocess.Popen([*argv, str(c), str(seconds)], stdout=subprocess.PIPE, text=True) for c in cpus]
    shares = [float(p.communicate(timeout=120)[0]) for p in procs]
    return sum(shares) / len(shares)


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


def _cpu_ticks(pid: int) -> int:
    """utime + stime of process `pid` in clock ticks (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


@contextmanager
def corunner_on(cpu: int, preexec_fn: Callable[[], None] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """stress-ng's CPU stressor pinned to `cpu`, entered once its worker has run: stress-ng forks the worker
    a moment after it starts, and on a busy machine that moment can come after the first trials meant to be
    disturbed have run."""
    argv = ["stress-ng", "--cpu", "1", "--taskset", str(cpu), "--quiet", "--timeout", "300s"]
    proc = subprocess.Popen(argv, preexec_fn=preexec_fn)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                workers = [int(c) for c in children.read_text().split()]
            except FileNotFoundError:
                workers = []
            if any(_cpu_ticks(w) > 0 for w in workers):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"stress-ng (exit {proc.returncode}) ran no worker on CPU {cpu} within 60 s")
            time.sleep(0.01)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
