#!/usr/bin/env python3
"""The SJTU probes against peers measured in the same run; prints ratios ours/peer.

    PYTHONPATH=src .venv/bin/python bench/bench_sjtu.py [--pairs 5] [--skip-hpcc]

- latency: our L1/L2/L3/DRAM ns per load against bench/peers/chase_peer.c (an independent random pointer
  chase, compiled here with cc) at the same working-set sizes on the same CPU; ABBA pairs, median of
  per-pair ratios (target: 0.9-1.1).
- mpi-p2p: our 8-byte one-way latency against hpcc's "MinPingPongLatency_usec" (HPC Challenge's
  Latency-Bandwidth benchmark, same Open MPI, 2 ranks, in a loopback-only network namespace). hpcc runs
  all its tests (~40 s at N=500 here), so it runs once.
- stream --scaling: our triad GB/s on 1..all cores against likwid-bench stream_mem_avx512 on the same cores
  (median of per-pair ratios per core count).
Needs cc, taskset, likwid-bench, hpcc, mpirun, unshare (as root); parts whose tools are missing are skipped.
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

from tailscope.native import native_path

PEER = Path(__file__).resolve().parent / "peers" / "chase_peer.c"


def run_json(argv: list[str]) -> dict:
    proc = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.splitlines()[-1])


def bench_latency(pairs: int, tmp: Path) -> None:
    exe = tmp / "chase_peer"
    subprocess.run(["cc", "-O2", str(PEER), "-o", str(exe)], check=True)
    probe = [str(native_path("latency")), "--iterations", "11", "--clock-chunks", "20", "--no-pages"]
    first = run_json(probe)
    sets = [(w["name"], w["bytes"]) for w in first["summary"]["working_sets"]]
    loads = 65536
    ratios: dict[str, list[float]] = {name: [] for name, _ in sets}
    for i in range(pairs):
        order = ("ours", "peer") if i % 2 == 0 else ("peer", "ours")
        got: dict[str, dict[str, float]] = {"ours": {}, "peer": {}}
        for who in order:
            if who == "ours":
                r = run_json(probe)
                got["ours"] = {w["name"]: w["ns"]["median"] for w in r["summary"]["working_sets"]}
            else:
                for name, size in sets:
                    out = subprocess.run(
                        ["taskset", "-c", "0", str(exe), str(size), str(loads), "11"],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    got["peer"][name] = float(out.stdout.split()[0])
        for name, _ in sets:
            ratios[name].append(got["ours"][name] / got["peer"][name])
    print("latency: ours / chase_peer (ns per load, median of per-pair ratios)")
    for name, size in sets:
        print(
            f"  {name:5s} {size:>11d} B  ratio {statistics.median(ratios[name]):.3f}  "
            f"(pairs: {', '.join(f'{r:.2f}' for r in ratios[name])})"
        )


def bench_mpi(tmp: Path) -> None:
    from tailscope.importers.hpcc_run import run_hpcc, write_hpccinf

    write_hpccinf(tmp, n=500, nb=64, p=1, q=2)
    out = run_hpcc(tmp, p=1, q=2, isolate_network=True, timeout_s=600).read_text()
    m = re.search(r"^MinPingPongLatency_usec=([\d.eE+-]+)", out, re.M)
    if not m:
        raise SystemExit("bench_sjtu: no MinPingPongLatency_usec in hpccoutf.txt")
    peer = float(m.group(1))
    argv = [
        "unshare",
        "--net",
        "sh",
        "-c",
        'ip link set lo up && exec "$@"',
        "sh",
        str(native_path("mpi-p2p")),
        "--sizes",
        "8",
        "--iterations",
        "21",
    ]
    ours = run_json(argv)["value"]
    print(
        f"mpi-p2p: 8 B one-way latency ours {ours:.4f} us, hpcc MinPingPong {peer:.4f} us, "
        f"ratio {ours / peer:.3f}"
    )


def bench_scaling(pairs: int) -> None:
    n = len(os.sched_getaffinity(0))
    elements = 4_000_000
    print("stream scaling: ours / likwid-bench stream_mem_avx512 (triad GB/s, median of per-pair ratios)")
    for k in range(1, n + 1):
        ratios = []
        for _ in range(pairs):
            ours = run_json(
                [
                    str(native_path("stream")),
                    "--elements",
                    str(elements),
                    "--cpus",
                    f"S0:0-{k - 1}",
                    "--reps",
                    "6",
                    "--no-pages",
                ]
            )["value"]
            proc = subprocess.run(
                ["likwid-bench", "-t", "stream_mem_avx512", "-i", "5", "-w", f"S0:{3 * 8 * elements}B:{k}"],
                capture_output=True,
                text=True,
                check=True,
            )
            m = re.search(r"^MByte/s:\s+([\d.]+)", proc.stdout, re.M)
            if not m:
                raise SystemExit(f"bench_sjtu: unexpected likwid-bench output:\n{proc.stdout}")
            ratios.append(ours / (float(m.group(1)) / 1000.0))
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"  {k} cores: ratio {statistics.median(ratios):.3f} (pairs: {shown})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--skip-hpcc", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if shutil.which("cc") and shutil.which("taskset"):
            bench_latency(args.pairs, tmp)
        else:
            print("latency: skipped (needs cc and taskset)", file=sys.stderr)
        if not args.skip_hpcc and shutil.which("hpcc") and os.geteuid() == 0:
            bench_mpi(tmp)
        else:
            print("mpi-p2p: skipped (needs hpcc and root, or --skip-hpcc given)", file=sys.stderr)
        if shutil.which("likwid-bench"):
            bench_scaling(args.pairs)
        else:
            print("stream scaling: skipped (needs likwid-bench)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
