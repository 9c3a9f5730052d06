"""Run one trial process and read its /proc entries before it is reaped.

The probe's threads vanish from /proc as they exit, and the process's own entries go when its parent reaps
it. So the trial process is watched, not just waited for:
- while it runs, `on_sample(pid)` is called every `sample_interval_s` and when output arrives after a quiet
  spell (a probe prints its records after its timed region, while its worker threads still exist);
- when it has exited, `os.waitid(..., WEXITED | WNOWAIT)` returns without reaping it: the zombie's
  /proc/PID (its main thread's schedstat, stat, status) is still readable, and `on_exit(pid)` reads it;
- then `os.wait4` reaps it and returns the rusage of the whole process (every thread, dead ones included).
"""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

OUTPUT_QUIET_S = 0.02  # output after this long without output triggers a sample...
OUTPUT_SAMPLE_GAP_S = 0.05  # ...unless the last sample is more recent than this
OUTPUT_SAMPLES = 2  # at most this many output-triggered samples per process (the periodic ones go on)


@dataclass
class Finished:
    pid: int
    stdout: str
    stderr: str
    returncode: int
    timed_out: bool
    wall_s: float
    rusage: resource.struct_rusage | None


def _wait_exited(pid: int, deadline: float) -> bool:
    """Block until `pid` has exited (without reaping it) or the deadline passes; True when it exited."""
    try:
        fd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        fd = -1
    try:
        while True:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
            if info is not None:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if fd >= 0:
                sel = selectors.DefaultSelector()
                try:
                    sel.register(fd, selectors.EVENT_READ)
                    sel.select(left)
                finally:
                    sel.close()
            else:
                time.sleep(min(left, 0.001))
    finally:
        if fd >= 0:
            os.close(fd)


def run_watched(
    argv: Sequence[str],
    timeout_s: float,
    *,
    on_sample: Callable[[int], None] | None = None,
    on_exit: Callable[[int], None] | None = None,
    sample_interval_s: float = 0.25,
) -> Finished:
    """Run `argv` to completion (killed after `timeout_s`), calling the hooks as described above."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pid = proc.pid
    chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
    timed_out, reaped = False, False
    rusage = None
    wall_s = 0.0
    sel = selectors.DefaultSelector()
    try:
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        deadline = t0 + timeout_s
        next_sample = t0 + sample_interval_s
        last_output = last_sample = t0 - OUTPUT_SAMPLE_GAP_S  # the first output always triggers a sample
        output_samples = 0
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline and not timed_out:
                timed_out = True
                proc.kill()
                deadline = now + 5.0  # drain what is left; a grandchild holding the pipe is not waited for
            elif now >= deadline:
                break
            wait = min(deadline, next_sample) - now if on_sample else deadline - now
            events = sel.select(max(0.0, wait))
            now = time.monotonic()
            sampled = False
            for key, _ in events:
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                chunks[key.data].append(data)
                quiet = now - last_output >= OUTPUT_QUIET_S and now - last_sample >= OUTPUT_SAMPLE_GAP_S
                if on_sample and not sampled and quiet and not timed_out and output_samples < OUTPUT_SAMPLES:
                    on_sample(pid)
                    sampled, next_sample, last_sample = True, now + sample_interval_s, now
                    output_samples += 1
                last_output = now
            if on_sample and not sampled and now >= next_sample and not timed_out:
                on_sample(pid)
                next_sample, last_sample = now + sample_interval_s, now
        exit_by = time.monotonic() + 5.0 if timed_out else max(deadline, time.monotonic())
        if not _wait_exited(pid, exit_by):
            timed_out = True
            proc.kill()
            _wait_exited(pid, time.monotonic() + 5.0)
        wall_s = time.monotonic() - t0
        if on_exit is not None:
            on_exit(pid)
        _, status, rusage = os.wait4(pid, 0)
        reaped = True
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        sel.close()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        if not reaped:  # interrupted: never leave a probe running (or a zombie) behind us
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)
            proc.wait()
    return Finished(
        pid=pid,
        stdout=b"".join(chunks["stdout"]).decode(errors="replace"),
        stderr=b"".join(chunks["stderr"]).decode(errors="replace"),
        returncode=proc.returncode,
        timed_out=timed_out,
        wall_s=wall_s or time.monotonic() - t0,
        rusage=rusage,
    )
