#!/usr/bin/env python3
"""Peak memory and throughput of every importer on a large input, beside `awk` over the same file.

    PYTHONPATH=src .venv/bin/python bench/bench_importers.py [--mb 200] [--only iterations,perf-csv,...]

For each format (iterations, perf-csv, likwid-csv, perfcounts) it writes a file of about --mb MB in a
temporary directory (deleted afterwards), then runs, each as a fresh process so its peak RSS is its own:
  - awk:        one field-splitting pass that sums a column (the cheapest useful pass over the file);
  - baseline:   python -c "import the importer module" (the interpreter, pyarrow, duckdb: memory not due to
                the file);
  - tailscope:  `python -m tailscope import FORMAT FILE --campaign DIR` (parse, checks, Parquet).
  - small file: the same import of a 100 kB file of the same format (the fixed cost: libraries, Parquet
                writer, pyarrow's readers and pools).
Prints MB/s and peak RSS (ru_maxrss of the child) of each, and the large import's peak minus the small one's:
the memory that depends on the input, to set against the importer's chunk size. The target (issue 9): peak
memory at most 2x the largest chunk, never proportional to the file.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

MB = 1_000_000
SMALL = 100_000  # bytes: the same import on a small file shows the fixed cost (libraries, writers, pools)


def write_iterations(path: Path, size: int) -> None:
    rnd = random.Random(1)
    with open(path, "w") as fh:
        fh.write("node,run,iteration,value,unit\n")
        written, node, run = 0, 0, 0
        while written < size:
            lines = [f"node{node:04d},r{run},{i},{rnd.uniform(90, 110):.6f},GFLOPS\n" for i in range(1000)]
            block = "".join(lines)
            fh.write(block)
            written += len(block)
            run += 1
            if run == 20:
                run, node = 0, node + 1


def write_perf_csv(path: Path, size: int) -> None:
    rnd = random.Random(2)
    events = ["cycles", "instructions", "cache-misses", "branch-misses"]
    with open(path, "w") as fh:
        fh.write("# started on Tue Nov 24 10:00:00 2026\n\n")
        written, k = 0, 0
        while written < size:
            t = 0.1 * (k + 1)
            lines = [f"{t:.9f},CPU{cpu},{rnd.randrange(10**6, 10**9)},,{ev},100000,100.00,,\n"
                     for cpu in range(64) for ev in events]  # fmt: skip
            lines += [f"{t:.9f},CPU{cpu},{rnd.uniform(90, 100):.2f},msec,task-clock,100000,100.00,,\n"
                      for cpu in range(64)]  # fmt: skip
            block = "".join(lines)
            fh.write(block)
            written += len(block)
            k += 1


def write_likwid_csv(path: Path, size: int) -> None:
    rnd = random.Random(3)
    threads = list(range(64))
    head = "Event,Counter," + ",".join(f"HWThread {t}" for t in threads) + "\n"
    with open(path, "w") as fh:
        fh.write(
            "app says hello\nSTRUCT,Info,3\nCPU name:,Intel(R) Xeon(R) Platinum 8160\nCPU clock:,2.10 GHz\n"
        )
        written, region = 0, 0
        while written < size:
            lines = [f"TABLE,Region r{region},Group 1 Raw,MEM,20\n", head,
                     "Runtime (RDTSC) [s],TSC," + ",".join("0.5" for _ in threads) + "\n"]  # fmt: skip
            for reg, ev in (("FIXC0", "INSTR_RETIRED_ANY"), ("FIXC1", "CPU_CLK_UNHALTED_CORE"),
                            ("FIXC2", "CPU_CLK_UNHALTED_REF"), ("TMP0", "TEMP_CORE")):  # fmt: skip
                lines.append(
                    f"{ev},{reg}," + ",".join(str(rnd.randrange(10**8, 10**9)) for _ in threads) + "\n"
                )
            for box in range(8):
                vals = [str(rnd.randrange(10**5, 10**6)) if t in (0, 32) else "0" for t in threads]
                lines.append(f"CAS_COUNT_RD,MBOX{box}C0," + ",".join(vals) + "\n")
            block = "".join(lines)
            fh.write(block)
            written += len(block)
            region += 1


def write_perfcounts(path: Path, size: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_import_perfcounts import write_file

    per_sample = 42_000  # bytes of one sample of bench_import_perfcounts' 2-socket shape
    write_file(path, max(2, size // per_sample))


FORMATS: dict[str, tuple[Callable[[Path, int], None], str, str, int, str]] = {
    # format: (writer, file name, awk script, chunk rows, module)
    "iterations": (write_iterations, "it.csv", "-F, '{ s += $4 } END { print NR, s }'", 65536,
                   "tailscope.importers.iterations_csv"),
    "perf-csv": (write_perf_csv, "perf.csv", "-F, '{ s += $3 } END { print NR, s }'", 65536,
                 "tailscope.importers.perf_csv"),
    "likwid-csv": (write_likwid_csv, "likwid.csv", "-F, '{ s += $3 } END { print NR, s }'", 65536,
                   "tailscope.importers.likwid_csv"),
    "perfcounts": (write_perfcounts, "n1.perfcounts.lua", "-F ' = ' '{ s += $2 } END { print NR, s }'",
                   1 << 20, "tailscope.importers.perfcounts"),
}  # fmt: skip


def measure(argv: list[str], *, shell: bool = False) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit code) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, shell=shell, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and proc.stderr is not None:
        sys.stderr.write(proc.stderr.read().decode(errors="replace"))
    return seconds, usage.ru_maxrss / 1024, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=200.0, help="input size per format in MB (default 200)")
    parser.add_argument("--only", default=",".join(FORMATS), help="comma-separated formats")
    args = parser.parse_args()
    awk = shutil.which("mawk") or shutil.which("awk") or shutil.which("gawk")
    if awk is None:
        sys.exit("no awk found")
    print(
        f"awk: {awk}; python: {sys.executable}; rows per chunk: iterations/perf/likwid 65536, perfcounts 2^20"
    )
    print(f"{'format':11s} {'size MB':>8s} {'tool':10s} {'seconds':>8s} {'MB/s':>8s} {'peak RSS MB':>12s}")
    for name in args.only.split(","):
        writer, file_name, awk_script, _chunk, module = FORMATS[name]
        with tempfile.TemporaryDirectory(prefix="bench-importers-") as tmp:
            path = Path(tmp) / file_name
            small = Path(tmp) / "small" / file_name
            small.parent.mkdir()
            writer(path, int(args.mb * MB))
            writer(small, SMALL)
            size_mb = path.stat().st_size / MB

            def tailscope(file: Path, campaign: str, fmt: str = name) -> list[str]:
                argv = [sys.executable, "-m", "tailscope", "import", fmt, str(file), "--campaign", campaign]
                return argv + (["--node", "n1"] if fmt != "iterations" else [])

            runs = {
                "awk": measure(f"{awk} {awk_script} {path}", shell=True),
                "baseline": measure([sys.executable, "-c", f"import {module}, tailscope.store.views"]),
                "small file": measure(tailscope(small, f"{tmp}/small-campaign")),
                "tailscope": measure(tailscope(path, f"{tmp}/campaign")),
            }
            for tool, (seconds, rss, code) in runs.items():
                rate = f"{size_mb / seconds:8.1f}" if tool in ("awk", "tailscope") else f"{'-':>8s}"
                status = "" if code == 0 else f"  (exit {code})"
                print(f"{name:11s} {size_mb:8.1f} {tool:10s} {seconds:8.2f} {rate} {rss:12.0f}{status}")
            excess = runs["tailscope"][1] - runs["baseline"][1]
            growth = runs["tailscope"][1] - runs["small file"][1]
            print(
                f"{name:11s} peak - baseline = {excess:.0f} MB; peak - peak on a {SMALL // 1000} kB file = "
                f"{growth:.0f} MB for a {size_mb:.0f} MB file ({growth / size_mb:.2f} x the file); "
                f"speed {runs['awk'][0] / runs['tailscope'][0]:.2f} x awk"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
