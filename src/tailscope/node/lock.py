"""The node lock: one tailscope at a time changes this node.

Everything that changes the node -- an injector (`inject`, `validate`'s blocks, any later verb that injects),
a restore of what a dead run left (its restore helper, `inject --restore`, the next run) -- holds this lock
first, and holds it until what it changed is put back. So the old value of a sysctl is read once, by the
first holder, and never again while it is changed: a second tailscope waits (bounded, `--wait`) and then
refuses with one line naming the holder; it never reads the first one's value as the node's own.

The lock is flock(2) on one file: the kernel drops it when its holder dies, SIGKILL included. For root,
/run/tailscope/node.lock, the same whatever journal directory a run was told to use; for other users (who
change only what is theirs: a delegated cgroup) `.lock` in their own journal directory. The holder writes who
it is into the file (pid, start time, command, journal directory, since when): a waiter names it, and the
next holder reads it (`previous`): when that one died, what it left is put back from its journal, wherever it
was kept, before anything is read (journal.dirs_after). One journal
per node: a run told to keep its journal elsewhere ($TAILSCOPE_JOURNAL_DIR, for tests) is still one holder at
a time, but what it leaves is restored from there (its helper, the next holder, or `inject --restore` with the
same setting).

A process holds the lock at most once (counted): flock on a second descriptor of the same file would wait for
the process itself. Standard library only (the restore helper imports this).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tailscope.errors import InputError
from tailscope.printable import printable

ROOT_LOCK = Path("/run/tailscope/node.lock")
WAIT_S = 10.0  # a second tailscope waits this long for the first by default
WAIT_ENV = "TAILSCOPE_NODE_LOCK_WAIT"  # seconds: that default instead (a prolog, a suite beside others)
WAIT_MAX_S = 7 * 86400
POLL_S = 0.05
RECORD_MAX = 8192


class NodeBusy(InputError):
    """Another tailscope holds the node lock after the wait: one line naming it, exit 2, nothing changed."""

    def __init__(self, message: str, who: str, holder: Holder | None = None) -> None:
        super().__init__(message)
        self.who = who  # the holder, in words
        self.holder = holder  # as it wrote itself into the lock file, where it could be read


def default_wait() -> float:
    """How long a tailscope that changes the node waits for another to finish when `--wait` is not given:
    $TAILSCOPE_NODE_LOCK_WAIT seconds where set (a node's prolog that should queue behind a running
    injector; the test suite, run beside other tailscopes), else WAIT_S. A bad value: one line, exit 2."""
    given = os.environ.get(WAIT_ENV)
    if given is None or not given.strip():
        return WAIT_S
    try:
        value = float(given)
    except ValueError:
        value = math.nan
    if not 0 <= value <= WAIT_MAX_S:  # nan too
        raise InputError(f"${WAIT_ENV}={printable(given[:40])!s}: expected seconds from 0 to {WAIT_MAX_S}")
    return value


def trusted_dir(d: Path) -> bool:
    """This user owns `d` and nobody else may write it (what is in it says what root writes where)."""
    try:
        st = d.lstat()
    except OSError:
        return False
    return d.is_dir() and not d.is_symlink() and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def lock_path(journal_dir: Path) -> Path:
    """Root: the node's one lock file (its directory made if needed); others: their journal's."""
    if os.geteuid() == 0:
        with contextlib.suppress(OSError):
            ROOT_LOCK.parent.mkdir(parents=True, mode=0o755, exist_ok=True)
        if trusted_dir(ROOT_LOCK.parent):
            return ROOT_LOCK
    return journal_dir / ".lock"


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) the lock, as it wrote itself into the lock file."""

    pid: int
    start: int
    argv: tuple[str, ...]
    journal: str
    since: float

    @classmethod
    def parse(cls, text: bytes) -> Holder | None:
        try:
            d = json.loads(text)
            argv = tuple(map(str, d["argv"]))
            return cls(int(d["pid"]), int(d["start"]), argv, str(d["journal"]), float(d["since"]))
        except (ValueError, TypeError, KeyError, RecursionError):
            return None  # empty (never held), or being rewritten by a new holder

    def describe(self) -> str:
        command = " ".join(["tailscope", *self.argv[1:]]) if self.argv else "tailscope"
        since = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} ({printable(command[:160])}) since {since}"


class NodeLock:
    """The lock file at `path`, held by this process `count` times."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self._fd = -1
        self.previous: Holder | None = None  # who held it before this process took it (its record)

    def acquire(self, wait_s: float, *, journal: Path, start: int) -> bool:
        """Take the lock, waiting at most `wait_s`; True when this process newly holds it (then the caller
        restores what dead runs left before it changes anything). NodeBusy when another holds it still."""
        if self.count:
            self.count += 1
            return False
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + wait_s
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise self._busy(wait_s) from None
                    time.sleep(min(POLL_S, left))
            self.previous = Holder.parse(os.pread(fd, RECORD_MAX, 0))
            me = {"pid": os.getpid(), "start": start, "argv": sys.argv[:8], "journal": str(journal)}
            record = json.dumps({**me, "since": time.time()}).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, record, 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self.count = fd, 1
        return True

    def release(self) -> None:
        if self.count == 0:
            return
        self.count -= 1
        if self.count == 0:
            fd, self._fd = self._fd, -1
            os.close(fd)  # the record stays (who was here last) until the next holder writes its own

    def holder(self) -> Holder | None:
        """Who holds it now (read without the lock: a guess while a new holder writes itself in)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return Holder.parse(os.pread(fd, RECORD_MAX, 0))
        finally:
            os.close(fd)

    def _busy(self, wait_s: float) -> NodeBusy:
        h = self.holder()
        if h is not None and h.pid == os.getpid():
            h = None
        who = h.describe() if h is not None else "another tailscope"
        return NodeBusy(
            f"{who} is changing this node (one tailscope changes a node at a time: {self.path}); waited "
            f"{wait_s:g} s (--wait S waits longer): nothing was changed",
            who,
            h,
        )


_LOCKS: dict[Path, NodeLock] = {}


def node_lock(path: Path) -> NodeLock:
    """This process's one NodeLock for `path`."""
    if path not in _LOCKS:
        _LOCKS[path] = NodeLock(path)
    return _LOCKS[path]
