"""`run --events SET -- CMD`: perf_event counters of the whole process tree of a trial.

The events of the set are resolved by the native library (`tsevents load`, the same resolution as the probes
and the monitor); those a thread can count (perf events of thread scope) are opened by the launched process
itself, between fork and exec, on itself with `inherit` (every child and thread it starts is counted into
them as it exits) and `enable_on_exec` (counting starts at the command's first instruction, not in Python).
They are moved to fixed descriptor numbers, and tailscope takes its own copies from the running command with
pidfd_getfd(2) (Linux 5.6; root or the command's own user). They are read once the tree has ended: value,
time enabled, time running, as the probes record them. Events of other scopes (uncore, /proc files) are the
monitor's (`--monitor`). Where a counter cannot be opened (no PMU in a VM for `cycles`) it is left out, never
zero.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import struct
import subprocess
from dataclasses import dataclass
from typing import Any

from tailscope.app.errors import AppInputError

FD_BASE = 900  # the descriptors' numbers in the command (above what programs usually open themselves)
ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5
_SYSCALLS = {"x86_64": (298, 438), "aarch64": (241, 438)}  # perf_event_open, pidfd_getfd
# attr.flags bits (include/uapi/linux/perf_event.h)
DISABLED, INHERIT, EXCLUDE_USER, EXCLUDE_KERNEL, EXCLUDE_HV, ENABLE_ON_EXEC = 1, 2, 16, 32, 64, 1 << 12
READ_FORMAT = 1 | 2  # TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING


@dataclass(frozen=True)
class TreeEvent:
    name: str
    family: str
    type: int
    config: int
    config1: int
    config2: int
    width: int | None
    exclude_user: bool
    exclude_kernel: bool


def resolve(event_set: str) -> list[TreeEvent]:
    """The thread-scope perf events of a set (name or file) or a ';' list, as the native library resolves
    them; bad input is an AppInputError."""
    from tailscope.counters import eventsets
    from tailscope.native import native_path

    try:
        target = str(eventsets.find(event_set).resolve())
    except eventsets.EventSetError:
        target = event_set  # a ';' list of event strings
    proc = subprocess.run(
        [str(native_path("tsevents")), "load", target], capture_output=True, text=True, timeout=60
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise AppInputError(f"--events {event_set}: {last}")
    out = []
    for line in proc.stdout.splitlines():
        rec = json.loads(line)
        if rec.get("record") != "event" or rec.get("kind") != "perf" or rec.get("scope") != "thread":
            continue
        out.append(
            TreeEvent(
                name=str(rec["name"]),
                family=str(rec.get("family") or "perf"),
                type=int(rec["type"]),
                config=int(rec["config"], 16),
                config1=int(rec["config1"], 16),
                config2=int(rec["config2"], 16),
                width=rec.get("width"),
                exclude_user=bool(rec.get("exclude_user")),
                exclude_kernel=bool(rec.get("exclude_kernel")) or os.geteuid() != 0,
            )
        )
    if not out:
        raise AppInputError(
            f"--events {event_set}: no event a process can count (perf events of thread scope)"
        )
    return out


def _attr(e: TreeEvent) -> ctypes.Array[ctypes.c_char]:
    flags = DISABLED | INHERIT | ENABLE_ON_EXEC | EXCLUDE_HV
    flags |= EXCLUDE_USER if e.exclude_user else 0
    flags |= EXCLUDE_KERNEL if e.exclude_kernel else 0
    raw = struct.pack("=IIQQQQQ", e.type, ATTR_SIZE, e.config, 0, 0, READ_FORMAT, flags)
    raw += struct.pack("=IIQQ", 0, 0, e.config1, e.config2)
    return ctypes.create_string_buffer(raw.ljust(ATTR_SIZE, b"\0"), ATTR_SIZE)


class TreeCounters:
    """One trial's counters: `child_setup` in the launched process, `attach(pid)` once it runs, `rows` at
    the end."""

    def __init__(self, events: list[TreeEvent]) -> None:
        numbers = _SYSCALLS.get(platform.machine())
        if numbers is None:
            raise AppInputError(f"--events: counting a process tree is not supported on {platform.machine()}")
        self.events = events
        self._open_nr, self._getfd_nr = numbers
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._attrs = [_attr(e) for e in events]  # built before fork: the child only makes system calls
        self._fds: list[int | None] = [None] * len(events)
        self._reserved: tuple[int, ...] = ()

    def reserve(self) -> tuple[int, ...]:
        """Placeholders at FD_BASE + i (the launcher keeps these numbers open in the command, closing every
        other descriptor after `child_setup`), taken by the counters there; `attach` closes ours."""
        numbers = tuple(FD_BASE + i for i in range(len(self.events)))
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            for n in numbers:
                os.dup2(devnull, n, inheritable=True)
        finally:
            os.close(devnull)
        self._reserved = numbers
        return numbers

    def child_setup(self) -> None:
        """In the launched process before exec: open each counter on itself at FD_BASE + i."""
        for i, attr in enumerate(self._attrs):
            fd = self._libc.syscall(self._open_nr, attr, 0, -1, -1, 0)
            if fd < 0:
                continue
            os.dup2(fd, FD_BASE + i, inheritable=True)  # over the placeholder (`reserve`)
            os.close(fd)

    def attach(self, pid: int) -> None:
        """tailscope's own copies of the counters the command opened (pidfd_getfd)."""
        for n in self._reserved:
            os.close(n)
        self._reserved = ()
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            return
        try:
            for i in range(len(self.events)):
                fd = self._libc.syscall(self._getfd_nr, pidfd, FD_BASE + i, 0)
                self._fds[i] = fd if fd >= 0 else None
        finally:
            os.close(pidfd)

    def rows(self, run_id: str) -> list[dict[str, Any]]:
        """counters rows (source perf) of the whole tree, after it ended; the descriptors are closed."""
        out = []
        for e, fd in zip(self.events, self._fds, strict=True):
            if fd is None:
                continue
            try:
                data = os.read(fd, 24)
            except OSError:
                data = b""
            finally:
                os.close(fd)
            if len(data) != 24:
                continue
            value, enabled, running = struct.unpack("=QQQ", data)
            out.append(
                {"run_id": run_id, "source": "perf", "pmu": e.family, "unit": None, "event": e.name,
                 "value": float(value), "time_enabled": enabled, "time_running": running, "width": e.width}
            )  # fmt: skip
        self._fds = [None] * len(self.events)
        return out

    def close(self) -> None:
        for n in self._reserved:
            os.close(n)
        self._reserved = ()
        for fd in self._fds:
            if fd is not None:
                os.close(fd)
        self._fds = [None] * len(self.events)
