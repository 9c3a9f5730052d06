"""What `tailscope check` and `tailscope analyze` print: lines, never printed here.

`render_answer` (the default) leads with the answer: one verdict line per node, one line per probe, then
at most five findings grouped by cause across probes, each with its evidence and the next command, and the
terms explained once; every line wrapped at the terminal width. `render_summary` (shown by --verbose after
the answer) is the full table of every (variant, node), the cluster blocks, the verdict checks and notes:

    campaign 3f2a...: 2 variants, 1 node, 400 ok runs, 1 failed
    probe  node  n    median [95% CI]              CV     slow >5%  slow >10%  kinds
    l2sum  n1    200  95.12 [95.01, 95.20] GB/s    0.41%  3/200     1/200      2 systematic, 1 transient
    verdict: DEGRADED (1 of 1 node degraded)
      n1: degraded: cpu-contention in trials 13-21 (9 of 9 flagged runs of l2sum): stress-ng (pid 4242) ...
    limits: slow-run rate (> 5% below the node median) at most 1% (binomial test, alpha 0.05); ...
    notes:
      - node n1, l2sum-1a2b: 3 of 200 runs (1.5%, ...) were more than 5% slower than the node median ...

One row per (variant, node). The first column is the probe, or the variant id where the campaign has
several variants of that probe. A slow count is marked with `!` where the slow-run test shows its rate
above the limit: the binomial tail-count test, or in a check stopped when settled the anytime-valid one
its verdict and claims use (analysis/summary.py sets TailCount.rejects so).
Names come from the store (node names, notes quoting them): control characters are written as escapes
(\\x1b) so a name cannot drive the terminal.
"""

from __future__ import annotations

import shutil
import textwrap
from collections import Counter

import numpy as np

from tailscope.analysis.health import SEVERITY
from tailscope.analysis.model import CampaignAnalysis, GroupSummary
from tailscope.analysis.run_columns import RunVerdicts
from tailscope.analysis.wording import pct, pct_range
from tailscope.printable import printable
from tailscope.probes.catalogue import variant_name
from tailscope.report.answer import answer_of, terms
from tailscope.report.numbers import kinds_text, median_ci_text, tail_text

__all__ = [
    "MAX_NOTES",
    "SCREEN_LINES",
    "render_answer",
    "render_summary",
    "terminal_width",
    "wrap_lines",
]

MAX_NOTES = 3  # the most important notes; the rest are in the report and --json
MAX_GROUP_ROWS = 30  # beyond this many (variant, node) rows only the slowest nodes of each variant are listed
SLOWEST_SHOWN = 10
MAX_NAMED_NODES = 12  # drain / re-test lists longer than this are cut, with the count
WIDTH = 100  # notes are wrapped to this many columns


MAX_FINDINGS = 3  # causes shown without --verbose (all with it, and in the report)
SCREEN_LINES = 40  # `check` (without --verbose) prints at most this many lines: fewer causes where needed
MAX_NODE_LINES = 12  # nodes named one per line (degraded and inconclusive first); the rest are counted
FEW_NODES = 3  # at most this many nodes named: each one's first reason gets three lines, not two
MAX_REASONS = 2  # reasons shown per node (all with --verbose, in the report and in --json)


def terminal_width(default: int = WIDTH) -> int:
    return max(40, shutil.get_terminal_size((default, 24)).columns)


