#!/usr/bin/env python3
"""Our hpl probe's GFLOPS against hpcc's HPL at the same N, and against the dgemm probe; alternated.

    TAILSCOPE_NATIVE_DIR=.venv/lib/python3.11/site-packages/tailscope/_native/bin \
        PYTHONPATH=src .venv/bin/python bench/bench_hpl.py [--rounds 5] [--n 4000] [--nb 192] [--cpus cores]

- hpcc (Debian's HPC Challenge 1.5, its HPL 2.0; importers/hpcc_run.py): hpccinf.txt with the same N,
  the given NB, P = Q = 1, one MPI rank under `taskset` on the probe's CPUs with one OpenBLAS thread per
  CPU and the OPENBLAS_CORETYPE our probe ends up using (read from its config record), in a loopback-only
  network namespace (root). hpcc runs all its tests each time, HPL last; its HPL Gflops is the WR line's
  (HPL's flop count 2/3 N^3 + 3/2 N^2 over HPL_pdgesv's wall time, as ours). Target: median of per-round
  ratios ours / hpcc >= 0.9.
- dgemm: the dgemm probe at the same N and CPUs (4 calls, the first excluded): how close the LU runs to the
  BLAS's matrix multiply (LU does 1/3 of dgemm's flops, most of them in dgemm updates).
Each round runs the three in a rotated order (no side always first), back to back, so slow drifts of a shared
machine cancel in the per-round ratios. Prints the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tailscope.importers.hpcc_run import run_hpcc, write_hpccinf
from tailscope.importers.hpl import parse_hpl
from tailscope.native import native_path


def probe(name: str, *args: str) -> tuple[float, dict, dict]:
    proc = subprocess.run(
        [str(native_path(name)), *args, "--no-pages"], capture_output=True, text=True, check=True
    )
    lines = proc.stdout.splitlines()
    config, result = json.loads(lines[0]), json.loads(lines[-1])
    assert result["record"] == "result", result
    return float(result["value"]), config, result


def hpcc(workdir: Path, n: int, nb: int, cpus: list[int], coretype: str | None) -> float:
    workdir.mkdir()
    write_hpccinf(workdir, n=n, nb=nb, p=1, q=1)
    env = {"OPENBLAS_NUM_THREADS": str(len(cpus)), "OMP_NUM_THREADS": str(len(cpus))}
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    out = run_hpcc(workdir, p=1, q=1, isolate_network=True, timeout_s=600, cpus=cpus, env=env)
    (result,) = parse_hpl(out.read_text(), source=str(out))
    if (result.n, result.nb, result.p, result.q) != (n, nb, 1, 1) or result.passed is not True:
        raise SystemExit(f"bench_hpl: unexpected hpcc result {result}")
    return result.gflops


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--nb", type=int, default=192, help="hpcc's NB (our dgetrf has none)")
    parser.add_argument("--cpus", default="cores", help="our --cpus syntax (default: cores)")
    args = parser.parse_args()
    missing = [t for t in ("hpcc", "mpirun", "taskset", "unshare") if not shutil.which(t)]
    if missing or os.geteuid() != 0:
        print(f"bench_hpl: needs root and {', '.join(missing) or 'hpcc, mpirun'}", file=sys.stderr)
        return 2
    n = str(args.n)
    _, config, _ = probe("hpl", "--n", "64", "--cpus", args.cpus)  # CPUs and the core type it resolves
    cpus, coretype = config["cpus"], config["params"]["blas_corename"]
    print(f"load average before: {load()}")
    print(f"HPL-Light N={args.n} (hpcc NB={args.nb}, P=Q=1), CPUs {cpus}, OpenBLAS core {coretype}")
    runs: dict[str, list[float]] = {"hpl": [], "hpcc": [], "dgemm": []}
    order = list(runs)
    with tempfile.TemporaryDirectory(prefix="bench-hpl-") as tmp:
        for i in range(args.rounds):
            for side in order[i % 3 :] + order[: i % 3]:
                if side == "hpl":
                    value, cfg, result = probe("hpl", "--n", n, "--cpus", args.cpus)
                    assert cfg["params"]["blas_corename"] == coretype
                    assert result["summary"]["residual_check"] == "PASSED"
                elif side == "hpcc":
                    value = hpcc(Path(tmp) / f"r{i}", args.n, args.nb, cpus, coretype)
                else:
                    value = probe("dgemm", "--n", n, "--calls", "4", "--cpus", args.cpus)[0]
                runs[side].append(value)
            print(f"  round {i + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in runs.items()))
    medians = {k: statistics.median(v) for k, v in runs.items()}
    print(f"{'':8} {'median GFLOPS':>14}  (all rounds)")
    for k, v in runs.items():
        print(f"{k:8} {medians[k]:14.2f}  ({' '.join(f'{x:.1f}' for x in v)})")
    vs_hpcc = statistics.median(a / b for a, b in zip(runs["hpl"], runs["hpcc"], strict=True))
    vs_dgemm = statistics.median(a / b for a, b in zip(runs["hpl"], runs["dgemm"], strict=True))
    print(
        f"hpl / hpcc HPL : {vs_hpcc:.3f} (median of per-round ratios; target >= 0.9 -> "
        f"{'met' if vs_hpcc >= 0.9 else 'NOT met'})"
    )
    print(f"hpl / dgemm    : {vs_dgemm:.3f} (median of per-round ratios)")
    print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
