""" "What the numbers mean": the plain-words paragraphs printed next to each figure and table of the report.

Each function returns plain text (the HTML renderer escapes it); numbers that depend on the analysis
settings (thresholds, confidence, allowed rate, quantile rule) are filled in so the words match the page.
"""

from __future__ import annotations

from tailscope.analysis.model import Settings
from tailscope.analysis.wording import pct

__all__ = ["CAUSES", "table_text", "timeline_text", "verdict_text"]


def _thresholds(settings: Settings) -> str:
    return " and ".join(pct(d) for d in settings.thresholds)


def table_text(settings: Settings) -> str:
    d = pct(settings.primary_threshold)
    level = pct(settings.confidence)
    return (
        f"Median [CI]: the middle run, and an interval that holds the true median with at least {level} "
        "probability. It is exact and assumes no bell curve (order statistics); it needs at least 6 runs. "
        "Two nodes whose intervals do not overlap differ. CV: standard deviation / mean across runs "
        "(the seed paper's HPL runs with 1 GiB pages: 0.13% at most). "
        f"Slow k/n: runs more than {_thresholds(settings)} slower than the node median; the rate's "
        f"interval is Clopper-Pearson ({level}); p is the one-sided binomial probability of k or more "
        f"slow runs if the true rate were the allowed {pct(settings.allowed_slow_rate)}: p below "
        f"{settings.alpha:g} means this node has more slow runs than allowed. "
        f"Quantile rule (SJTU): passes when the {pct(settings.quantile_rule_q)} quantile on the slow side "
        f"is within {pct(-settings.quantile_rule_limit)} of the median. It is blind to rare slow modes: "
        "if 0.4% of runs are 20% slow, the 1% quantile still sits among the normal runs and the rule over "
        "500 runs fails only about 5% of the time. The tail count sees every slow run, which is why both "
        "are shown and the tail count is the one to trust for rare slowdowns. "
        f"Kinds: of the runs more than {d} slow, systematic ones were slow in every iteration, transient "
        "ones in a few. Trials needed: runs to see at least one slow run with 95% / 99% probability at the "
        f"observed rate, or at 1 in {round(1 / settings.given_rate):d} when none was seen."
    )


CAUSES = (
    "A systematic slow run sits low for the whole run: its slowdown was fixed when its memory was "
    "allocated. The usual cause is physical page placement: the pages it got map to conflicting L2/L3 "
    "sets or snoop-filter entries (the seed paper's case), so every iteration pays the same extra DRAM "
    "traffic. The next run gets other pages and is usually normal; larger pages (2 MiB, 1 GiB) remove "
    "most of it. A transient slow run has a few deep dips: something else ran for a moment (OS daemons, "
    "interrupts, timer ticks, a co-runner sharing the node or its memory bandwidth, a frequency or "
    "power-capping event). Look at what else ran on the node at that time, and at the fwq noise probe."
)


def timeline_text() -> str:
    return (
        "Each iteration of a slow run (colour) against a typical run of the same node (grey: the run "
        "closest to the node median). Warm-up iterations are left out. Drawn are the barrier-to-barrier "
        "team times where the probe records them, else the slowest thread of each iteration; stream is "
        "drawn by its triad kernel. Where the slow run has one record per iteration, the grey dotted line "
        "is the typical iteration its label was measured against and the dashed line the low cut: an "
        "iteration beyond it counts as low, and a run low in every iteration is systematic, in a few "
        "transient (the classifier's own reference and cut). Otherwise the dashed line is the slow "
        "threshold measured from the typical run's median iteration (below it for rates, above it for "
        "times). Long runs are drawn as the lowest "
        "and highest value of each bucket of iterations, so single-iteration spikes stay visible. "
        f"{CAUSES}"
    )


def verdict_text(has_checks: bool) -> str:
    text = (
        "Each node is healthy, degraded (a limit failed or it is slower than its peers; its causes are "
        "named) or inconclusive (too busy or too noisy to judge); the campaign's verdict is the worst "
        "node's. Exit codes: 0 healthy, 1 degraded, 3 inconclusive."
    )
    if has_checks:
        return text + " Each check applies one limit to one node and variant."
    return text + " All limits are off, so only the fleet screen and the busy/noise screens judged."
