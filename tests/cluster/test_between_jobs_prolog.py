"""`check --between-jobs` as slurmd's real Prolog (issue 33): scripts/slurm/tailscope-between-jobs before each
of 10 jobs on a one-node test cluster; the check ran before every job, each one's cost is its log line's
seconds, and no node was drained unless the check said degraded (then with tailscope's reason).

The cluster is scripts/slurm-test-cluster's, started here with one node; its slurm.conf gets Prolog= and
PrologEpilogTimeout= and slurmctld and slurmd read them with `scontrol reconfigure` (facts-slurm-accounting:
it takes effect so). The history gives l2sum this node's baseline (8 trials of `run l2sum --node n1`); the
other probes have none, so a 2 s budget can claim l2sum's level at most: healthy, or inconclusive where this
machine is busy (which never fails the node).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import SCRIPT, slurm_missing

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "scripts" / "slurm" / "tailscope-between-jobs"
JOBS = 10
LINE = re.compile(
    r"n1: (healthy|degraded|inconclusive|another check|the check) .*?job (\d+|none), ([\d.]+) s"
)


def _run(argv: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow
@pytest.mark.root
def test_the_check_runs_before_each_of_ten_jobs_and_drains_nothing(tmp_path):
    reason = slurm_missing()
    if reason:
        pytest.skip(reason)
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:/usr/sbin"}
    env.pop("TAILSCOPE_HISTORY", None)
    tailscope = [sys.executable, "-m", "tailscope"]
    history, base = tmp_path / "history", tmp_path / "base"
    made = _run([*tailscope, "run", "l2sum", "--trials", "8", "--node", "n1", "--no-progress", "--campaign",
                 str(base)], env)  # fmt: skip
    assert made.returncode in (0, 1), made.stderr
    assert _run([*tailscope, "history", "add", str(history), str(base)], env).returncode == 0

    prolog = tmp_path / "prolog"  # the script and its .conf beside it, as /etc/slurm would hold them
    prolog.mkdir()
    shutil.copy(WRAPPER, prolog / WRAPPER.name)
    log = tmp_path / "between-jobs.log"
    (prolog / f"{WRAPPER.name}.conf").write_text(
        f"HISTORY={history}\nBUDGET=2s\nTIMEOUT=80\nPYTHON={sys.executable}\nPYTHONPATH={ROOT / 'src'}\n"
        f"CAMPAIGNS={tmp_path / 'campaigns'}\nLOG={log}\n"
    )
    root = tmp_path / "slurm"
    started = _run([sys.executable, str(SCRIPT), "start", str(root), "--nodes", "1"], env, timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        conf = Path(started.stdout.strip().splitlines()[-1])
        env["SLURM_CONF"] = str(conf)
        with conf.open("a") as fh:
            fh.write(f"Prolog={prolog / WRAPPER.name}\nPrologEpilogTimeout=100\n")
        assert _run(["scontrol", "reconfigure"], env).returncode == 0
        _wait_idle(env)
        ids = []
        for i in range(JOBS):  # --exclusive: one job on the node at a time, each with its own prolog
            out = _run(["sbatch", "--parsable", "--exclusive", "-o", str(tmp_path / f"job{i}.out"), "--wrap",
                        "echo ran"], env)  # fmt: skip
            assert out.returncode == 0, out.stderr
            ids.append(out.stdout.strip().split(";")[0])
        deadline = time.monotonic() + 100 * JOBS
        while _run(["squeue", "-h", "-o", "%i"], env).stdout.strip() and time.monotonic() < deadline:
            time.sleep(1)
        lines = log.read_text().splitlines() if log.exists() else []
        found = {m.group(2): (m.group(1), float(m.group(3))) for m in map(LINE.search, lines) if m}
        print("\n".join(lines))  # each prolog's verdict and cost, shown with -s
        assert set(found) == set(ids), lines  # the check ran before each of the jobs
        assert all(v[0] in ("healthy", "inconclusive", "degraded") for v in found.values()), lines
        assert all(seconds < 80 for _, seconds in found.values())
        assert all((tmp_path / f"job{i}.out").read_text().strip() == "ran" for i in range(JOBS))
        drained = _run(["sinfo", "-R", "-h", "-o", "%N|%E"], env).stdout.strip()
        if any(v[0] == "degraded" for v in found.values()):
            assert drained.startswith("n1|tailscope: "), drained  # drained with tailscope's own reason
        else:
            assert drained == "", drained  # none drained
    finally:
        subprocess.run([sys.executable, str(SCRIPT), "stop", str(root)], timeout=120, check=False, env=env)


def _wait_idle(env: dict[str, str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _run(["sinfo", "-h", "-o", "%t"], env).stdout.strip() == "idle":
            return
        time.sleep(0.3)
    raise AssertionError("the node did not come back idle after scontrol reconfigure")
