"""unknown: no cause of the catalogue fits, or the run has no evidence to judge (imported runs).

The sentence says which, with the run's shape (systematic / transient from its iterations), so a reader
still learns whether a level shift or interference is to be looked for.
"""

from __future__ import annotations

from tailscope.analysis.causes.base import finding
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct

NAME = "unknown"
READS = ("has_evidence", "kind", "kind_evidence")
MITIGATION = (
    "rerun with the monitor (`--monitor`) or on a node with a PMU to see more; compare the pages with "
    "`tailscope addr explain`"
)
SHOWN = ("others_share", "irq_share", "interrupts_per_s", "effective_mhz", "thp_fault_fallback", "pgmajfault")


def shape(ctx: RunContext) -> str:
    ev = ctx.kind_evidence
    if ev is None:
        return "its iterations do not tell a level shift from interference"
    if ev.low_cut <= 0:  # classify.low_cut: 3 sds of the node's iteration noise reach below zero
        return f"its node's iterations vary too much to tell a low one ({ev.iterations} iterations)"
    low = f"{ev.low} of {ev.iterations} iterations low (more than {pct(1 - ev.low_cut)} under the usual)"
    if ctx.kind == "systematic":
        return f"{low}: a level shift over the whole run, as from the pages it got or a whole-run co-runner"
    if ctx.kind == "transient":
        return f"{low}: interference during part of the run"
    return low


def assess(ctx: RunContext) -> CauseFinding:
    if not ctx.has_evidence:
        reason = "no evidence recorded (imported, or run before evidence collection)"
        mitigation = "rerun with `tailscope run` or `tailscope check`, which record evidence for every trial"
    else:
        seen = ", ".join(f"{n} {ctx.value(n):.4g}" for n in SHOWN if ctx.value(n) is not None)
        reason = "nothing unusual in the recorded evidence" + (f" ({seen})" if seen else "")
        mitigation = MITIGATION
    evidence = {"has_evidence": ctx.has_evidence, "kind": ctx.kind, "reason": reason}
    return finding(NAME, ctx, 0.0, f"{reason}; {shape(ctx)}", mitigation, evidence, direct=False)
