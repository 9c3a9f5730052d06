"""cache-contention: a cache-bound probe was slower while it lost no CPU time (by elimination, like
memory-bandwidth-contention): an SMT sibling or other cores sharing the cache level evicted its lines.

Fixed scores 0.35 transient, 0.2 otherwise; low confidence. With a PMU, cache-miss counters would say more.
"""

from __future__ import annotations

from tailscope.analysis.causes.base import finding, vs_usual
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.causes.memory_bandwidth import clock_words, cpu_time_as_usual
from tailscope.analysis.model import CauseFinding

NAME = "cache-contention"
READS = ("probe", "others_share", "lost_share", "effective_mhz")
CACHE_PROBES = frozenset({"l2sum", "l1sum", "l3sum", "cache", "pchase"})
MITIGATION = (
    "keep SMT siblings and cores sharing the cache idle during the probe (Slurm --exclusive, "
    "--hint=nomultithread); with a PMU, compare cache-miss counts of slow and normal runs"
)


def assess(ctx: RunContext) -> CauseFinding | None:
    if ctx.probe not in CACHE_PROBES or not ctx.has_evidence or not cpu_time_as_usual(ctx):
        return None
    score = 0.35 if ctx.kind == "transient" else 0.2
    sentence = (
        "a cache-bound probe slowed while it lost no CPU time "
        f"(others {vs_usual(ctx.value('others_share'), ctx.typical('others_share'))}) "
        f"and {clock_words(ctx)}: "
        "contention for the shared cache fits"
    )
    evidence = {"probe": ctx.probe, "others_share": ctx.value("others_share"), "kind": ctx.kind}
    return finding(NAME, ctx, score, sentence, MITIGATION, evidence, direct=False)
