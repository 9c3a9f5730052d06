"""The short terminal verdict of `tailscope check` and `tailscope analyze`: lines, never printed here.

    campaign 3f2a...: 2 variants, 1 node, 400 ok runs, 1 failed
    probe  node  n    median [95% CI]              CV     slow >5%  slow >10%  kinds
    l2sum  n1    200  95.12 [95.01, 95.20] GB/s    0.41%  3/200     1/200      2 systematic, 1 transient
    verdict: DEGRADED (1 of 1 node degraded)
      n1: degraded: cpu-contention in trials 13-21 (9 of 9 flagged runs of l2sum): stress-ng (pid 4242) ...
    limits: slow-run rate (> 5% below the node median) at most 1% (binomial test, alpha 0.05); ...
    notes:
      - node n1, l2sum-1a2b: 3 of 200 runs (1.5%, ...) were more than 5% slower than the node median ...

One row per (variant, node). The first column is the probe, or the variant id where the campaign has
several variants of that probe. A slow count the tail-count test rejects is marked with `!`.
Names come from the store (node names, notes quoting them): control characters are written as escapes
(\\x1b) so a name cannot drive the terminal.
"""

from __future__ import annotations

import textwrap
from collections import Counter

from tailscope.analysis.health import SEVERITY
from tailscope.analysis.model import CampaignAnalysis, GroupSummary
from tailscope.analysis.wording import pct, pct_range
from tailscope.report.numbers import kinds_text, median_ci_text, tail_text

__all__ = ["MAX_NOTES", "render_summary"]

MAX_NOTES = 3  # the most important notes; the rest are in the report and --json
MAX_GROUP_ROWS = 30  # beyond this many (variant, node) rows only the slowest nodes of each variant are listed
SLOWEST_SHOWN = 10
MAX_NAMED_NODES = 12  # drain / re-test lists longer than this are cut, with the count
WIDTH = 100  # notes are wrapped to this many columns


def render_summary(analysis: CampaignAnalysis) -> list[str]:
    """The summary as lines without newlines: header, one row per group, the verdict, the top notes."""
    s = analysis.settings
    n_failed = sum(g.n_failed for g in analysis.groups)
    nodes = len({g.node for g in analysis.groups})
    lines = [
        f"campaign {_printable(analysis.campaign)}: {_count(len(analysis.variants), 'variant')}, "
        f"{_count(nodes, 'node')}, {len(analysis.runs)} ok runs, {n_failed} failed"
    ]
    if analysis.groups:
        per_probe = Counter(v.probe for v in analysis.variants)
        header = [
            "probe",
            "node",
            "n",
            f"median [{pct(s.confidence)} CI]",
            "CV",
            *(f"slow >{pct(d)}" for d in s.thresholds),
            "kinds",
        ]
        groups, hidden = _shown_groups(analysis)
        rows = [[_printable(c) for c in _row(g, per_probe[g.probe] > 1)] for g in groups]
        lines += _columns([header, *rows])
        if hidden:
            lines.append(
                f"  ({hidden} faster (variant, node) rows not shown: the slowest {SLOWEST_SHOWN} nodes of "
                "each variant are listed; all in the report and in --json)"
            )
    else:
        lines.append("no successful runs to analyse")
    lines += _cluster_lines(analysis)
    lines += _verdict_lines(analysis)
    if analysis.notes:
        lines.append("notes:")
        for note in analysis.notes[:MAX_NOTES]:
            lines += textwrap.wrap(_printable(note), WIDTH, initial_indent="  - ", subsequent_indent="    ")
        rest = len(analysis.notes) - MAX_NOTES
        if rest > 0:
            lines.append(f"  ({rest} more note{'s' if rest != 1 else ''} in the report and in --json)")
    return lines


def _shown_groups(analysis: CampaignAnalysis) -> tuple[list[GroupSummary], int]:
    """Every group on small campaigns; on fleets, the slowest nodes of each variant (by node ratio)."""
    groups = list(analysis.groups)
    if len(groups) <= MAX_GROUP_ROWS:
        return groups, 0
    shown: list[GroupSummary] = []
    for variant in dict.fromkeys(g.variant for g in groups):
        mine = [g for g in groups if g.variant == variant]
        mine.sort(key=lambda g: g.node_ratio)
        shown += mine[:SLOWEST_SHOWN]
    return shown, len(groups) - len(shown)


