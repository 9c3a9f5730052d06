"""The processes that ran on the probe's CPUs during a trial (the `corunners` table).

Every process's CPU time (utime + stime of /proc/PID/stat, all its threads, in ticks) is read at the end of
a trial when that trial shows that something else ran on the probe's CPUs (the collector decides, from the
per-CPU busy time and the probe threads' run-queue wait, and within its budget); that reading is the baseline
of the next one, so a quiet trial costs no scan of /proc. On a busy trial without a full scan, only the 16
processes busiest at the last scan are re-read (a few files), and those started since that scan (one listing
of /proc), so a busy spell names them on every trial and a newcomer from its first one.
While a trial runs, those processes are also re-read every sample interval for the CPU they ran on
(`processor`). A process's time is attributed to the probe's CPUs in the proportion of its readings that
found it on one of them (exact for a pinned co-runner, a sample for a floating one), and scaled from the span
since its previous reading (or its start, for a process younger than the baseline scan) to the trial's wall
time (a rate). A process that started and ended between two readings is not seen here; the per-CPU
`others_s` (busy time minus the probe's) still counts its time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.evidence.procfile import ProcFile
from tailscope.evidence.procstat import TICKS_PER_S

PROC = Path("/proc")
TOP = 10  # rows per trial
MIN_SHARE = 0.01  # of wall_s x probe CPUs
CMDLINE_CHARS = 200
ACTIVE_MAX = 16  # processes re-read during a trial


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    comm: str
    starttime: int  # ticks after boot: tells a reused pid apart
    cpu_ticks: int  # utime + stime
    processor: int


# Kernel threads: what they take is OS noise (or reclaim), not another job's CPU time.
KERNEL_THREAD_PREFIXES = (
    "kworker", "ksoftirqd", "migration", "rcu_", "rcuc", "rcuog", "rcuop", "irq/", "watchdog", "cpuhp",
    "kthreadd", "kswapd", "kcompactd", "khugepaged", "ktimers", "idle_inject",
)  # fmt: skip


@dataclass(frozen=True)
class Corunner:
    """A process that took CPU time on the probe's CPUs during a trial (the corunners table's row; the cause
    catalogue reads them back as these, analysis/causes/context.py)."""

    pid: int
    comm: str
    cmdline: str | None
    cpu_s: float
    share: float  # of (trial wall time x probe CPUs)

    @property
    def kernel_thread(self) -> bool:
        return self.comm.startswith(KERNEL_THREAD_PREFIXES)


def parse_stat(text: str, pid: int) -> ProcInfo:
    close = text.rindex(")")
    rest = text[close + 2 :].split()
    return ProcInfo(
        pid=pid,
        comm=text[text.index("(") + 1 : close],
        starttime=int(rest[19]),
        cpu_ticks=int(rest[11]) + int(rest[12]),
        processor=int(rest[36]),
    )


def read_one(pid: int, proc: Path = PROC) -> ProcInfo | None:
    try:
        fd = os.open(f"{proc}/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        text = os.read(fd, 4096).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return parse_stat(text, pid)
    except (ValueError, IndexError):
        return None


def pids(proc: Path = PROC) -> list[int]:
    try:
        return [int(n) for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return []


def scan(proc: Path = PROC, which: Iterable[int] | None = None) -> dict[int, ProcInfo]:
    out = {}
    for pid in pids(proc) if which is None else which:
        info = read_one(pid, proc)
        if info is not None:
            out[pid] = info
    return out


def cmdline(pid: int, proc: Path = PROC) -> str | None:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    text = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    return text[:CMDLINE_CHARS] or None


@dataclass
class CorunnerTracker:
    """Baseline scan, light samples during a trial, end scan; `finish` attributes and ranks."""

    proc: Path = PROC
    ticks_per_s: float = TICKS_PER_S
    baseline: dict[int, ProcInfo] | None = None
    baseline_at: float = 0.0  # clock() of the baseline scan
    active: set[int] = field(default_factory=set)
    _seen: dict[int, list[int]] = field(default_factory=dict)
    _latest: dict[int, ProcInfo] = field(default_factory=dict)
    _read_at: dict[int, float] = field(default_factory=dict)  # re-read since the baseline scan: when
    _cmdlines: dict[tuple[int, int], str | None] = field(default_factory=dict)  # (pid, starttime) -> cmdline
    # seconds since boot now, the clock of /proc/PID/stat's starttime (a fixture test sets its own)
    boot_clock: Callable[[], float] = field(default=lambda: time.clock_gettime(time.CLOCK_BOOTTIME))
    # seconds on a monotonic clock: the spans between scans (a test sets its own, to hold on a busy machine)
    clock: Callable[[], float] = time.monotonic
    # the active processes' stat files, kept open between full scans (two system calls per re-read; a
    # descriptor stays bound to its process, so a reused pid reads as gone, not as someone else)
    _files: dict[int, ProcFile] = field(default_factory=dict)

    def _read_active(self, pid: int) -> ProcInfo | None:
        f = self._files.get(pid)
        if f is None:
            f = self._files[pid] = ProcFile(f"{self.proc}/{pid}/stat")
        text = f.read()
        if text is None:
            return None
        try:
            return parse_stat(text, pid)
        except (ValueError, IndexError):
            return None

    def start(self) -> None:
        if self.baseline is None:
            self.baseline, self.baseline_at = scan(self.proc), self.clock()
        self._seen, self._latest = {}, {}

    def sample(self) -> None:
        """Re-read the processes that were active at the last scan (cheap: a few files; a process that
        started since is seen by the end scan, on the CPU it ran on last)."""
        for pid in self.active:
            info = self._read_active(pid)
            if info is not None:
                self._note(info)

    def _newcomers(self, exclude: set[int]) -> list[int]:
        """Pids that the baseline does not know, at most ACTIVE_MAX of them (the newest last)."""
        known = self.baseline or {}
        new = [pid for pid in pids(self.proc) if pid not in known and pid not in exclude]
        return sorted(new)[-ACTIVE_MAX:]

    def _in_baseline(self, pid: int, info: ProcInfo) -> ProcInfo | None:
        """The baseline reading of this very process (None for one started since, or a reused pid)."""
        base = self.baseline.get(pid) if self.baseline is not None else None
        return base if base is not None and base.starttime == info.starttime else None

    def _before_ticks(self, pid: int, info: ProcInfo) -> int:
        base = self._in_baseline(pid, info)
        return base.cpu_ticks if base is not None else 0

    def _note(self, info: ProcInfo) -> None:
        self._latest[info.pid] = info
        self._seen.setdefault(info.pid, []).append(info.processor)

    def finish(
        self,
        *,
        exclude: set[int],
        cpus: Sequence[int],
        wall_s: float,
        scan_now: bool = True,
        busy: bool = False,
    ) -> list[Corunner]:
        """The ranked co-runners of the trial. With `scan_now` every process is read and the reading becomes
        the next baseline. Without it, a `busy` trial re-reads only the processes busiest at the last scan
        and those started since (a few files: the same processes are named on every trial of a busy spell,
        between full scans); a quiet one reads nothing."""
        assert self.baseline is not None
        now, boot_now = self.clock(), self.boot_clock()
        newcomers: dict[int, ProcInfo] = {}
        if scan_now:
            end = scan(self.proc)
        elif busy:
            end = {pid: info for pid in self.active if (info := self._read_active(pid)) is not None}
            # and the processes started since the last scan (one listing of /proc, ~40 us for 70 processes):
            # a co-runner that starts in a quiet spell is named by the first busy trial, not by the next scan
            newcomers = scan(self.proc, self._newcomers(exclude))
            end.update(newcomers)
            if not end:
                return []
        else:
            return []
        for info in end.values():
            self._note(info)
        cpu_set = set(cpus)
        capacity = wall_s * max(1, len(cpu_set))
        found = []
        active: dict[int, int] = {}
        for pid, info in self._latest.items():
            ticks = info.cpu_ticks - self._before_ticks(pid, info)
            if ticks <= 0:
                continue
            if pid in end:
                active[pid] = ticks
            if pid in exclude:
                continue
            seen = self._seen.get(pid, [])
            on_probe = sum(1 for c in seen if c in cpu_set)
            if not on_probe:
                continue
            # the delta spans the process's last reading to now (the trial and the gap before it): a rate,
            # scaled to the trial's wall time
            window = now - self._read_at.get(pid, self.baseline_at)
            if pid not in self._read_at and self._in_baseline(pid, info) is None:
                # younger than the baseline scan: its ticks span its own life, not the time since the scan (a
                # co-runner that started 0.4 s into a quiet spell read as 2% of the probe CPUs, not 35%)
                window = min(window, max(boot_now - info.starttime / self.ticks_per_s, wall_s))
            scale = min(1.0, wall_s / window) if window > 0 else 1.0
            cpu_s = ticks / self.ticks_per_s * on_probe / len(seen) * scale
            # A process's CPU field is its main thread's: the time of threads on other CPUs lands here too
            # (seen: a 2-thread stream beside a 1-CPU probe "took 103%" of it). No process can take more
            # than the probe CPUs' whole time; per-thread attribution would be exact, at a cost per thread.
            cpu_s = min(cpu_s, wall_s * max(1, len(cpu_set)))
            found.append((cpu_s, info))
        if scan_now:
            self.baseline, self.baseline_at, self._read_at = end, now, {}
            # the busiest processes of this trial are the ones re-read while the next ones run
            self.active = set(sorted(active, key=lambda p: -active[p])[:ACTIVE_MAX])
            for pid in [p for p in self._files if p not in self.active]:
                self._files.pop(pid).close()
        else:
            for pid, info in end.items():
                self.baseline[pid] = info
                self._read_at[pid] = now
        found.sort(key=lambda x: (-x[0], x[1].pid))
        rows = []
        for cpu_s, info in found[:TOP]:
            share = cpu_s / capacity if capacity > 0 else 0.0
            if share < MIN_SHARE:
                break
            key = (info.pid, info.starttime)
            if key not in self._cmdlines:  # read once per process, not on every trial it is named in
                if len(self._cmdlines) > 4096:
                    self._cmdlines.clear()
                self._cmdlines[key] = cmdline(info.pid, self.proc)
            rows.append(Corunner(info.pid, info.comm, self._cmdlines[key], cpu_s, share))
            if info.pid in newcomers and len(self.active) < 2 * ACTIVE_MAX:
                self.active.add(info.pid)  # a named newcomer is re-read on the next trials of the spell
        return rows
