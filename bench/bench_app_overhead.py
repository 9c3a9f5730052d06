#!/usr/bin/env python3
"""What `tailscope run -- CMD` adds to an application's wall time, against the same command run bare by
hyperfine; evidence on (the default), alternated in rounds.

    TAILSCOPE_NATIVE_DIR=.venv/lib/python3.11/site-packages/tailscope/_native/bin \
        PYTHONPATH=src .venv/bin/python bench/bench_app_overhead.py [--rounds 5] [--runs 3] [--steps 700]

The application is Debian's LAMMPS running its LJ melt example (lammps-examples) with `--steps` steps (700:
about 2 s here), pinned to one CPU with taskset; without LAMMPS, a 2 s CPU loop in Python. Each round runs
hyperfine (`--runs N`, one warm-up, no shell) and then `tailscope run --trials N` into one campaign (the same
command, per-trial evidence on), in alternating order, so a shared machine's drift hits both alike. The figure
compared is the program's own wall time: hyperfine's per-run times against the trials' stored wall_s (the
tree's start to its first process's exit, as hyperfine measures). Printed: per-round medians, their ratio
tailscope / hyperfine, the median of the per-round ratios (target: <= 1.01), the load average around.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
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


def tailscope(argv: list[str], runs: int, campaign: Path) -> list[float]:
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect

    before = set()
    if campaign.exists():
        con = connect(Campaign.open(campaign))
        before = {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
        con.close()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tailscope",
            "run",
            "--no-progress",
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
    con = connect(Campaign.open(campaign))
    try:
        rows = con.execute("SELECT run_id, wall_s FROM runs WHERE status = 'ok'").fetchall()
    finally:
        con.close()
    return [w for r, w in rows if r not in before]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=700)
    args = ap.parse_args()
    if shutil.which("hyperfine") is None:
        print("hyperfine not installed (Debian: apt-get install hyperfine)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-app-") as tmp:
        work = Path(tmp)
        argv = command(work, args.steps)
        print(f"command: {' '.join(argv)}")
        print(f"load average before: {os.getloadavg()}")
        ratios = []
        for k in range(args.rounds):
            order = ("hyperfine", "tailscope") if k % 2 == 0 else ("tailscope", "hyperfine")
            times: dict[str, list[float]] = {}
            for side in order:
                if side == "hyperfine":
                    times[side] = hyperfine(argv, args.runs, work)
                else:
                    times[side] = tailscope(argv, args.runs, work / "campaign")
            bare, ours = statistics.median(times["hyperfine"]), statistics.median(times["tailscope"])
            ratios.append(ours / bare)
            print(
                f"round {k + 1}: hyperfine {bare:.4f} s, tailscope run {ours:.4f} s, ratio {ours / bare:.4f}"
            )
        print(f"load average after: {os.getloadavg()}")
        print(f"median ratio tailscope run / hyperfine: {statistics.median(ratios):.4f} (target <= 1.01)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
