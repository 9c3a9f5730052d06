"""A node's cheap evidence over a span of time (a job's: from its prolog to its epilog), from /proc and /sys.

No probe runs and nothing is written: a reading is a few dozen small files and one pass over /proc/PID/stat
(a few milliseconds on a node with a thousand processes). `read_sources()` lists the readers one by one, so
a caller that must finish within a bound (the Slurm epilog) can run them in a thread and name the one that
did not answer; `span(before, after)` turns two readings into flat evidence names:

- counters (machine checks, EDAC errors, thermal throttling, THP and compaction, CPU time by state) as their
  increase over the span, or, with no reading at its start, their value since boot with the suffix `.total`;
- gauges (cpufreq, load average, free memory by block size) as read at the end;
- co-runners (with a reading at the start only): the CPU time over the span of every process that is not the
  job's (`exclude`), user processes and kernel threads apart, and the busiest named.

A file the kernel does not have leaves its names out (a VM has no thermal_throttle, no EDAC), never zero.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailscope.evidence import buddyinfo, corunners, interrupts, procstat, sysfs, vmstat
from tailscope.node.dimms import edac_error_counts
from tailscope.node.read import parse_cpu_list, read_text

Value = int | float | str
# /proc/interrupts rows -> evidence names (arch/x86/kernel/irq.c prints them; other architectures do not)
IRQ_ROWS = {
    "MCE": "mce.count",
    "THR": "mce.threshold_interrupts",
    "DFR": "mce.deferred_errors",
    "TRM": "thermal.interrupts",
}
THROTTLE_NAMES = {
    "core_throttle_count": "thermal.core_throttle_count",
    "core_throttle_total_time_ms": "thermal.core_throttle_ms",
    "package_throttle_count": "thermal.package_throttle_count",
    "package_throttle_total_time_ms": "thermal.package_throttle_ms",
}
BUSY_STATES = ("user", "nice", "system", "irq", "softirq")  # of procstat.REPORTED; steal is the host's
TOP_CORUNNERS = 3
MIN_CORUNNER_S = 0.05  # a process named among the busiest took at least this much CPU time over the span


@dataclass(frozen=True)
class Roots:
    """Where /proc and /sys are: `/` on a node; a directory holding a copy (recorded files, a test)."""

    proc: Path = Path("/proc")
    sys: Path = Path("/sys")

    @classmethod
    def under(cls, root: Path) -> Roots:
        return cls(root / "proc", root / "sys")

    @property
    def sys_cpu(self) -> Path:
        return self.sys / "devices" / "system" / "cpu"

    @property
    def edac_mc(self) -> Path:
        return self.sys / "devices" / "system" / "edac" / "mc"


@dataclass
class Reading:
    """What one reading found: counters and gauges by evidence name, each process's (start time, CPU ticks,
    name), and the boot-time clock when it was taken."""

    counters: dict[str, int | float]
    gauges: dict[str, Value]
    processes: dict[int, tuple[int, int, str]]
    boot_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "counters": self.counters,
            "gauges": self.gauges,
            "processes": {str(pid): list(p) for pid, p in self.processes.items()},
            "boot_s": self.boot_s,
        }

    @classmethod
    def from_json(cls, data: Any) -> Reading:
        """A reading written by `to_json` (ValueError/TypeError/KeyError on anything else)."""
        counters = {str(k): _number(v) for k, v in dict(data["counters"]).items()}
        gauges = {str(k): v for k, v in dict(data["gauges"]).items() if isinstance(v, int | float | str)}
        processes = {}
        for pid, p in dict(data["processes"]).items():
            start, ticks, comm = p
            processes[int(pid)] = (int(start), int(ticks), str(comm))
        return cls(counters, gauges, processes, float(data["boot_s"]))


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a number")
    return value


def _cpus(roots: Roots) -> list[int]:
    return parse_cpu_list(read_text(roots.sys_cpu / "online"))


def _thermal(roots: Roots, out: Reading) -> None:
    for name, value in sysfs.throttle_totals(_cpus(roots), roots.sys_cpu).items():
        out.counters[THROTTLE_NAMES[name]] = value


def _cpufreq(roots: Roots, out: Reading) -> None:
    cpus = _cpus(roots)
    current = [f.cpufreq_khz for f in sysfs.read(cpus, roots.sys_cpu).values() if f.cpufreq_khz is not None]
    if current:
        out.gauges["cpufreq.min_khz"] = min(current)
        out.gauges["cpufreq.mean_khz"] = round(sum(current) / len(current))
        out.gauges["cpufreq.max_khz"] = max(current)
    limits = sysfs.frequency_limits(cpus, roots.sys_cpu)
    if limits:
        out.gauges["cpufreq.limit_khz"] = min(limits.values())


def _interrupts(roots: Roots, out: Reading) -> None:
    text = (roots.proc / "interrupts").read_text()
    for row, value in interrupts.row_totals(text, IRQ_ROWS).items():
        out.counters[IRQ_ROWS[row]] = value


def _edac(roots: Roots, out: Reading) -> None:
    for name, value in edac_error_counts(roots.edac_mc).items():
        out.counters[f"edac.{name}"] = value


def _vmstat(roots: Roots, out: Reading) -> None:
    for name, value in vmstat.parse_wanted((roots.proc / "vmstat").read_text()).items():
        out.counters[f"vmstat.{name}"] = value


def _cpu_time(roots: Roots, out: Reading) -> None:
    per_cpu = procstat.parse((roots.proc / "stat").read_text())
    for i, state in enumerate(procstat.FIELDS):
        if state in procstat.REPORTED:
            ticks = sum(t[i] for t in per_cpu.values() if i < len(t))
            out.counters[f"cpu.{state}_s"] = round(ticks / procstat.TICKS_PER_S, 2)


def _load(roots: Roots, out: Reading) -> None:
    fields = (roots.proc / "loadavg").read_text().split()  # "0.33 0.41 0.40 2/345 12345" (proc(5))
    for name, text in zip(("load.avg1", "load.avg5", "load.avg15"), fields[:3], strict=False):
        out.gauges[name] = float(text)
    if len(fields) > 3 and fields[3].partition("/")[0].isdigit():
        out.gauges["load.runnable"] = int(fields[3].partition("/")[0])


def _buddyinfo(roots: Roots, out: Reading) -> None:
    zones = buddyinfo.read(roots.proc)
    if not zones:
        return
    order = buddyinfo.huge_order(
        pmd_path=roots.sys / "kernel" / "mm" / "transparent_hugepage" / "hpage_pmd_size"
    )
    found = buddyinfo.summarize(zones, order)
    out.gauges["buddyinfo.free_mib"] = round(found.free_bytes / 2**20, 1)
    if found.huge_share is not None:
        out.gauges["buddyinfo.huge_share"] = round(found.huge_share, 4)
    if found.huge_share_min_node is not None:
        out.gauges["buddyinfo.huge_share_min_node"] = round(found.huge_share_min_node, 4)


def _processes(roots: Roots, out: Reading) -> None:
    for pid, info in corunners.scan(roots.proc).items():
        out.processes[pid] = (info.starttime, info.cpu_ticks, info.comm)


Source = Callable[[Roots, Reading], None]
# In this order: the counters first (a reading cut short by a hung file keeps what came before it).
SOURCES: tuple[tuple[str, str, Source], ...] = (
    ("interrupts", "/proc/interrupts", _interrupts),
    ("vmstat", "/proc/vmstat", _vmstat),
    ("cpu time", "/proc/stat", _cpu_time),
    ("edac", "/sys/devices/system/edac/mc", _edac),
    ("thermal", "/sys/devices/system/cpu/cpu*/thermal_throttle", _thermal),
    ("cpufreq", "/sys/devices/system/cpu/cpu*/cpufreq", _cpufreq),
    ("load", "/proc/loadavg", _load),
    ("buddyinfo", "/proc/buddyinfo", _buddyinfo),
    ("processes", "/proc/PID/stat", _processes),
)


def empty_reading() -> Reading:
    return Reading({}, {}, {}, time.clock_gettime(time.CLOCK_BOOTTIME))


def read_source(name: str, fn: Source, roots: Roots, out: Reading) -> str | None:
    """Run one source into `out`; a failure is one line naming it (the others still run)."""
    try:
        fn(roots, out)
    except (OSError, ValueError, UnicodeDecodeError, IndexError) as exc:
        return f"{name}: {type(exc).__name__}: {exc}"
    return None


def read(roots: Roots | None = None) -> tuple[Reading, list[str]]:
    """Every source, in order (no bound: see the module's docstring); the reading and the failures."""
    roots = roots or Roots()
    out = empty_reading()
    errors = [e for name, _, fn in SOURCES if (e := read_source(name, fn, roots, out)) is not None]
    return out, errors


def span(
    before: Reading | None,
    after: Reading,
    *,
    exclude: Callable[[int], bool] = lambda pid: False,
    ticks_per_s: float = procstat.TICKS_PER_S,
) -> dict[str, Value]:
    """Evidence names over the span from `before` (None: no reading at its start) to `after`."""
    evidence: dict[str, Value] = {}
    for name, value in sorted(after.counters.items()):
        if before is None:
            evidence[f"{name}.total"] = value
        elif name in before.counters:
            delta = value - before.counters[name]
            evidence[name] = round(delta, 2) if isinstance(delta, float) else delta
    evidence.update(sorted(after.gauges.items()))
    if before is not None:
        busy = sum(float(evidence.get(f"cpu.{state}_s", 0)) for state in BUSY_STATES)
        idle = sum(float(evidence.get(f"cpu.{state}_s", 0)) for state in ("idle", "iowait"))
        if busy + idle > 0:
            evidence["load.busy_share"] = round(busy / (busy + idle), 4)
        evidence.update(_corunners(before, after, exclude, ticks_per_s))
    return evidence


def _corunners(
    before: Reading, after: Reading, exclude: Callable[[int], bool], ticks_per_s: float
) -> dict[str, Value]:
    """CPU time over the span of the processes alive at its end that are not excluded: the increase since
    the start for a process seen then (the same pid and start time), the whole of it for one started since."""
    start_ticks = int(before.boot_s * ticks_per_s)
    user_s = kernel_s = 0.0
    busiest: list[tuple[float, int, str]] = []
    for pid, (started, ticks, comm) in after.processes.items():
        seen = before.processes.get(pid)
        if seen is not None and seen[0] == started:
            ticks -= seen[1]
        elif started < start_ticks:
            continue  # a pid reused since, or a process the first reading missed: its ticks span more
        if ticks <= 0 or exclude(pid):
            continue
        seconds = ticks / ticks_per_s
        if comm.startswith(corunners.KERNEL_THREAD_PREFIXES):
            kernel_s += seconds
        else:
            user_s += seconds
            busiest.append((seconds, pid, comm))
    busiest.sort(key=lambda x: (-x[0], x[1]))
    named = [f"{comm}[{pid}] {s:.2f} s" for s, pid, comm in busiest[:TOP_CORUNNERS] if s >= MIN_CORUNNER_S]
    out: dict[str, Value] = {
        "corunners.cpu_s": round(user_s, 2),
        "corunners.kernel_cpu_s": round(kernel_s, 2),
    }
    if named:
        out["corunners.top"] = ", ".join(named)
    return out


def job_cgroup_member(pid: int, job_id: str, proc: Path = Path("/proc")) -> bool:
    """Whether the process is in a cgroup of this Slurm job (task/cgroup and proctrack/cgroup put a job's
    processes under .../job_<id>/...): visible only with those plugins; False where it cannot tell."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return False
    needle = f"/job_{job_id}"
    return any(needle + "/" in line or line.endswith(needle) for line in text.splitlines())
