#!/usr/bin/env python3
"""fwq's measurement overhead relative to its quantum: the timer read, and the gap between samples.

    PYTHONPATH=src .venv/bin/python bench/bench_fwq_overhead.py [--quanta 10,100,1000]

For each target quantum it runs the fwq probe once and reports, from its own records:
  - the timer overhead (config timer_overhead_ns: the minimum of 10 back-to-back TSC reads, rdtscp+lfence)
    relative to the median quantum: the error one timestamp pair adds to a sample (target < 1%);
  - the median gap between one sample's end and the next one's start (storing the sample, sched_getcpu,
    the next TSC read): time the thread spends not working, relative to the quantum.
The peer is the probe's own quantum measured in the same run. A few seconds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys

from tailscope.native import native_path


def run(quantum_us: float, samples: int) -> tuple[dict, list[dict]]:
    argv = [str(native_path("fwq")), "--quantum-us", str(quantum_us), "--samples", str(samples), "--no-pages"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=True)
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    return records[0], [r for r in records if r["record"] == "iteration"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quanta", default="10,100,1000", help="target quanta in microseconds (10,100,1000)")
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    print(f"{'quantum us':>10} {'median us':>10} {'timer ns':>9} {'timer/q':>9} {'gap ns':>8} {'gap/q':>9}")
    verdict = None
    for q in (float(x) for x in args.quanta.split(",")):
        config, its = run(q, args.samples)
        hz = config["tsc_hz"]
        median_us = statistics.median(r["value"] for r in its)
        gaps = []
        for thread in {r["thread"] for r in its}:
            mine = [r for r in its if r["thread"] == thread]
            gaps += [(b["tsc_start"] - a["tsc_end"]) / hz * 1e9 for a, b in itertools.pairwise(mine)]
        gap = statistics.median(gaps)
        timer_ns = config["timer_overhead_ns"]
        rel_timer, rel_gap = timer_ns / (median_us * 1e3), gap / (median_us * 1e3)
        print(f"{q:10g} {median_us:10.2f} {timer_ns:9.1f} {rel_timer:9.3%} {gap:8.1f} {rel_gap:9.3%}")
        if q == 100.0:
            verdict = rel_timer
    if verdict is not None:
        met = "met" if verdict < 0.01 else "NOT met"
        print(f"target: timer overhead < 1% of the default 100 us quantum -> {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
