#!/usr/bin/env python3
"""Our dgemm probe's GFLOPS against a plain C program calling the same cblas_dgemm, alternated.

    PYTHONPATH=src .venv/bin/python bench/bench_dgemm.py [--pairs 5] [--n 2000] [--calls 10] [--blas wheel]

The peer, bench/peers/dgemm_peer.c, is compiled at run time with `cc` against OpenBLAS (pkg-config) into a
temporary directory. `--blas wheel` compares a probe built against OpenBLAS from PyPI (scipy-openblas32, the
no-root install's BLAS; point TAILSCOPE_NATIVE_DIR at such a build, e.g. one configured with
-DTAILSCOPE_SYSTEM_BLAS=OFF) with the peer built against the same wheel's library.
Both run the same N, calls (the first excluded), the same CPUs (the peer under
`taskset`), the same number of BLAS threads and the same OPENBLAS_CORETYPE (the one our probe ends up
using, read from its config record). The peer allocates with malloc (4 KiB pages: THP is madvise-only on
most systems), so the probe is measured with --page 4k (like for like) and with its default --page thp.
Prints medians, their ratio, and the median of per-round ratios ours/peer (the headline: rounds run
back to back, so slow drifts of a shared machine cancel; target >= 0.97). About a minute at N = 2000 on
2 cores.
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

from tailscope.native import native_path

PEER_SOURCE = Path(__file__).resolve().parent / "peers" / "dgemm_peer.c"


def build_peer(workdir: Path, blas: str = "system") -> Path:
    exe = workdir / "dgemm_peer"
    if blas == "wheel":
        try:
            import scipy_openblas32 as wheel
        except ImportError:
            raise SystemExit("bench_dgemm: --blas wheel needs scipy-openblas32 (pip install it)") from None
        lib = wheel.get_lib_dir()
        flags = [f"-I{wheel.get_include_dir()}", "-Dcblas_dgemm=scipy_cblas_dgemm",
                 "-Dopenblas_get_corename=scipy_openblas_get_corename", f"-L{lib}", f"-Wl,-rpath,{lib}",
                 f"-l{wheel.get_library()}"]
    else:
        pkg = ["pkg-config", "--cflags", "--libs", "openblas"]
        found = subprocess.run(pkg, capture_output=True, text=True)
        if found.returncode != 0:
            raise SystemExit("bench_dgemm: pkg-config finds no openblas (Debian: libopenblas-dev)")
        flags = found.stdout.split()
    subprocess.run(["cc", "-O2", str(PEER_SOURCE), *flags, "-o", str(exe)], check=True)
    return exe


def ours(n: int, calls: int, cpus: str, page: str) -> tuple[float, dict]:
    argv = [str(native_path("dgemm")), "--n", str(n), "--calls", str(calls), "--cpus", cpus, "--page", page]
    proc = subprocess.run([*argv, "--no-pages"], capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    config, result = json.loads(lines[0]), json.loads(lines[-1])
    assert result["record"] == "result", result
    return float(result["value"]), config


def peer(exe: Path, n: int, calls: int, cpus: list[int], coretype: str | None) -> tuple[float, str]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(len(cpus)), OMP_NUM_THREADS=str(len(cpus)))
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    cpu_list = ",".join(map(str, cpus))
    proc = subprocess.run(
        ["taskset", "-c", cpu_list, str(exe), str(n), str(calls)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    fields = proc.stdout.split()
    return float(fields[1]), fields[3]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7, help="rounds of (4k, peer, thp) (7)")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--cpus", default="cores", help="our --cpus syntax (default: cores)")
    parser.add_argument("--blas", choices=("system", "wheel"), default="system",
                        help="the peer's OpenBLAS: the system's (pkg-config) or scipy-openblas32's")
    args = parser.parse_args()
    if not shutil.which("cc") or not shutil.which("taskset"):
        print("bench_dgemm: needs cc and taskset", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-dgemm-") as tmp:
        exe = build_peer(Path(tmp), args.blas)
        _, config = ours(args.n, 2, args.cpus, "4k")  # what the probe resolves: CPUs, core type
        cpus = config["cpus"]
        coretype = config["params"]["blas_corename"]
        built = config["params"].get("blas_build")
        if args.blas == "wheel" and "scipy-openblas32" not in str(built):
            raise SystemExit(f"bench_dgemm: --blas wheel, but the probe links {built} (TAILSCOPE_NATIVE_DIR)")
        print(f"DGEMM N={args.n}, {args.calls} calls (first excluded), CPUs {cpus}, OpenBLAS core {coretype}")
        print(f"probe BLAS: {built} ({config['params'].get('blas_library')}); peer BLAS: {args.blas}")
        header = f"{'variant':22} {'ours GFLOPS':>12} {'peer GFLOPS':>12} {'ratio':>7} {'paired':>7}"
        print(f"{header}  (medians of {args.pairs}; paired: median of per-round ratios)")
        runs: dict[str, list[float]] = {"4k": [], "peer": [], "thp": []}
        order = list(runs)
        for i in range(args.pairs):  # rotate the order each round: no side always runs first
            for side in order[i % 3 :] + order[: i % 3]:
                if side == "peer":
                    value, used = peer(exe, args.n, args.calls, cpus, coretype)
                    if used != coretype:
                        raise SystemExit(f"bench_dgemm: the peer ran core type {used}, not {coretype}")
                else:
                    value = ours(args.n, args.calls, args.cpus, side)[0]
                runs[side].append(value)
        p = statistics.median(runs["peer"])
        paired = {}
        for page in ("4k", "thp"):
            o = statistics.median(runs[page])
            paired[page] = statistics.median(x / y for x, y in zip(runs[page], runs["peer"], strict=True))
            print(f"{'probe --page ' + page:22} {o:12.2f} {p:12.2f} {o / p:7.3f} {paired[page]:7.3f}")
        print("all runs: " + " | ".join(f"{k}: {' '.join(f'{x:.1f}' for x in v)}" for k, v in runs.items()))
        met = "met" if paired["4k"] >= 0.97 else "NOT met"
        print(f"target: paired ratio (like for like, 4k) >= 0.97 -> {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
