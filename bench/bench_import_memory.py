#!/usr/bin/env python3
"""Peak memory of `tailscope import iterations` for files of 1 M, 2 M and 4 M runs (one iteration each, the
shape of the issue's 49 MB, 2 M-run file that peaked at 4.35 GB): each import is a fresh process, its peak
RSS read from wait4's rusage. The peer, measured in the same run on the same file, is pyarrow reading the
whole CSV into memory (`pyarrow.csv.read_csv`): the ratio import / peer says whether the import holds more
than the file's own rows. Target: every import under 512 MiB, flat with the number of runs.

    PYTHONPATH=src .venv/bin/python bench/bench_import_memory.py [--runs 1000000 2000000 4000000] [--nodes 64]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIMIT_MIB = 512


def write_file(path: Path, runs: int, nodes: int) -> None:
    """node,run,iteration,value: `runs` runs over `nodes` nodes, one iteration each (~24 bytes a line)."""
    block = 100_000
    with open(path, "w") as out:
        out.write("node,run,iteration,value\n")
        for start in range(0, runs, block):
            out.write(
                "".join(
                    f"c{i % nodes:04d},r{i},0,{1.0 + (i % 977) / 1000:.3f}\n"
                    for i in range(start, min(runs, start + block))
                )
            )


def peak_rss(cmd: list[str]) -> tuple[float, float, int]:
    """(peak RSS in MiB, seconds, exit status) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        print(f"  {' '.join(cmd[:4])} ... exited {proc.returncode}: {err.strip()[-300:]}", file=sys.stderr)
    return usage.ru_maxrss / 1024, seconds, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1_000_000, 2_000_000, 4_000_000])
    parser.add_argument("--nodes", type=int, default=64)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    header = ("runs", "file MB", "import MiB", "import s", "peer MiB", "ratio")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (9, 8, 11, 9, 9, 6), strict=True)) + "  verdict")
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-import-memory-") as tmp:
        for runs in args.runs:
            path = Path(tmp) / f"it-{runs}.csv"
            write_file(path, runs, args.nodes)
            campaign = Path(tmp) / f"c-{runs}"
            mib, seconds, rc = peak_rss(
                [sys.executable, "-m", "tailscope", "import", "iterations", str(path),
                 "--campaign", str(campaign), "--lower-is-better", "--name", "bench"]
            )  # fmt: skip
            read = f"import pyarrow.csv as c; t = c.read_csv({str(path)!r}); print(t.num_rows)"
            peer, _, _ = peak_rss([sys.executable, "-c", read])
            ok = rc == 0 and mib < LIMIT_MIB
            failed |= not ok
            size = path.stat().st_size / 1e6
            verdict = "ok" if ok else (f"FAILED (exit {rc})" if rc else f"OVER {LIMIT_MIB} MiB")
            ratio = mib / peer
            print(f"{runs:>9} {size:>8.1f} {mib:>11.0f} {seconds:>9.1f} {peer:>9.0f} {ratio:>6.2f} {verdict}")
            path.unlink()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
