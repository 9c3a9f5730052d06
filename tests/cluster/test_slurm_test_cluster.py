"""scripts/slurm-test-cluster itself, with accounting: every daemon listens on loopback only, `stop` leaves
nothing listening or running, and `start` on the same directory restarts the cluster with its jobs' records
(sacct still lists them)."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.conftest import SCRIPT, accounting_missing, slurm_missing

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=180, check=False
    )


def _listening(ports: set[int]) -> dict[int, str]:
    """Port -> the address it is listening on (`ss -ltnH`), for these ports."""
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, timeout=30, check=True).stdout
    found = {}
    for line in out.splitlines():
        local = line.split()[3]
        address, _, port = local.rpartition(":")
        if port.isdigit() and int(port) in ports:
            found[int(port)] = address.strip("[]")
    return found


def _pids(root: Path) -> list[int]:
    files = [*(root / "run").glob("*.pid"), root / "munge" / "munged.pid", root / "db" / "mariadbd.pid"]
    alive = []
    for f in files:
        try:
            pid = int(f.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if Path(f"/proc/{pid}").exists():
            alive.append(pid)
    return alive


def test_loopback_only_clean_stop_and_restart_with_records(tmp_path: Path) -> None:
    reason = slurm_missing() or accounting_missing()
    if reason:
        pytest.skip(reason)
    root = tmp_path / "cluster"
    began = time.monotonic()
    started = _script("start", str(root), "--nodes", "1", "--accounting")
    try:
        assert started.returncode == 0, started.stderr
        env = {"SLURM_CONF": started.stdout.strip(), "PATH": "/usr/bin:/usr/sbin:/bin"}
        first_start = time.monotonic() - began
        ports = set(json.loads((root / "cluster.json").read_text())["ports"].values())
        listening = _listening(ports)
        assert set(listening) == ports, f"not listening: {ports - set(listening)}"
        assert all(ipaddress.ip_address(a).is_loopback for a in listening.values()), listening
        job = subprocess.run(
            ["sbatch", "--parsable", "--wait", "-J", "before-restart", "-o", "/dev/null", "--wrap", "true"],
            env=env, capture_output=True, text=True, timeout=120, check=True,
        ).stdout.strip()  # fmt: skip
        # slurmctld sends the job's record to slurmdbd on its own time: stop once it is there (on a busy
        # machine a stop right after the job read back as the allocation's placeholder name)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and subprocess.run(
            ["sacct", "-P", "-n", "-X", "-j", job, "-o", "JobName"],
            env=env, capture_output=True, text=True, timeout=60,
        ).stdout.strip() != "before-restart":  # fmt: skip
            time.sleep(0.5)
    finally:
        t = time.monotonic()
        stopped = _script("stop", str(root))
        stop_s = time.monotonic() - t
    assert stopped.returncode == 0, stopped.stderr
    assert _listening(ports) == {} and _pids(root) == []

    t = time.monotonic()
    restarted = _script("start", str(root), "--nodes", "1", "--accounting")
    try:
        assert restarted.returncode == 0, restarted.stderr
        restart_s = time.monotonic() - t
        new_ports = set(json.loads((root / "cluster.json").read_text())["ports"].values())
        assert all(ipaddress.ip_address(a).is_loopback for a in _listening(new_ports).values())
        sacct = subprocess.run(
            ["sacct", "-P", "-n", "-X", "-j", job, "-o", "JobID,JobName,State"],
            env=env, capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        assert sacct.splitlines() == [f"{job}|before-restart|COMPLETED"]
    finally:
        _script("stop", str(root))
    assert _listening(new_ports) == {} and _pids(root) == []
    print(f"\nstart {first_start:.1f} s, stop {stop_s:.1f} s, restart {restart_s:.1f} s")
