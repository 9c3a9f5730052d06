"""Helpers of the application tests: a program that leaves a setsid daemon, and the process table."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from installed import tailscope_env

__all__ = ["tailscope_env"]  # the app tests take it from here, with the rest

# The program under test: prints a line, forks a daemon that calls setsid and forks again (a classic
# double-fork), writes the daemon's pid to the file named by $DAEMON_PID, then sleeps SLEEP seconds.
DAEMONIZE = """
import os, sys, time
path = os.environ["DAEMON_PID"]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
        time.sleep(600)
        os._exit(0)
    os._exit(0)
print("started", flush=True)
while not os.path.exists(path):
    time.sleep(0.01)
time.sleep(float(sys.argv[1]))
print("result: 42.5 units", flush=True)
"""


def daemonize_argv(tmp_path: Path) -> list[str]:
    script = tmp_path / "daemonize.py"
    script.write_text(DAEMONIZE)
    return [sys.executable, str(script)]


def running(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie runs nothing; init reaps it)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def with_marker(marker: str) -> list[int]:
    """Live processes whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and running(int(name)):
            found.append(int(name))
    return found


def wait_for(predicate, timeout_s: float = 60.0, step_s: float = 0.05) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()


def run_words(campaign: Path, trials: int, *words: str) -> list[str]:
    """`tailscope run`'s command line: `trials` trials into `campaign`, no progress bar, then `words`."""
    return ["run", "--no-progress", "--trials", str(trials), "--campaign", str(campaign), *words]


def tailscope_child(*words: str, **popen: Any) -> subprocess.Popen:
    """`python -m tailscope WORDS` as a child of the test, with `tailscope_env()` unless `env=` says."""
    popen.setdefault("env", tailscope_env())
    return subprocess.Popen([sys.executable, "-m", "tailscope", *words], **popen)
