"""The one launcher: a command started exactly as given, as a fresh process tree that dies with its trial.

Used by `run -- CMD` (app/trial.py), `trace` (trace/run.py) and `monitor -- CMD` (counters/monitor.py).

    done = launch(argv, cwd=..., env=..., timeout_s=..., on_line=..., on_sample=..., on_exit=...)

- The tree is held as a cgroup v2 of its own where tailscope may make one, else through tailscope being a
  child subreaper (tree.py); processes of the tree still running when its first process exits (daemons that
  called setsid) are named in `done.leftovers` and killed, and so is the whole tree on a timeout, an
  exception or Ctrl-C in tailscope. SIGKILL of tailscope: the watchdog (guard.py, watchdog.py) kills it.
- Output: with `capture`, stdout and stderr are read as they stream; every line goes to `on_line(stream,
  line)` (a line longer than MAX_LINE is passed in pieces) and the last `keep_bytes` of each are kept.
  Without it the command writes to tailscope's own terminal (trace, monitor).
- `child_setup()` runs in the launched process before exec (after it joined its cgroup; descriptors it
  leaves open must be in `pass_fds`), `on_start(pid)` in tailscope once it runs (app/counters.py opens the
  tree's counters there).
- Like evidence/process.py's `run_watched` for a probe: `on_sample(pid, pids)` every `sample_interval_s`,
  and `on_exit(pid, pids)` once the first process has exited but before it is reaped (its /proc entries are
  still there), then wait4 gives the rusage.
"""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tailscope.errors import InputError
from tailscope.launch.guard import guard, temporary_directory
from tailscope.launch.tree import Member, ProcessTree
from tailscope.launch.watchdog import start_time

KEEP_BYTES = 64 * 1024
MAX_LINE = 1 << 20  # a line without a newline for this long is handed on in pieces (bounded memory)
DRAIN_S = 5.0  # after the tree is gone, how long to wait for the pipes' last bytes

__all__ = [
    "KEEP_BYTES",
    "MAX_LINE",
    "LaunchError",
    "Launched",
    "Member",
    "ProcessTree",
    "guard",
    "launch",
    "temporary_directory",
]


class LaunchError(InputError):
    """The command cannot be started (no such program, not executable): one line, exit 2."""


class _Stream:
    """One output stream: the last `keep` bytes, and complete lines handed to the callback."""

    def __init__(self, name: str, keep: int, on_line: Callable[[str, str], None] | None) -> None:
        self.name, self.keep, self.on_line = name, keep, on_line
        self.tail = bytearray()
        self.partial = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self.tail += data
        if len(self.tail) > 2 * self.keep:
            del self.tail[: len(self.tail) - self.keep]
        if self.on_line is None:
            return
        self.partial += data
        start = 0
        while True:
            end = self.partial.find(b"\n", start)
            if end < 0:
                break
            self.on_line(self.name, self.partial[start:end].decode(errors="replace"))
            start = end + 1
        del self.partial[:start]
        while len(self.partial) >= MAX_LINE:
            self.on_line(self.name, self.partial[:MAX_LINE].decode(errors="replace"))
            del self.partial[:MAX_LINE]

    def close(self) -> None:
        if self.on_line is not None and self.partial:
            self.on_line(self.name, self.partial.decode(errors="replace"))
        self.partial.clear()

    def text(self) -> str:
        return bytes(self.tail[-self.keep :]).decode(errors="replace")


@dataclass
class Launched:
    pid: int
    returncode: int
    timed_out: bool
    wall_s: float
    rusage: resource.struct_rusage | None
    stdout: str = ""  # the last keep_bytes (capture only)
    stderr: str = ""
    stdout_bytes: int = 0  # everything it wrote
    stderr_bytes: int = 0
    leftovers: list[Member] = field(default_factory=list)  # still running when the first process ended
    mode: str = "subreaper"  # how the tree was held: cgroup | subreaper
    mono_start_ns: int = 0
    mono_end_ns: int = 0
    realtime_start_ns: int = 0


