#!/usr/bin/env python3
"""The fixed cost of `check --between-jobs` (issue 33): what a check between jobs costs beyond its budget.

    PYTHONPATH=src .venv/bin/python bench/bench_between_jobs.py [--rounds 5] [--budget 2s]
        [--fleet NODES] [--days 365] [--compare OTHER/src] [--keep DIR]   (a later --keep DIR: its history)

A history of this node first: 8 trials of l2sum (`run l2sum --trials 8`), added as a healthy entry whatever
this machine's load made of it (tests/store_tools.add_as_healthy: only healthy entries are a baseline), so
l2sum has a level to claim. With --fleet N the history also holds a synthetic fleet of N nodes x --days
daily entries of 4 probes (tests/history/synthetic.py): a site's shared history, which the check reads for
its baseline and appends to.

Each round, interleaved, in fresh processes:
- peer `python -c pass`: the interpreter's start;
- peer `python -c "import numpy, pandas, pyarrow"`: the libraries any analysis in tailscope needs;
- the check: `tailscope check --between-jobs --budget B --json --history COPY` (a fresh copy of the history
  each round, so no round's entry is another's baseline): wall time from the command's start to its exit,
  its CPU time (user + system of it and its children: the probes' too), and `stopping.seconds` from its
  JSON, the time its trials took inside the budget. fixed = wall - trials: start-up, baseline read,
  analysis, history append.
--compare OTHER/src runs another tree's check in the same rounds (alternating which goes first): the fixed
cost before and after a change, on the same machine at the same time. Prints `uptime` before and after, each
round, the medians and fixed / the import peer's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "history"))

TAILSCOPE = [sys.executable, "-m", "tailscope"]
PEERS = {"python": "pass", "imports": "import numpy, pandas, pyarrow"}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall s, CPU s of the process and its children, the process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def make_history(work: Path, fleet: int, days: int, env: dict[str, str]) -> Path:
    from store_tools import add_as_healthy

    history = work / "history"
    if history.is_dir():  # --keep DIR of an earlier run: its history again (the same rounds, another tree)
        print(f"history: {history} (kept from an earlier run)")
        return history
    if fleet:
        from synthetic import day_rows, make_fleet

        from tailscope.history.directory import DirectoryHistory

        began = time.perf_counter()
        nodes, y, facts = make_fleet(fleet, days)
        entries, sets = [], []
        for day in range(days):
            e, f = day_rows(nodes, y, facts, day)
            entries += e
            sets += f
        DirectoryHistory(history).write(entries, sets)
        print(f"fleet history: {len(entries):,} entries of {fleet} nodes x {days} days, written in "
              f"{time.perf_counter() - began:.0f} s")  # fmt: skip
    base = work / "base"
    argv = [*TAILSCOPE, "run", "l2sum", "--trials", "8", "--no-progress", "--campaign", str(base)]
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    if run.returncode not in (0, 1):
        raise SystemExit(f"run l2sum failed: {run.stderr.strip()}")
    add_as_healthy(history, base)
    return history


def check_round(name: str, i: int, history: Path, work: Path, budget: str, env: dict[str, str]) -> Run | None:
    """One check on a fresh copy of the history; None (said) when it gave no JSON."""
    copy = work / f"history-{name}-{i}"
    shutil.copytree(history, copy)
    argv = [*TAILSCOPE, "check", "--between-jobs", "--budget", budget, "--json", "--history", str(copy),
            "--campaign", str(work / f"check-{name}-{i}")]  # fmt: skip
    load = os.getloadavg()[0]
    try:
        wall, cpu, proc = timed(argv, env)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        print(f"round {i} {name}: exit {proc.returncode} without JSON: {proc.stderr.strip()[-300:]}")
        return None
    run = Run(wall, cpu, float(out["stopping"]["seconds"]), out["trials"]["stored"], out["verdict"], load)
    print(f"round {i} {name:8s} exit {proc.returncode} {run.verdict:12s} {_times(wall, cpu)}  trials "
          f"{run.trials:4.2f} s ({run.stored})  fixed {run.fixed:5.2f} s  load {load:.1f}")  # fmt: skip
    return run


def _times(wall: float, cpu: float) -> str:
    return f"wall {wall:5.2f} s  CPU {cpu:5.2f} s"


@dataclass
class Run:
    wall: float
    cpu: float
    trials: float  # stopping.seconds: the trials' time inside the budget
    stored: int
    verdict: str
    load: float

    @property
    def fixed(self) -> float:
        return self.wall - self.trials


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", default="2s")
    parser.add_argument("--fleet", type=int, default=0, help="synthetic fleet nodes in the history (0: none)")
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument(
        "--compare", type=Path, metavar="SRC", help="another tree's src/: its check in the same rounds"
    )
    parser.add_argument("--keep", type=Path, help="work here and keep it; a later run reuses its history")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "TAILSCOPE_HISTORY"}
    checks = {"check": env}
    if args.compare:
        checks["compare"] = {**env, "PYTHONPATH": str(args.compare.resolve())}
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-between-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"start: {uptime()}")
    if args.compare:
        print(f"check: {env.get('PYTHONPATH', '(installed)')}; compare: {args.compare}")
    history = make_history(work, args.fleet, args.days, env)
    peers: dict[str, list[tuple[float, float]]] = {name: [] for name in PEERS}
    runs: dict[str, list[Run]] = {name: [] for name in checks}
    try:
        for i in range(args.rounds):
            for name, code in PEERS.items():
                wall, cpu, _ = timed([sys.executable, "-c", code], env)
                peers[name].append((wall, cpu))
            said = "  ".join(f"{name} {rows[-1][0]:.2f} s" for name, rows in peers.items())
            print(f"round {i} peers    {said}")
            for name, check_env in checks.items() if i % 2 == 0 else reversed(checks.items()):
                run = check_round(name, i, history, work, args.budget, check_env)
                if run is not None:
                    runs[name].append(run)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    if not all(runs.values()):
        return 1
    imports = statistics.median(w for w, _ in peers["imports"])
    print(f"medians of {args.rounds} rounds (budget {args.budget}, fleet {args.fleet} nodes):")
    for name, rows in peers.items():
        wall, cpu = statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows)
        print(f"  {name:8s} {_times(wall, cpu)}")
    fixed = {}
    for name, rows in runs.items():
        fixed[name] = statistics.median(r.fixed for r in rows)
        wall, cpu = statistics.median(r.wall for r in rows), statistics.median(r.cpu for r in rows)
        trials = statistics.median(r.trials for r in rows)
        print(f"  {name:8s} {_times(wall, cpu)}  trials {trials:4.2f} s  fixed {fixed[name]:5.2f} s = "
              f"{fixed[name] / imports:.1f} x the import peer")  # fmt: skip
    if args.compare:
        print(f"  fixed cost, check / compare: {fixed['check'] / fixed['compare']:.2f}")
    print(f"end: {uptime()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