def render_answer(
    analysis: CampaignAnalysis,
    *,
    width: int | None = None,
    campaign_dir: str = "DIR",
    verbose: bool = False,
    max_lines: int | None = None,
) -> list[str]:
    """The verdict per node (analysis/health.py), one line per probe, the causes of the flagged runs
    grouped across probes (analysis/causes), the terms: wrapped at `width`. `verbose` names every node
    with all its reasons. `max_lines` (not verbose): fewer causes are shown, never fewer than one, where
    MAX_FINDINGS of them would make the answer longer (a cause with its next command takes 5-7 lines)."""
    width = width or terminal_width()
    answer = answer_of(analysis, campaign_dir)
    s = analysis.settings
    out: list[str] = []

    def wrap(text: str, indent: str = "", more: str = "    ") -> list[str]:
        return textwrap.wrap(
            _printable(text),
            width,
            initial_indent=indent,
            subsequent_indent=more,
            break_on_hyphens=False,
            break_long_words=False,
        )

    def put(text: str, indent: str = "", more: str = "    ") -> None:
        out.extend(wrap(text, indent, more))

    states = Counter(n.state for n in answer.nodes)
    summary = ", ".join(f"{states[k]} {k}" for k in ("degraded", "inconclusive", "healthy") if states[k])
    put(f"verdict: {answer.state.upper()} ({summary or 'no node had ok runs to judge'})")
    order = ("degraded", "inconclusive", "healthy")
    ranked = sorted(answer.nodes, key=lambda n: (order.index(n.state), n.node))
    named = [n for n in ranked if n.state != "healthy"][:MAX_NODE_LINES]
    if len(ranked) <= MAX_NODE_LINES or verbose:
        named = ranked
    for n in named:
        causes = f": {', '.join(n.causes)}" if n.state == "degraded" and n.causes else ""
        if verbose:  # every reason on its own lines
            put(f"{n.node}: {n.state}{causes}", "  ", "      ")
            for reason in n.reasons:
                put(reason, "    - ", "      ")
            continue
        head = f"{n.node}: {n.state}{causes}"
        more = (
            f" (+{len(n.reasons) - 1} more: --verbose)" if len(n.reasons) > 1 and n.state != "healthy" else ""
        )
        # about two lines; three for a lone node or a few (`check` on this node), so the first reason gets to
        # its second clause: who ran there when the node was too busy, the figure and its limit otherwise
        lines = 3 if len(named) <= FEW_NODES else 2
        room = max(40, lines * (width - 6) - len(head) - len(more) - 12)
        first = _clip(n.reasons[0], room) if n.reasons else ""
        put(head + (f" - {first}{more}" if first else ""), "  ", "      ")
    if len(named) < len(ranked):
        rest = Counter(n.state for n in ranked if n not in named)
        put("  " + ", ".join(f"{k} more {state}" for state, k in rest.items()) + " (--verbose lists them)")
    limits = next((n.limits for n in analysis.nodes if n.limits), ())
    failed = [c for c in analysis.verdict.checks if not c.passed]
    checks = f"; {len(failed)} of {len(analysis.verdict.checks)} checks failed" if failed else ""
    if verbose and limits:
        put("limits: " + "; ".join(limits) + checks, "  ", "      ")
    elif analysis.nodes:
        put(f"limits: {_limits_short(analysis)}{checks} (--verbose for more)", "  ", "      ")
    put(f"probes (median [{pct(s.confidence)} CI], run-to-run CV, slow runs):")
    for line in _probe_lines(analysis):
        put(line, "  ", "      ")

    def causes_block(count: int) -> list[str]:
        shown = answer.causes[:count]
        if not shown:
            return wrap("causes: no flagged runs") if analysis.runs else []
        of = (
            f" ({len(shown)} of {len(answer.causes)}; --verbose for all)"
            if len(shown) < len(answer.causes)
            else ""
        )
        block = wrap(f"causes of the flagged runs, most important first{of}:")
        for i, c in enumerate(shown, start=1):
            head = f"{i}. {c.cause} [{c.confidence}]: "
            room = max(40, 2 * (width - 5) - len(head) - 12)  # about two lines
            block += wrap(head + (c.evidence if verbose else _clip(c.evidence, room)), "  ", "     ")
            todo = c.mitigation if verbose else c.mitigation.split("; ")[0]
            block += wrap(f"do: {todo}", "     ", "       ")
            if c.next_command:
                block += wrap(f"next: {c.next_command}", "     ", "       ")
        return block

    tail: list[str] = []
    for line in _comparison_lines(analysis):
        tail += wrap(line, "", "    ")
    tail += wrap("terms: " + terms(analysis))
    count = len(answer.causes) if verbose else MAX_FINDINGS
    block = causes_block(count)
    room = None if verbose or max_lines is None else max_lines - len(out) - len(tail)
    while room is not None and count > 1 and len(block) > room:
        count -= 1
        block = causes_block(count)
    return out + block + tail


