""" "What the numbers mean": the plain-words paragraphs printed next to each figure and table of the report.

Each function returns plain text (the HTML renderer escapes it); numbers that depend on the analysis
settings (thresholds, confidence, allowed rate, quantile rule) are filled in so the words match the page.
"""

from __future__ import annotations

from tailscope.analysis.model import Settings
from tailscope.analysis.wording import pct

__all__ = [
    "CAUSES",
    "ecdf_text",
    "histogram_text",
    "nodes_text",
    "sorted_text",
    "table_text",
    "timeline_text",
    "verdict_text",
]


def _thresholds(settings: Settings) -> str:
    return " and ".join(pct(d) for d in settings.thresholds)


def sorted_text(settings: Settings, higher_is_better: bool) -> str:
    order = "lowest value" if higher_is_better else "longest time"
    return (
        f"Every run of this variant, sorted from the slowest (left, {order}) to the fastest (right). "
        "Each value is node-median scaled, as in McCalpin's SC18 Fig. 1: value x (median of all runs of "
        "the variant / median of the run's own node). Scaling removes the steady difference between "
        "nodes (one node that is always 3% slower) so what remains is run-to-run variation. The healthy "
        "shape is a flat line; a drop at the left end is the slow tail. The dashed lines are the slow "
        f"thresholds ({_thresholds(settings)}): a point beyond a line is that much slower than its own "
        "node's median. The solid line is the median of all runs. Colours say what the run's iterations "
        "show about why it was slow (see the timelines below). Hover a point for its run id, trial and value."
    )


def ecdf_text(settings: Settings) -> str:
    return (
        "The fraction of runs (y) whose performance ratio is at or below x. The performance ratio is the "
        "run divided by its node's median (the node median divided by the run for times), so 1 is a "
        f"typical run and {1 - settings.primary_threshold:g} is {pct(settings.primary_threshold)} slower. "
        "A steep rise at 1 means runs are tight. A foot to the left of the dashed lines is the slow tail: "
        "the curve's height where it crosses a line is the fraction of runs slower than that threshold."
    )


def histogram_text() -> str:
    return (
        "How many runs fall into each bin of performance ratio. A separate small hump left of the main "
        "peak is a slow mode: a second population of runs with a cause of its own, not the edge of normal "
        "spread. A rare mode (1 run in 100) is a bar of height 1 or 2 here; the table counts it exactly."
    )


def nodes_text(settings: Settings) -> str:
    return (
        "Per node: the slowest, median and fastest run (the seed paper's Fig. 9), nodes sorted by median, "
        "slowest first. Short bars at different heights mean node-to-node differences dominate (hardware, "
        "firmware, memory population, CPU frequency settings: compare the node facts at the end). Long "
        "bars mean run-to-run variation dominates. A node drawn in red is slower than its peers: the "
        "modified z-score of its median (log scale, against the other nodes) is below "
        f"-{settings.robust_cut:g}. Such a node is slow in every run, so node-median scaling hides it "
        "from the slow-run counts."
    )


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
        "drawn by its triad kernel. The dashed line is the slow threshold measured from the typical run's "
        "median iteration (below it for rates, above it for times). Long runs are drawn as the lowest "
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
    return (
        "No limits were set, so nothing could fail and the verdict passes by default. To make it a test, "
        "set --max-slow-rate (tail-count test), --max-q01-drop (quantile rule) or --max-cv; a failed "
        "limit gives exit code 1."
    )
