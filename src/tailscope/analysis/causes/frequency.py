"""frequency: the probe CPUs ran at a lower clock than the node's usual one.

Reads the effective clock (median of short dependent-add chunks, `effective_mhz`; a PMU-free measure that
the host's preemption does not bias), cpufreq's current frequency and thermal-throttle counts where /sys
has them. Explained slowdown = 1 - clock / usual clock (a compute-bound probe slows in proportion).
Preemption by whole time slices leaves most ~135 us chunks untouched, but wake-ups more frequent than one per
chunk (os-noise's short detours) touch every chunk: then a lower effective clock is the detours' time, not
the clock's, and it is not read as a frequency drop while it is within what the detours took, or at all
when the detours hit most chunks (measured here: 20,000 wake-ups/s read as an 11% and, in another run, a
55-70% lower clock).
"""

from __future__ import annotations

from tailscope.analysis.causes.base import explained_score, finding, vs_usual
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding

NAME = "frequency"
READS = ("effective_mhz", "cpufreq_khz", "throttle_count")
MIN_DROP = 0.01
CLOCK_CHUNK_S = 120e-6  # one chunk of the add chain: 500,000 adds at ~4.2 GHz (native/common/ts_clock.h)
MITIGATION = (
    "check the governor (performance), turbo and power-capping settings, cooling and thermal throttling "
    "(thermal_throttle counts); fix the frequency for benchmarks"
)


def assess(ctx: RunContext) -> CauseFinding | None:
    drops = {name: d for name in ("effective_mhz", "cpufreq_khz") if (d := ctx.drop(name)) is not None}
    detours = ctx.preemptions()
    if detours is not None and detours.short:
        every_chunk = detours.extra_per_s * CLOCK_CHUNK_S >= 0.5  # most chunks were hit: no clean chunk left
        if every_chunk or drops.get("effective_mhz", 0.0) <= detours.share + MIN_DROP:
            drops.pop("effective_mhz", None)  # the add chain lost the detours' time, not clock cycles
    throttles = ctx.excess("throttle_count") or 0.0
    drop = max(drops.values(), default=0.0)
    if drop < MIN_DROP and throttles <= 0:
        return None
    parts = []
    if "effective_mhz" in drops:
        parts.append(
            f"effective clock {vs_usual(ctx.value('effective_mhz'), ctx.typical('effective_mhz'), 'mhz')}"
        )
    if "cpufreq_khz" in drops:
        now_khz, usual_khz = ctx.value("cpufreq_khz"), ctx.typical("cpufreq_khz")
        parts.append(
            "cpufreq "
            + vs_usual(now_khz / 1000 if now_khz else None, usual_khz / 1000 if usual_khz else None, "mhz")
        )
    if throttles > 0:
        parts.append(f"{throttles:.0f} thermal throttle events")
    sentence = f"{ctx.cpu_text()} ran slower than usual: " + "; ".join(parts)
    virt = str(ctx.facts.get("virtualization") or "none")
    mitigation = MITIGATION
    if virt != "none" and "effective_mhz" in drops:
        # a guest's add chain slows when the host runs another guest on the same core's other hardware
        # thread, or lowers the core's clock: the guest cannot tell which
        sentence += (
            " (a virtual machine: another guest on the same physical core, or the host's own frequency "
            "choices, lower it too)"
        )
        mitigation = MITIGATION + "; on a VM, ask the host's operator (pinned vCPUs, no SMT sharing)"
    score = explained_score(drop, ctx.slowdown) if drop >= MIN_DROP else 0.2
    evidence = {
        "clock_drop": drop,
        "effective_mhz": ctx.value("effective_mhz"),
        "usual_effective_mhz": ctx.typical("effective_mhz"),
        "cpufreq_khz": ctx.value("cpufreq_khz"),
        "usual_cpufreq_khz": ctx.typical("cpufreq_khz"),
        "throttle_count": ctx.value("throttle_count"),
    }
    return finding(NAME, ctx, score, sentence, mitigation, evidence)
