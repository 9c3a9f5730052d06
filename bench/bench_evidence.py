#!/usr/bin/env python3
"""What per-trial evidence costs: the same probe trials with and without it, interleaved, in one run.

    PYTHONPATH=src .venv/bin/python bench/bench_evidence.py [--probe l2sum] [--pairs 100] [--clock-readings N]

Each pair runs one trial with `--no-evidence` (the peer) and one with evidence (order alternating), through
the runner's own `run_trial` into a scratch campaign; pair 0 warms up (first /proc scan, library load) and
is dropped. The overhead is printed as a share of the trial time (the median probe-process wall time of the
peer trials), two ways, each as (with - without):
- the runner's wall time between trials: run_trial's wall time less the probe process's (start to exit),
  i.e. what the runner adds around each trial (begin, the zombie's read, the rows, the clock, the scans);
- the runner's CPU time per trial (time.process_time over run_trial: every runner thread, the clock's
  included; the probe is a child and not counted): what evidence costs the machine, wherever it ran.
Also: the CPU time inside each of the collector's hooks (a breakdown; median and mean), how often the
optional parts ran, the probe process's wall time and result with / without (does evidence disturb what is
measured?), and the load average before and after (the machine is shared: figures vary with it).
Target: evidence < 1% of trial time.

Then the clock's stability: --clock-readings per-trial readings (the collector's settings) on the first probe
CPU, with a long reference reading (101 chunks) every 5th; printed: the references' spread, the readings'
median against the references' median, their p5-p95 spread and their availability.

Figures seen on the 2-vCPU KVM development VM: docs/evidence.md (they vary with the machine's load).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from tailscope.campaign import runner
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
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--budget", type=float, default=EvidenceSettings.budget, help="optional parts' share")
    ap.add_argument("--param", action="append", default=[], metavar="K=V", help="probe parameter")
    ap.add_argument("--clock-readings", type=int, default=100)
    args = ap.parse_args()
    params = dict(p.split("=", 1) for p in args.param)
    variant = ProbeVariant(args.probe, params)
    collector = TimedCollector(EvidenceSettings(budget=args.budget))
    from tailscope.evidence import clock, corunners

    counts = {"clock": 0, "scan": 0}
    real_measure, real_scan, real_watched = clock.measure, corunners.scan, runner.run_watched
    probe_wall = [0.0]

    def counted_measure(*a, **k):  # type: ignore[no-untyped-def]
        counts["clock"] += 1
        return real_measure(*a, **k)

    def counted_scan(*a, **k):  # type: ignore[no-untyped-def]
        if len(a) < 2 and k.get("which") is None:  # every process, not the newcomers of a busy trial
            counts["scan"] += 1
        return real_scan(*a, **k)

    def timed_watched(*a, **k):  # type: ignore[no-untyped-def]
        done = real_watched(*a, **k)
        probe_wall[0] = done.wall_s  # the probe process, start to exit (before the zombie is read)
        return done

    clock.measure = counted_measure  # type: ignore[assignment]
    corunners.scan = counted_scan  # type: ignore[assignment]
    runner.run_watched = timed_watched  # type: ignore[assignment]
    trial_s: dict[bool, list[float]] = {False: [], True: []}  # the probe process
    between: dict[bool, list[float]] = {False: [], True: []}  # run_trial's wall time less the probe's
    cpu: dict[bool, list[float]] = {False: [], True: []}  # the runner's CPU time in run_trial
    values: dict[bool, list[float]] = {False: [], True: []}
    hook_cpu: list[float] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        campaign = Campaign.create(Path(tmp) / "c")
        for i in range(args.pairs + 1):
            for with_evidence in (i % 2 == 0, i % 2 == 1):
                before_cpu = sum(collector.cpu.values())
                c0, t0 = time.process_time(), time.perf_counter()
                rows = run_trial(
                    campaign,
                    Trial(variant, i),
                    node="bench",
                    task="bench",
                    timeout_s=120,
                    evidence=collector if with_evidence else None,
                )
                wall, used = time.perf_counter() - t0, time.process_time() - c0
                run = rows.runs[0]
                if run["status"] != "ok":
                    print(f"trial {i}: {run['status']}: {run['error']}")
                    return 1
                if i == 0:
                    if with_evidence:
                        collector.spent.clear()
                        collector.cpu.clear()
                        counts.update(clock=0, scan=0)
                    continue
                trial_s[with_evidence].append(probe_wall[0])
                between[with_evidence].append(wall - probe_wall[0])
                cpu[with_evidence].append(used)
                values[with_evidence].append(float(run["value"]))
                if with_evidence:
                    hook_cpu.append(sum(collector.cpu.values()) - before_cpu)
    load_after = os.getloadavg()
    clock.measure, corunners.scan, runner.run_watched = real_measure, real_scan, real_watched  # type: ignore[assignment]
    n = args.pairs
    trial = statistics.median(trial_s[False])
    med, mean = statistics.median, statistics.mean

    def share(x: float) -> str:
        return f"{x * 1e3:.3f} ms = {x / trial * 100:.2f}% of the trial"

    print(
        f"{args.probe} {params or ''}: {n} interleaved pairs (with / --no-evidence), optional-part budget "
        f"{args.budget:g}"
    )
    print(
        f"  load average: before {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.2f}' for x in load_after)} (1, 5, 15 min)"
    )
    print(
        f"  trial (probe process) median: without {trial * 1e3:.2f} ms, with "
        f"{med(trial_s[True]) * 1e3:.2f} ms (ratio {med(trial_s[True]) / trial:.4f})"
    )
    print(
        f"  runner wall time between trials: without median {med(between[False]) * 1e3:.3f} ms, with "
        f"{med(between[True]) * 1e3:.3f} ms"
    )
    print(
        f"    overhead (median with - median without): {share(med(between[True]) - med(between[False]))}; "
        f"means: {share(mean(between[True]) - mean(between[False]))}"
    )
    print(
        f"  runner CPU time per trial: without median {med(cpu[False]) * 1e3:.3f} ms, with "
        f"{med(cpu[True]) * 1e3:.3f} ms"
    )
    print(
        f"    overhead (median with - median without): {share(med(cpu[True]) - med(cpu[False]))}; "
        f"means: {share(mean(cpu[True]) - mean(cpu[False]))}   (target < 1%)"
    )
    print(
        f"  CPU time inside the collector's hooks: median {share(med(hook_cpu))}, "
        f"mean {share(mean(hook_cpu))}"
    )
    for name, spent in sorted(collector.cpu.items()):
        print(
            f"    {name:8s} {spent / n * 1e3:.3f} ms/trial CPU, "
            f"{collector.spent[name] / n * 1e3:.3f} ms/trial wall"
        )
    print(
        f"    optional parts: {counts['clock']} clock readings and {counts['scan']} full /proc scans in {n} "
        "trials"
    )
    print(
        f"  probe result median: without {med(values[False]):.4g}, with {med(values[True]):.4g} "
        f"(ratio {med(values[True]) / med(values[False]):.4f})"
    )
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
