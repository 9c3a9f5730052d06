#!/usr/bin/env python3
"""What `tailscope run -- CMD` adds to an application's wall time, against the same command run bare by
hyperfine; evidence on (the default), alternated in rounds.

    TAILSCOPE_NATIVE_DIR=.venv/lib/python3.11/site-packages/tailscope/_native/bin \
        PYTHONPATH=src .venv/bin/python bench/bench_app_overhead.py [--rounds 5] [--runs 3] [--steps 700]

The application is Debian's LAMMPS running its LJ melt example (lammps-examples) with `--steps` steps (700:
about 2 s here), pinned to one CPU with taskset; without LAMMPS, a 2 s CPU loop in Python. Each round runs
hyperfine (`--runs N`, one warm-up, no shell) and then `tailscope run --trials N` into one campaign (the same
command, per-trial evidence on; `--no-evidence` to compare without), in alternating order, so a shared
machine's drift hits both alike. Two figures, both against hyperfine's per-run times (medians per round):

- wall: the trials' stored wall_s (the tree's start to its first process's exit, as hyperfine measures): what
  tailscope adds to the application's own time; the target (<= 1.01) is about this one.
- cycle: tailscope's whole cost per trial, what a user waits for: wall_s plus the gap from one trial's end to
  the next one's start (reap, evidence, rows, working directory: all outside wall_s); and the whole `tailscope
  run` command (Python start-up, node facts, store commit) divided by its trials + warm-up.

Printed: per-round figures and ratios, the medians of the per-round ratios, the load average around (the
machine is shared: read the per-round ratios, not one number).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MELT = Path("/usr/share/lammps/examples/melt/in.melt")
LOOP = "import time\nt = time.process_time()\nwhile time.process_time() - t < 2.0: pass\n"


def command(work: Path, steps: int) -> list[str]:
    cpu = str(max(os.sched_getaffinity(0)))
    if shutil.which("lmp") and MELT.exists():
        deck = work / "in.melt"
        deck.write_text(re.sub(r"^run\s+\d+", f"run\t\t{steps}", MELT.read_text(), flags=re.M))
        return ["taskset", "-c", cpu, shutil.which("lmp") or "lmp", "-in", str(deck), "-log", "none"]
    loop = work / "loop.py"
    loop.write_text(LOOP)
    return ["taskset", "-c", cpu, sys.executable, str(loop)]


def hyperfine(argv: list[str], runs: int, work: Path) -> list[float]:
    out = work / "hyperfine.json"
    subprocess.run(
        [
            "hyperfine",
            "--style",
            "none",
            "--shell=none",
            "--warmup",
            "1",
            "--runs",
            str(runs),
            "--export-json",
            str(out),
            " ".join(argv),
        ],
        check=True,
        cwd=work,
        stdout=subprocess.DEVNULL,
    )
    return [float(t) for t in json.loads(out.read_text())["results"][0]["times"]]


def tailscope(argv: list[str], runs: int, campaign: Path, evidence: bool) -> tuple[list[float], float, float]:
    """This round's stored wall_s of each trial, the median gap from one trial's end to the next one's start,
    and the whole command's time per trial (trials + the warm-up)."""
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect

    before = set()
    if campaign.exists():
        con = connect(Campaign.open(campaign))
        before = {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
        con.close()
    t0 = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tailscope",
            "run",
            "--no-progress",
            *([] if evidence else ["--no-evidence"]),
            "--trials",
            str(runs),
            "--warmup",
            "1",
            "--campaign",
            str(campaign),
            "--",
            *argv,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    whole = (time.monotonic() - t0) / (runs + 1)
    con = connect(Campaign.open(campaign))
    try:
        rows = con.execute(
            "SELECT run_id, wall_s, mono_start_ns, mono_end_ns FROM runs WHERE status = 'ok' "
            "ORDER BY mono_start_ns"
        ).fetchall()
    finally:
        con.close()
    new = [(w, m0, m1) for r, w, m0, m1 in rows if r not in before]
    gaps = [(b[1] - a[2]) / 1e9 for a, b in itertools.pairwise(new)]
    return [w for w, _, _ in new], statistics.median(gaps) if gaps else float("nan"), whole


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--no-evidence", action="store_true", help="tailscope run --no-evidence")
    args = ap.parse_args()
    if shutil.which("hyperfine") is None:
        print("hyperfine not installed (Debian: apt-get install hyperfine)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-app-") as tmp:
        work = Path(tmp)
        argv = command(work, args.steps)
        print(f"command: {' '.join(argv)}")
        print(f"evidence: {'off' if args.no_evidence else 'on'}")
        print(f"load average before: {os.getloadavg()}")
        walls, cycles, wholes = [], [], []
        for k in range(args.rounds):
            order = ("hyperfine", "tailscope") if k % 2 == 0 else ("tailscope", "hyperfine")
            for side in order:
                if side == "hyperfine":
                    bare = statistics.median(hyperfine(argv, args.runs, work))
                else:
                    trials, gap, whole = tailscope(argv, args.runs, work / "campaign", not args.no_evidence)
            ours = statistics.median(trials)
            cycle = ours + gap
            walls.append(ours / bare)
            cycles.append(cycle / bare)
            wholes.append(whole / bare)
            print(
                f"round {k + 1}: hyperfine {bare:.4f} s | wall_s {ours:.4f} s (ratio {ours / bare:.4f})"
                f" | gap {gap * 1e3:.1f} ms, cycle {cycle:.4f} s ({cycle / bare:.4f})"
                f" | whole command per trial {whole:.4f} s ({whole / bare:.4f})"
            )
        print(f"load average after: {os.getloadavg()}")
        print(f"median ratio wall_s / hyperfine: {statistics.median(walls):.4f} (target <= 1.01)")
        print(f"median ratio trial cycle / hyperfine: {statistics.median(cycles):.4f}")
        print(f"median ratio whole command per trial / hyperfine: {statistics.median(wholes):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
