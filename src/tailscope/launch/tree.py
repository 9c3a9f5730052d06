"""A launched command's process tree, held so that nothing of it outlives its trial.

Where tailscope may make a cgroup (cgroup v2 mounted and writable: as root on most nodes), each launch gets
its own directory under tailscope's cgroup; a process that calls setsid and double-forks stays in it, and the
cgroup is killed (cgroup.kill, or SIGKILL to every member) and removed at the end. Elsewhere tailscope is a
child subreaper (PR_SET_CHILD_SUBREAPER): the tree's orphans are reparented to it instead of to init, and the
tree is the launched process's descendants plus those orphans and theirs (found through
/proc/PID/task/TID/children, or a scan of /proc where that file is missing). An orphan is known by its
ancestry, not its environment: every child of tailscope that was not one when the tree was opened (the
watchdog, a monitor, an injector started before it) and is not the launched process was reparented to it
during the trial, so it is the tree's, whatever its environment says (a daemon started with `env -i`);
tailscope's own callbacks during a trial start nothing that outlives them.
Every process of a tree also carries TAILSCOPE_LAUNCH=<token> in its environment: the watchdog finds the tree
by it when tailscope itself has died. An orphan is reparented to init then, so the launcher hands each one it
adopts to the watchdog by pid and start time as it notices it (`adopt`, at most every ADOPT_EVERY_S while
the command runs): one that cleared its environment dies with a SIGKILLed tailscope too, unless it was
adopted in the last moment before (and a child it starts after that carries no token either: said in
the README).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tailscope.launch.guard import guard
from tailscope.launch.watchdog import start_time

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
TOKEN_VAR = "TAILSCOPE_LAUNCH"
_counter = itertools.count()
_subreaper = False
ADOPT_EVERY_S = 0.5


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_active_trees = 0  # ProcessTrees not yet closed: the subreaper lasts as long as one of them


def become_subreaper() -> bool:
    global _subreaper
    if not _subreaper:
        _subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
    return _subreaper


def _tree_opened() -> None:
    global _active_trees
    _active_trees += 1
    become_subreaper()


def _tree_closed() -> None:
    """The last tree closed: no longer a subreaper. A process that launched in-process (a test calling main(),
    a Python user of this module) must not keep collecting its other children's orphans: only the tree's
    own are reaped here, so another child's orphans would stay zombies under it (a SIGKILLed `tailscope
    inject`'s tsinject, killed by its PR_SET_PDEATHSIG, stayed a zombie named tsinject)."""
    global _active_trees, _subreaper
    _active_trees = max(0, _active_trees - 1)
    if _active_trees == 0 and _subreaper and _prctl(PR_SET_CHILD_SUBREAPER, 0):
        _subreaper = False


def cgroup2_mount(mountinfo: str = "/proc/self/mountinfo") -> Path | None:
    """Where cgroup v2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid node)."""
    try:
        text = Path(mountinfo).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def own_cgroup(proc_cgroup: str = "/proc/self/cgroup") -> str | None:
    """This process's cgroup v2 path ('0::/path' line), or None."""
    try:
        for line in Path(proc_cgroup).read_text().splitlines():
            if line.startswith("0::"):
                return line[3:]
    except OSError:
        return None
    return None


def make_cgroup() -> Path | None:
    """A fresh cgroup v2 directory under tailscope's own, or None where none can be made (not root, no v2
    hierarchy, read-only, or controllers enabled on ours that forbid a process in a child... checked when
    the process is moved)."""
    mount, mine = cgroup2_mount(), own_cgroup()
    if mount is None or mine is None or not os.access(mount, os.W_OK):
        return None
    parent = mount / mine.lstrip("/")
    path = parent / f"tailscope-{os.getpid()}-{next(_counter)}"
    guard().hold("cgroup", str(path))  # before it exists: a death right after mkdir still removes it
    try:
        path.mkdir()
    except OSError:
        guard().release("cgroup", str(path))
        return None
    return path


def remove_cgroup(path: Path, deadline_s: float = 10.0) -> bool:
    from tailscope.launch.watchdog import kill_cgroup

    gone = kill_cgroup(str(path), deadline_s)
    if gone:
        guard().release("cgroup", str(path))
    return gone


@dataclass(frozen=True)
class Member:
    pid: int
    comm: str
    cmdline: str


def _children_file(pid: int) -> list[int] | None:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except FileNotFoundError:
            return None  # no CONFIG_PROC_CHILDREN: the caller scans /proc
        except (OSError, ValueError):
            continue
    return out


def _ppids() -> dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                text = f.read().decode(errors="replace")
            out[int(name)] = int(text[text.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _has_token(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def describe(pid: int) -> Member | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
        comm = text[text.index("(") + 1 : text.rindex(")")]
        state = text[text.rindex(")") + 2 :].split()[0]
    except (OSError, ValueError, IndexError):
        return None
    if state in ("Z", "X"):
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        cmdline = ""
    return Member(pid, comm, cmdline)


class ProcessTree:
    """The processes of one launch (see the module docstring)."""

    def __init__(self, *, use_cgroup: bool = True) -> None:
        self.token = f"{os.getpid()}-{next(_counter)}-{time.monotonic_ns()}"
        self.cgroup = make_cgroup() if use_cgroup else None
        self._home = _own_cgroup_dir() if self.cgroup is not None else None  # found here, outside the trial
        self.root_pid: int | None = None
        self.seen: set[int] = set()  # every pid found in the tree: only these are ever reaped here
        _tree_opened()
        self._open = True
        guard().hold("token", self.token)  # the watchdog first: it is a child of ours, not of the tree
        # tailscope's own children now (pid, start time): any other child later, but the root, is an orphan
        # of the tree reparented to us
        self._own = {(p, start_time(p)) for p in _own_children()}
        self._adopted: dict[int, str] = {}  # orphans handed to the watchdog: pid -> start time
        self._adopt_at = 0.0

    @property
    def mode(self) -> str:
        return "cgroup" if self.cgroup is not None else "subreaper"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, TOKEN_VAR: self.token}

    @contextlib.contextmanager
    def joined(self) -> Iterator[None]:
        """tailscope itself in the tree's cgroup while it starts the command, so that the command is born in
        it (a vfork: no Python code between fork and exec, which would cost a full fork of tailscope, 9-13 ms
        inside the trial's wall time), and back in its own cgroup before anything else runs. A cgroup that
        cannot be joined is left to `started`, which finds the command outside it."""
        home = self._home
        if self.cgroup is None or home is None or not _join(self.cgroup):
            yield
            return
        try:
            yield
        finally:
            if not _join(home) and not _join(home):
                # never left inside the cgroup that the end of the trial kills
                self.cgroup = None
                raise OSError(f"cannot move tailscope back to its cgroup {home}")

    def preexec(self) -> None:
        """In the child, before exec: into the cgroup, its own process group, killed when we die."""
        self.preexec_same_group()
        os.setpgid(0, 0)

    def preexec_same_group(self) -> None:
        """As `preexec`, in tailscope's process group (a command on the terminal: trace, monitor)."""
        if self.cgroup is not None:
            try:
                fd = os.open(str(self.cgroup / "cgroup.procs"), os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
            except OSError:
                pass  # checked by the parent (`started`): the subreaper holds the tree instead
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    def started(self, pid: int) -> None:
        self.root_pid = pid
        if self.cgroup is not None:
            try:
                inside = _in_cgroup(pid, self.cgroup)
            except OSError:
                inside = False
            if not inside:
                remove_cgroup(self.cgroup)
                self.cgroup = None

    def pids(self) -> list[int]:
        """The live processes of the tree (the root too, while it is not reaped)."""
        if self.cgroup is not None:
            try:
                found = [int(x) for x in (self.cgroup / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                found = []
        else:
            found = self._descendants()
        self.seen.update(found)
        return found

    def _descendants(self) -> list[int]:
        me = os.getpid()
        mine = _children_file(me)
        if mine is None:
            return self._descendants_by_scan()
        # our children that belong to the tree: the root, and orphans of the tree reparented to us
        todo = [p for p in mine if self._is_tree_child(p)]
        seen: list[int] = []
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.append(pid)
            kids = _children_file(pid)
            todo += kids or []
        return seen

    def _descendants_by_scan(self) -> list[int]:
        me = os.getpid()
        ppids = _ppids()
        kids: dict[int, list[int]] = {}
        for pid, ppid in ppids.items():
            kids.setdefault(ppid, []).append(pid)
        todo = [p for p in kids.get(me, []) if self._is_tree_child(p)]
        seen: list[int] = []
        while todo:
            pid = todo.pop()
            if pid not in seen:
                seen.append(pid)
                todo += kids.get(pid, [])
        return seen

    def adopt(self) -> None:
        """Subreaper only, at most every ADOPT_EVERY_S: the orphans reparented to tailscope since the last
        call, handed to the watchdog by pid and start time (it kills them if tailscope dies)."""
        now = time.monotonic()
        if self.cgroup is not None or now < self._adopt_at:
            return
        self._adopt_at = now + ADOPT_EVERY_S
        for pid in _own_children():
            start = start_time(pid)
            if pid == self.root_pid or start is None or (pid, start) in self._own or pid in self._adopted:
                continue
            self._adopted[pid] = start
            guard().hold("pid", f"{pid} {start}")

    def _is_tree_child(self, pid: int) -> bool:
        """A child of tailscope that is the tree's: the root, one carrying the token, or one reparented to
        tailscope since the tree opened (not a child of tailscope's own from before)."""
        if pid == self.root_pid or _has_token(pid, f"{TOKEN_VAR}={self.token}".encode()):
            return True
        return (pid, start_time(pid)) not in self._own

    def leftovers(self) -> list[Member]:
        """Processes of the tree still running (the root is excluded: it has exited when this is asked)."""
        return [m for p in self.pids() if p != self.root_pid and (m := describe(p)) is not None]

    def kill(self, deadline_s: float = 10.0) -> None:
        """SIGKILL every process of the tree (the root too) until none is left; reap those that are ours."""
        end = time.monotonic() + deadline_s
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1")
        while time.monotonic() < end:
            pids = [p for p in self.pids() if describe(p) is not None]
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            self.reap_orphans()
            time.sleep(0.01)
        self.reap_orphans()

    def reap_orphans(self) -> None:
        """Reap the tree's processes reparented to us (the subreaper) that have exited; never the root (its
        owner reaps it) and never another child of ours."""
        for pid in self._zombie_children():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)

    def _zombie_children(self) -> list[int]:
        out = []
        for pid in _own_children():
            if pid == self.root_pid:
                continue
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    text = f.read().decode(errors="replace")
            except OSError:
                continue
            if text[text.rindex(")") + 2 :].split()[0] == "Z" and self._zombie_is_ours(pid):
                out.append(pid)
        return out

    def _zombie_is_ours(self, pid: int) -> bool:
        # a pid seen in the tree while it ran, or an orphan reparented to us that exited before it was seen
        # (its stat still has its start time); never a child of tailscope's own (a monitor, the watchdog),
        # whose owner waits for it
        return pid in self.seen or (pid, start_time(pid)) not in self._own

    def close(self) -> None:
        """After the trial: nothing of the tree left, the cgroup removed, the watchdog's entries released."""
        self.kill()
        if self.cgroup is not None:
            remove_cgroup(self.cgroup)
        guard().release("token", self.token)
        for pid, start in self._adopted.items():
            guard().release("pid", f"{pid} {start}")
        self._adopted.clear()
        if self._open:
            self._open = False
            _tree_closed()


def _own_children() -> list[int]:
    mine = _children_file(os.getpid())
    return mine if mine is not None else [p for p, pp in _ppids().items() if pp == os.getpid()]


def _own_cgroup_dir() -> Path | None:
    mount, mine = cgroup2_mount(), own_cgroup()
    return None if mount is None or mine is None else mount / mine.lstrip("/")


def _join(cgroup: Path) -> bool:
    """This process (all its threads) into `cgroup`."""
    try:
        fd = os.open(str(cgroup / "cgroup.procs"), os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, b"0")
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _in_cgroup(pid: int, cgroup: Path) -> bool:
    """`pid` (not yet reaped) was born in, or moved into, `cgroup`. /proc/PID/cgroup says so even once the
    process has exited: cgroup.procs lists only the living, so a command that ends before it is read (`true`,
    on a busy node) would look as if it had never been inside."""
    mount = cgroup2_mount()
    path = own_cgroup(f"/proc/{pid}/cgroup")
    if mount is not None and path is not None:
        where = mount / path.lstrip("/")
        return where == cgroup or cgroup in where.parents
    try:  # no /proc/PID/cgroup (reaped already): the living members
        procs = (cgroup / "cgroup.procs").read_text().split()
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        raise
    return str(pid) in procs
