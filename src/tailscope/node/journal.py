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

Where: `$TAILSCOPE_JOURNAL_DIR` when set, else /run/tailscope/journal for root (tmpfs: it empties at boot,
as the state it describes does), else $XDG_RUNTIME_DIR/tailscope/journal, else
/tmp/tailscope-<uid>/journal; root falls back to the last two when /run cannot be written.

This module imports only the standard library (and tailscope.errors, which does too): the helper is
`python -m tailscope.node.journal watch ...` and starts in tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailscope.errors import InputError  # standard library only, as this module

ENV_DIR = "TAILSCOPE_JOURNAL_DIR"
RUN_DIR = Path("/run/tailscope/journal")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
FORMAT = 1
STOP_GRACE_S = 5.0  # a process entry: SIGTERM, then SIGKILL after this


class JournalError(InputError):
    """The journal cannot be written: the change it would describe is not made (one line, exit 2)."""


# -- who wrote an entry -----------------------------------------------------------------------------------
def boot_id() -> str:
    return BOOT_ID.read_text().strip()


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks after boot); None when there is no such process or it has
    exited and waits to be reaped (a zombie: a SIGKILLed run is one until its parent waits for it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


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


def _trusted(d: Path) -> bool:
    """A journal directory is used only when this user owns it and nobody else may write it: an entry
    says what to write where, as root (a /tmp fallback made by another user must not be obeyed)."""
    try:
        st = d.lstat()
    except OSError:
        return False
    return d.is_dir() and not d.is_symlink() and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def journal_dir(*, create: bool) -> Path | None:
    """The journal directory; with `create`, made (mode 0700) if missing. Without, None when none exists."""
    errors = []
    for d in _candidates():
        if d.is_dir():
            if _trusted(d):
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
    return [d for d in _candidates() if _trusted(d)]


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(d: Path) -> Iterator[None]:
    """One restorer at a time per journal (the helper, a new run and `inject --restore` may meet)."""
    fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# -- entries ----------------------------------------------------------------------------------------------
@dataclass
class Entry:
    path: Path  # the entry's file
    data: dict[str, Any]

    @property
    def owner(self) -> Owner:
        o = self.data["owner"]
        return Owner(int(o["pid"]), int(o["start"]), str(o["boot"]))

    @property
    def what(self) -> str:
        return str(self.data["what"])


def describe(action: str, f: dict[str, Any]) -> str:
    if action == "write":
        return f"{f['path']} back to {str(f['value']).strip()!r}"
    if action == "mkdir":
        return f"cgroup {f['path']} removed"
    if action == "move":
        return f"pid {f['pid']} back to cgroup {f['origin']}"
    if action == "process":
        return f"{f.get('name', 'process')} pid {f['pid']} stopped"
    raise ValueError(action)


def read_entries(d: Path) -> list[Entry]:
    out = []
    for p in sorted(d.glob("*.json")):
        try:
            data = json.loads(p.read_text())
            if data.get("format") != FORMAT:
                continue
            out.append(Entry(p, data))
        except (OSError, ValueError):
            continue  # a torn temporary is never named *.json; anything else unreadable is left alone
    out.sort(key=lambda e: (e.data["owner"]["pid"], e.data["owner"]["start"], e.data["seq"]))
    return out


class Journal:
    """The entries of this process. `record` before a change; `restore` (or `forget`) after."""

    def __init__(self, directory: Path | None = None) -> None:
        self._dir = directory
        self._owner: Owner | None = None
        self._seq = 0
        self._helper: subprocess.Popen[bytes] | None = None

    @property
    def directory(self) -> Path:
        if self._dir is None:
            self._dir = journal_dir(create=True)
            assert self._dir is not None
        return self._dir

    def record(self, action: str, **fields: Any) -> Entry:
        """Write the entry for a change about to be made (durably: on disk before this returns)."""
        if self._owner is None:
            self._owner = Owner.this_process()
        d = self.directory
        self._seq += 1
        data = {
            "format": FORMAT,
            "owner": {"pid": self._owner.pid, "start": self._owner.start, "boot": self._owner.boot},
            "argv": sys.argv[:8],
            "seq": self._seq,
            "action": action,
            "what": describe(action, fields),
            "written_at": time.time(),
            **fields,
        }
        path = d / f"{self._owner.tag()}-{self._seq:05d}.json"
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
        try:
            self._ensure_helper()
        except OSError as exc:
            path.unlink(missing_ok=True)
            why = f"cannot start the restore helper ({exc.strerror})"
            raise JournalError(f"{why}: nothing was changed") from exc
        return Entry(path, data)

    def forget(self, entry: Entry) -> None:
        """The change is undone (or was never made): drop its entry."""
        with contextlib.suppress(FileNotFoundError):
            entry.path.unlink()

    def restore(self, entry: Entry) -> None:
        """Undo one change of this run and drop its entry; OSError when it cannot be undone."""
        undo(entry.data, {})
        self.forget(entry)

    def _ensure_helper(self) -> None:
        if self._helper is not None and self._helper.poll() is None:
            return
        assert self._owner is not None
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])  # this tree's tailscope, whatever sys.path says
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        argv = [sys.executable, "-m", "tailscope.node.journal", "watch"]
        argv += [str(self._owner.pid), str(self._owner.start), str(self.directory)]
        self._helper = subprocess.Popen(
            argv, start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env
        )

    @property
    def helper_pid(self) -> int | None:
        return self._helper.pid if self._helper is not None else None


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


