"""File names and atomic writes without the store's heavy imports (no pyarrow): what a campaign's shards use
and what a Slurm epilog can afford (tailscope.jobs.store appends one record per job and node).

- `safe_name`: a node or task name as one file-name component.
- `write_atomic_bytes`: a file replaced whole or not at all (temp file beside it, fsync, rename, fsync dir).
- `named`: an OSError that names no file (a write() on a full disk) naming the one written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path

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


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically: temp file in the same directory, fsync, rename, fsync directory.
    On any failure (disk full, interrupt) the temp file is removed and `path` is untouched; an error names
    `path`."""
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
