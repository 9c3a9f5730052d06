#!/usr/bin/env python3
"""Each probe's noise floor on this node: the smallest slowdown tailscope can tell from run-to-run noise.

    PYTHONPATH=src .venv/bin/python bench/bench_noise_floor.py [--trials 30] [--probes l2sum,stream,dgemm,fwq]

Run it on a quiet node (nothing else running). For each probe it runs `tailscope run PROBE --trials N` (each
trial a fresh process, exactly as a campaign does), analyses the campaign with `tailscope analyze --json` and
prints, from the node's own summary:
  - CV (sd / mean) and the robust CV (1.4826 * MAD / median: what a few outliers do not inflate);
  - the 1% quantile's drop below the median (the SJTU rule's number);
  - the smallest visible slowdown: 3 robust CVs. A run slower than that sits > 3 robust standard deviations
    below the median (a robust z beyond -3), so a systematic slowdown of that size is told from noise in a
    single run; smaller ones need many runs (the tail-count test) to be seen;
  - whether the default slow threshold (5% below the node median) is above that floor: if not, the node's
    noise alone produces "slow" runs at the default threshold, and --threshold should be raised for it.
The ratios are measured against the probe's own median in the same run. Minutes (l2sum and fwq are short,
stream and dgemm about a second a trial).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tailscope.analysis.robust import noise_floor, robust_cv

DEFAULT_THRESHOLD = 0.05


def tailscope(*argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tailscope", *argv]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30, help="quiet trials per probe (at least 30)")
    parser.add_argument("--probes", default="l2sum,stream,dgemm,fwq")
    parser.add_argument("--keep", type=Path, help="keep the campaign in this directory")
    args = parser.parse_args()
    if args.trials < 30:
        parser.error("--trials: a noise floor needs at least 30 trials")
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="tailscope-noise-"))
    print(
        f"{'probe':7s} {'n':>4s} {'median':>12s} {'CV':>7s} {'robust CV':>9s} {'q01 drop':>8s} "
        f"{'visible':>8s}  default 5% threshold"
    )
    for probe in args.probes.split(","):
        campaign = workdir / probe
        started = time.monotonic()
        tailscope("run", probe, "--trials", str(args.trials), "--campaign", str(campaign), "--no-progress")
        elapsed = time.monotonic() - started
        analysis = json.loads(tailscope("analyze", str(campaign), "--json").stdout)
        for group in analysis["groups"]:
            cv = robust_cv(group["mad"], group["median"])
            visible = noise_floor(group["mad"], group["median"])
            drop = group["quantile_rule"]["drop"]
            ok = "above the floor" if visible < DEFAULT_THRESHOLD else "BELOW the floor: raise --threshold"
            median = f"{group['median']:.4g} {group['unit']}"
            print(
                f"{probe:7s} {group['n']:4d} {median:>12s} {group['cv']:7.2%} {cv:9.2%} "
                f"{drop:8.2%} {visible:8.2%}  {ok}  ({elapsed:.0f} s)"
            )
    print(
        f"campaigns in {workdir}; commands: tailscope run PROBE --trials {args.trials}; "
        "tailscope analyze DIR --json"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
