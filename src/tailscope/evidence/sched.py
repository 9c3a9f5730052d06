"""The probe's threads as the scheduler saw them: /proc/PID/task/TID/{schedstat,stat,status,sched} (read as
/proc/TID/task/TID, the same files: see `read_task`).

- schedstat: time on the CPU, time waiting on a run queue (ns), timeslices (Documentation/scheduler/
  sched-stats.rst).
- stat: minflt (field 10), majflt (12), utime/stime (14, 15, ticks), processor (39): the CPU it last ran on.
- sched (CONFIG_SCHED_DEBUG): nr_voluntary_switches, nr_involuntary_switches, se.nr_migrations. Without it,
  the switches come from status (voluntary_ctxt_switches, nonvoluntary_ctxt_switches) and the migrations are
  the changes of `processor` between samples (a lower bound).
Counters of a new thread start at zero, so a thread's value at its last sample is its value over the trial.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tailscope.node.read import parse_cpu_list

PROC = Path("/proc")


@dataclass(frozen=True)
class TaskSample:
    tid: int
    run_ns: int
    run_delay_ns: int
    timeslices: int
    minflt: int
    majflt: int
    processor: int
    voluntary_switches: int | None
    involuntary_switches: int | None
    migrations: int | None  # se.nr_migrations, when /proc/.../sched exists


def _read(path: str, dir_fd: int | None = None) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return os.read(fd, 65536).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_schedstat(text: str) -> tuple[int, int, int]:
    run, delay, slices = (int(x) for x in text.split()[:3])
    return run, delay, slices


def parse_stat(text: str) -> dict[str, int]:
    """Fields of /proc/PID/stat after the command name (which may contain spaces and parentheses)."""
    rest = text[text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): field k is rest[k - 3]
    return {
        "ppid": int(rest[1]),
        "minflt": int(rest[7]),
        "majflt": int(rest[9]),
        "utime": int(rest[11]),
        "stime": int(rest[12]),
        "starttime": int(rest[19]),
        "processor": int(rest[36]),
    }


def parse_comm(text: str) -> str:
    return text[text.index("(") + 1 : text.rindex(")")]


def _field(text: str, key: str) -> int | None:
    """The integer after `key` and its separator (':' plus blanks) at the start of a line, or None."""
    at = text.find("\n" + key)
    if at < 0:
        if not text.startswith(key):
            return None
        at = -1
    start = at + 1 + len(key)
    if not key.endswith(":"):
        start = text.find(":", start) + 1
    end = text.find("\n", start)
    try:
        return int(text[start : end if end >= 0 else len(text)])
    except ValueError:
        return None


def parse_status_switches(text: str) -> tuple[int | None, int | None]:
    return _field(text, "voluntary_ctxt_switches:"), _field(text, "nonvoluntary_ctxt_switches:")


def parse_sched_switches(text: str) -> tuple[int | None, int | None]:
    return _field(text, "nr_voluntary_switches "), _field(text, "nr_involuntary_switches ")


def parse_sched_migrations(text: str) -> int | None:
    return _field(text, "se.nr_migrations ")


def _allowed_cpus(pid: int, proc: Path = PROC) -> set[int]:
    """Cpus_allowed_list of a process (a zombie's too), or an empty set where it cannot be read."""
    try:
        text = Path(f"{proc}/{pid}/status").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            try:
                return set(parse_cpu_list(line.split(":", 1)[1]))
            except ValueError:  # not the kernel's cpulist format: nothing to narrow the visits by
                return set()
    return set()


def read_task(pid: int, tid: int, proc: Path = PROC) -> TaskSample | None:
    """One thread's sample, or None when it is gone (or its files are unreadable). `pid` is its process
    (the thread is read through its own /proc/TID directory, see below)."""
    # /proc/TID/task/TID is the same thread as /proc/PID/task/TID, but its dentries hang under /proc/TID,
    # which the kernel drops when the thread exits. Read under /proc/PID, a worker's dentries are dropped
    # when the process is reaped: wait4 then walked them in release_task -> d_invalidate ->
    # shrink_dcache_parent (perf), costing the runner 0.4-3.5 ms of CPU per trial of a two-thread l2sum.
    # The directory is opened once and its files relative to it: one path walk through /proc, not four.
    try:
        base = os.open(f"{proc}/{tid}/task/{tid}", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        return _read_task_at(base, tid)
    finally:
        os.close(base)


def _read_task_at(base: int, tid: int) -> TaskSample | None:
    schedstat, stat = _read("schedstat", base), _read("stat", base)
    if not schedstat or not stat:
        return None
    try:
        run, delay, slices = parse_schedstat(schedstat)
        fields = parse_stat(stat)
    except (ValueError, IndexError):
        return None
    # `sched` (CONFIG_SCHED_DEBUG) has the switches and the migrations; `status` is the fallback for switches
    sched = _read("sched", base)
    if sched:
        vol, invol = parse_sched_switches(sched)
    else:
        status = _read("status", base)
        vol, invol = parse_status_switches(status) if status else (None, None)
    return TaskSample(
        tid=tid,
        run_ns=run,
        run_delay_ns=delay,
        timeslices=slices,
        minflt=fields["minflt"],
        majflt=fields["majflt"],
        processor=fields["processor"],
        voluntary_switches=vol,
        involuntary_switches=invol,
        migrations=parse_sched_migrations(sched) if sched else None,
    )


def task_ids(pid: int, proc: Path = PROC) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"{proc}/{pid}/task"))
    except OSError:
        return []


