"""The launcher's watchdog: kills what a dead tailscope launched, removes what it left.

Run by `tailscope.launch` as `python -I -S watchdog.py` in a session of its own (so a terminal's Ctrl-C or a
kill of tailscope's process group does not reach it), with a pipe on its standard input. tailscope writes
one line per thing to look after, and takes it back when it is done with it:

    + cgroup PATH     a cgroup v2 directory it made: every process in it is killed, then it is removed
    + token TEXT      processes whose environment holds TAILSCOPE_LAUNCH=TEXT (a launched tree) are killed
    + pid PID START   one process (START: its start time in /proc/PID/stat, so a reused pid is left alone)
    + tmp PATH        a temporary directory removed
    - KIND ARG        the same, taken back (tailscope cleaned it up itself)
    exit              tailscope ends normally: nothing to do

When the pipe reaches its end without `exit` (tailscope died, SIGKILL included) it does all of the above and
exits. Only the standard library: it starts in ~20 ms and cannot fail on a missing package.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time

KILL_DEADLINE_S = 10.0


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (a zombie's too), None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
        return text[text.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _cgroup_pids(path: str) -> list[int]:
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def kill_cgroup(path: str, deadline_s: float = KILL_DEADLINE_S) -> bool:
    """Every process of the cgroup killed (cgroup.kill where the kernel has it, 5.14+), then the directory
    removed; True when it is gone."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if not os.path.isdir(path):
            return True
        pids = _cgroup_pids(path)
        if pids:
            try:
                with open(os.path.join(path, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                for pid in pids:
                    _kill(pid)
        try:
            os.rmdir(path)
            return True
        except OSError:
            time.sleep(0.02)
    return False


def _with_token(token: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if token in env.split(b"\0"):
            found.append(int(name))
    return found


def kill_token(token: str, deadline_s: float = KILL_DEADLINE_S) -> None:
    """Kill every process whose environment carries the token, again until none is left (a process may fork
    while its tree is being killed)."""
    marker = f"TAILSCOPE_LAUNCH={token}".encode()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        pids = _with_token(marker)
        if not pids:
            return
        for pid in pids:
            _kill(pid)
        time.sleep(0.02)


def cleanup(held: dict[str, dict[str, str]]) -> None:
    for path in held["cgroup"]:
        kill_cgroup(path)
    for token in held["token"]:
        kill_token(token)
    for pid, start in held["pid"].items():
        if start_time(int(pid)) == start:
            _kill(int(pid))
    for path in held["tmp"]:
        shutil.rmtree(path, ignore_errors=True)


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    held: dict[str, dict[str, str]] = {"cgroup": {}, "token": {}, "pid": {}, "tmp": {}}
    for raw in sys.stdin.buffer:
        line = raw.decode(errors="replace").rstrip("\n")
        if line == "exit":
            return 0
        parts = line.split(" ", 2)
        if len(parts) < 3 or parts[0] not in "+-" or parts[1] not in held:
            continue
        sign, kind, arg = parts
        key, value = arg, ""
        if kind == "pid":
            key, _, value = arg.partition(" ")
        if sign == "+":
            held[kind][key] = value
        else:
            held[kind].pop(key, None)
    cleanup(held)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
