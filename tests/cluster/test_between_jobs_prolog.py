"""`check --between-jobs` as slurmd's real Prolog (issue 33): scripts/slurm/tailscope-between-jobs before each
of 10 jobs on the test session's cluster (conftest.py), beside tailscope-jobs in its Prolog glob, as a site
runs both; the check ran before every job, each one's cost is its log line's seconds, and no node was drained
unless the check said degraded (then with tailscope's reason).

The wrapper is linked into the cluster's prolog.d/ for the length of the test, its .conf and the shared
tailscope-slurm.sh beside the copy it points to; PrologEpilogTimeout is raised above the check's bound for
that time (`slurm_conf`: the session's 6 s is sized for tailscope-jobs' 1.8 s). The history gives l2sum this
node's baseline (8 trials of `run l2sum --node n1`, added as a healthy entry: only healthy entries are a
baseline, and this shared machine is rarely quiet); the other probes have none, so a 2 s budget can claim
l2sum's level at most: healthy, or inconclusive where this machine is busy (which never fails the node).
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.conftest import ROOT, SlurmCluster, drained
from installed import PACKAGE_ROOT, tailscope_env
from store_tools import add_as_healthy

pytestmark = [pytest.mark.root, pytest.mark.slow]

SLURM = ROOT / "scripts" / "slurm"
JOBS = 10
TIMEOUT_S = 60  # the wrapper's TIMEOUT: the check's own bound, start-up and history append included
# the wrapper's worst case (TIMEOUT, SIGKILL's 5 s grace, 10 s to drain) with room: it never reaches slurmd's
PROLOG_TIMEOUT_S = TIMEOUT_S + 5 + 10 + 5
LINE = re.compile(
    r"^(\S+) tailscope-between-jobs: n1: (\w+) \(prolog_slurmd of job (\d+), ([\d.]+) s\)(.*)$"
)


def _run(env: dict[str, str], *argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_check_runs_before_each_of_ten_jobs_and_drains_nothing(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    env = slurm_cluster
    assert drained(env) == {}, "a node was already drained before this test"
    history, base = tmp_path / "history", tmp_path / "base"
    made = _run(tailscope_env(env), sys.executable, "-m", "tailscope", "run", "l2sum",
                "--trials", "8", "--node", "n1", "--no-progress", "--campaign", str(base))  # fmt: skip
    assert made.returncode in (0, 1), made.stderr
    add_as_healthy(history, base)

    etc = tmp_path / "etc"  # the script, its .conf and the shared part, as /etc/slurm would hold them
    etc.mkdir()
    for name in ("tailscope-between-jobs", "tailscope-slurm.sh"):
        shutil.copy(SLURM / name, etc / name)
    log = tmp_path / "between-jobs.log"
    (etc / "tailscope-between-jobs.conf").write_text(
        f"HISTORY={history}\nBUDGET=2s\nTIMEOUT={TIMEOUT_S}\nPYTHON={sys.executable}\n"
        f"PYTHONPATH={PACKAGE_ROOT}\nCAMPAIGNS={tmp_path / 'campaigns'}\nLOG={log}\n"
    )
    link = slurm_cluster.prolog_dir / "tailscope-between-jobs"
    ids: list[str] = []
    began = time.monotonic()
    with slurm_cluster.slurm_conf(PrologEpilogTimeout=str(PROLOG_TIMEOUT_S)):
        link.symlink_to(etc / "tailscope-between-jobs")
        try:
            for i in range(JOBS):  # on n1, one at a time (--exclusive), each with its own prolog
                out = _run(env, "sbatch", "--parsable", "--exclusive", "-w", "n1", "-J", "between",
                           "-o", str(tmp_path / f"job{i}.out"), "--wrap", "date +%s.%N")  # fmt: skip
                assert out.returncode == 0, out.stderr
                ids.append(out.stdout.strip().split(";")[0])
            deadline = time.monotonic() + JOBS * (PROLOG_TIMEOUT_S + 30)
            while _run(env, "squeue", "-h", "-j", ",".join(ids)).stdout.strip():
                assert time.monotonic() < deadline, "the jobs did not finish"
                time.sleep(1)
        finally:
            link.unlink()
    took = time.monotonic() - began

    lines = log.read_text().splitlines() if log.exists() else []
    print(f"\n{JOBS} jobs in {took:.0f} s; each prolog's check, verdict and cost:")
    print("\n".join(lines))
    found = {m.group(3): m for m in map(LINE.match, lines) if m}
    assert sorted(found) == sorted(ids), lines  # one check for each job: none skipped, none twice
    outcomes = {m.group(2) for m in found.values()}
    assert outcomes <= {"healthy", "inconclusive", "degraded", "stopped"}, lines  # never without a verdict
    for i, job in enumerate(ids):  # the check ended before its job began (the log's time is truncated)
        logged = dt.datetime.fromisoformat(found[job].group(1)).timestamp()
        started = float((tmp_path / f"job{i}.out").read_text().strip())
        assert logged <= started, (job, found[job].group(0), started)
        assert float(found[job].group(4)) < TIMEOUT_S + 5 + 1  # the cost printed, within the wrapper's bound
    reasons = drained(env)
    if "degraded" in outcomes:  # drained with tailscope's own reason, then given back for the next tests
        assert set(reasons) == {"n1"} and "tailscope: " in reasons["n1"], reasons
        _run(env, "scontrol", "update", "nodename=n1", "state=resume")
    else:
        assert reasons == {}, reasons  # none drained
