"""File names and atomic writes without the store's heavy imports (no pyarrow): what a campaign's shards use
and what a Slurm epilog can afford (tailscope.jobs.store appends one record per job and node).

- `safe_name`: a node or task name as one file-name component.
- `write_atomic_bytes`: a file replaced whole or not at all (temp file beside it, fsync, rename, fsync dir).
- `check_replaceable`: what such a write may replace: a regular file, or nothing. The rename replaces
  whatever has the name, so an output given as /dev/null (a device), a FIFO or /dev/stdout (a symbolic
  link) would be replaced by a file, for every process on the node where tailscope runs as root.
- `named`: an OSError that names no file (a write() on a full disk) naming the one written.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
from pathlib import Path

from tailscope.userfile import kind_of

# A node or task name becomes part of a file name: keep letters, digits, '-', '_' and '.', replace the rest.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME = 96  # bytes of a name component; longer names keep a prefix and a hash (ENAMETOOLONG never)


def safe_name(text: str) -> str:
    cleaned = _UNSAFE.sub("_", text).strip(".") or "_"
    if len(cleaned) > _MAX_NAME:
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        cleaned = f"{cleaned[: _MAX_NAME - 13]}-{digest}"
    return cleaned


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def named(exc: OSError, path: Path | str) -> OSError:
    """`exc` naming `path` where it names nothing: a write() or fsync() that fails (the disk is full) raises
    an OSError without a file name, and its message would say what happened but not where."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return type(exc)(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))


class NotAFile(OSError):
    """Something other than a regular file where tailscope would write one (errno EEXIST, the path named)."""


def check_replaceable(path: Path | str) -> None:
    """Raise NotAFile where `path` exists and is not a regular file (not following a symbolic link): an
    atomic write renames onto the name, which would replace the device, FIFO, socket or link itself."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return  # nothing there (or not reachable: the write itself says why)
    kind = kind_of(mode)
    if kind is not None:
        why = (f"{kind}, not a regular file: tailscope writes its output as a file of its own in its place "
               "and never replaces another kind (give a file name)")  # fmt: skip
        raise NotAFile(errno.EEXIST, why, str(path))


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically: temp file in the same directory, fsync, rename, fsync directory.
    On any failure (disk full, interrupt) the temp file is removed and `path` is untouched; an error names
    `path`. Only a regular file at `path` is replaced (check_replaceable)."""
    check_replaceable(path)
    tmp = path.with_name(f".{path.name[:150]}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise named(exc, path) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
