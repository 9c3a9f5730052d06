#!/usr/bin/env python3
"""What each injector measurably does on this node, against control windows measured in the same run.

    PYTHONPATH=src .venv/bin/python bench/bench_injectors.py [--pairs 5] [--seconds 0.5] [--thp]

For each injector and intensity, a victim pinned to one CPU runs alternately without (control) and with the
injection; the figure is the median over pairs of injected / mean(control windows either side), so other
work on a shared machine slows both alike:
  - cpuoccupy / cpu-quota: a pinned busy loop's progress (victim on the injector's CPU; cpu-quota limits the
    victim itself);
  - membw: a 256 MiB array copy's bandwidth, victim on the other CPU (no CPU time taken from it);
  - cachecopy: an 8 MiB (cache-resident) array copy's bandwidth, victim on the other CPU;
  - os-noise: the victim's involuntary context switches per second (and the injector's wake-ups);
  - thp-fragment (--thp; about a minute, takes nearly all free memory for a while): the huge pages a 512 MiB
    MADV_HUGEPAGE allocation gets, and thp_fault_fallback.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "inject"))

from victims import busy_loop, copy_rate, median, pinned, switches, thp_kib, vmstat

from tailscope.inject.control import Injection


def paired(
    make: Callable[[], Injection], victim_cpu: int, measure: Callable[[float], float], pairs: int, sec: float
) -> tuple[float, float]:
    ratios, controls = [], []
    with pinned(victim_cpu):
        measure(0.1)
        before = measure(sec)
        for _ in range(pairs):
            with make():
                time.sleep(0.05)
                injected = measure(sec)
            after = measure(sec)
            ratios.append(injected / ((before + after) / 2))
            controls.append(before)
            before = after
    return median(ratios), median(controls)


def quota_victim(intensity: float, pairs: int, sec: float) -> float:
    victim = subprocess.Popen(
        [sys.executable, "-c", "import os\nos.sched_setaffinity(0, {0})\nwhile True: pass"]
    )
    tck = os.sysconf("SC_CLK_TCK")

    def share(s: float) -> float:
        def cpu() -> float:
            f = Path(f"/proc/{victim.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / tck

        c0, t0 = cpu(), time.monotonic()
        time.sleep(s)
        return (cpu() - c0) / (time.monotonic() - t0)

    try:
        ratios = []
        for _ in range(pairs):
            control = share(sec * 2)
            with Injection.of("cpu-quota", intensity, cpus=[0], pids=[victim.pid]):
                injected = share(sec * 2)
            ratios.append(injected / control)
        return median(ratios)
    finally:
        victim.kill()
        victim.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--thp", action="store_true", help="also thp-fragment (a minute, most free memory)")
    a = ap.parse_args()
    p, s = a.pairs, a.seconds
    other = 1 if len(os.sched_getaffinity(0)) > 1 else 0
    print("injector      intensity  victim                                     injected/control")
    for x in (0.2, 0.5, 0.8):
        r, _ = paired(lambda x=x: Injection.of("cpuoccupy", x, cpus=[0]), 0, busy_loop, p, s)
        print(f"cpuoccupy     {x:9g}  busy loop, same CPU                        {r:.2f}")
    for x in (0.2, 0.5, 0.8):
        print(
            f"cpu-quota     {x:9g}  busy loop's CPU share, in the quota         {quota_victim(x, p, s):.2f}"
        )
    for x in (0.3, 0.6, 1.0):
        r, c = paired(lambda x=x: Injection.of("membw", x, cpus=[0]), other, copy_rate(256 << 20), p, s)
        print(f"membw         {x:9g}  256 MiB copy on CPU {other} ({c / 1e9:.1f} GB/s control)       {r:.2f}")
    for x in (0.3, 0.6, 1.0):
        r, c = paired(lambda x=x: Injection.of("cachecopy", x, cpus=[0]), other, copy_rate(8 << 20), p, s)
        print(
            f"cachecopy     {x:9g}  8 MiB copy on CPU {other} ({c / 1e9:.1f} GB/s control)          {r:.2f}"
        )
    for rate in (1000.0, 5000.0, 20000.0):
        with pinned(0):
            s0 = switches()
            busy_loop(s)
            control = (switches() - s0) / s
            with Injection.of("os-noise", rate, cpus=[0]) as inj:
                s0 = switches()
                busy_loop(s)
                injected = (switches() - s0) / s
            r, _ = paired(lambda rate=rate: Injection.of("os-noise", rate, cpus=[0]), 0, busy_loop, p, s)
        t = inj.done["threads"][0]
        print(
            f"os-noise      {rate:9g}  preemptions/s {control:.0f} -> {injected:.0f} "
            f"(wake-ups {t['wakeups'] / inj.done['seconds']:.0f}/s, fifo {t['fifo']}); busy loop {r:.2f}"
        )
    if a.thp:
        control = thp_kib(512)
        with Injection.of("thp-fragment", 1.0, reserve="300m") as inj:
            f0 = vmstat("thp_fault_fallback")
            injected = thp_kib(512)
            fb = vmstat("thp_fault_fallback") - f0
        print(
            f"thp-fragment  {1.0:9g}  huge pages of a 512 MiB THP allocation: {control >> 10} -> "
            f"{injected >> 10} MiB, thp_fault_fallback +{fb} "
            f"({inj.ready['blocks_covered']}/{inj.ready['blocks_total']} 2 MiB blocks pinned)"
        )


if __name__ == "__main__":
    main()
