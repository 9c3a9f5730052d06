"""memory-bandwidth-contention: a bandwidth-bound probe was slower while it lost no CPU time.

Without a PMU the memory traffic of other cores cannot be seen, so this is a finding by elimination: the
probe is bandwidth-bound (stream-like), the run lost no CPU time (others, steal, run-queue wait and the
timing loop's lost time within 2% of usual), its clock explains at most half of its slowdown (a clock d lower
slows a bandwidth-bound loop by at most d: on this KVM guest a neighbour streaming memory lowered the probe
CPU's effective clock by 1.4-3% while stream ran 8-18% slower, and those runs were all called `frequency`),
and os/memory counters show nothing. The frequency finding, scored by what its drop explains, stays beside it.
Interference that comes and goes (transient) fits better than a level shift, which page placement also
explains. Fixed scores: 0.4 transient, 0.25 otherwise; low confidence.
"""

from __future__ import annotations

from tailscope.analysis.causes.base import finding, vs_usual
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.causes.frequency import MIN_DROP  # the smallest clock drop read as one
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct

NAME = "memory-bandwidth-contention"
READS = ("probe", "others_share", "steal_share", "run_delay_share", "lost_share", "effective_mhz")
BANDWIDTH_PROBES = frozenset({"stream", "triad", "membw", "hpcc-stream", "likwid-stream"})
CPU_LOSS_TOLERANCE = 0.02
MITIGATION = (
    "run bandwidth-bound jobs with whole sockets reserved (Slurm --exclusive); look for other jobs or "
    "daemons streaming memory on the node's other cores (with a PMU: uncore memory-controller counts)"
)


def clock_drop(ctx: RunContext) -> float:
    """How much lower the effective clock was than usual (0 when as usual, higher or unknown)."""
    return max(0.0, ctx.drop("effective_mhz") or 0.0)


def cpu_time_as_usual(ctx: RunContext) -> bool:
    """No CPU time lost beyond usual, and a clock that explains at most half of the run's slowdown (a memory-
    or cache-bound loop slows by at most its clock drop)."""
    for name in ("others_share", "steal_share", "run_delay_share", "lost_share"):
        excess = ctx.excess(name)
        if excess is not None and excess > CPU_LOSS_TOLERANCE:
            return False
    drop = clock_drop(ctx)
    return drop < MIN_DROP or drop < 0.5 * ctx.slowdown


def clock_words(ctx: RunContext) -> str:
    """'its clock was as usual', or how much lower it was and how little of the slowdown that explains."""
    drop = clock_drop(ctx)
    if drop < MIN_DROP:
        return "its clock was as usual"
    return f"its clock was only {pct(drop)} lower, at most {pct(drop)} of the {pct(ctx.slowdown)} slowdown"


def assess(ctx: RunContext) -> CauseFinding | None:
    if ctx.probe not in BANDWIDTH_PROBES or not ctx.has_evidence or not cpu_time_as_usual(ctx):
        return None
    score = 0.4 if ctx.kind == "transient" else 0.25
    virt = str(ctx.facts.get("virtualization") or "none")
    who = "other cores" if virt == "none" else "other cores, or the host's other tenants (a virtual machine),"
    sentence = (
        "a bandwidth-bound probe slowed while it lost no CPU time "
        f"(others {vs_usual(ctx.value('others_share'), ctx.typical('others_share'))}) "
        f"and {clock_words(ctx)}: "
        f"{who} competing for memory bandwidth fits (no PMU: their traffic is not seen)"
    )
    evidence = {
        "probe": ctx.probe,
        "others_share": ctx.value("others_share"),
        "usual_others_share": ctx.typical("others_share"),
        "effective_mhz": ctx.value("effective_mhz"),
        "usual_effective_mhz": ctx.typical("effective_mhz"),
        "kind": ctx.kind,
    }
    return finding(NAME, ctx, score, sentence, MITIGATION, evidence, direct=False)
