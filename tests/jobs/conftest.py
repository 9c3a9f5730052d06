"""The jobs tests' shared history: a synthetic fleet with one slow node collected through the command line,
with epilog records of the slow node's jobs (thermal throttling in two of three) and one class whose user and
job name hold terminal escapes. Session-scoped: show, report and verdict read the same one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tailscope.cli import main
from tailscope.hostlist import expand
from tailscope.jobs.store import append_epilog

sys.path.insert(0, str(Path(__file__).parent))
from fleet import make_fleet, write_sacct


@pytest.fixture(scope="session")
def history(tmp_path_factory):
    fleet = make_fleet(nodes=48, jobs=900, days=21, classes=6, slow={10: 0.12}, max_size=4, seed=4)
    rows = [dict(r) for r in fleet.rows]
    for r in rows[:40]:  # one class with a user and a job name holding terminal escapes
        r.update(name="evil\x1b[2Jname", user_name="mallory\x07")
    root = tmp_path_factory.mktemp("show")
    dump = write_sacct(rows, root / "sacct.txt")
    history = root / "H"
    assert main(["jobs", "collect", str(history), "--sacct-file", str(dump)]) == 0
    slow = fleet.nodes[10]
    hot = 0
    for i, r in enumerate(r for r in rows if slow in expand(r["nodelist"])):
        evidence = {"thermal.package_throttle_count": 4 if i % 3 else 0, "cpufreq.min_khz": 1_200_000,
                    "mce.count.total": 7}  # fmt: skip
        hot += bool(i % 3)
        append_epilog(str(history), {
            "version": 1, "cluster": "synth", "job_id": r["job_id"], "node": slow,
            "at": r["end_at"].isoformat(), "job_start": r["start_at"].isoformat(), "span_s": r["elapsed_s"],
            "evidence": evidence, "facts_digest": "d", "epilog_cpu_s": 0.1, "epilog_wall_s": 0.2,
            "errors": [],
        })  # fmt: skip
    return history, slow, hot, expand(rows[0]["nodelist"])[0]  # the last: ran a job of the evil class
