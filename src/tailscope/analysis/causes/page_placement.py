"""page-placement: a level shift set by the physical pages the run got (seed 000), by elimination.

Only for systematic runs (slow in every iteration) with recorded evidence, and only when no other cause
with direct evidence accounts for at least 30% of the slowdown. The decisive test is `tailscope addr
explain CAMPAIGN` (a max-statistic permutation test of slow vs normal runs' page frames, addr/explain.py);
with a PMU, snoop-filter evictions. Advice is vendor-aware (vendor.py): snoop-filter and cache-slice advice
only for the CPU families where seed 000 established that mechanism.
"""

from __future__ import annotations

from collections.abc import Sequence

from tailscope.analysis.causes.base import finding
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.causes.vendor import cpu_name, snoop_filter_family
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct

NAME = "page-placement"
READS = ("kind", "kind_evidence", "other findings", "facts.cpu_vendor/family/model")
OTHERS_EXPLAIN = 0.3
ELIMINATION = {
    "memory-bandwidth-contention",
    "cache-contention",
}  # by elimination too: they do not exclude it
SCORE = 0.45


def mitigation(ctx: RunContext) -> str:
    family = snoop_filter_family(ctx.facts)
    if family:
        return (
            f"on {family} the pages' cache slices can conflict in the snoop filter (seed 000): use 1 GiB "
            "pages or sort pages by slice (`tailscope addr`), and test with `tailscope addr explain`"
        )
    return (
        "compare the pages of slow and normal runs with `tailscope addr explain` (permutation test); "
        f"try 1 GiB pages, which give fewer distinct placements (no known address-to-cache mapping for "
        f"{cpu_name(ctx.facts)})"
    )


def assess(ctx: RunContext, others: Sequence[CauseFinding] = ()) -> CauseFinding | None:
    ev = ctx.kind_evidence
    if ctx.kind != "systematic" or ev is None or not ctx.has_evidence:
        return None
    if any(f.score >= OTHERS_EXPLAIN and f.cause not in ELIMINATION for f in others):
        return None
    sentence = (
        f"a level shift: {ev.low} of {ev.iterations} iterations low, median {pct(1 - ev.median_ratio)} below "
        f"the usual iteration with spread {pct(ev.spread)}, and nothing in the evidence (CPU time, clock, "
        "interrupts, memory) explains it: the physical pages the run got fit"
    )
    evidence = {
        "iterations": ev.iterations,
        "low": ev.low,
        "median_ratio": ev.median_ratio,
        "spread": ev.spread,
        "snoop_filter_family": snoop_filter_family(ctx.facts),
    }
    return finding(NAME, ctx, SCORE, sentence, mitigation(ctx), evidence, direct=False)
