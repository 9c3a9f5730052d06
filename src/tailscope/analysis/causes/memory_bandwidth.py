"""memory-bandwidth-contention: a bandwidth-bound probe was slower while it lost no CPU time.

Without a PMU the memory traffic of other cores cannot be seen, so this is a finding by elimination: the
probe is bandwidth-bound (stream-like), the run lost no CPU time (others, steal, run-queue wait and the
timing loop's lost time within 2% of usual), its clock was as usual, and os/memory counters show nothing.
Interference that comes and goes (transient) fits better than a level shift, which page placement also
explains. Fixed scores: 0.4 transient, 0.25 otherwise; low confidence.
"""

from __future__ import annotations

from tailscope.analysis.causes.base import finding, vs_usual
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding

NAME = "memory-bandwidth-contention"
READS = ("probe", "others_share", "steal_share", "run_delay_share", "lost_share", "effective_mhz")
BANDWIDTH_PROBES = frozenset({"stream", "triad", "membw", "hpcc-stream", "likwid-stream"})
CPU_LOSS_TOLERANCE = 0.02
MITIGATION = (
    "run bandwidth-bound jobs with whole sockets reserved (Slurm --exclusive); look for other jobs or "
    "daemons streaming memory on the node's other cores (with a PMU: uncore memory-controller counts)"
)


def cpu_time_as_usual(ctx: RunContext) -> bool:
    for name in ("others_share", "steal_share", "run_delay_share", "lost_share"):
        excess = ctx.excess(name)
        if excess is not None and excess > CPU_LOSS_TOLERANCE:
            return False
    now, usual = ctx.value("effective_mhz"), ctx.typical("effective_mhz")
    return not (now is not None and usual and now < 0.99 * usual)


def assess(ctx: RunContext) -> CauseFinding | None:
    if ctx.probe not in BANDWIDTH_PROBES or not ctx.has_evidence or not cpu_time_as_usual(ctx):
        return None
    score = 0.4 if ctx.kind == "transient" else 0.25
    virt = str(ctx.facts.get("virtualization") or "none")
    who = "other cores" if virt == "none" else "other cores, or the host's other tenants (a virtual machine),"
    sentence = (
        "a bandwidth-bound probe slowed while it lost no CPU time "
        f"(others {vs_usual(ctx.value('others_share'), ctx.typical('others_share'))}) and its clock was as "
        f"usual: {who} competing for memory bandwidth fits (no PMU: their traffic is not seen)"
    )
    evidence = {
        "probe": ctx.probe,
        "others_share": ctx.value("others_share"),
        "usual_others_share": ctx.typical("others_share"),
        "effective_mhz": ctx.value("effective_mhz"),
        "kind": ctx.kind,
    }
    return finding(NAME, ctx, score, sentence, MITIGATION, evidence, direct=False)
