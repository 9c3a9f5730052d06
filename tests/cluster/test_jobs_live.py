"""The site's own jobs as the ensemble, live: 3 slurmd nodes, 60 short jobs of 3 classes, one node made slow
from outside its jobs (slow_node.py: a CPU quota and weight on the processes its slurmd starts for jobs;
the jobs never read their node's name and are placed by Slurm), `tailscope jobs collect` from the real
sacct (slurmdbd over MariaDB), `tailscope jobs show` naming that node and no other, tailscope's epilog
record of every job on every node, and no node drained."""

from __future__ import annotations

import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from cluster import slow_node
from cluster.conftest import ROOT, SlurmCluster, drained

pytestmark = [pytest.mark.root, pytest.mark.slow]

SLOW = "n2"
# class (job name) -> CPU seconds of work: a fixed amount of CPU time whatever the CPU's speed, so a job's
# elapsed time is its work over the CPU share it got (at least 1 s: sacct's resolution is a second)
CLASSES = {"cpu-a": 1.0, "cpu-b": 1.3, "cpu-c": 1.6}
PER_CLASS = 20


def _job_script(cpu_s: float) -> str:
    return f"python3 -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < {cpu_s}: pass'"


def _tailscope(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    full = dict(env, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [sys.executable, "-m", "tailscope", *args], env=full, capture_output=True, text=True, timeout=600
    )


def _sacct(env: dict[str, str], since: str) -> list[dict[str, str]]:
    fields = ["JobID", "JobName", "NodeList", "ElapsedRaw", "State"]
    out = subprocess.run(
        ["sacct", "-P", "-X", "-n", "-S", since, "-o", ",".join(fields)],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    return [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines()]


def test_jobs_show_names_the_node_slowed_from_outside(slurm_accounting: SlurmCluster, tmp_path: Path) -> None:
    reason = slow_node.available()
    if reason:
        pytest.skip(f"cannot slow a node here: {reason}")
    env = slurm_accounting
    assert drained(env) == {}, "a node was already drained before this test"
    history = tmp_path / "history"
    conf = slurm_accounting.default_jobs_conf().replace(
        f"HISTORY={slurm_accounting.history}", f"HISTORY={history}"
    )
    # a loaded machine may take more than the default 1.8 s; PrologEpilogTimeout (6 s) still bounds it
    conf = conf.replace("ARGS=", "ARGS=--timeout 4 ")
    since = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(seconds=1)
    began = time.monotonic()
    slurmd = int((slurm_accounting.root / "run" / f"slurmd-{SLOW}.pid").read_text())
    submitted = []
    with (
        slurm_accounting.jobs_conf(conf),
        slow_node.SlowJobs(slurmd, cpu_share=0.4, weight_share=0.4) as slow,
    ):
        for _ in range(PER_CLASS):
            for name, cpu_s in CLASSES.items():
                argv = ["sbatch", "--parsable", "--exclusive", "-J", name, "-o", "/dev/null"]
                argv += ["--wrap", _job_script(cpu_s)]
                out = subprocess.run(
                    argv, env=env, capture_output=True, text=True, timeout=60, check=True
                ).stdout
                submitted.append(out.strip().split(";")[0])
        deadline = time.monotonic() + 900
        while subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True).stdout.strip():
            assert time.monotonic() < deadline, "the jobs did not finish in 15 minutes"
            time.sleep(0.5)
        moved = len(slow.moved)
    took = time.monotonic() - began

    local_since = since.astimezone().replace(tzinfo=None).isoformat()  # sacct -S: local time
    rows = [r for r in _sacct(env, local_since) if r["JobID"] in submitted]
    assert sorted(r["JobID"] for r in rows) == sorted(submitted)
    assert {r["State"] for r in rows} == {"COMPLETED"}
    elapsed: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in rows:
        elapsed[(r["JobName"], r["NodeList"])].append(int(r["ElapsedRaw"]))
    print(f"\n{len(rows)} jobs in {took:.0f} s; {moved} job processes slowed on {SLOW}; elapsed s by class:")
    for (name, node), values in sorted(elapsed.items()):
        print(f"  {name} {node}: n={len(values)} median {statistics.median(values)} {sorted(values)}")
    assert drained(env) == {}

    # tailscope's epilog recorded every job on every node it ran on
    from tailscope.jobs.store import read_epilog

    records, damaged = read_epilog(str(history))
    assert damaged == []
    got = {(r["job_id"], r["node"]) for r in records}
    assert got >= {(r["JobID"], r["NodeList"]) for r in rows}, sorted(
        {(r["JobID"], r["NodeList"]) for r in rows} - got
    )
    cut = [r for r in records if r["errors"]]
    print(f"{len(records)} epilog records, {len(cut)} with errors: {[r['errors'] for r in cut][:3]}")
    assert all(r["facts_digest"] for r in records if not r["errors"])

    # jobs collect from the real sacct, then show: the slow node and no other
    collected = _tailscope(env, "jobs", "collect", str(history), "--since", since.isoformat())
    assert collected.returncode == 0, collected.stderr
    print(collected.stdout.strip())
    shown = _tailscope(env, "jobs", "show", str(history), "--json")
    assert shown.returncode in (0, 1, 3), shown.stderr
    answer = json.loads(shown.stdout)
    for n in answer["nodes"]:
        print(f"  {n['node']}: effect {n['effect']:+.3f} {n['effect_ci']} q {n['q']:.3g} jobs {n['jobs']}")
    assert {c["jobs"] for c in answer["classes"]} == {PER_CLASS} and len(answer["classes"]) == len(CLASSES)
    slow_nodes = {n["node"] for n in answer["nodes"] if n["q"] < 0.05 and n["effect"] > 0}
    assert slow_nodes == {SLOW}, answer["nodes"]
    assert answer["verdict"] == "degraded" and shown.returncode == 1
    terminal = _tailscope(env, "jobs", "show", str(history)).stdout
    print(terminal)
    lines = [line.strip() for line in terminal.splitlines()]
    assert "nodes that make jobs slow (1; q < 0.05):" in lines
    (sentence,) = [line for line in lines if line.startswith(f"{SLOW}: jobs that ran on it were ")]
    assert " slower " in sentence and "; epilog: " in sentence
    assert lines[-1].startswith("verdict: degraded (1 node(s) beyond") and lines[-1].endswith(f": {SLOW})")