_WITH_SCHED: set[str] = set()  # /proc roots whose threads have a `sched` file (CONFIG_SCHED_DEBUG)


class TaskTracker:
    """The latest sample of every thread of one process (and of the other processes of its tree, `others`:
    an application's children, `run -- CMD`), and the CPUs each was seen on."""

    def __init__(self, pid: int, proc: Path = PROC) -> None:
        self.pid = pid
        self.proc = proc
        self.last: dict[int, TaskSample] = {}
        self.cpus_seen: dict[int, list[int]] = {}
        self.final: set[int] = set()  # threads read as the zombie was waited for: exact final values
        self.pids: set[int] = {pid}  # every process whose threads were read
        # the main thread's affinity when it exited: a visit outside it (hwloc's CPUID probe moving the
        # thread across every CPU during MPI_Init, a launcher before it pinned) is not where the work ran
        self.main_allowed: set[int] = set()
        # the same for every other process of the tree, read as the trial's process exits (OpenMPI's orted
        # runs hwloc's probe too: on a busy node it waits long enough on the other CPU to be seen there)
        self.allowed_of: dict[int, set[int]] = {}
        self.pid_of: dict[int, int] = {}  # thread -> its process, for the threads of `others`

    def sample(self, *, final: bool = False, others: Sequence[int] = ()) -> None:
        """Every thread's files. Before the exit the main thread is skipped once a read has shown that its
        `sched` file exists: its read as a zombie is exact and counts its migrations, so an earlier one
        adds nothing (without `sched` its CPUs between reads are the migrations, and it is read each time).
        """
        # `final` reads the zombie, whose workers are gone (waitid reports the exit only once every thread has
        # exited): its main thread is all there is, and the task directory is not listed (50 us here)
        for tid in [self.pid] if final else task_ids(self.pid, self.proc):
            if tid == self.pid and not final and str(self.proc) in _WITH_SCHED:
                continue
            s = read_task(self.pid, tid, self.proc)
            if s is None:
                continue
            self.last[tid] = s
            if s.migrations is not None:
                _WITH_SCHED.add(str(self.proc))
            seen = self.cpus_seen.setdefault(tid, [])
            if not seen or seen[-1] != s.processor:
                seen.append(s.processor)
            if final:
                self.final.add(tid)
                self.main_allowed = _allowed_cpus(self.pid, self.proc)
        for pid in others:
            if pid == self.pid:
                continue
            self.pids.add(pid)
            if final:
                self.allowed_of[pid] = _allowed_cpus(pid, self.proc)
            for tid in task_ids(pid, self.proc):
                s = read_task(pid, tid, self.proc)
                if s is None:
                    continue
                self.pid_of[tid] = pid
                self.last[tid] = s
                seen = self.cpus_seen.setdefault(tid, [])
                if not seen or seen[-1] != s.processor:
                    seen.append(s.processor)

    def cpus(self, min_share: float = 0.01) -> list[int]:
        """Every CPU a thread that did work was seen on: threads with at least `min_share` of the CPU time of
        all (a launcher before its exec, an MPI daemon that sleeps, a helper thread do not widen the set), the
        main thread and every other process's threads within the affinity they had at the end."""
        total = sum(s.run_ns for s in self.last.values())
        out: set[int] = set()
        for tid, seen in self.cpus_seen.items():
            if total and self.last[tid].run_ns < min_share * total:
                continue
            if tid == self.pid:
                allowed = self.main_allowed
            else:  # a thread of the trial's process keeps every visit, as before; another process's, its own
                allowed = self.allowed_of.get(self.pid_of.get(tid, self.pid), set())
            out.update([c for c in seen if c in allowed] or seen)
        return sorted(out)

    def threads(self) -> list[TaskSample]:
        """Thread index order: the main thread (tid == pid) first, then by thread id (creation order)."""
        return sorted(self.last.values(), key=lambda s: (s.tid != self.pid, s.tid))

    def migrations(self, tid: int) -> int:
        s = self.last[tid]
        if s.migrations is not None:
            return s.migrations
        return max(0, len(self.cpus_seen.get(tid, [])) - 1)
