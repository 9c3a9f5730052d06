#!/usr/bin/env python3
"""What per-trial evidence costs: the same probe trials with and without it, interleaved.

    PYTHONPATH=src .venv/bin/python bench/bench_evidence.py [--probe l2sum] [--pairs 40] [--clock-every 1]

Each pair runs one trial without evidence and one with it (order alternating), through the runner's own
`run_trial` into a scratch campaign. Reported:
- the evidence's own time per trial: the wall time and the runner's CPU time (all its threads, the clock's
  included) spent inside the collector's hooks (before the process starts,
  samples while it runs, at its exit, and the rows and clock after it), median and mean, as a share of the
  median trial time, with the optional parts (clock and process scans, limited by --budget) shown apart;
- the end-to-end ratio: median time of one run_trial call with evidence / without (includes everything, but
  on a shared VM its run-to-run noise is larger than the 1% target, so the hook time is the figure to check);
- the probe's own result with / without (does evidence disturb what is measured?).
Target: evidence < 1% of trial time.

Then the clock's stability: --clock-readings per-trial readings (the collector's settings) on the first probe
CPU, with a long reference reading (101 chunks) every 5th; printed: the references' spread, the readings'
median against the references' median, their p5-p95 spread and their availability.

Figures seen on the 2-vCPU KVM development VM: see the report in the `evidence` branch's commit message and
docs/evidence.md (they vary with the machine's load).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from tailscope.campaign.runner import Trial, run_trial
from tailscope.evidence.collector import EvidenceCollector, EvidenceSettings
from tailscope.probes.catalogue import ProbeVariant
from tailscope.store.campaign import Campaign


class TimedCollector(EvidenceCollector):
    """The product's collector with a stopwatch around each hook."""

    def __init__(self, settings: EvidenceSettings) -> None:
        super().__init__(settings)
        self.spent: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)

    def _timed(self, name: str, fn, *args):  # type: ignore[no-untyped-def]
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return fn(*args)
        finally:
            self.spent[name] += time.perf_counter() - t0
            self.cpu[name] += time.process_time() - c0

    def begin(self, variant_id: str) -> None:
        self._timed("begin", super().begin, variant_id)

    def sample(self, pid: int) -> None:
        self._timed("sample", super().sample, pid)

    def at_exit(self, pid: int) -> None:
        self._timed("at_exit", super().at_exit, pid)

    def finish(self, *args):  # type: ignore[no-untyped-def]
        return self._timed("finish", super().finish, *args)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probe", default="l2sum")
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--budget", type=float, default=EvidenceSettings.budget, help="optional parts' share")
    ap.add_argument("--param", action="append", default=[], metavar="K=V", help="probe parameter")
    ap.add_argument("--clock-readings", type=int, default=100)
    args = ap.parse_args()
    params = dict(p.split("=", 1) for p in args.param)
    variant = ProbeVariant(args.probe, params)
    collector = TimedCollector(EvidenceSettings(budget=args.budget))
    from tailscope.evidence import clock, corunners

    clock_s, scan_s, scans, clocks = [0.0], [0.0], [0], [0]
    real_measure, real_scan = clock.measure, corunners.scan

    def timed_measure(*a, **k):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return real_measure(*a, **k)
        finally:
            clock_s[0] += time.perf_counter() - t0
            clocks[0] += 1

    def timed_scan(*a, **k):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return real_scan(*a, **k)
        finally:
            scan_s[0] += time.perf_counter() - t0
            scans[0] += 1

    clock.measure = timed_measure  # type: ignore[assignment]
    corunners.scan = timed_scan  # type: ignore[assignment]
    walls: dict[bool, list[float]] = {False: [], True: []}
    values: dict[bool, list[float]] = {False: [], True: []}
    hook: list[float] = []
    hook_cpu: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        campaign = Campaign.create(Path(tmp) / "c")
        for i in range(args.pairs + 1):  # pair 0 warms up (first /proc scan, library load) and is dropped
            for with_evidence in (i % 2 == 0, i % 2 == 1):
                before = sum(collector.spent.values())
                before_cpu = sum(collector.cpu.values())
                t0 = time.perf_counter()
                rows = run_trial(
                    campaign,
                    Trial(variant, i),
                    node="bench",
                    task="bench",
                    timeout_s=120,
                    evidence=collector if with_evidence else None,
                )
                wall = time.perf_counter() - t0
                run = rows.runs[0]
                if run["status"] != "ok":
                    print(f"trial {i}: {run['status']}: {run['error']}")
                    return 1
                if i == 0:
                    if with_evidence:
                        collector.spent.clear()
                        collector.cpu.clear()
                        clock_s[0] = scan_s[0] = 0.0
                        scans[0] = clocks[0] = 0
                    continue
                walls[with_evidence].append(wall)
                values[with_evidence].append(float(run["value"]))
                if with_evidence:
                    hook.append(sum(collector.spent.values()) - before)
                    hook_cpu.append(sum(collector.cpu.values()) - before_cpu)
    n = args.pairs
    med_off, med_on = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"{args.probe} {params or ''}: {n} pairs, optional-part budget {args.budget:g}")
    print(
        f"  trial wall (run_trial) median: without {med_off * 1e3:.1f} ms, with {med_on * 1e3:.1f} ms, "
        f"ratio {med_on / med_off:.4f}"
    )
    print(
        f"  evidence hooks per trial: median {statistics.median(hook) * 1e3:.2f} ms, "
        f"mean {statistics.mean(hook) * 1e3:.2f} ms = {statistics.mean(hook) / med_off * 100:.2f}% of the "
        "median trial (target < 1%)"
    )
    print(
        f"  runner CPU time inside the hooks (what the evidence costs the machine; the wall time above also "
        f"counts waiting for a CPU on a busy node): mean {statistics.mean(hook_cpu) * 1e3:.2f} ms = "
        f"{statistics.mean(hook_cpu) / med_off * 100:.2f}% of the median trial"
    )
    for name, spent in sorted(collector.spent.items()):
        cpu = collector.cpu[name]
        print(f"    {name:8s} {spent / n * 1e3:.3f} ms/trial wall, {cpu / n * 1e3:.3f} ms/trial CPU")
    print(
        f"    of which clock {clock_s[0] / n * 1e3:.3f} ms/trial ({clocks[0]} clock readings), "
        f"/proc scans {scan_s[0] / n * 1e3:.3f} ms/trial ({scans[0]} scans in {n} trials)"
    )
    print(
        f"  probe result median: without {statistics.median(values[False]):.4g}, "
        f"with {statistics.median(values[True]):.4g} "
        f"(ratio {statistics.median(values[True]) / statistics.median(values[False]):.4f})"
    )
    clock.measure = real_measure  # type: ignore[assignment]
    clock_stability(args.clock_readings)
    return 0


def clock_stability(n: int) -> None:
    from tailscope.evidence import clock

    cpu = sorted(os.sched_getaffinity(0))[0]
    refs, hz, avail = [], [], []
    for i in range(n):
        if i % 5 == 0:
            refs.append(clock.measure([cpu], chunks=101)[0].effective_hz / 1e6)
        r = clock.measure([cpu])[0]
        hz.append(r.effective_hz / 1e6)
        avail.append(r.available_fraction)
    ref = statistics.median(refs)
    q = statistics.quantiles(hz, n=20)
    print(
        f"clock on CPU {cpu}: references (101 chunks) {min(refs):.0f}-{max(refs):.0f} MHz "
        f"(spread {(max(refs) - min(refs)) / ref * 100:.2f}%), median {ref:.1f}"
    )
    med = statistics.median(hz)
    print(
        f"  {n} per-trial readings ({clock.CHUNKS} chunks of {clock.ADDS} adds): median {med:.1f} MHz "
        f"({(med - ref) / ref * 100:+.2f}% of the references), p5-p95 {q[0]:.0f}-{q[-1]:.0f} "
        f"({(q[-1] - q[0]) / ref * 100:.2f}%), availability median {statistics.median(avail):.3f}, "
        f"min {min(avail):.3f}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
