"""Start and stop one injection, cleaning up on every exit path.

`Injection` is a context manager: `start()` returns once the injection is in force (tsinject printed its
`ready` record, the cgroup quota or the frequency cap is written); `stop()` ends the tsinject process
(SIGTERM, then SIGKILL after a grace period), moves processes back to their own cgroups and removes the one it
made, and writes back every sysfs/procfs value it changed. Every change is first written to the node-state
journal (node/journal.py), whose restore helper undoes it if tailscope is SIGKILLed; tsinject also dies with
its parent (PR_SET_PDEATHSIG). `start()` first takes the node lock (node/lock.py: one tailscope changes a node
at a time; `lock_wait_s` bounds the wait), so the old values it reads are the node's own; `stop()` gives it
back once everything is undone.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from tailscope.inject.kinds import InjectInputError, InjectorKind, kind_named
from tailscope.native import native_path
from tailscope.node.journal import Entry, JournalError, start_time, this_journal
from tailscope.node.journal_entry import CPU_CONTROLLER_OFF

READY_TIMEOUT_S = 300.0  # thp-fragment takes a minute to take and fragment all memory here
STOP_GRACE_S = 10.0
COMPACT_UNEVICTABLE = Path("/proc/sys/vm/compact_unevictable_allowed")
CPUFREQ_ROOT = Path("/sys/devices/system/cpu")


def online_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def parse_cpus(text: str) -> list[int]:
    """`0-2,5` -> [0, 1, 2, 5]; a CPU this process cannot run on is an input error. Every number is checked
    against the CPUs here before a range is expanded, so memory never follows a number the user gave."""
    online = online_cpus()
    top = max(online)
    cpus: set[int] = set()
    for part in text.split(","):
        lo_text, dash, hi_text = part.strip().partition("-")
        if not lo_text.isdigit() or (dash and not hi_text.isdigit()):
            raise InjectInputError(f"--cpus {text!r}: expected a CPU list like 0-3,8")
        lo, hi = int(lo_text), int(hi_text) if dash else int(lo_text)
        if hi < lo:
            raise InjectInputError(f"--cpus {text!r}: range {part.strip()} runs backwards")
        if hi > top:
            raise InjectInputError(f"--cpus {text!r}: CPU {max(lo, top + 1)} is not available here")
        cpus.update(range(lo, hi + 1))
    missing = cpus - set(online)
    if missing:
        raise InjectInputError(f"--cpus {text!r}: CPU {sorted(missing)[0]} is not available here")
    return sorted(cpus)


@dataclass
class Injection:
    """One injector at one intensity on some CPUs (or on a process / cgroup for cpu-quota)."""

    kind: InjectorKind
    intensity: float
    cpus: list[int] = field(default_factory=lambda: [0])
    pids: list[int] = field(default_factory=list)  # cpu-quota: processes to put under the quota
    cgroup: Path | None = None  # cpu-quota: an existing cgroup whose quota is set (and restored)
    duration_s: float = 0.0  # tsinject stops itself after this (0: when stopped)
    reserve: str | None = None  # memory kinds: MemAvailable left alone (tsinject --reserve)
    home_cpus: list[int] | None = None  # kinds without pinned threads: the CPUs the injector may run on
    cpufreq_root: Path = CPUFREQ_ROOT
    lock_wait_s: float | None = None  # how long start() waits for another tailscope (None: default_wait())

    ready: dict[str, Any] = field(default_factory=dict)  # tsinject's ready record / what was written
    done: dict[str, Any] = field(default_factory=dict)  # tsinject's done record
    returncode: int | None = None  # tsinject's exit status once stopped
    error: str = ""  # tsinject's last stderr line, if any
    _proc: subprocess.Popen[str] | None = None
    _changes: list[Entry] = field(default_factory=list)  # journal entries of what start() changed, in order
    _proc_entry: Entry | None = None  # the journal entry of the tsinject process
    _holding: bool = False  # start() took the node lock; stop() gives it back

    @classmethod
    def of(cls, name: str, intensity: float | None = None, **kw: Any) -> Injection:
        kind = kind_named(name)
        return cls(kind, kind.check_intensity(kind.default if intensity is None else intensity), **kw)

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> Injection:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        try:
            this_journal().hold(self.lock_wait_s)  # before any old value is read
        except JournalError as exc:
            raise InjectInputError(f"{self.kind.name}: {exc}") from exc
        self._holding = True
        try:
            if self.kind.backend == "native":
                self._start_native()
            elif self.kind.backend == "cgroup":
                self._start_quota()
            else:
                self._start_freq_cap()
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int | None:
        """The tsinject process (native kinds), None otherwise or once stopped."""
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        """False once a tsinject child has exited on its own (its --duration, or killed)."""
        return self._proc is None or self._proc.poll() is None

    def wait(self) -> None:
        """Block until tsinject exits on its own (duration) — for the native kinds only."""
        if self._proc is not None:
            self._proc.wait()

    def stop(self) -> None:
        """Undo everything start() did; safe to call twice and from a signal handler's unwinding."""
        errors: list[str] = []
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            out = proc.stdout.read() if proc.stdout else ""
            for line in out.splitlines():
                if '"record":"done"' in line:
                    self.done = json.loads(line)
            self.returncode = proc.returncode
            if proc.stderr:
                lines = proc.stderr.read().strip().splitlines()
                self.error = lines[-1] if lines else ""
                proc.stderr.close()
            if proc.stdout:
                proc.stdout.close()
        journal = this_journal()
        if self._proc_entry is not None:
            journal.forget(self._proc_entry)
            self._proc_entry = None
        changes, self._changes = self._changes, []
        for entry in reversed(changes):  # the last change first: pids out, quota back, then the cgroup
            try:
                journal.restore(entry)
            except OSError as exc:
                errors.append(f"{entry.what}: {exc.strerror or exc}")
        if self._holding:  # the lock stays held while an entry of ours remains (journal.Journal)
            self._holding = False
            journal.unhold()
        if errors:
            raise InjectInputError(f"{self.kind.name}: cleanup incomplete: {'; '.join(errors)}")

    # -- native (tsinject) ---------------------------------------------------------------------------
    def argv(self) -> list[str]:
        argv = [str(native_path("tsinject")), self.kind.name, "--intensity", f"{self.intensity:g}"]
        if self.kind.needs_cpus:
            argv += ["--cpus", ",".join(map(str, self.cpus))]
        if self.duration_s:
            argv += ["--duration", f"{self.duration_s:g}"]
        if self.reserve and not self.kind.needs_cpus:
            argv += ["--reserve", self.reserve]
        return argv

    def _start_native(self) -> None:
        if self.kind.name == "thp-fragment":
            self._set(COMPACT_UNEVICTABLE, "0\n")
        home = set(self.home_cpus) if self.home_cpus and not self.kind.needs_cpus else None
        self._proc = subprocess.Popen(
            self.argv(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            # set in the child before exec, so not one page is touched on the probe's CPUs
            preexec_fn=(lambda: os.sched_setaffinity(0, home)) if home else None,
        )
        start = start_time(self._proc.pid)
        if start is not None:  # else it has exited already: said below, from its stderr
            self._proc_entry = this_journal().record(
                "process", pid=self._proc.pid, pid_start=start, name="tsinject " + self.kind.name
            )
        assert self._proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._proc.stdout], [], [], 0.5)
            if ready:
                line = self._proc.stdout.readline()
                if line.startswith('{"record":"ready"'):
                    self.ready = json.loads(line)
                    return
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().strip() if self._proc.stderr else ""
                raise InjectInputError(
                    err.splitlines()[-1] if err else f"tsinject exited {self._proc.returncode}"
                )
        raise InjectInputError(f"{self.kind.name}: tsinject not ready after {READY_TIMEOUT_S:g} s")

    def _set(self, path: Path, value: str) -> None:
        """Write `value` to a sysfs/procfs file, remembering the old value for stop()."""
        try:
            old = path.read_text()
        except OSError as exc:
            raise InjectInputError(f"{self.kind.name}: {path}: {exc.strerror} (needs root)") from exc
        entry = self._record("write", path=str(path), value=old)
        try:
            path.write_text(value)
        except OSError as exc:
            this_journal().forget(entry)
            raise InjectInputError(f"{self.kind.name}: {path}: {exc.strerror} (needs root)") from exc
        self._changes.append(entry)

    def _record(self, action: str, **fields: Any) -> Entry:
        """The journal entry of a change about to be made (before it is made)."""
        try:
            return this_journal().record(action, **fields)
        except JournalError as exc:
            raise InjectInputError(f"{self.kind.name}: {exc}") from exc

    # -- cpu-quota (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us) ----------------------------------------
    def _start_quota(self) -> None:
        from tailscope.inject import cgroups

        if not self.pids and self.cgroup is None:
            raise InjectInputError("cpu-quota: name the processes (--pid) or the cgroup (--cgroup) to limit")
        hierarchy = cgroups.cpu_hierarchy()  # read under the node lock: the node's own state
        if hierarchy.enable is not None:  # before the cgroup is made: a cpu.max appears in it only then
            self._enable_cpu(hierarchy.enable)
        period_us = 100_000
        quota_us = max(1000, round((1 - self.intensity) * period_us * len(self.cpus)))  # 1 - 0.9 < 0.1
        if self.cgroup is not None:
            group = self.cgroup
        else:
            group = hierarchy.root / f"tailscope-inject-{os.getpid()}-{time.monotonic_ns()}"
            entry = self._record("mkdir", path=str(group))
            try:
                group.mkdir()
            except OSError as exc:
                this_journal().forget(entry)
                raise InjectInputError(f"cpu-quota: cannot create {group}: {exc.strerror}") from exc
            self._changes.append(entry)
        for path, value in hierarchy.quota_files(group, quota_us, period_us):
            self._set(path, value)
        for pid in self.pids:
            original = hierarchy.cgroup_of(pid)
            entry = self._record(
                "move", pid=pid, pid_start=start_time(pid), group=str(group), origin=str(original)
            )
            try:
                (group / "cgroup.procs").write_text(f"{pid}\n")
            except OSError as exc:
                this_journal().forget(entry)
                raise InjectInputError(
                    f"cpu-quota: cannot move pid {pid} into {group}: {exc.strerror}"
                ) from exc
            self._changes.append(entry)
        self.ready = {
            "record": "ready",
            "cgroup": str(group),
            "version": hierarchy.version,
            "quota_us": quota_us,
            "period_us": period_us,
            "cpus": len(self.cpus),
            "pids": self.pids,
        }

    def _enable_cpu(self, subtree: Path) -> None:
        """`+cpu` in a v2 root's cgroup.subtree_control, journaled as the `-cpu` that takes it back."""
        entry = self._record("write", path=str(subtree), value=CPU_CONTROLLER_OFF)
        try:
            subtree.write_text("+cpu\n")
        except OSError as exc:
            this_journal().forget(entry)
            raise InjectInputError(f"cpu-quota: cannot enable cpu in {subtree}: {exc.strerror}") from exc
        self._changes.append(entry)

    # -- freq-cap (cpufreq scaling_max_freq) -----------------------------------------------------------
    def _start_freq_cap(self) -> None:
        capped = {}
        for cpu in self.cpus:
            d = self.cpufreq_root / f"cpu{cpu}" / "cpufreq"
            if not (d / "scaling_max_freq").exists():
                raise InjectInputError(
                    f"freq-cap: no cpufreq on CPU {cpu} ({d} is absent, as in most VMs): the clock cannot be "
                    "capped on this node"
                )
            hi = int((d / "cpuinfo_max_freq").read_text())
            lo = int((d / "cpuinfo_min_freq").read_text())
            cap = max(lo, int(hi * (1 - self.intensity)))
            self._set(d / "scaling_max_freq", f"{cap}\n")
            capped[cpu] = cap
        self.ready = {"record": "ready", "scaling_max_freq_khz": capped}


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM ignored while an injection is cleaned up: a second Ctrl-C must not cut it short."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def freq_cap_available(root: Path = CPUFREQ_ROOT) -> bool:
    return (root / "cpu0" / "cpufreq" / "scaling_max_freq").exists()
