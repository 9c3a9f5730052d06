"""The watchdog process (watchdog.py) of this tailscope process: one, started on first use.

`guard().hold("cgroup", path)` before a cgroup, tree or temporary directory exists, `release(...)` once
tailscope has cleaned it up itself. If tailscope dies without releasing (SIGKILL), the watchdog sees its pipe
end and kills and removes what is still held.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

_SCRIPT = Path(__file__).with_name("watchdog.py")


class Guard:
    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._owner = os.getpid()

    def _send(self, line: str) -> None:
        with self._lock:
            if self._proc is None or self._owner != os.getpid():
                self._owner = os.getpid()
                self._proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", str(_SCRIPT)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # its own session: a Ctrl-C or a kill of our group spares it
                    close_fds=True,
                )
                atexit.register(self.close)
            assert self._proc.stdin is not None
            self._proc.stdin.write(line.encode() + b"\n")
            self._proc.stdin.flush()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def hold(self, kind: str, arg: str) -> None:
        self._send(f"+ {kind} {arg}")

    def release(self, kind: str, arg: str) -> None:
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._send(f"- {kind} {arg}")

    def close(self) -> None:
        """Normal end: the watchdog exits without touching anything still held (tailscope cleaned up)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None or self._owner != os.getpid():
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.write(b"exit\n")
            proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


_GUARD = Guard()


def guard() -> Guard:
    return _GUARD


@contextlib.contextmanager
def temporary_directory(prefix: str) -> Iterator[str]:
    """`tempfile.TemporaryDirectory`, also removed by the watchdog if tailscope dies inside the block."""
    path = tempfile.mkdtemp(prefix=prefix)
    _GUARD.hold("tmp", path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        _GUARD.release("tmp", path)
