#!/usr/bin/env python3
"""Cost of tailscope's OMPT tool per OpenMP region, against the same program without it in the same run.

    PYTHONPATH=src .venv/bin/python bench/bench_ompt_overhead.py [--regions 100000] [--repeats 5]

Builds bench/ompt_tiny_regions.c with clang (LLVM libomp) and runs a loop of --regions tiny parallel regions
(each with a dynamic `omp for`: per region and thread the tool records implicit task, loop and barrier
begin/end; the encountering thread also the region itself) on --threads threads (default 2), alternating,
--repeats times each:
  none      libomp, no tool
  dispatch  libomp + the tool with TAILSCOPE_OMPT_NOOP=1: callbacks registered, nothing recorded (what
            libomp's OMPT dispatch costs by itself)
  tool      libomp + the tool (numa_maps copies off: they are per distinct region, not per instance)
  counters  libomp + the tool reading task-clock and page-faults at every region edge (one read() each)
It prints the median (and minimum) loop time per region, the added time per region and per recorded event
(callback), the ratio to `none`, and the time the tool adds at exit (writing its files) from the wall time.
gcc + libgomp is shown as a second peer (libgomp has no OMPT: the tool cannot run there). A minute or two
on 2 vCPUs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tailscope.native import native_library

HERE = Path(__file__).resolve().parent


def build(cc: str, out: Path) -> Path:
    subprocess.run([cc, "-O2", "-fopenmp", "-o", str(out), str(HERE / "ompt_tiny_regions.c")], check=True)
    return out


def run(binary: Path, regions: int, env: dict[str, str]) -> tuple[float, float]:
    """(loop seconds, wall seconds) of one run."""
    t0 = time.monotonic()
    proc = subprocess.run([str(binary), str(regions)], env=env, capture_output=True, text=True, check=True)
    wall = time.monotonic() - t0
    fields = dict(kv.split("=") for kv in proc.stdout.split())
    return float(fields["seconds"]), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="OpenMP threads (1: no barrier waits)")
    args = parser.parse_args()
    clang = shutil.which("clang-14") or shutil.which("clang")
    if not clang:
        print("bench_ompt_overhead: needs clang (Debian clang-14)", file=sys.stderr)
        return 2
    tool = str(native_library("tailscope_ompt"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_TOOL", "TAILSCOPE_OMPT"))}
    base.update({"OMP_NUM_THREADS": str(args.threads), "OMP_PROC_BIND": "close", "OMP_PLACES": "cores"})
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        llvm = build(clang, tmpdir / "tiny_llvm")
        gnu = build("gcc", tmpdir / "tiny_gnu")
        configs = {
            "none": (llvm, {}),
            "dispatch": (
                llvm,
                {"OMP_TOOL_LIBRARIES": tool, "TAILSCOPE_OMPT_NOOP": "1", "TAILSCOPE_OMPT_NUMA": "off"},
            ),
            "tool": (llvm, {"OMP_TOOL_LIBRARIES": tool, "TAILSCOPE_OMPT_NUMA": "off"}),
            "counters": (
                llvm,
                {
                    "OMP_TOOL_LIBRARIES": tool,
                    "TAILSCOPE_OMPT_NUMA": "off",
                    "TAILSCOPE_OMPT_EVENTS": "task-clock;page-faults",
                },
            ),
            "libgomp": (gnu, {}),
        }
        loops: dict[str, list[float]] = {k: [] for k in configs}
        walls: dict[str, list[float]] = {k: [] for k in configs}
        events = 0
        for i in range(args.repeats):
            for name, (binary, extra) in configs.items():
                env = dict(base, **extra)
                if "OMP_TOOL_LIBRARIES" in extra:
                    env["TAILSCOPE_OMPT_OUT"] = str(tmpdir / f"{name}-{i}")
                loop, wall = run(binary, args.regions, env)
                loops[name].append(loop)
                walls[name].append(wall)
                if name == "tool" and i == 0:
                    with open(tmpdir / f"{name}-{i}" / "events.tsv") as f:
                        events = sum(1 for _ in f) - 1
    per_event_per_region = events / args.regions / 2  # begin+end pairs per region
    none = statistics.median(loops["none"]) / args.regions
    print(
        f"{args.regions} regions x {args.repeats} runs, {args.threads} threads; "
        f"the tool recorded {events} events "
        f"({events / args.regions:.1f} per region)"
    )
    print(
        "us/region: median over runs (min in brackets); added: vs `none`; ns/event: added per recorded event"
    )
    print(f"{'config':>9} {'us/region':>18} {'added us':>9} {'ns/event':>9} {'ratio':>7} {'exit s':>7}")
    for name in configs:
        per = statistics.median(loops[name]) / args.regions
        added = per - none
        exit_s = statistics.median(w - t for w, t in zip(walls[name], loops[name], strict=True))
        per_event = (
            added / (2 * per_event_per_region) * 1e9
            if name in ("dispatch", "tool", "counters")
            else float("nan")
        )
        print(
            f"{name:>9} {per * 1e6:10.3f} {added * 1e6:9.3f} {per_event:9.1f} {per / none:7.2f} {exit_s:7.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