def _start(
    argv: Sequence[str],
    tree: ProcessTree,
    cwd: str | None,
    env: Mapping[str, str] | None,
    capture: bool,
    child_setup: Callable[[], None] | None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    base = dict(os.environ if env is None else env)
    pipe = subprocess.PIPE if capture else None
    own = tree.preexec if capture else tree.preexec_same_group

    def preexec() -> None:
        own()
        if child_setup is not None:
            child_setup()

    # Python code between fork and exec (preexec_fn) forces a full fork of this large process and makes Popen
    # wait for it: 9-13 ms inside the trial's wall time against 0.2-0.3 ms for a vfork. Only a child_setup
    # (perf counters) needs it; otherwise the command is born in the tree's cgroup (the caller holds
    # tree.joined() around this), gets its own process group from Popen, and the watchdog (rather than
    # PR_SET_PDEATHSIG) kills it if tailscope dies.
    extra: dict[str, Any] = {}
    if child_setup is not None:
        extra["preexec_fn"] = preexec
    elif capture:
        extra["process_group"] = 0
    try:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=tree.env(base),
            stdin=subprocess.DEVNULL if capture else None,
            stdout=pipe,
            stderr=pipe,
            close_fds=True,
            pass_fds=tuple(pass_fds),
            **extra,
        )
    except FileNotFoundError as exc:
        missing = exc.filename if exc.filename not in (None, argv[0]) else argv[0]
        if cwd is not None and not os.path.isdir(cwd):
            raise LaunchError(f"{cwd}: no such working directory") from None
        raise LaunchError(f"{missing}: no such program (not found on PATH or at that path)") from None
    except PermissionError:
        raise LaunchError(f"{argv[0]}: not executable (permission denied)") from None
    except OSError as exc:
        raise LaunchError(f"{argv[0]}: cannot run it ({exc.strerror or exc})") from None


