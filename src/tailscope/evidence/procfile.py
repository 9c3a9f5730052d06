"""A /proc or /sys file kept open and re-read from the start, for the readings around every trial.

`Path.read_text()` costs seven system calls per read (openat, fstat, ioctl, lseek, read, read, close: seen
with `strace -c` on the runner) and the Python around them; a kept-open descriptor re-read with `pread` at
offset 0 costs two (the content, then an empty read at its end: seq_file returns at most its buffer, about
a page, per read, so /proc/vmstat and a wide /proc/interrupts take several). The kernel regenerates the
content on every read from offset 0, so each read is a fresh snapshot.
"""

from __future__ import annotations

import contextlib
import os

CHUNK = 65536


class ProcFile:
    """One file, opened on first use; `read()` is its whole current content, or None when unreadable."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._missing = False

    def read(self) -> str | None:
        if self._fd is None:
            if self._missing:
                return None
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                self._missing = True  # a file the kernel does not have is not tried again
                return None
            except OSError:
                return None
        try:
            data = os.pread(self._fd, CHUNK, 0)
            if data:
                more = os.pread(self._fd, CHUNK, len(data))
                while more:  # a seq_file hands out one buffer per read
                    data += more
                    more = os.pread(self._fd, CHUNK, len(data))
        except OSError:
            self.close()  # reopened on the next read
            return None
        return data.decode(errors="replace")

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # also at interpreter shutdown, when `os` may be gone
            self.close()
