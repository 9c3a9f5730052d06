"""The per-trial evidence collector: readings around one trial process, turned into store rows.

Used by the local runner (campaign/runner.py) through `process.run_watched`:

    collector.begin(variant_id)                       just before the process starts
    run_watched(argv, ..., on_sample=collector.sample, on_exit=collector.at_exit)
    evidence = collector.finish(run_id, variant_id, cpus, finished.rusage)   after it was reaped

Rows follow EVIDENCE.md: `counters` rows with source "os" (pmu cpu / task / vm / trial) and `corunners` rows.
A source that cannot be read leaves its rows out, never zero.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailscope.evidence import clock, interrupts, procstat, sysfs, vmstat
from tailscope.evidence.corunners import MIN_SHARE, CorunnerTracker
from tailscope.evidence.procfile import ProcFile
from tailscope.evidence.sched import TaskTracker

SOURCE = "os"
CREDIT_CAP_S = 0.01  # the optional parts' credit never exceeds this (no burst after a long quiet spell)


@dataclass(frozen=True)
class EvidenceSettings:
    """What the collector reads, and how much trial time its optional parts may take.

    The fixed part (/proc/stat, /proc/interrupts, /proc/vmstat, cpufreq/thermal files, the probe's threads)
    is read on every trial. The optional parts -- the effective clock (~0.7 ms of CPU time per probe CPU) and
    the scan of every process (~10 us per process) -- each draw on a credit that grows by half of `budget` x
    each trial's wall time and is charged the CPU time the part used (all its threads): on
    trials of a second or more they run every time; on 50 ms trials the clock runs every few trials (and on
    the first trial of every variant). A process scan is only wanted when something else ran (see
    `finish`)."""

    # probe threads (and, in long trials, the active processes) while it runs; the threads are also read when
    # output arrives after a quiet spell, which is when a probe prints its records after its timed region
    sample_interval_s: float = 0.25
    budget: float = 0.003  # share of trial wall time the optional parts may use, on average
    measure_clock: bool = True  # measure the effective clock (when the credit allows)
    clock_chunks: int = clock.CHUNKS
    clock_adds: int = clock.ADDS


@dataclass
class Evidence:
    counters: list[dict[str, Any]] = field(default_factory=list)
    corunners: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Reading:
    """The files as read (parsed in `finish`, after the trial, for the probe's CPUs only)."""

    t: float
    stat: str
    irq: str
    vm: str
    cpu_files: dict[int, sysfs.CpuSysfs]
    runner_cpu_s: float


class EvidenceCollector:
    """Readings before, during and after each trial of one runner; the co-runner baseline carries over."""

    def __init__(
        self,
        settings: EvidenceSettings | None = None,
        *,
        proc: Path = procstat.PROC,
        sys_cpu: Path = sysfs.SYS_CPU,
    ) -> None:
        self.settings = settings or EvidenceSettings()
        self.proc, self.sys_cpu = proc, sys_cpu
        # kept open and re-read from the start (procfile.py): two system calls per read instead of seven
        self._stat = ProcFile(f"{proc}/stat")
        self._interrupts = ProcFile(f"{proc}/interrupts")
        self._vmstat = ProcFile(f"{proc}/vmstat")
        self._self_stat = ProcFile(f"{proc}/self/stat")
        self.corunners = CorunnerTracker(proc=proc)
        self._cpus_of: dict[str, list[int]] = {}  # variant -> CPUs its last trial ran on
        # each optional part has its own credit (half the budget each), so a busy node's scans cannot starve
        # the clock. Both start at zero: a part whose cost is not known yet is affordable (the first busy
        # trial gets its scan, the first trial of a variant its clock in any case), and no starting credit
        # is spent on the first trials (10 ms each was 0.4% of the trial time over 100 l2sum trials)
        self._credit_s = {"clock": 0.0, "scan": 0.0}
        self._cost_s = {"clock": 0.0, "scan": 0.0}  # what the last one took
        self._last_process_sample = 0.0
        if self.settings.measure_clock:
            clock.prepare()  # the TSC frequency is found once (up to 20 ms), not charged to a trial
        self._before: _Reading | None = None
        self._after: _Reading | None = None
        self._tasks: TaskTracker | None = None

    # --- readings ------------------------------------------------------------------------------------------
    def _read(self, cpus: Sequence[int]) -> _Reading:
        stat = self._stat.read() or ""
        return _Reading(
            t=time.monotonic(),
            stat=stat,
            irq=self._interrupts.read() or "",
            vm=self._vmstat.read() or "",
            cpu_files=sysfs.read(list(cpus), self.sys_cpu),
            runner_cpu_s=time.process_time(),
        )

    def begin(self, variant_id: str) -> None:
        """Just before the trial process starts."""
        self.corunners.start()
        self._tasks, self._after = None, None
        self._before = self._read(self._cpus_of.get(variant_id) or [])
        self._last_process_sample = self._before.t
        if variant_id not in self._cpus_of:  # first trial of the variant: its CPUs are not known yet
            self._before.cpu_files = sysfs.read(sorted(procstat.parse(self._before.stat)), self.sys_cpu)

    def sample(self, pid: int, others: Sequence[int] = ()) -> None:
        """While the trial runs: the probe's threads (and those of `others`, the rest of an application's
        process tree); once per sample interval the recently active processes too (so trials shorter than
        the interval never pay for it)."""
        if self._tasks is None:
            self._tasks = TaskTracker(pid, self.proc)
        self._tasks.sample(others=others)
        now = time.monotonic()
        if now - self._last_process_sample >= self.settings.sample_interval_s:
            self._last_process_sample = now
            self.corunners.sample()

    def at_exit(self, pid: int, others: Sequence[int] = ()) -> None:
        """The process has exited and is not reaped yet: its main thread's final values (and the last of
        `others`, processes of its tree still there), then the CPUs'."""
        if self._tasks is None:
            self._tasks = TaskTracker(pid, self.proc)
        self._tasks.sample(final=True, others=others)
        before = self._before
        self._after = self._read(sorted(before.cpu_files) if before else [])

    def cpus_seen(self) -> list[int]:
        """The CPUs the trial's threads were seen on (after `at_exit`), or [] when none was read."""
        return self._tasks.cpus() if self._tasks is not None else []

    # --- rows ----------------------------------------------------------------------------------------------
    def finish(
        self,
        run_id: str,
        variant_id: str,
        cpus: Sequence[int] | None,
        rusage: resource.struct_rusage | None,
    ) -> Evidence:
        """Rows of the trial that just ended (after `at_exit` and the reap)."""
        before, after, tasks = self._before, self._after, self._tasks
        if before is None or after is None:
            return Evidence()
        first_of_variant = variant_id not in self._cpus_of
        probe_cpus = list(cpus) if cpus else sorted(before.cpu_files)
        if cpus:
            self._cpus_of[variant_id] = list(cpus)
        wall_s = after.t - before.t
        for part in self._credit_s:
            self._credit_s[part] = min(CREDIT_CAP_S, self._credit_s[part] + self.settings.budget / 2 * wall_s)
        out = Evidence()

        def row(pmu: str, unit: int | None, event: str, value: float) -> None:
            out.counters.append(
                {"run_id": run_id, "source": SOURCE, "pmu": pmu, "unit": unit, "event": event, "value": value}
            )

        row("trial", None, "wall_s", wall_s)
        adjusted = _run_ns_adjusted(tasks, rusage) if tasks is not None else {}
        probe_on_cpu = _probe_time_per_cpu(tasks, adjusted)
        runner_cpu = _last_cpu(self._self_stat)
        runner_s = after.runner_cpu_s - before.runner_cpu_s
        stat_b, stat_a = procstat.parse(before.stat, probe_cpus), procstat.parse(after.stat, probe_cpus)
        irq_b, irq_a = interrupts.parse(before.irq, probe_cpus), interrupts.parse(after.irq, probe_cpus)
        others_max = 0.0
        for cpu in probe_cpus:
            times = procstat.delta_seconds(stat_b, stat_a, cpu)
            for name, seconds in times.items():
                row("cpu", cpu, f"{name}_s", seconds)
            if times:
                used = times["user"] + times["nice"] + times["system"]
                own = probe_on_cpu.get(cpu, 0.0) + (runner_s if runner_cpu == cpu else 0.0)
                others = max(0.0, used - own)
                others_max = max(others_max, others)
                row("cpu", cpu, "others_s", others)
            if cpu in irq_b.total and cpu in irq_a.total:
                row("cpu", cpu, "interrupts", irq_a.total[cpu] - irq_b.total[cpu])
            loc_b, loc_a = irq_b.local_timer.get(cpu), irq_a.local_timer.get(cpu)
            if loc_b is not None and loc_a is not None:
                row("cpu", cpu, "local_timer_interrupts", loc_a - loc_b)
            b, a = before.cpu_files.get(cpu), after.cpu_files.get(cpu)
            if a is not None and a.cpufreq_khz is not None:
                row("cpu", cpu, "cpufreq_khz", a.cpufreq_khz)
            thr_b = b.throttle_count if b is not None else None
            thr_a = a.throttle_count if a is not None else None
            if thr_b is not None and thr_a is not None:
                row("cpu", cpu, "throttle_count", thr_a - thr_b)
        run_delay_s = 0.0
        if tasks is not None:
            for index, s in enumerate(tasks.threads()):
                row("task", index, "run_s", adjusted[s.tid] / 1e9)
                row("task", index, "run_delay_s", s.run_delay_ns / 1e9)
                run_delay_s = max(run_delay_s, s.run_delay_ns / 1e9)
                if s.voluntary_switches is not None:
                    row("task", index, "voluntary_switches", s.voluntary_switches)
                if s.involuntary_switches is not None:
                    row("task", index, "involuntary_switches", s.involuntary_switches)
                row("task", index, "migrations", tasks.migrations(s.tid))
                row("task", index, "minflt", s.minflt)
                row("task", index, "majflt", s.majflt)
        for key, delta in vmstat.deltas(_vm(before.vm), _vm(after.vm)).items():
            row("vm", None, key, delta)
        exclude = {os.getpid()} | (tasks.pids if tasks is not None else set())
        # Scan every process only when someone else ran: busy time beyond the probe's on a probe CPU (10 ms
        # ticks: 2 ticks is the noise of one difference) or a probe thread waiting on its run queue.
        threshold = max(MIN_SHARE * wall_s, 2.0 / procstat.TICKS_PER_S)
        busy = others_max >= threshold or run_delay_s >= MIN_SHARE * wall_s
        scan = busy and self._afford("scan")
        t0 = time.process_time()
        found = self.corunners.finish(
            exclude=exclude, cpus=probe_cpus, wall_s=wall_s, scan_now=scan, busy=busy
        )
        if scan:
            self._spend("scan", time.process_time() - t0)
        for c in found:
            out.corunners.append(
                {
                    "run_id": run_id,
                    "pid": c.pid,
                    "comm": c.comm,
                    "cmdline": c.cmdline,
                    "cpu_s": c.cpu_s,
                    "share": c.share,
                }
            )
        if self.settings.measure_clock and (first_of_variant or self._afford("clock")):
            t0 = time.process_time()  # CPU time of every clock thread: waiting for a busy CPU costs nothing
            readings = clock.measure(probe_cpus, self.settings.clock_chunks, self.settings.clock_adds)
            self._spend("clock", time.process_time() - t0)
            for reading in readings:
                row("cpu", reading.cpu, "effective_mhz", reading.effective_hz / 1e6)
                row("cpu", reading.cpu, "available_fraction", reading.available_fraction)
        return out

    def _afford(self, part: str) -> bool:
        # a part that once cost more than the cap is still run whenever the credit is full
        return self._credit_s[part] >= min(self._cost_s[part], CREDIT_CAP_S)

    def _spend(self, part: str, seconds: float) -> None:
        self._cost_s[part] = seconds
        self._credit_s[part] -= seconds


def _rusage_cpu_ns(rusage: resource.struct_rusage | None) -> int | None:
    if rusage is None:
        return None
    return round((rusage.ru_utime + rusage.ru_stime) * 1e9)


def _run_ns_adjusted(tasks: TaskTracker, rusage: resource.struct_rusage | None) -> dict[int, float]:
    """Each thread's time on a CPU. Threads read at the exit (the main thread) are exact; a worker thread's
    last sample can be up to one sample interval old, so the process total (rusage, every thread) minus the
    exact ones is shared among the workers in proportion to their sampled time."""
    threads = tasks.threads()
    out = {s.tid: float(s.run_ns) for s in threads}
    total = _rusage_cpu_ns(rusage)
    stale = [s for s in threads if s.tid not in tasks.final]
    if total is None or not stale:
        return out
    missing = total - sum(out.values())
    if missing <= 0:
        return out
    sampled = sum(s.run_ns for s in stale)
    for s in stale:
        out[s.tid] += missing * (s.run_ns / sampled if sampled > 0 else 1.0 / len(stale))
    return out


def _probe_time_per_cpu(tasks: TaskTracker | None, adjusted: dict[int, float]) -> dict[int, float]:
    """Seconds the probe's threads ran (`adjusted`: _run_ns_adjusted), by the CPU each ran on last (probe
    threads are pinned)."""
    if tasks is None:
        return {}
    per_cpu: dict[int, float] = {}
    for s in tasks.threads():
        per_cpu[s.processor] = per_cpu.get(s.processor, 0.0) + adjusted[s.tid] / 1e9
    return per_cpu


def _last_cpu(self_stat: ProcFile) -> int | None:
    """The CPU the runner ran on last (/proc/self/stat field 39)."""
    text = self_stat.read()
    if text is None:
        return None
    try:
        return int(text[text.rindex(")") + 2 :].split()[36])
    except (ValueError, IndexError):
        return None


def _vm(text: str) -> dict[str, int]:
    try:
        return vmstat.parse_wanted(text)
    except ValueError:
        return {}
