"""thp-fallback: the run got small pages where it asked for transparent huge pages.

Reads /proc/vmstat thp_fault_alloc and thp_fault_fallback over the trial. The run asked for huge pages when
its page policy (runs.page_policy, stored for every run, the default thp too) is a huge-page one (thp, 2m, 1g)
or when the node's normal runs got huge pages. A run's pages are
set when it starts, so a fallback shows as a level shift (systematic); the score is higher then. The
compaction and allocation stalls of the same trial are the kernel's failed attempts to find 2 MiB blocks
(fragmentation): their time (1 ms per stall, memory_pressure's stated cost) counts here too, and the score
is at least the share of the slowdown they explain -- unless kswapd reclaimed in the trial
(`RunContext.short_of_memory`): then the node was short of memory, the fallbacks are one effect of that
shortage, and the stalls are memory-pressure's.
"""

from __future__ import annotations

from tailscope.analysis.causes.base import explained_score, finding
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct

NAME = "thp-fallback"
READS = ("thp_fault_alloc", "thp_fault_fallback", "compact_stall", "allocstall", "runs.page_policy")
HUGE_POLICIES = ("thp", "2m", "1g")  # the page policies that ask for huge pages (4k does not)
STALL_COST_S = 1e-3
MITIGATION = (
    "compact memory before runs (echo 1 > /proc/sys/vm/compact_memory), set THP defrag to 'defer+madvise' "
    "or 'madvise', or reserve huge pages (vm.nr_hugepages, hugetlbfs)"
)


def assess(ctx: RunContext) -> CauseFinding | None:
    fallback = ctx.value("thp_fault_fallback")
    if fallback is None:
        return None
    extra = fallback - (ctx.typical("thp_fault_fallback") or 0.0)
    alloc = ctx.value("thp_fault_alloc") or 0.0
    usual_alloc = ctx.typical("thp_fault_alloc") or 0.0
    policy = (ctx.page_policy or "").lower()
    asked = usual_alloc > 0 or policy in HUGE_POLICIES
    if extra < 1 or not asked:
        return None
    fraction = extra / max(extra + alloc, 1.0)
    base = 0.5 if ctx.kind == "systematic" else 0.3
    stalls = sum(max(0.0, ctx.excess(n) or 0.0) for n in ("compact_stall", "allocstall"))
    short = ctx.short_of_memory()
    wall = ctx.value("wall_s") or 0.0
    stalled = stalls * STALL_COST_S / wall if wall > 0 and not short else 0.0
    score = max(min(1.0, base + 0.4 * fraction), explained_score(stalled, ctx.slowdown))
    if short:
        tail = "; the node was short of memory (kswapd reclaimed): the fallbacks are one effect of that"
    elif stalls:
        tail = f"; {stalls:,.0f} compaction and allocation stalls looking for 2 MiB blocks"
    else:
        tail = ""
    sentence = (
        f"{extra:,.0f} huge-page faults fell back to small pages (thp_fault_fallback {fallback:,.0f}, usual "
        f"{ctx.typical('thp_fault_fallback') or 0:,.0f}); it got {alloc:,.0f} huge pages where normal runs "
        "got "
        f"{usual_alloc:,.0f} ({pct(fraction)} of its huge-page faults fell back)"
        + tail
    )
    evidence = {
        "thp_fault_fallback": fallback,
        "usual_thp_fault_fallback": ctx.typical("thp_fault_fallback"),
        "thp_fault_alloc": alloc,
        "usual_thp_fault_alloc": usual_alloc,
        "fallback_fraction": fraction,
        "stalls": stalls,
        "short_of_memory": short,
        "page_policy": policy or None,
    }
    return finding(NAME, ctx, score, sentence, MITIGATION, evidence)
