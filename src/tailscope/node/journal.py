"""The node-state journal: every change tailscope makes to a node, written down before it is made.

tailscope runs as root on production nodes (`inject`, `validate`); what it changes -- a cgroup it made, a
quota, a sysctl under /proc/sys, a cpufreq limit, a process it moved or started -- must be put back when it
ends, SIGKILL included, which no handler can catch. So each change has an entry, one JSON file:

- written (fsync'd, then renamed into place, the directory fsync'd) BEFORE the change, with what restores it
  (the old value, the cgroup the process came from, the process to stop);
- removed once the change is undone, by the run itself (`restore`) or, when the run died, by
  - its restore helper: a process in its own session (so a Ctrl-C or a `kill -- -PGID` of the run's group
    does not reach it), started with the first entry, that waits on a pidfd of the run (or polls its
    /proc entry where pidfds are missing) and restores what the run left the moment it is gone;
  - the next run of a verb that changes the node (`inject`, `validate`) or `tailscope inject --restore`,
    when the helper died too (`restore_dead`).
Nothing is restored while its run lives: a run is gone when its pid is absent, or names a process with
another start time (/proc/PID/stat field 22), or the entry is from another boot (boot_id).

One tailscope at a time changes the node: every writer and every restorer holds the node lock (lock.py)
first -- `Journal.hold` (the verbs: `changing_the_node`; an Injection takes it itself), `restore_dead`, the
helper -- and the first hold of a process restores what dead runs left before anything is read. An entry is
untrusted input (journal_entry.py: one schema, and the places tailscope may change); a damaged one is said in
one line (`Damaged.line`) and left alone, never restored, never a traceback.

Where: `$TAILSCOPE_JOURNAL_DIR` when set, else /run/tailscope/journal for root (tmpfs: it empties at boot,
as the state it describes does), else $XDG_RUNTIME_DIR/tailscope/journal, else
/tmp/tailscope-<uid>/journal; root falls back to the last two when /run cannot be written.

This module imports only the standard library (and tailscope.errors, which does too): the helper is
`python -m tailscope.node.journal watch ...` and starts in tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailscope.errors import InputError  # standard library only, as this module
from tailscope.node.journal_entry import FORMAT, SUBTREE_CONTROL, DamagedEntry, check, refusal, start_time
from tailscope.node.lock import NodeBusy, NodeLock, default_wait, lock_path, node_lock, trusted_dir
from tailscope.printable import printable

ENV_DIR = "TAILSCOPE_JOURNAL_DIR"
RUN_DIR = Path("/run/tailscope/journal")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
STOP_GRACE_S = 5.0  # a process entry: SIGTERM, then SIGKILL after this
ENTRY_MAX = 1 << 16  # an entry is well under 1 KiB: a bigger file is not one tailscope wrote
HELPER_WAIT_S = 3600.0  # the helper waits this long for the node lock while its run's entries remain


class JournalError(InputError):
    """The journal cannot be written: the change it would describe is not made (one line, exit 2)."""


# -- who wrote an entry -----------------------------------------------------------------------------------
def boot_id() -> str:
    return BOOT_ID.read_text().strip()


@dataclass(frozen=True)
class Owner:
    pid: int
    start: int
    boot: str

    @classmethod
    def this_process(cls) -> Owner:
        pid = os.getpid()
        start = start_time(pid)
        assert start is not None
        return cls(pid, start, boot_id())

    def alive(self) -> bool:
        """The very process that wrote the entry still runs (same pid, start time and boot)."""
        return self.boot == boot_id() and start_time(self.pid) == self.start

    def tag(self) -> str:
        return f"{self.pid}-{self.start}"


# -- where ------------------------------------------------------------------------------------------------
def _candidates() -> list[Path]:
    given = os.environ.get(ENV_DIR)
    if given:
        return [Path(given)]
    out = [RUN_DIR] if os.geteuid() == 0 else []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        out.append(Path(runtime) / "tailscope" / "journal")
    out.append(Path(f"/tmp/tailscope-{os.geteuid()}") / "journal")
    return out


def journal_dir(*, create: bool) -> Path | None:
    """The journal directory; with `create`, made (mode 0700) if missing. Without, None when none exists."""
    errors = []
    for d in _candidates():
        if d.is_dir():
            if trusted_dir(d):
                return d
            errors.append(f"{d}: not owned by this user alone")
            continue
        if not create:
            continue
        try:
            d.mkdir(parents=True, mode=0o700, exist_ok=True)
            return d
        except OSError as exc:
            errors.append(f"{d}: {exc.strerror}")
    if not create:
        return None
    raise JournalError(f"no node-state journal can be written ({'; '.join(errors)}): nothing was changed")


def existing_dirs() -> list[Path]:
    """Every candidate directory that exists (a dead run may have used a fallback)."""
    return [d for d in _candidates() if trusted_dir(d)]


def dirs_after(lock: NodeLock, dirs: list[Path]) -> list[Path]:
    """`dirs`, and the journal of the lock's previous holder where it kept it elsewhere
    ($TAILSCOPE_JOURNAL_DIR): a run SIGKILLed while another waited for the lock left its changes there, and
    the waiter, holding the lock now, puts them back before it reads a single old value."""
    prev = Path(lock.previous.journal) if lock.previous is not None and lock.previous.journal else None
    if prev is None or not prev.is_absolute() or prev in dirs or not trusted_dir(prev):
        return dirs
    return [*dirs, prev]


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- entries ----------------------------------------------------------------------------------------------
@dataclass
class Entry:
    path: Path  # the entry's file
    data: dict[str, Any]  # checked by journal_entry.check: every field below is there, of its type

    @property
    def owner(self) -> Owner:
        o = self.data["owner"]
        return Owner(o["pid"], o["start"], o["boot"])

    @property
    def what(self) -> str:
        return describe(self.data["action"], self.data)


@dataclass(frozen=True)
class Damaged:
    """An entry file that is not a valid entry of a place tailscope changes: said, left alone."""

    path: Path
    why: str

    def line(self) -> str:
        return (
            f"damaged journal entry {printable(self.path)}: {self.why}; not restored and left in place "
            "(check what it names by hand, then remove it)"
        )


def describe(action: str, f: dict[str, Any]) -> str:
    if action == "write":
        return f"{printable(f['path'])} back to {printable(repr(str(f['value']).strip()))}"
    if action == "mkdir":
        return f"cgroup {printable(f['path'])} removed"
    if action == "move":
        return f"pid {f['pid']} back to cgroup {printable(f['origin'])}"
    if action == "process":
        return f"{printable(f.get('name', 'process'))} pid {f['pid']} stopped"
    raise ValueError(action)


def _parse(p: Path) -> Entry:
    """One entry file, checked; DamagedEntry (with why) for anything else."""
    try:
        with open(p, "rb") as f:
            raw = f.read(ENTRY_MAX + 1)
    except OSError as exc:
        raise DamagedEntry(f"unreadable ({exc.strerror or exc})") from None
    if len(raw) > ENTRY_MAX:
        raise DamagedEntry(f"over {ENTRY_MAX} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise DamagedEntry(f"not JSON ({len(raw)} bytes: truncated?)") from None
    fields = check(data)
    why = refusal(fields)
    if why is not None:
        raise DamagedEntry(why)
    return Entry(p, fields)


def scan(d: Path) -> tuple[list[Entry], list[Damaged]]:
    """Every entry in `d` (the last change of a run last), and every file that is not a valid entry."""
    out, damaged = [], []
    for p in sorted(d.glob("*.json")):  # a torn temporary is never named *.json
        try:
            out.append(_parse(p))
        except DamagedEntry as exc:
            if p.exists():  # not an entry removed while it was read
                damaged.append(Damaged(p, str(exc)))
    out.sort(key=lambda e: (e.owner.pid, e.owner.start, e.data["seq"]))
    return out, damaged


def read_entries(d: Path) -> list[Entry]:
    return scan(d)[0]


def damaged_entries(directories: list[Path] | None = None) -> list[Damaged]:
    return [x for d in (directories if directories is not None else existing_dirs()) for x in scan(d)[1]]


class Journal:
    """The entries of this process. `hold` (the node lock) before reading what is about to change; `record`
    before a change; `restore` (or `forget`) after; `unhold` at the end. The lock is kept while an entry of
    this process remains (a change that could not be undone), whatever `unhold` says."""

    def __init__(self, directory: Path | None = None) -> None:
        self._dir = directory
        self._owner: Owner | None = None
        self._seq = 0
        self._helper: subprocess.Popen[bytes] | None = None
        self._lock: NodeLock | None = None
        self._holds = 0
        self._mine: set[Path] = set()  # this process's entries not yet undone

    @property
    def directory(self) -> Path:
        if self._dir is None:
            self._dir = journal_dir(create=True)
            assert self._dir is not None
        return self._dir

    @property
    def owner(self) -> Owner:
        if self._owner is None:
            self._owner = Owner.this_process()
        return self._owner

    def hold(self, wait_s: float | None = None, say: Callable[[str], None] | None = None) -> None:
        """Take the node lock (waiting at most `wait_s`, default `default_wait()`: NodeBusy, nothing changed;
        InputError for a bad $TAILSCOPE_NODE_LOCK_WAIT). The first hold of this
        process puts back what dead runs left, saying so through `say` (stderr by default), and refuses
        (JournalError) when some of it cannot be put back: the node is not as it was."""
        if self._holds or self._mine:
            self._holds += 1
            return
        d = self.directory  # JournalError when no journal can be written: nothing was changed
        lock = node_lock(lock_path(d))
        fresh = lock.acquire(default_wait() if wait_s is None else wait_s, journal=d, start=self.owner.start)
        self._lock, self._holds = lock, 1
        if not fresh:
            return
        try:
            restored, damaged = _restore_locked(None, dirs_after(lock, existing_dirs()))
        except BaseException:
            self.unhold()
            raise
        lines = restored_lines(restored) + [x.line() for x in damaged]
        for line in lines:
            (say or _say)(line)
        failed = [line for line in restored_lines(restored) if line.startswith("could not")]
        if failed:
            self.unhold()
            raise JournalError(
                f"{failed[0]}: the node is not as it was; fix that, then `tailscope inject --restore` "
                "(nothing was changed)"
            )

    def unhold(self) -> None:
        self._holds = max(0, self._holds - 1)
        self._maybe_release()

    def _maybe_release(self) -> None:
        if self._holds == 0 and not self._mine and self._lock is not None:
            lock, self._lock = self._lock, None
            lock.release()

    @property
    def holding(self) -> bool:
        return self._lock is not None

    def record(self, action: str, **fields: Any) -> Entry:
        """Write the entry for a change about to be made (durably: on disk before this returns)."""
        if not self.holding:
            raise RuntimeError("a node change recorded without the node lock (Journal.hold first)")
        owner = self.owner
        d = self.directory
        self._seq += 1
        data = {
            "format": FORMAT,
            "owner": {"pid": owner.pid, "start": owner.start, "boot": owner.boot},
            "argv": sys.argv[:8],
            "seq": self._seq,
            "action": action,
            "what": describe(action, fields),
            "written_at": time.time(),
            **fields,
        }
        try:
            why = refusal(check(data))
        except DamagedEntry as exc:
            why = str(exc)
        if why is not None:
            raise JournalError(f"{why}: nothing was changed")
        path = d / f"{owner.tag()}-{self._seq:05d}.json"
        tmp = d / f".{path.name}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(data, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            _fsync_dir(d)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise JournalError(f"node-state journal {d}: {exc.strerror}: nothing was changed") from exc
        self._mine.add(path)
        try:
            self._ensure_helper()
        except OSError as exc:
            self.forget(Entry(path, data))
            why = f"cannot start the restore helper ({exc.strerror})"
            raise JournalError(f"{why}: nothing was changed") from exc
        return Entry(path, data)

    def forget(self, entry: Entry) -> None:
        """The change is undone (or was never made): drop its entry."""
        with contextlib.suppress(FileNotFoundError):
            entry.path.unlink()
        self._mine.discard(entry.path)
        self._maybe_release()

    def restore(self, entry: Entry) -> None:
        """Undo one change of this run and drop its entry; OSError when it cannot be undone."""
        undo(entry.data, {})
        self.forget(entry)

    def _ensure_helper(self) -> None:
        if self._helper is not None and self._helper.poll() is None:
            return
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])  # this tree's tailscope, whatever sys.path says
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        argv = [sys.executable, "-m", "tailscope.node.journal", "watch"]
        argv += [str(self.owner.pid), str(self.owner.start), str(self.directory)]
        self._helper = subprocess.Popen(
            argv, start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env
        )

    @property
    def helper_pid(self) -> int | None:
        return self._helper.pid if self._helper is not None else None


def _say(line: str) -> None:
    print(f"tailscope: {line}", file=sys.stderr)


_THIS: Journal | None = None


def this_journal() -> Journal:
    """The journal of this process (made on first use: read-only verbs never get here)."""
    global _THIS
    if _THIS is None:
        _THIS = Journal()
    return _THIS


# -- undoing ----------------------------------------------------------------------------------------------
def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _procs(group: Path) -> list[int]:
    try:
        return [int(x) for x in (group / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def _cpu_users(subtree: Path) -> list[Path]:
    """The child cgroups of `subtree`'s cgroup that enable cpu in their own cgroup.subtree_control (why the
    kernel refuses `-cpu` there: EBUSY); none unless `subtree` is a cgroup.subtree_control."""
    if subtree.name != SUBTREE_CONTROL:
        return []
    out = []
    with contextlib.suppress(OSError):
        for child in sorted(subtree.parent.iterdir()):
            with contextlib.suppress(OSError):
                if child.is_dir() and "cpu" in (child / SUBTREE_CONTROL).read_text().split():
                    out.append(child)
    return out


def undo(f: dict[str, Any], context: dict[str, Path]) -> str | None:
    """Undo one recorded change (a checked entry's fields); returns what was done instead of the entry's
    `what`, if anything else. OSError when it cannot be done, and before anything is done when the entry
    names a place tailscope never changes. `context` carries, from a `move` to the `mkdir` before it, where
    the processes left in a made cgroup go (the cgroup they came from)."""
    why = refusal(f)
    if why is not None:
        raise OSError(errno.EPERM, why)
    action = f["action"]
    if action == "write":
        real = Path(os.path.realpath(f["path"]))  # the place refusal() checked
        try:
            _write(real, f["value"])
        except OSError as exc:
            users = _cpu_users(real) if exc.errno == errno.EBUSY else []
            if not users:
                raise
            # the kernel keeps a controller on while a child cgroup hands it to its own children: that child
            # (Slurm's or systemd's, since) uses it now, and taking it away is not tailscope's to do
            shown = ", ".join(printable(str(u)) for u in users[:3]) + (" ..." if len(users) > 3 else "")
            return f"cpu controller left on in {printable(real)}: {shown} enable it for their children now"
    elif action == "move":
        pid, group, origin = f["pid"], Path(f["group"]), Path(f["origin"])
        context[str(group)] = origin
        gone = f"pid {pid} had ended (nothing to move back to {printable(origin)})"
        if f["pid_start"] is None or start_time(pid) != f["pid_start"]:  # the pid may name another process
            return gone
        try:
            _write(origin / "cgroup.procs", f"{pid}\n")
        except ProcessLookupError:
            return gone
    elif action == "mkdir":
        group = Path(f["path"])
        if not group.is_dir():
            return f"cgroup {printable(group)} was already gone"
        to = context.get(str(group), group.parent)
        evacuated: set[int] = set()
        for _ in range(100):  # children the run started in the group, or a process moving out
            for pid in _procs(group):
                with contextlib.suppress(ProcessLookupError):
                    _write(to / "cgroup.procs", f"{pid}\n")
                    evacuated.add(pid)
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
        else:
            group.rmdir()  # the last try raises with the reason
        if evacuated:
            pids = ", ".join(map(str, sorted(evacuated)))
            return f"cgroup {printable(group)} removed (pids {pids} left in it moved to {printable(to)})"
    else:  # process (check() allows no other action; refusal() refused another running program)
        pid = f["pid"]
        if start_time(pid) != f["pid_start"]:
            return f"{printable(f['name'])} pid {pid} had ended"
        _stop_process(pid, f["pid_start"])
    return None


def _stop_process(pid: int, start: int) -> None:
    """SIGTERM, then SIGKILL after STOP_GRACE_S; returns once the process is gone (or a zombie)."""
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if start_time(pid) != start:
                return
            time.sleep(0.02)
    raise OSError(errno.EBUSY, f"pid {pid} still runs after SIGKILL")


@dataclass(frozen=True)
class Restored:
    owner: Owner
    done: list[str]  # what was put back
    failed: list[str]  # what could not be, with why (the entries stay)


def _restore_locked(only: Owner | None, dirs: list[Path]) -> tuple[list[Restored], list[Damaged]]:
    out, damaged = [], []
    for d in dirs:
        entries, bad = scan(d)
        damaged += bad
        owners: dict[Owner, list[Entry]] = {}
        for e in entries:
            owners.setdefault(e.owner, []).append(e)
        for owner, mine in owners.items():
            if (only is not None and owner != only) or owner.alive():
                continue
            done, failed = [], []
            context: dict[str, Path] = {}
            for e in reversed(mine):  # the last change first
                try:
                    note = undo(e.data, context)
                except OSError as exc:
                    failed.append(f"{e.what}: {exc.strerror or exc}")
                    continue
                e.path.unlink(missing_ok=True)
                done.append(note or e.what)
            out.append(Restored(owner, done, failed))
    return out, damaged


def restore_dead(
    only: Owner | None = None, directories: list[Path] | None = None, *, wait_s: float | None = None
) -> list[Restored]:
    """Restore everything that runs which are gone left in the journal (only `only`'s, when given), under
    the node lock (NodeBusy after `wait_s`). A live run's entries are never touched; damaged entries are
    left (`damaged_entries` says them). Reads nothing and creates nothing when there is no journal."""
    dirs = directories if directories is not None else existing_dirs()
    if not dirs:
        return []
    lock = node_lock(lock_path(dirs[0]))  # the one NodeLock of this process: held already, it counts
    wait_s = default_wait() if wait_s is None else wait_s
    fresh = lock.acquire(wait_s, journal=dirs[0], start=this_journal().owner.start)
    try:
        return _restore_locked(only, dirs_after(lock, dirs) if fresh and only is None else dirs)[0]
    finally:
        lock.release()


def live_runs(directories: list[Path] | None = None) -> list[Owner]:
    """The runs that have entries and still run (their changes are theirs to undo)."""
    dirs = directories if directories is not None else existing_dirs()
    owners = {e.owner for d in dirs for e in read_entries(d)}
    return sorted((o for o in owners if o.alive()), key=lambda o: o.pid)


def restored_lines(restored: list[Restored]) -> list[str]:
    lines = []
    for r in restored:
        who = f"pid {r.owner.pid}" + ("" if r.owner.boot == boot_id() else " (an earlier boot)")
        lines += [f"restored what {who} left: {w}" for w in r.done]
        lines += [f"could not restore what {who} left: {w}" for w in r.failed]
    return lines


@contextlib.contextmanager
def changing_the_node(wait_s: float | None = None) -> Iterator[Journal]:
    """For a verb that changes the node, around all of it: the node lock held (`Journal.hold`: what dead
    runs left is put back first and said on stderr; NodeBusy after `wait_s`), released at the end once
    everything this process changed is undone."""
    journal = this_journal()
    journal.hold(wait_s)
    try:
        yield journal
    finally:
        journal.unhold()


# -- the helper -------------------------------------------------------------------------------------------
def watch(owner: Owner, directory: Path) -> int:
    """Wait until `owner` is gone, then, holding the node lock, restore what it (and any other dead run) left
    in `directory`; when another holds the lock, that one has restored it on taking it (or will)."""
    for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(s, signal.SIG_IGN)  # only SIGKILL ends the helper before its run
    fd = None
    with contextlib.suppress(OSError, AttributeError):
        fd = os.pidfd_open(owner.pid)
    if owner.alive():
        while owner.alive():  # the pidfd is readable once the run has exited; /proc is the fallback
            if fd is not None:
                select.select([fd], [], [], 5.0)
            else:
                time.sleep(0.2)
    if fd is not None:
        os.close(fd)
    t0 = time.monotonic()
    lock = node_lock(lock_path(directory))
    while True:  # the node lock, as every restorer; while another holds it, it has put back or will
        try:
            lock.acquire(0.0, journal=directory, start=start_time(os.getpid()) or 0)
            break
        except NodeBusy as busy:
            # the holder restored what dead runs left when it took the lock, and said the damaged entries,
            # in its own journal: this one only when it keeps the same (else this helper waits to say them)
            same = busy.holder is not None and busy.holder.journal == str(directory)
            if not any(e.owner == owner for e in read_entries(directory)) and (
                same or not list(directory.glob(f"{owner.tag()}-*.json"))
            ):
                return 0
            if time.monotonic() - t0 > HELPER_WAIT_S:
                _helper_say([f"node lock still held after {HELPER_WAIT_S:g} s: `tailscope inject --restore`"])
                return 1
            time.sleep(0.1)
    try:  # what any dead run left there, its own run's first of all
        restored, damaged = _restore_locked(None, dirs_after(lock, [directory]))
    finally:
        lock.release()
    damaged = [x for x in damaged if x.path.name.startswith(f"{owner.tag()}-")]  # its run said the others
    lines = restored_lines(restored) + [x.line() for x in damaged]
    if lines:
        _helper_say([*lines, f"restore took {time.monotonic() - t0:.3f} s"])
    return 1 if damaged or any(r.failed for r in restored) else 0


def _helper_say(lines: list[str]) -> None:
    with contextlib.suppress(OSError):
        print("\n".join(f"tailscope restore helper: {line}" for line in lines), file=sys.stderr)


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "watch":
        return watch(Owner(int(argv[1]), int(argv[2]), boot_id()), Path(argv[3]))
    print("usage: python -m tailscope.node.journal watch PID START_TIME DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
