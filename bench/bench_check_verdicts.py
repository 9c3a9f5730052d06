#!/usr/bin/env python3
"""Issue 14's three live `check` cases on this node, each a real `tailscope check` with real co-runners.

    PYTHONPATH=src .venv/bin/python bench/bench_check_verdicts.py [--trials N] [--window 10:12] [--only CASE]

1. busy: `stress-ng --cpu NCPU` runs for the whole check. Expected: exit 3 (inconclusive), naming stress-ng.
2. window: `stress-ng --cpu NCPU` starts WINDOW_START s after the first trial and runs WINDOW_LEN s.
   Expected: exit 1 (degraded: cpu-contention), and the runs blamed on it are the ones that overlap the
   window (printed: trials blamed, trials that overlapped, and the overlap of the two sets).
3. quiet: nothing else started. Expected: exit 0 (healthy), or 3 with the node's own noise floor given as
   the reason where it is above the limits (this VM's memory bandwidth flips between levels: say which).
Each case prints the exit code, the node's verdict line and reasons from `analyze --json`, and the load
average before and after (a case run beside other work measures that work too: it says so).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TAILSCOPE = [sys.executable, "-m", "tailscope"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def check(campaign: Path, trials: int) -> subprocess.Popen[str]:
    argv = [*TAILSCOPE, "check", "--trials", str(trials), "--campaign", str(campaign), "--no-progress"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stress(ncpu: int, seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["stress-ng", "--cpu", str(ncpu), "--quiet", "--timeout", f"{max(1, round(seconds))}s"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def analysis(campaign: Path) -> dict[str, Any]:
    out = subprocess.run([*TAILSCOPE, "analyze", str(campaign), "--json"], capture_output=True, text=True)
    return json.loads(out.stdout)


def first_trial_started(campaign: Path, timeout: float = 120.0) -> float:
    """Wall-clock time when the check's first trial was committed (the campaign's commits/ appears)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        commits = campaign / "commits"
        if commits.is_dir() and any(commits.iterdir()):
            return time.time()
        time.sleep(0.1)
    raise SystemExit(f"{campaign}: no trial stored within {timeout:.0f} s")


def report(name: str, proc: subprocess.Popen[str], campaign: Path, before: str) -> dict[str, Any]:
    out, err = proc.communicate()
    a = analysis(campaign)
    print(f"\n== {name}: exit {proc.returncode}  (load before {before}, after {load()})")
    for n in a.get("nodes") or []:
        print(f"   node {n['node']}: {n['verdict']}")
        for reason in n.get("reasons") or []:
            print(f"     - {reason[:400]}")
    verdict_lines = [line for line in out.splitlines() if "verdict" in line.lower()][:3]
    for line in verdict_lines:
        print(f"   terminal: {line.strip()[:200]}")
    if proc.returncode not in (0, 1, 3):
        print(err[-2000:])
    return a


def blamed_trials(a: dict[str, Any], cause: str) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for r in a.get("runs") or []:
        causes = r.get("causes") or []
        if causes and causes[0]["cause"] == cause:
            out.setdefault(str(r["probe"]), set()).add(int(r["trial"]))
    return out


def overlapping(a: dict[str, Any], start: float, end: float) -> dict[str, set[int]]:
    import datetime as dt

    out: dict[str, set[int]] = {}
    for r in a.get("runs") or []:
        t0 = dt.datetime.fromisoformat(str(r["started_at"])).timestamp()
        if t0 < end and t0 + 0.0 >= start - 5.0:  # runs that started in the window (or just before it)
            out.setdefault(str(r["probe"]), set()).add(int(r["trial"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=12, help="trials of each probe (default 12)")
    ap.add_argument("--window", default="12:15", help="START:LEN seconds of the window case (12:15)")
    ap.add_argument("--only", choices=("busy", "window", "quiet"), action="append")
    args = ap.parse_args()
    if shutil.which("stress-ng") is None:
        print("stress-ng is not installed (Debian: stress-ng)", file=sys.stderr)
        return 2
    ncpu = len(os.sched_getaffinity(0))
    cases = args.only or ["busy", "window", "quiet"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-verdicts-"))
    print(f"# {ncpu} CPUs; campaigns under {tmp}; tailscope check --trials {args.trials}")
    if "busy" in cases:
        before = load()
        hog = stress(ncpu, 3600)
        time.sleep(1.0)
        try:
            a = report(
                f"busy (stress-ng --cpu {ncpu} all along)",
                check(tmp / "busy", args.trials),
                tmp / "busy",
                before,
            )
        finally:
            hog.terminate()
            hog.wait()
        named = any("stress-ng" in reason for n in a.get("nodes") or [] for reason in n.get("reasons") or [])
        print(f"   names stress-ng: {named}")
    if "window" in cases:
        start_s, len_s = (float(x) for x in args.window.split(":"))
        before = load()
        proc = check(tmp / "window", args.trials)
        t_first = first_trial_started(tmp / "window")
        time.sleep(start_s)
        w0 = time.time()
        hog = stress(ncpu, len_s)
        hog.wait()
        w1 = time.time()
        a = report(
            f"window (stress-ng --cpu {ncpu} for {len_s:g} s, {start_s:g} s in)", proc, tmp / "window", before
        )
        blamed = blamed_trials(a, "cpu-contention")
        inside = overlapping(a, w0, w1)
        for probe in sorted(set(blamed) | set(inside)):
            b, i = blamed.get(probe, set()), inside.get(probe, set())
            print(
                f"   {probe}: blamed on cpu-contention {sorted(b)}; started in the window {sorted(i)}; "
                f"blamed outside it {sorted(b - i)}"
            )
        print(f"   window {w0 - t_first:.1f}-{w1 - t_first:.1f} s after the first trial")
    if "quiet" in cases:
        before = load()
        report("quiet (nothing started)", check(tmp / "quiet", args.trials), tmp / "quiet", before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
