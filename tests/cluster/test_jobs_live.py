"""The site's own jobs as the ensemble, live: 3 slurmd nodes, 60 short jobs of 3 classes, one node made slow
from outside its jobs (slow_node.py: a CPU quota and weight on the processes its slurmd starts for jobs;
the jobs never read their node's name and are placed by Slurm), `tailscope jobs collect` from the real
sacct (slurmdbd over MariaDB), `tailscope jobs show` naming that node and no other, tailscope's epilog
record of every job on every node, and no node drained.

One class is timed by its figure of merit: its jobs run as the user nobody for a fixed wall time and print
the rate they reached (`#SBATCH --comment=tailscope:rate`, output `%x-%j.out`); the epilog reads the rate
from each job's output as nobody (--apps, jobs/output.py). On the slow node the rate drops while the
elapsed time does not: the figure names the node, the elapsed time alone does not. A few jobs with hostile
names and comments ('|', a line break followed by a forged record) are collected exactly as they were
given."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from cluster import slow_node
from cluster.conftest import NODES, SlurmCluster, drained
from installed import tailscope_env

pytestmark = [pytest.mark.root, pytest.mark.slow]

SLOW = "n2"
# class (job name) -> CPU seconds of work: a fixed amount of CPU time whatever the CPU's speed, so a job's
# elapsed time is its work over the CPU share it got (at least 1 s: sacct's resolution is a second)
CLASSES = {"cpu-a": 1.0, "cpu-b": 1.3}
RATE_CLASS = "rate"  # timed by its figure of merit: a fixed wall time, the work done in it printed
RATE_WALL_S = 3
PER_CLASS = 20
NOBODY = 65534
# the rate jobs run as nobody: a python3 nobody may run (not one under root's home, such as pyenv's shims)
SYSTEM_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
RATE_DEFINITION = 'name = "rate"\nmetrics = ["rate:it/s:higher=^rate: ([0-9.]+) it/s$"]\nsanity = "^done$"\n'
# (name, comment) of jobs whose text a user controls: a '|', a line break, and a line that reads as a record
FORGED = (
    "5|forged|root|root|debug|n3|1|1|1|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T00:00:01|COMPLETED"
)
HOSTILE = [("a|b", f"x|y\n{FORGED}"), ("line\nbreak", "tab\there"), (f"c\n{FORGED}", "")]


def _job_script(cpu_s: float) -> str:
    return f"python3 -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < {cpu_s}: pass'"


def _rate_script() -> str:
    """Runs until a whole second RATE_WALL_S after it started (the job's elapsed time is RATE_WALL_S on every
    node), counting loops; prints the rate."""
    loop = (
        "import sys, time\nend = int(sys.argv[1])\nt0 = time.time()\nn = 0\n"
        'while time.time() < end: n += 1\nprint(f"rate: {n / (time.time() - t0):.1f} it/s")\nprint("done")'
    )
    return f"end=$(( $(date +%s) + {RATE_WALL_S} )); {SYSTEM_PYTHON} -c '{loop}' $end"


def _tailscope(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    full = tailscope_env(env)
    return subprocess.run(
        [sys.executable, "-m", "tailscope", *args], env=full, capture_output=True, text=True, timeout=600
    )


def _sacct(env: dict[str, str], since: str) -> list[dict[str, str]]:
    """The jobs' fixed fields as sacct gives them (no user text: a job name may hold '|' or a line break)."""
    fields = ["JobID", "NodeList", "ElapsedRaw", "State"]
    out = subprocess.run(
        ["sacct", "-P", "-X", "-n", "-S", since, "-o", ",".join(fields)],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    return [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines()]


def _sbatch(env: dict[str, str], *args: str) -> str:
    argv = ["sbatch", "--parsable", "--exclusive", *args]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    return out.strip().split(";")[0]


def test_jobs_show_names_the_node_slowed_from_outside(
    slurm_accounting: SlurmCluster, tmp_path: Path, nobody_dir: Path
) -> None:
    reason = slow_node.available() or (None if SYSTEM_PYTHON else "no python3 in /usr/bin, /bin")
    if reason:
        pytest.skip(f"cannot slow a node here: {reason}")
    env = slurm_accounting
    assert drained(env) == {}, "a node was already drained before this test"
    history = tmp_path / "history"
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / f"{RATE_CLASS}.toml").write_text(RATE_DEFINITION)
    conf = slurm_accounting.default_jobs_conf().replace(
        f"HISTORY={slurm_accounting.history}", f"HISTORY={history}"
    )
    # a loaded machine may take more than the default 1.8 s; PrologEpilogTimeout (6 s) still bounds it
    conf = conf.replace("ARGS=", f"ARGS=--timeout 4 --apps {apps} ")
    since = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(seconds=1)
    began = time.monotonic()
    slurmd = int((slurm_accounting.root / "run" / f"slurmd-{SLOW}.pid").read_text())
    names: dict[str, str] = {}  # job id -> class
    with (
        slurm_accounting.jobs_conf(conf),
        slow_node.SlowJobs(slurmd, cpu_share=0.4, weight_share=0.4) as slow,
    ):
        for i in range(PER_CLASS):
            for name, cpu_s in CLASSES.items():
                names[_sbatch(env, "-J", name, "-o", "/dev/null", "--wrap", _job_script(cpu_s))] = name
            rate = [
                "-J",
                RATE_CLASS,
                f"--comment=tailscope:{RATE_CLASS}",
                f"--uid={NOBODY}",
                f"--gid={NOBODY}",
                # round the nodes, so each has its share of the figure's jobs: left to the scheduler, a busy
                # machine once put 2 of 20 on the slow node, too few to name it by its figure
                f"--nodelist={NODES[i % len(NODES)]}",
            ]
            rate += ["-D", str(nobody_dir), "-o", f"{nobody_dir}/%x-%j.out", "--wrap", _rate_script()]
            names[_sbatch(env, *rate)] = RATE_CLASS
        hostile = [_sbatch(env, "-J", name, f"--comment={comment}", "-o", "/dev/null", "--wrap", "true")
                   for name, comment in HOSTILE]  # fmt: skip
        deadline = time.monotonic() + 900
        while subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True).stdout.strip():
            assert time.monotonic() < deadline, "the jobs did not finish in 15 minutes"
            time.sleep(0.5)
        moved = len(slow.moved)
    took = time.monotonic() - began

    local_since = since.astimezone().replace(tzinfo=None).isoformat()  # sacct -S: local time
    rows = [r for r in _sacct(env, local_since) if r["JobID"] in names]
    assert sorted(r["JobID"] for r in rows) == sorted(names)
    failed = [(names[r["JobID"]], r) for r in rows if r["State"] != "COMPLETED"]
    assert not failed, (failed, {p.name: p.read_text()[-300:] for p in nobody_dir.iterdir()})
    elapsed: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in rows:
        elapsed[(names[r["JobID"]], r["NodeList"])].append(int(r["ElapsedRaw"]))
    print(f"\n{len(rows)} jobs in {took:.0f} s; {moved} job processes slowed on {SLOW}; elapsed s by class:")
    for (name, node), values in sorted(elapsed.items()):
        print(f"  {name} {node}: n={len(values)} median {statistics.median(values)} {sorted(values)}")
    assert drained(env) == {}
    rate_elapsed = {node: statistics.median(v) for (name, node), v in elapsed.items() if name == RATE_CLASS}
    # the rate class's elapsed time: the same on every node, to sacct's second (its prolog's time included)
    assert max(rate_elapsed.values()) - min(rate_elapsed.values()) <= 1, rate_elapsed

    # tailscope's epilog recorded every job on every node it ran on, and the rate jobs' figures
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
    rates: dict[str, list[float]] = defaultdict(list)
    with_figures = [r for r in records if names.get(r["job_id"]) == RATE_CLASS]
    for r in with_figures:
        assert set(r.get("figures", {})) == {"rate"}, r["errors"]
        rates[r["node"]].append(r["figures"]["rate"]["value"])
    cpu = sorted(r["epilog_cpu_s"] for r in with_figures)
    wall = sorted(r["epilog_wall_s"] for r in with_figures)
    medians = {n: round(statistics.median(v)) for n, v in sorted(rates.items())}
    print(f"rate by node: {medians}; epilogs that read it: CPU median {statistics.median(cpu):.2f} max "
          f"{cpu[-1]:.2f} s, wall median {statistics.median(wall):.2f} max {wall[-1]:.2f} s")  # fmt: skip

    # jobs collect from the real sacct, then show: the slow node and no other
    collected = _tailscope(env, "jobs", "collect", str(history), "--since", since.isoformat())
    assert collected.returncode == 0, collected.stderr
    print(collected.stdout.strip())
    from tailscope.jobs.store import open_jobs

    stored, _ = open_jobs(str(history)).read_jobs()
    stored = stored.set_index("job_id")
    kept = [(stored.loc[j, "name"], stored.loc[j, "comment"]) for j in hostile]
    assert [(name, comment if isinstance(comment, str) else "") for name, comment in kept] == HOSTILE
    # no forged record: each of ours under its own name, and no other but a job an earlier test ended in the
    # second before `since` (sacct -S counts a job that ended after it)
    assert {j: stored.loc[j, "name"] for j in names} == names
    others = set(stored.index) - set(names) - set(hostile)
    assert all(int(j) < min(map(int, names)) for j in others), sorted(others)
    shown = _tailscope(env, "jobs", "show", str(history), "--json")
    assert shown.returncode in (0, 1, 3), shown.stderr
    answer = json.loads(shown.stdout)
    for n in answer["nodes"]:
        print(f"  {n['node']}: effect {n['effect']:+.3f} {n['effect_ci']} q {n['q']:.3g} jobs {n['jobs']}")
    assert {c["jobs"] for c in answer["classes"]} == {PER_CLASS} and len(answer["classes"]) == len(
        CLASSES
    ) + 1
    assert {c["basis"] for c in answer["classes"]} == {"elapsed", f"figure:{RATE_CLASS}"}
    slow_nodes = {n["node"] for n in answer["nodes"] if n["q"] < 0.05 and n["effect"] > 0}
    assert slow_nodes == {SLOW}, answer["nodes"]
    assert answer["verdict"] == "degraded" and shown.returncode == 1
    terminal = _tailscope(env, "jobs", "show", str(history)).stdout
    print(terminal)
    lines = []
    for line in terminal.splitlines():  # the answer is wrapped: a continuation line is indented by 4 or more
        if lines and line.startswith("    "):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line.strip())
    assert lines[0] == f"verdict: DEGRADED (1 node makes its jobs more than 5% slower: {SLOW})"
    assert "nodes that make jobs slow (1), the largest effect first:" in lines
    (sentence,) = [line for line in lines if line.startswith(f"{SLOW}: jobs that ran on it were ")]
    assert " slower " in sentence and "; epilog: " in sentence and " since " in sentence

    # the rate class alone: its figure names the slow node, its elapsed time does not
    from tailscope.jobs.show import answer as jobs_answer
    from tailscope.verbs.settings import judging_settings

    rate_jobs = stored.reset_index()
    rate_jobs = rate_jobs[rate_jobs["job_id"].map(names.get) == RATE_CLASS]
    by_figure = jobs_answer(rate_jobs, records, judging_settings(None, {}))
    by_elapsed = jobs_answer(rate_jobs, [{**r, "figures": {}} for r in records], judging_settings(None, {}))
    assert [c.basis for c in by_figure.classes] == [f"figure:{RATE_CLASS}"]
    assert [c.basis for c in by_elapsed.classes] == ["elapsed"]
    assert {n.node for n in by_figure.nodes if n.result.slow} == {SLOW}
    assert {n.node for n in by_elapsed.nodes if n.result.slow} == set()
