"""A file a user or a user's program named, read with bounds: the one way tailscope opens such a path (a
`--metric-file` a trial wrote, an application definition, a campaign spec).

- Regular files only: opened with O_NONBLOCK (a FIFO's open returns at once instead of waiting for a writer)
  and checked with fstat on the descriptor it opened (no FIFO, device, socket or directory: `/dev/zero` is
  refused, not read for ever).
- Size-limited: a file over `limit` bytes is refused, and no more than `limit` bytes are ever read (a file
  still growing is cut there).
- `beneath=DIR`: the path is resolved inside DIR and never leaves it. With openat2(2) (Linux >= 5.6, through
  the raw system call) RESOLVE_BENEATH refuses `..`, absolute paths and symbolic links that lead out of DIR
  (links inside DIR are followed) and RESOLVE_NO_MAGICLINKS refuses /proc's magic links; where openat2 is
  missing (older kernels, a seccomp filter that refuses it), each component is opened with O_NOFOLLOW from
  DIR's descriptor, so no symbolic link is followed at all. A program cannot make tailscope read (and store
  a line of) /etc/shadow by linking its metric file there.

Every refusal is `UnreadableFile` with one line naming the path and why; the caller says what it means (a
trial's failure, an input error with exit 2).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

KIB, MIB = 1024, 1024 * 1024
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
SYS_OPENAT2 = 437  # the same number on every Linux architecture (the unified system call table)
RESOLVE_NO_MAGICLINKS, RESOLVE_BENEATH = 0x02, 0x08
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind_of(mode: int) -> str | None:
    """What a file of `mode` is in words ("a FIFO"), where it is not a regular file; None where it is."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "a special file")


class UnreadableFile(Exception):
    """A path that is not read: `path` and `reason`; str() is one line naming both."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc: ctypes.CDLL | None = None
_openat2_missing = False  # learnt once: ENOSYS or a filter's EPERM


def read_bytes(path: Path | str, *, limit: int, beneath: Path | str | None = None) -> bytes:
    """The whole file at `path` (at most `limit` bytes, else UnreadableFile)."""
    fd = open_regular(path, limit=limit, beneath=beneath)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UnreadableFile(path, f"larger than {_size(limit)}, more than such a file may have")
    return data


def read_lines(
    path: Path | str,
    *,
    limit: int,
    piece: int,
    beneath: Path | str | None = None,
    tail: bool = False,
) -> Iterator[bytes]:
    """The lines of the file at `path` without their newline, a line longer than `piece` bytes in pieces;
    UnreadableFile when it cannot be opened or holds more than `limit` bytes (raised before any line when
    its size says so at open). `tail`: a larger file is not refused, its last `limit` bytes are read instead
    (from the first line that starts in them: a program's figures are printed at its end)."""
    fd = open_regular(path, limit=None if tail else limit, beneath=beneath)
    with os.fdopen(fd, "rb") as f:
        left = limit
        if tail:
            size = os.fstat(fd).st_size
            if size > limit:
                f.seek(size - limit - 1)  # the byte before the tail: a newline there starts it on a line
                left -= len(f.readline(limit + 1)) - 1
        while left > 0:
            line = f.readline(min(piece, left))
            if not line:
                return
            left -= len(line)
            yield line.rstrip(b"\r\n") if line.endswith(b"\n") else line


def open_regular(path: Path | str, *, limit: int | None, beneath: Path | str | None = None) -> int:
    """A descriptor of the regular file at `path` (read-only), checked as the module docstring says (`limit`
    None: of any size, for a caller that reads a bounded part of it)."""
    shown = str(path)
    try:
        fd = _open_beneath(Path(beneath), str(path)) if beneath is not None else os.open(path, _FLAGS)
    except UnreadableFile:
        raise
    except OSError as exc:
        raise UnreadableFile(shown, _reason(exc)) from None
    try:
        st = os.fstat(fd)
        kind = kind_of(st.st_mode)
        if kind is not None:
            raise UnreadableFile(shown, f"{kind}, not a regular file")
        if limit is not None and st.st_size > limit:
            raise UnreadableFile(shown, f"{_size(st.st_size)}, more than the {_size(limit)} it may have")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_beneath(root: Path, relative: str) -> int:
    if os.path.isabs(relative):
        raise UnreadableFile(relative, f"an absolute path, not one inside {root}")
    dirfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = _openat2(dirfd, relative)
        return fd if fd is not None else _open_each_component(dirfd, relative)
    finally:
        os.close(dirfd)


def _openat2(dirfd: int, relative: str) -> int | None:
    """openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) of `relative` under `dirfd`; None where the kernel
    (or a filter in front of it) does not provide openat2."""
    global _libc, _openat2_missing
    if _openat2_missing:
        return None
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    how = _OpenHow(_FLAGS, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(
        ctypes.c_long(SYS_OPENAT2),
        ctypes.c_int(dirfd),
        ctypes.c_char_p(os.fsencode(relative)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM, errno.E2BIG, errno.EINVAL):
        _openat2_missing = True
        return None
    if err == errno.EXDEV:
        raise UnreadableFile(relative, "leads out of the directory it must be in (a symbolic link or ..)")
    if err == errno.ELOOP:
        raise UnreadableFile(relative, "a symbolic link that cannot be followed here")
    raise OSError(err, os.strerror(err), relative)


def _open_each_component(dirfd: int, relative: str) -> int:
    """`relative` opened one component at a time with O_NOFOLLOW (no symbolic link is followed)."""
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise UnreadableFile(relative, "expected a path inside the directory, without '..'")
    current = dirfd
    try:
        for name in parts[:-1]:
            step = _nofollow(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, current, relative)
            if current != dirfd:
                os.close(current)
            current = step
        return _nofollow(parts[-1], _FLAGS, current, relative)
    finally:
        if current != dirfd:
            os.close(current)


def _nofollow(name: str, flags: int, dirfd: int, relative: str) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, dirfd):
            why = "a symbolic link (not followed: this kernel has no openat2 to keep it inside the directory)"
            raise UnreadableFile(relative, why) from None
        raise


def _is_link(name: str, dirfd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dirfd).st_mode)
    except OSError:
        return False


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _size(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n / KIB:g} KiB" if n >= KIB else f"{n} bytes"
