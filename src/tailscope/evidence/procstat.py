"""/proc/stat per CPU: time in each state, in USER_HZ ticks (proc(5)); rows are seconds over the trial."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

PROC = Path("/proc")
# proc(5) order of the per-CPU fields; guest time is already inside user/nice, so it is not reported.
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
REPORTED = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")

CpuTimes = dict[int, tuple[int, ...]]


def parse(text: str, cpus: Collection[int] | None = None) -> CpuTimes:
    """`cpuN ...` lines of /proc/stat -> {N: ticks per field} (the aggregate `cpu` line is skipped); with
    `cpus`, only theirs."""
    out: CpuTimes = {}
    wanted = None if cpus is None else {f"cpu{c}" for c in cpus}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, _, rest = line.partition(" ")
        if wanted is not None and name not in wanted:
            continue
        if name[3:].isdigit():
            out[int(name[3:])] = tuple(map(int, rest.split()))
    return out


def read(proc: Path = PROC) -> CpuTimes:
    try:
        return parse((proc / "stat").read_text())
    except OSError:
        return {}


def delta_seconds(
    before: CpuTimes, after: CpuTimes, cpu: int, ticks_per_s: float = TICKS_PER_S
) -> dict[str, float]:
    """{state: seconds} on `cpu` between the two readings (empty when the CPU is missing from either)."""
    if cpu not in before or cpu not in after:
        return {}
    b, a = before[cpu], after[cpu]
    return {
        name: (a[i] - b[i]) / ticks_per_s for i, name in enumerate(FIELDS) if name in REPORTED and i < len(a)
    }