def _cluster_lines(analysis: CampaignAnalysis) -> list[str]:
    """One block per variant measured on >= 3 nodes: variance split, drain / re-test nodes, speed bins."""
    lines: list[str] = []
    for c in analysis.cluster:
        v = c.components
        icc = f"ICC {v.icc:.2f}" + (
            f" [{v.icc_low:.2f}, {v.icc_high:.2f}]"
            if v.icc_low is not None and v.icc_high is not None
            else ""
        )
        rate = pct_range(c.slow_rate_low, c.slow_rate_high)
        lines.append(
            f"cluster {_printable(c.variant)}: {v.nodes} nodes, fleet median {c.fleet_median:.4g} {c.unit}; "
            f"node-to-node {pct(v.node_sd_pct)}, run-to-run {pct(v.run_sd_pct)} ({icc}); "
            f"slow runs {c.slow_runs}/{c.runs} ({pct(c.slow_rate)}, CI {rate})"
        )
        lines.append(f"  drain (Bonferroni): {_node_list(c.drain)}")
        lines.append(f"  re-test (Benjamini-Hochberg): {_node_list(c.retest)}")
        if c.bins:
            bins = "; ".join(f"{b.index}: {len(b.nodes)} nodes {b.low:.4g}-{b.high:.4g}" for b in c.bins)
            lines.append(f"  speed bins (1 = slowest): {bins}")
    return lines


def _node_list(nodes: tuple[str, ...]) -> str:
    if not nodes:
        return "none"
    named = ", ".join(_printable(n) for n in nodes[:MAX_NAMED_NODES])
    return named + (f" (+{len(nodes) - MAX_NAMED_NODES} more)" if len(nodes) > MAX_NAMED_NODES else "")


def _row(g: GroupSummary, several_variants: bool) -> list[str]:
    return [
        g.variant if several_variants else g.probe,
        g.node,
        str(g.n),
        median_ci_text(g),
        pct(g.cv) if g.cv is not None else "-",
        *(tail_text(t) + ("!" if t.rejects else "") for t in g.tails),
        kinds_text(g),
    ]


def _columns(rows: list[list[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)) + "  " + r[-1] for r in rows]


MAX_NODE_LINES = 12  # non-healthy nodes listed one by one; the rest are counted
MAX_REASONS = 2  # reasons shown per node (all in the report and --json)


def _verdict_lines(analysis: CampaignAnalysis) -> list[str]:
    """The campaign state, one line per node that is not healthy (all nodes when few), and the limits.

    The state is the node verdicts' worst (analysis/health.py): never PASS above a failing probe."""
    nodes = analysis.nodes
    if not nodes:
        return ["verdict: INCONCLUSIVE (no node has ok runs to judge)"]
    state = analysis.verdict.state
    counts = Counter(n.verdict for n in nodes)
    summary = ", ".join(
        f"{counts[s]} of {_count(len(nodes), 'node')} {s}" for s in ("degraded", "inconclusive") if counts[s]
    )
    lines = [
        f"verdict: {state.upper()}" + (f" ({summary})" if summary else f" ({_count(len(nodes), 'node')})")
    ]
    shown = [n for n in nodes if n.verdict != "healthy"] if len(nodes) > MAX_NODE_LINES else list(nodes)
    shown.sort(key=lambda n: (-SEVERITY[n.verdict], n.node))
    for n in shown[:MAX_NODE_LINES]:
        head = f"  {_printable(n.node)}: {n.verdict}"
        if n.verdict == "degraded" and n.causes:
            head += ": " + ", ".join(dict.fromkeys(c.cause for c in n.causes))
        lines.append(head)
        for reason in n.reasons[:MAX_REASONS]:
            lines += textwrap.wrap(
                _printable(reason), WIDTH, initial_indent="    - ", subsequent_indent="      "
            )
        if len(n.reasons) > MAX_REASONS:
            lines.append(f"    ({len(n.reasons) - MAX_REASONS} more reasons in the report and in --json)")
    hidden = len(nodes) - min(len(shown), MAX_NODE_LINES)
    if hidden > 0:
        lines.append(f"  ({hidden} more nodes, healthy or beyond the first {MAX_NODE_LINES}, in --json)")
    if nodes:
        lines += textwrap.wrap(
            "limits: " + "; ".join(nodes[0].limits), WIDTH, initial_indent="", subsequent_indent="  "
        )
    return lines


def _printable(text: str) -> str:
    """Control characters (ESC, newline, ...) as Python escapes: 'n\\x1b[31m1' stays one inert line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