def launch(
    argv: Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    capture: bool = True,
    on_line: Callable[[str, str], None] | None = None,
    on_sample: Callable[[int, Sequence[int]], None] | None = None,
    on_exit: Callable[[int, Sequence[int]], None] | None = None,
    sample_interval_s: float = 0.25,
    keep_bytes: int = KEEP_BYTES,
    use_cgroup: bool = True,
    child_setup: Callable[[], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    pass_fds: Sequence[int] = (),
) -> Launched:
    """Run `argv` as a fresh process tree to the end of its first process (see the module docstring)."""
    if not argv:
        raise LaunchError("no command given after --")
    tree = ProcessTree(use_cgroup=use_cgroup)
    streams = {n: _Stream(n, keep_bytes, on_line) for n in ("stdout", "stderr")}
    reaped, pidfd = False, -1
    proc: subprocess.Popen[bytes] | None = None
    sel = selectors.DefaultSelector()
    aside = _Aside()
    try:
        # tailscope joins the tree's cgroup before the clock starts: the first migration into a cgroup after
        # a quiet spell waits for an RCU grace period (~12 ms here), the move back right after is fast
        with tree.joined():
            mono0, real0 = time.monotonic_ns(), time.time_ns()
            t0 = time.monotonic()
            proc = _start(argv, tree, cwd, env, capture, child_setup, pass_fds)
        pid = proc.pid
        tree.started(pid)
        if on_start is not None:
            on_start(pid)
        guard().hold("pid", f"{pid} {_start_time(pid)}")
        try:
            pidfd = os.pidfd_open(pid)
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        except (OSError, AttributeError):
            pidfd = -1
        if capture:
            assert proc.stdout is not None and proc.stderr is not None
            sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
            sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        deadline = t0 + timeout_s if timeout_s else None
        next_sample = t0 + sample_interval_s
        timed_out = exited = False
        while not exited:
            now = time.monotonic()
            if deadline is not None and now >= deadline and not timed_out:
                timed_out = True
                tree.kill()
            waits = [1.0 if pidfd >= 0 else 0.01]
            if on_sample is not None:
                waits.append(next_sample - now)
            if deadline is not None and not timed_out:
                waits.append(deadline - now)
            for key, _ in sel.select(max(0.0, min(waits))):
                if key.data == "exit":
                    exited = True
                else:
                    _read_stream(sel, key, streams)
            if not exited:
                exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None
                aside.step(pid)
                tree.adopt()
            now = time.monotonic()
            if on_sample is not None and not exited and now >= next_sample:
                on_sample(pid, tree.pids())
                next_sample = now + sample_interval_s
        wall_s = time.monotonic() - t0
        mono1 = time.monotonic_ns()
        aside.restore()
        if on_exit is not None:
            on_exit(pid, [p for p in tree.pids() if p != pid])
        leftovers = tree.leftovers()
        tree.kill()  # the daemons it left: named above, gone now
        _drain(sel, streams)
        _, status, rusage = os.wait4(pid, 0)
        reaped = True
        guard().release("pid", f"{pid} {_start_time(pid)}")
        for s in streams.values():
            s.close()
        return Launched(
            pid=pid,
            returncode=os.waitstatus_to_exitcode(status),
            timed_out=timed_out,
            wall_s=wall_s,
            rusage=rusage,
            stdout=streams["stdout"].text(),
            stderr=streams["stderr"].text(),
            stdout_bytes=streams["stdout"].total,
            stderr_bytes=streams["stderr"].total,
            leftovers=leftovers,
            mode=tree.mode,
            mono_start_ns=mono0,
            mono_end_ns=mono1,
            realtime_start_ns=real0,
        )
    finally:
        aside.restore()
        sel.close()
        if pidfd >= 0:
            os.close(pidfd)
        if proc is not None:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            if not reaped:  # interrupted: never leave the tree (or a zombie) behind us
                tree.kill()
                with contextlib.suppress(ChildProcessError):
                    proc.wait()
        tree.close()


class _Aside:
    """tailscope's own thread off the command's CPUs while it runs (a command pinned with taskset, numactl or
    a job's binding to some of tailscope's CPUs): its wake-ups to read output and sample then never preempt
    the application. Checked on each wake-up until the command has narrowed its affinity (after its exec);
    tailscope's affinity is restored when the command has exited."""

    def __init__(self) -> None:
        try:
            self.own: set[int] | None = os.sched_getaffinity(0)
        except OSError:
            self.own = None
        self.moved = False
        self.done = self.own is None or len(self.own) < 2

    def step(self, pid: int) -> None:
        if self.done or self.own is None:
            return
        try:
            theirs = os.sched_getaffinity(pid)
        except OSError:
            self.done = True
            return
        rest = self.own - theirs
        if theirs and rest and theirs != self.own:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, rest)
                self.moved = True
            self.done = True

    def restore(self) -> None:
        if self.moved and self.own is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self.own)
            self.moved = False


def _drain(sel: selectors.BaseSelector, streams: dict[str, _Stream]) -> None:
    end = time.monotonic() + DRAIN_S
    while any(k.data != "exit" for k in sel.get_map().values()) and time.monotonic() < end:
        for key, _ in sel.select(max(0.0, end - time.monotonic())):
            if key.data == "exit":
                sel.unregister(key.fileobj)
            else:
                _read_stream(sel, key, streams)


def _read_stream(
    sel: selectors.BaseSelector, key: selectors.SelectorKey, streams: dict[str, _Stream]
) -> None:
    """One read of a ready output pipe into its stream; at its end of file the pipe leaves the selector."""
    data = os.read(key.fd, 65536)
    if data:
        streams[key.data].feed(data)
    else:
        sel.unregister(key.fileobj)


def _start_time(pid: int) -> str:
    return start_time(pid) or "0"
