"""Helpers of the node-state journal and node lock tests: real `tailscope inject` runs, real SIGKILLs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tailscope.node import journal
from tailscope.node.lock import default_wait, lock_path, node_lock

COMPACT = Path("/proc/sys/vm/compact_unevictable_allowed")
DEADLINE_S = 30.0
LOCKED_S = default_wait() + 120  # a run that takes the node lock: its wait (conftest's), then itself


def as_the_node_has_it(path: Path) -> str:
    """`path` read holding the node lock, so while no tailscope changes the node: another one beside the
    suite (another checkout's, a user's) may hold its own change in force for minutes, and that is neither
    the node's own value nor what a test left."""
    here = Path(tempfile.mkdtemp(prefix="tailscope-read-"))  # named as the holder's journal: empty, its own
    lock = node_lock(lock_path(here))  # this process's one NodeLock: already held here, it counts
    lock.acquire(default_wait(), journal=here, start=0)
    try:
        return path.read_text()
    finally:
        lock.release()
        here.rmdir()


def wait_for(what: str, ok: Callable[[], bool], deadline_s: float = DEADLINE_S) -> None:
    end = time.monotonic() + deadline_s
    while not ok():
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline_s:g} s: {what}")
        time.sleep(0.05)


def tailscope(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tailscope", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def ready_line(proc: subprocess.Popen[str]) -> dict[str, object]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert '"ready"' in line, (line, proc.stderr.read() if proc.stderr and proc.poll() is not None else "")
    return json.loads(line)


def sigkill(proc: subprocess.Popen[str]) -> str:
    """SIGKILL the run (no handler can run) and return what was said on its stderr (the helper's lines
    included: it shares the run's stderr, and the pipe closes when the helper is done)."""
    proc.kill()
    _, err = proc.communicate(timeout=DEADLINE_S)
    return err


def pids_named(name: str) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() == name:
                    out.add(int(d.name))
            except OSError:
                pass
    return out


def helper_of(pid: int) -> int | None:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"tailscope.node.journal" in argv and str(pid).encode() in argv:
                return int(d.name)
    return None


def inject_restore(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tailscope", "inject", "--restore"],
        capture_output=True, text=True, timeout=LOCKED_S, env={**os.environ, **env},
    )  # fmt: skip


def plant(directory: Path, owner: journal.Owner, target: Path, value: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = {
        "format": journal.FORMAT,
        "owner": {"pid": owner.pid, "start": owner.start, "boot": owner.boot},
        "seq": 1,
        "action": "write",
        "what": journal.describe("write", {"path": str(target), "value": value}),
        "path": str(target),
        "value": value,
    }
    entry = directory / f"{owner.tag()}-00001.json"
    entry.write_text(json.dumps(data))
    return entry
