#!/usr/bin/env python3
"""The background monitor's own CPU time per wall second, at 1 s and 10 ms with the software set, against
`perf stat -I` counting the same perf software events system-wide in the same run.

    PYTHONPATH=src .venv/bin/python bench/bench_monitor_overhead.py [--seconds 10] [--warmup 2]

Each tool runs alone for --warmup + --seconds; its CPU time is read from /proc/PID/schedstat (ns the
scheduler charged to it, exact, user + kernel) at the end of the warm-up and again --seconds later, so
start-up (tsmon's TSC calibration, perf's event parsing) is not counted. Reported: CPU seconds per wall
second (the fraction of one CPU) for each tool and interval, the targets (tsmon < 0.1% of one CPU at 1 s,
< 1% at 10 ms; the seed's own sampler: < 1% at 1 s), and tsmon's ratio to perf stat. tsmon samples more than
perf stat does: /proc/stat per CPU, /proc/interrupts, /proc/vmstat (thp, compaction, NUMA keys) as well.
System-wide perf events need root (or perf_event_paranoid <= 0); without, both tools count less and the
figures say so. A third line, "floor", is tsmon waking up, reading the clocks and writing one line per sample
with nothing to read: the cost of the sampling loop itself on this machine (timer wake-ups are expensive in
a VM: ~35 us each on the KVM development guest, against a few us on bare metal).

Figures seen on the 2-vCPU KVM development VM (root, perf_event_paranoid 2, 10 s per case, runs vary ~2x):
1 s: tsmon 0.040-0.045% of one CPU (once 0.14% while other jobs loaded the VM), perf stat -I 1000
0.019-0.023% (tsmon reads 3 /proc files per sample as well); 10 ms: tsmon 1.1-1.8%, perf stat -I 10
1.7-2.6% (ratio 0.6-1.1), floor 0.6-0.8%. Target at 1 s (< 0.1%) met; at 10 ms (< 1%) not met on this
VM, where the bare wake-up loop alone is most of the budget and each cross-CPU perf read is an IPI (a VM
exit); the /proc files are read every 100 ms (--proc-interval), not every 10 ms sample, which halved the
cost. Check on bare metal.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tailscope.counters.eventsets import find
from tailscope.native import native_path

TARGETS = {1.0: 0.001, 0.01: 0.01}
PERF_EVENTS = "task-clock,context-switches,cpu-migrations,page-faults,minor-faults,major-faults"


def cpu_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def measure(argv: list[str], warmup: float, seconds: float) -> float:
    """CPU seconds per wall second of the process started by argv, after warm-up."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(warmup)
        if proc.poll() is not None:
            raise SystemExit(f"{argv[0]} exited early: {proc.stderr.read().decode() if proc.stderr else ''}")
        c0, t0 = cpu_ns(proc.pid), time.monotonic_ns()
        time.sleep(seconds)
        c1, t1 = cpu_ns(proc.pid), time.monotonic_ns()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return (c1 - c0) / (t1 - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measured wall time per case (default 10)")
    ap.add_argument("--warmup", type=float, default=2.0, help="start-up time not counted (default 2)")
    args = ap.parse_args()
    tsmon = native_path("tsmon")
    software = find("software")
    perf = shutil.which("perf")
    cpu = os.cpu_count() or 1
    print(
        f"machine: {cpu} CPUs; euid {os.geteuid()}; perf_event_paranoid "
        f"{Path('/proc/sys/kernel/perf_event_paranoid').read_text().strip()}"
    )
    failed = False
    with tempfile.TemporaryDirectory() as d:
        for interval in (1.0, 0.01):
            label = "1s" if interval == 1.0 else "10ms"
            out = Path(d) / f"m-{label}.jsonl"
            cmd = [str(tsmon), "-o", str(out), "--interval", label, "--events", str(software)]
            mine = measure(cmd, args.warmup, args.seconds)
            lines = sum(1 for _ in out.open())
            print(f"\n[{label}] {' '.join(cmd)}")
            print(
                f"  tsmon:      {mine * 100:.4f}% of one CPU ({mine * 1e3:.3f} ms CPU per s; {lines} lines)"
            )
            peer = None
            if perf:
                pcmd = [
                    perf,
                    "stat",
                    "-a",
                    "-x,",
                    "-I",
                    str(int(interval * 1000)),
                    "-e",
                    PERF_EVENTS,
                    "-o",
                    os.devnull,
                ]
                peer = measure(pcmd, args.warmup, args.seconds)
                print(f"  perf stat:  {peer * 100:.4f}% of one CPU  ({' '.join(pcmd)})")
                print(f"  ratio tsmon / perf stat: {mine / peer:.2f}" if peer > 0 else "  perf stat: 0 CPU")
            else:
                print("  perf stat: not installed (Debian: linux-perf); no peer figure")
            if interval < 1.0:
                fcmd = [
                    str(tsmon),
                    "-o",
                    str(out),
                    "--interval",
                    label,
                    "--events",
                    "s=proc:stat:user",
                    "--proc-interval",
                    "1000s",
                ]
                floor = measure(fcmd, args.warmup, args.seconds)
                print(f"  floor:      {floor * 100:.4f}% of one CPU (wake, clocks, one line; nothing read)")
            target = TARGETS[interval]
            ok = mine < target
            failed |= not ok
            print(f"  target < {target * 100:g}% of one CPU: {'met' if ok else 'NOT met'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
