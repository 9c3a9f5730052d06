#!/usr/bin/env python3
"""Our stream probe's triad bandwidth against likwid-bench's STREAM triad, same cores, same array size.

    PYTHONPATH=src .venv/bin/python bench/bench_stream.py [--pairs 10] [--elements N] [--stores nt]

The peer is likwid-bench (likwid 5.2): `stream_mem_avx512` (A = B + s*C with non-temporal stores) for our
default `--stores nt`, and `stream_avx512` (ordinary stores) for `--stores cached`; both count 24 bytes per
element as STREAM does. Both use the first cores of socket 0 (`-w S0:SIZE:T`, `--cpus S0:0-(T-1)`), three
arrays of the size our default rule chooses, and the same number of timed triad passes: our --reps R gives
R-1 timed triads (after a warm-up repetition), likwid-bench gets `-i R-1` iterations per thread.
Runs alternate in ABBA order; the table gives medians, their ratio, and the median of per-pair ratios
ours/peer (the headline; target >= 0.95): the memory bandwidth of a VM moves with its neighbours' load
over seconds, and pairing each run with its neighbour in time keeps that drift out of the ratio.
About a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys

from tailscope.native import native_path

PEERS = {"nt": "stream_mem_avx512", "cached": "stream_avx512"}


def ours(elements: int, threads: int, stores: str, reps: int) -> float:
    argv = [str(native_path("stream")), "--elements", str(elements), "--cpus", f"S0:0-{threads - 1}"]
    argv += ["--reps", str(reps)]
    proc = subprocess.run(
        [*argv, "--stores", stores, "--no-pages"], capture_output=True, text=True, check=True
    )
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["record"] == "result", result
    return float(result["value"])


def likwid(kernel: str, elements: int, threads: int, iterations: int) -> float:
    size = 3 * 8 * elements  # three arrays of doubles: likwid's -w size is the whole working set
    argv = ["likwid-bench", "-t", kernel, "-i", str(iterations), "-w", f"S0:{size}B:{threads}"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=True)
    m = re.search(r"^MByte/s:\s+([\d.]+)", proc.stdout, re.M)
    v = re.search(r"Vector length (\d+)/", proc.stdout)
    if not m or not v or int(v.group(1)) != elements:
        raise SystemExit(f"bench_stream: unexpected likwid-bench output:\n{proc.stdout}")
    return float(m.group(1)) / 1000.0  # MByte/s (10^6) -> GB/s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10, help="A/B pairs per store kind (10)")
    parser.add_argument("--reps", type=int, default=10, help="our --reps; likwid runs reps-1 iterations (10)")
    parser.add_argument("--elements", type=int, help="doubles per array (default: our sizing rule)")
    parser.add_argument("--stores", choices=("nt", "cached", "both"), default="both")
    args = parser.parse_args()
    if not shutil.which("likwid-bench"):
        print("bench_stream: likwid-bench not found (Debian package likwid)", file=sys.stderr)
        return 2
    check = subprocess.run(
        [str(native_path("stream")), "--check-args"], capture_output=True, text=True, check=True
    )
    config = json.loads(check.stdout.splitlines()[0])
    threads = len([c for c in config["cpu_sockets"] if c == 0])
    elements = args.elements or int(config["params"]["elements"])
    mib = 24 * elements / 2**20
    print(f"stream triad, {threads} threads on S0, {elements} elements per array ({mib:.0f} MiB per triad)")
    header = f"{'stores':8} {'peer':20} {'ours GB/s':>10} {'peer GB/s':>10} {'ratio':>7} {'paired':>7}"
    print(f"{header}  (medians of {args.pairs}; paired: median of per-pair ratios)")
    kinds = ("nt", "cached") if args.stores == "both" else (args.stores,)
    worst = None
    for stores in kinds:
        a, b = [], []
        for i in range(args.pairs):  # ABBA: neither side always runs first
            for side in ("ours", "peer") if i % 2 == 0 else ("peer", "ours"):
                if side == "ours":
                    a.append(ours(elements, threads, stores, args.reps))
                else:
                    b.append(likwid(PEERS[stores], elements, threads, args.reps - 1))
        # the headline ratio pairs each run with its neighbour in time, so slow drifts of the machine cancel
        ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
        worst = ratio if worst is None else min(worst, ratio)
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{stores:8} {PEERS[stores]:20} {ma:10.2f} {mb:10.2f} {ma / mb:7.3f} {ratio:7.3f}")
        print(
            f"{'':8} {'(all runs)':20} {' '.join(f'{x:.1f}' for x in a)} | {' '.join(f'{x:.1f}' for x in b)}"
        )
    print(f"target: paired ratio >= 0.95 -> {'met' if worst is not None and worst >= 0.95 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