def undo(f: dict[str, Any], context: dict[str, Path]) -> str | None:
    """Undo one recorded change; returns what was done instead of the entry's `what`, if anything else.
    `context` carries, from a `move` to the `mkdir` before it, where the processes left in a made cgroup
    go (the cgroup they came from)."""
    action = f["action"]
    if action == "write":
        _write(Path(f["path"]), str(f["value"]))
    elif action == "move":
        pid, group, origin = int(f["pid"]), Path(f["group"]), Path(f["origin"])
        context[str(group)] = origin
        if start_time(pid) != f.get("pid_start"):  # its pid may name another process now: leave that alone
            return f"pid {pid} had ended (nothing to move back to {origin})"
        try:
            _write(origin / "cgroup.procs", f"{pid}\n")
        except ProcessLookupError:
            return f"pid {pid} had ended (nothing to move back to {origin})"
    elif action == "mkdir":
        group = Path(f["path"])
        if not group.is_dir():
            return f"cgroup {group} was already gone"
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
            return f"cgroup {group} removed (pids {pids} left in it moved to {to})"
    elif action == "process":
        pid = int(f["pid"])
        if start_time(pid) != f.get("pid_start"):
            return f"{f.get('name', 'process')} pid {pid} had ended"
        _stop_process(pid, int(f["pid_start"]))
    else:
        raise OSError(0, f"unknown action {action!r}")
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


def restore_dead(only: Owner | None = None, directories: list[Path] | None = None) -> list[Restored]:
    """Restore everything that runs which are gone left in the journal (only `only`'s, when given).
    A live run's entries are never touched. Reads nothing and creates nothing when there is no journal."""
    out = []
    for d in directories if directories is not None else existing_dirs():
        with _locked(d):
            entries = read_entries(d)
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
    return out


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


def restore_before_changing() -> None:
    """Called by the verbs that change the node before their first change: say what dead runs left and
    put it back."""
    for line in restored_lines(restore_dead()):
        print(f"tailscope: {line}", file=sys.stderr)


# -- the helper -------------------------------------------------------------------------------------------
def watch(owner: Owner, directory: Path) -> int:
    """Wait until `owner` is gone, then restore what it left in `directory`."""
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
    restored = restore_dead(only=owner, directories=[directory])
    lines = restored_lines(restored)
    if lines:
        lines.append(f"restore took {time.monotonic() - t0:.3f} s")
        with contextlib.suppress(OSError):
            print("\n".join(f"tailscope restore helper: {line}" for line in lines), file=sys.stderr)
    return 1 if any(r.failed for r in restored) else 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "watch":
        return watch(Owner(int(argv[1]), int(argv[2]), boot_id()), Path(argv[3]))
    print("usage: python -m tailscope.node.journal watch PID START_TIME DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
