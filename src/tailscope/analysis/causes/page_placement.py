"""page-placement: a level shift set by the physical pages the run got (seed 000), by elimination.

Only for systematic runs (slow in every iteration) with recorded evidence, and only when no other cause
with direct evidence accounts for at least 30% of the slowdown. The decisive test is the pages test of
`tailscope addr explain` (a max-statistic permutation test of slow vs normal runs' page frames,
addr/explain.py), which the workflow runs when the campaign recorded pages and a run lands here: an
address dependence it finds makes this a direct finding (score 0.8); none found leaves it a weak one
(0.15). Without pages: by elimination (0.45, low confidence). With a PMU, snoop-filter evictions.
Advice is vendor-aware (vendor.py): snoop-filter and cache-slice advice only for the CPU families where
seed 000 established that mechanism.
On a virtual machine (facts.virtualization) the pages are guest-physical: the host decides where the memory
really is, and the host's other tenants shift a run's level with no trace in the guest. Slow runs there
also come in spells, which the permutation test (it assumes runs are exchangeable) reads as an address
dependence whenever the allocator hands out similar frames within a spell: seen here, 0.8 on runs that were
slow because the host's memory bandwidth dropped. So on a VM this cause stays a weak one (SCORE_NOT_FOUND,
low confidence) whatever the test says, and says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tailscope.analysis.causes.base import finding
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct
from tailscope.node.vendor import cpu_name, snoop_filter_family

NAME = "page-placement"
READS = ("kind", "kind_evidence", "other findings", "facts.cpu_vendor/family/model")
OTHERS_EXPLAIN = 0.3
ELIMINATION = {
    "memory-bandwidth-contention",
    "cache-contention",
}  # by elimination too: they do not exclude it
SCORE = 0.45
SCORE_TESTED = 0.8
SCORE_NOT_FOUND = 0.15


@dataclass(frozen=True)
class PagesTest:
    """The pages test of one variant (addr/explain.py's parity search)."""

    variant: str
    trials_with_pages: int
    slow: int
    permutations: int
    alpha: float
    p_adjusted: float | None  # of the best address-bit parity
    bits: tuple[int, ...] | None
    significant: bool


def variants_it_explains(runs: Sequence[Any]) -> set[str]:
    """The variants with a run whose best explanation (first cause) is page-placement: where the pages
    test is worth running (workflow) and the check suggests the 1 GiB offset sweep. A second place behind
    another elimination cause (a busy node's cache-contention) is no reason to test pages."""
    from tailscope.analysis.run_columns import RunVerdicts

    if isinstance(runs, RunVerdicts):  # by column: only the runs with causes (or other fields of their own)
        runs = runs.rows(runs.with_extra())
    return {str(r.variant) for r in runs if r.causes and r.causes[0].cause == NAME}


def pages_tests(explanation: Any) -> dict[str, PagesTest]:
    """Per variant: the pages test, from an addr.explain.Explanation."""
    out = {}
    for v in explanation.variants:
        best = v.best
        out[v.variant] = PagesTest(
            variant=v.variant,
            trials_with_pages=v.trials_with_pages,
            slow=v.slow,
            permutations=v.permutations,
            alpha=float(explanation.settings["alpha"]),
            p_adjusted=None if best is None else float(best.p_adjusted),
            bits=None if best is None else tuple(best.bits),
            significant=bool(v.findings),
        )
    return out


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


def assess(
    ctx: RunContext, others: Sequence[CauseFinding] = (), tests: Mapping[str, PagesTest] | None = None
) -> CauseFinding | None:
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
    if ctx.probe.startswith("app:"):  # an application (`run -- CMD`): its pages are not recorded
        return finding(
            NAME,
            ctx,
            SCORE_NOT_FOUND,
            f"a level shift ({ev.low} of {ev.iterations} iterations low) that no evidence explains; page "
            "placement does not apply to an application: tailscope records physical pages only for its own "
            "probes",
            "test this node's page placement with the probes: "
            "`tailscope run l2sum --page 2m,1g --trials 100`, "
            "then `tailscope addr explain`",
            {"iterations": ev.iterations, "low": ev.low, "applies": False},
            direct=False,
        )
    evidence: dict[str, Any] = {
        "iterations": ev.iterations,
        "low": ev.low,
        "median_ratio": ev.median_ratio,
        "spread": ev.spread,
        "snoop_filter_family": snoop_filter_family(ctx.facts),
    }
    test = (tests or {}).get(ctx.variant)
    virt = str(ctx.facts.get("virtualization") or "none")
    if virt != "none":
        evidence["virtualization"] = virt
        if test is not None and test.p_adjusted is not None:
            evidence.update(pages_test_p=test.p_adjusted, pages_test_bits=list(test.bits or ()))
        sentence += (
            f"; but this node is a virtual machine ({virt}): its physical pages are guest-physical, not "
            "where the host put the memory, and the host's other tenants shift a run's level too"
        )
        return finding(
            NAME,
            ctx,
            SCORE_NOT_FOUND,
            sentence,
            "test page placement on bare metal; on a VM, compare with the host's load (ask its operator)",
            evidence,
            direct=False,
        )
    if test is None or test.trials_with_pages == 0 or test.slow == 0 or test.p_adjusted is None:
        return finding(NAME, ctx, SCORE, sentence, mitigation(ctx), evidence, direct=False)
    evidence.update(pages_test_p=test.p_adjusted, pages_test_bits=list(test.bits or ()))
    if test.significant:
        sentence += (
            f"; the pages test ties slowness to the parity of physical address bits {list(test.bits or ())} "
            f"(max-statistic permutation p = {test.p_adjusted:.3g}, {test.permutations} permutations)"
        )
        return finding(NAME, ctx, SCORE_TESTED, sentence, mitigation(ctx), evidence)
    sentence += (
        f"; but the pages test found no address dependence (best parity p = {test.p_adjusted:.3g} > "
        f"{test.alpha:g})"
    )
    return finding(NAME, ctx, SCORE_NOT_FOUND, sentence, mitigation(ctx), evidence, direct=False)
