"""thp-fallback: the run got small pages where it asked for transparent huge pages.

Reads /proc/vmstat thp_fault_alloc and thp_fault_fallback over the trial. The run asked for huge pages when
its parameters name a huge/THP page policy or when the node's normal runs got huge pages. A run's pages are
set when it starts, so a fallback shows as a level shift (systematic); the score is higher then.
"""

from __future__ import annotations

from tailscope.analysis.causes.base import finding
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct

NAME = "thp-fallback"
READS = ("thp_fault_alloc", "thp_fault_fallback", "params.pages")
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
    policy = str(ctx.params.get("pages", ctx.params.get("page_policy", ""))).lower()
    asked = usual_alloc > 0 or any(w in policy for w in ("thp", "huge", "2m", "1g"))
    if extra < 1 or not asked:
        return None
    fraction = extra / max(extra + alloc, 1.0)
    base = 0.5 if ctx.kind == "systematic" else 0.3
    score = min(1.0, base + 0.4 * fraction)
    sentence = (
        f"{extra:,.0f} huge-page faults fell back to small pages (thp_fault_fallback {fallback:,.0f}, usual "
        f"{ctx.typical('thp_fault_fallback') or 0:,.0f}); it got {alloc:,.0f} huge pages where normal runs "
        "got "
        f"{usual_alloc:,.0f} ({pct(fraction)} of its huge-page faults fell back)"
    )
    evidence = {
        "thp_fault_fallback": fallback,
        "usual_thp_fault_fallback": ctx.typical("thp_fault_fallback"),
        "thp_fault_alloc": alloc,
        "usual_thp_fault_alloc": usual_alloc,
        "fallback_fraction": fraction,
        "page_policy": policy or None,
    }
    return finding(NAME, ctx, score, sentence, MITIGATION, evidence)