def _clip(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters: whole '; '-clauses while they fit, then the next one cut at
    a word; '...' marks the cut (--verbose and the report have it all)."""
    if len(text) <= limit:
        return text
    kept = ""
    for clause in text.split("; "):
        joined = f"{kept}; {clause}" if kept else clause
        if len(joined) <= limit:
            kept = joined
            continue
        if limit - len(kept) >= 40:  # room for a useful part of the next clause
            kept = joined[:limit].rsplit(" ", 1)[0].rstrip(",;:(")
        break
    return kept + " ..."


def _limits_short(analysis: CampaignAnalysis) -> str:
    s = analysis.settings
    stopped = "stopping" in analysis.methods  # judged as it stopped when settled (analysis/sequential.py)
    parts = [
        f"level {pct(s.max_level_drop)} below history" if stopped and s.max_level_drop is not None else "",
        f"slow-run rate {pct(s.max_slow_rate)}" if s.max_slow_rate is not None else "",
        f"q01 drop {pct(s.max_q01_drop)}" if s.max_q01_drop is not None else "",
        f"CV {pct(s.max_cv)}" if s.max_cv is not None else "",
        f"CV {s.max_cv_ratio:g}x robust" if s.max_cv_ratio is not None else "",
        f"busy {pct(s.max_busy_share)}",
    ]
    return ", ".join(p for p in parts if p)


def wrap_lines(lines: list[str] | tuple[str, ...], width: int) -> list[str]:
    """Lines wrapped at `width`, continuation lines indented under their first word."""
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(
            _printable(line),
            width,
            subsequent_indent=indent + "    ",
            break_on_hyphens=False,
            break_long_words=False,
        ) or [""]
    return out


def _probe_lines(analysis: CampaignAnalysis) -> list[str]:
    """One line per probe variant: its median over all runs with the interval of its first node when it
    has one node, the run-to-run CV, and its slow runs (with ! when a node's slow-run test rejects)."""
    lines = []
    runs = RunVerdicts.of(analysis.runs)  # by column: no object per run
    variant_of, kind_of = runs.column("variant"), runs.column("kind")
    slow_runs = runs.column("slow").astype(bool)
    for v in sorted(analysis.variants, key=lambda v: (v.probe, v.variant)):
        groups = [g for g in analysis.groups if g.variant == v.variant]
        mine = variant_of == v.variant
        slow = int(np.count_nonzero(slow_runs & mine))
        rejects = any(g.tails and g.tails[0].rejects for g in groups)
        name = variant_name(v.probe, dict(v.params))
        if len(groups) == 1:
            g = groups[0]
            center = median_ci_text(g)
            cv = f", CV {pct(g.cv)}" if g.cv is not None else ""
        else:
            center = f"{v.global_median:.4g} {v.unit} over {v.nodes} nodes"
            cv = ""
        kinds = Counter(kind_of[slow_runs & mine].tolist())  # in the runs' order: ties as they came
        kind_text = ", ".join(f"{k} {KIND_WORDS.get(kind, kind)}" for kind, k in kinds.most_common())
        lines.append(
            f"{name}: {center}{cv}; {slow} of {int(np.count_nonzero(mine))} runs slow{'!' if rejects else ''}"
            + (f" ({kind_text})" if kind_text else "")
        )
    return lines


KIND_WORDS = {"systematic": "systematic", "transient": "transient", "unclassified": "unclassified"}


def _comparison_lines(analysis: CampaignAnalysis) -> list[str]:
    from tailscope.compare import compare

    out = []
    for c in compare(analysis):
        for k in c.contrasts:
            out.append(f"compared: {k.sentence}")
    return out


def render_summary(analysis: CampaignAnalysis, *, verdict: bool = True) -> list[str]:
    """The summary as lines without newlines: header, one row per group, the verdict (unless `verdict`
    is False: `--verbose` prints it after `render_answer`, which has it), the top notes."""
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
    if verdict:
        lines += _verdict_lines(analysis)
    elif analysis.verdict.checks:
        lines.append("checks:")
        for c in sorted(analysis.verdict.checks, key=lambda c: (c.passed, c.scope, c.name)):
            lines += textwrap.wrap(
                _printable(f"{'passed' if c.passed else 'FAILED'} {c.name} {c.scope}: {c.message}"),
                WIDTH,
                initial_indent="  ",
                subsequent_indent="    ",
            )
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
            f"cluster {_printable(c.variant)}: {v.nodes} nodes, "
            f"fleet median {c.fleet_median:.4g} {_printable(c.unit)}; "
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
    """Control characters (ESC, newline, ...) as escapes: 'n\\x1b[31m1' stays one inert line."""
    return printable(text)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
