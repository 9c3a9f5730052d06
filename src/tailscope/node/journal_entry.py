"""One node-state journal entry: its schema, and the places an entry may name.

An entry is JSON that root obeys when it restores (it writes the entry's old value, removes its cgroup, moves
its process back, stops its injector), so it is read as untrusted input, by one reader (journal.scan) for
every restorer: the run itself, its restore helper, the next `inject`/`validate`, `inject --restore`.
`check(data)` returns the entry's fields or raises DamagedEntry with what is wrong in words; `refusal(fields)`
says why an entry names a place tailscope never changes, or None. The same two checks run when an entry is
written, so what tailscope records is always something it may restore.

The places (`WRITES`, cgroup hierarchies, `PROCESS_COMMS`): a path is resolved first (os.path.realpath: `..`
and symlinks), then must be under one of
- /proc/sys/vm (sysctls: compact_unevictable_allowed, nr_hugepages, ...),
- /sys/kernel/mm/transparent_hugepage (THP), /sys/kernel/mm/hugepages and
  /sys/devices/system/node/nodeN/hugepages (huge-page pools: nr_hugepages, nr_overcommit_hugepages only),
- /sys/devices/system/cpu (cpufreq's scaling_max_freq, scaling_min_freq, scaling_governor only),
- a mounted cgroup hierarchy (v1 or v2, from /proc/self/mounts): quota files written (cpu.max,
  cpu.cfs_quota_us, cpu.cfs_period_us), processes moved back, a `tailscope-*` cgroup removed, and `-cpu`
  written to a cgroup.subtree_control (the cpu controller cpu-quota enabled there, and nothing else);
- or a directory named in $TAILSCOPE_JOURNAL_PLACES (os.pathsep-separated): a copy of sysfs in the real format
  where the node has none (freq-cap's test: no cpufreq in a VM).
A `process` entry stops only a process whose start time (/proc/PID/stat field 22) is the recorded one; one
naming a running process that is not a `tsinject` is refused.

Standard library only (with tailscope.printable, which is too): the restore helper imports this.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from tailscope.printable import printable

FORMAT = 1
ACTIONS = ("write", "mkdir", "move", "process")
MAX_TEXT = 4096  # a path or an old value: sysfs and procfs values are at most a page
PLACES_ENV = "TAILSCOPE_JOURNAL_PLACES"
MOUNTS = "/proc/self/mounts"
PROCESS_COMMS = ("tsinject",)  # the only processes tailscope starts and journals
CGROUP_WRITES = ("cpu.max", "cpu.cfs_quota_us", "cpu.cfs_period_us")
CGROUP_PREFIX = "tailscope-"  # a cgroup tailscope made (inject/control.py, launch/tree.py)
SUBTREE_CONTROL = "cgroup.subtree_control"
CPU_CONTROLLER_OFF = "-cpu\n"  # the only value written there: the cpu controller cpu-quota enabled, off again


@dataclass(frozen=True)
class Place:
    root: str
    names: tuple[str, ...] | None  # the file names that may be written there (None: any)


WRITES = (
    Place("/proc/sys/vm", None),
    Place("/sys/kernel/mm/transparent_hugepage", None),
    Place("/sys/kernel/mm/hugepages", ("nr_hugepages", "nr_overcommit_hugepages")),
    Place("/sys/devices/system/node", ("nr_hugepages", "nr_overcommit_hugepages")),
    Place("/sys/devices/system/cpu", ("scaling_max_freq", "scaling_min_freq", "scaling_governor")),
)


class DamagedEntry(ValueError):
    """An entry that is not one tailscope wrote (truncated, edited, another format): why, in words."""


# -- the schema -------------------------------------------------------------------------------------------
def _int(data: dict[str, Any], key: str, lo: int, *, none: bool = False) -> None:
    value = data.get(key)
    if value is None and none and key in data:
        return
    if type(value) is not int or value < lo:  # bool is an int to isinstance: not here
        raise DamagedEntry(f"{key!r} is {_shown(value)}, expected a whole number >= {lo}")


def _text(data: dict[str, Any], key: str, *, path: bool = False) -> None:
    value = data.get(key)
    if not isinstance(value, str) or len(value) > MAX_TEXT or "\0" in value:
        raise DamagedEntry(f"{key!r} is {_shown(value)}, expected text of at most {MAX_TEXT} characters")
    if path and not value.startswith("/"):
        raise DamagedEntry(f"{key!r} is {_shown(value)}, expected an absolute path")


FIELDS: dict[str, tuple[tuple[str, str], ...]] = {  # action -> (field, kind): path | text | pid | start?
    "write": (("path", "path"), ("value", "text")),
    "mkdir": (("path", "path"),),
    "move": (("pid", "pid"), ("pid_start", "start?"), ("group", "path"), ("origin", "path")),
    "process": (("pid", "pid"), ("pid_start", "start"), ("name", "text")),
}


def check(data: object) -> dict[str, Any]:
    """The fields of a valid entry (as Journal.record writes it), else DamagedEntry: the first problem."""
    if not isinstance(data, dict):
        raise DamagedEntry(f"a JSON {type(data).__name__}, expected an object")
    if data.get("format") != FORMAT:
        raise DamagedEntry(f"format {_shown(data.get('format'))}, expected {FORMAT} (another tailscope's?)")
    owner = data.get("owner")
    if not isinstance(owner, dict):
        raise DamagedEntry(f"'owner' is {_shown(owner)}, expected an object (pid, start, boot)")
    try:
        _int(owner, "pid", 1)
        _int(owner, "start", 0)
        _text(owner, "boot")
    except DamagedEntry as exc:
        raise DamagedEntry(f"owner: {exc}") from None
    _int(data, "seq", 0)
    action = data.get("action")
    if action not in ACTIONS:
        raise DamagedEntry(f"'action' is {_shown(action)}, expected one of {', '.join(ACTIONS)}")
    for key, kind in FIELDS[action]:
        if kind in ("path", "text"):
            _text(data, key, path=kind == "path")
        else:
            _int(data, key, 1 if kind == "pid" else 0, none=kind == "start?")
    return data


def _shown(value: object) -> str:
    text = "missing" if value is None else repr(value)
    return printable(text if len(text) <= 60 else text[:57] + "...")


# -- the places -------------------------------------------------------------------------------------------
def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def cgroup_mounts(mounts: str = MOUNTS) -> list[str]:
    """The mount points of every cgroup hierarchy (v1 and v2), resolved."""
    out = []
    try:
        with open(mounts) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in ("cgroup", "cgroup2"):
            where = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])  # \040: a space
            out.append(os.path.realpath(where))
    return out


def extra_places() -> list[str]:
    given = os.environ.get(PLACES_ENV, "")
    return [os.path.realpath(p) for p in given.split(os.pathsep) if p]


def _in_cgroup(real: str, *, below: bool = False) -> bool:
    """In a cgroup hierarchy (with `below`: a cgroup under its root, never the root itself)."""
    return any(_under(real, m) and not (below and real == m) for m in cgroup_mounts())


def _in_extra(real: str) -> bool:
    return any(_under(real, p) for p in extra_places())


def refusal(fields: dict[str, Any]) -> str | None:
    """Why the (checked) entry names a place tailscope never changes, or None when it may be restored."""
    action = fields["action"]
    if action == "write":
        real = os.path.realpath(fields["path"])
        name = os.path.basename(real)
        if name == SUBTREE_CONTROL:
            if fields["value"] != CPU_CONTROLLER_OFF:
                what, off = printable(repr(fields["value"][:40])), CPU_CONTROLLER_OFF.strip()
                return f"{printable(fields['path'])}: {what} is not the {off} tailscope writes there"
            if _in_extra(real) or _in_cgroup(real):
                return None
            return _not_ours(fields["path"], real, "a cgroup's controllers")
        if _in_extra(real) or (_in_cgroup(real) and name in CGROUP_WRITES):
            return None
        if any(_under(real, p.root) and (p.names is None or name in p.names) for p in WRITES):
            return None
        return _not_ours(fields["path"], real, "a file tailscope writes")
    if action == "mkdir":
        real = os.path.realpath(fields["path"])
        ours = os.path.basename(real).startswith(CGROUP_PREFIX)
        if _in_extra(real) or (ours and _in_cgroup(real, below=True)):
            return None
        return _not_ours(fields["path"], real, f"a {CGROUP_PREFIX}* cgroup")
    if action == "move":
        for key in ("group", "origin"):
            real = os.path.realpath(fields[key])
            if not (_in_extra(real) or _in_cgroup(real)):
                return _not_ours(fields[key], real, "a cgroup")
    if action == "process" and start_time(fields["pid"]) == fields["pid_start"]:
        comm = _comm(fields["pid"])
        if comm not in PROCESS_COMMS:  # that very process runs, and it is not one tailscope starts
            what = printable(repr(comm))
            return f"pid {fields['pid']} is {what}, not a process tailscope starts ({PROCESS_COMMS[0]})"
    return None


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks after boot); None when there is no such process or it has
    exited and waits to be reaped (a zombie: a SIGKILLed run is one until its parent waits for it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def _not_ours(given: str, real: str, expected: str) -> str:
    where = printable(given) if given == real else f"{printable(given)} (resolves to {printable(real)})"
    return f"{where} is not {expected}: not a place tailscope changes"
