"""The short terminal verdict of `tailscope check` and `tailscope analyze`: lines, never printed here.

    campaign 3f2a...: 2 variants, 1 node, 400 ok runs, 1 failed
    probe  node  n    median [95% CI]              CV     slow >5%  slow >10%  kinds
    l2sum  n1    200  95.12 [95.01, 95.20] GB/s    0.41%  3/200     1/200      2 systematic, 1 transient
    verdict: PASS (no limits set; --max-slow-rate, --max-q01-drop or --max-cv make it a test)
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

from tailscope.analysis.model import CampaignAnalysis, GroupSummary
from tailscope.analysis.wording import pct
from tailscope.report.numbers import kinds_text, median_ci_text, tail_text

__all__ = ["MAX_FAILED_CHECKS", "MAX_NOTES", "render_summary"]

MAX_NOTES = 3  # the most important notes; the rest are in the report and --json
MAX_FAILED_CHECKS = 10
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
        rows = [[_printable(c) for c in _row(g, per_probe[g.probe] > 1)] for g in analysis.groups]
        lines += _columns([header, *rows])
    else:
        lines.append("no successful runs to analyse")
    lines += _verdict_lines(analysis)
    if analysis.notes:
        lines.append("notes:")
        for note in analysis.notes[:MAX_NOTES]:
            lines += textwrap.wrap(_printable(note), WIDTH, initial_indent="  - ", subsequent_indent="    ")
        rest = len(analysis.notes) - MAX_NOTES
        if rest > 0:
            lines.append(f"  ({rest} more note{'s' if rest != 1 else ''} in the report and in --json)")
    return lines


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
    verdict = analysis.verdict
    word = "PASS" if verdict.passed else "FAIL"
    if not verdict.checks:
        return [
            f"verdict: {word} (no limits set; --max-slow-rate, --max-q01-drop or --max-cv make it a test)"
        ]
    failed = [c for c in verdict.checks if not c.passed]
    if not failed:
        return [f"verdict: {word} (all {len(verdict.checks)} checks passed)"]
    lines = [f"verdict: {word} ({len(failed)} of {len(verdict.checks)} checks failed)"]
    for c in failed[:MAX_FAILED_CHECKS]:
        text = _printable(f"{c.name}: {c.message}")
        lines += textwrap.wrap(text, WIDTH, initial_indent="  FAIL ", subsequent_indent="    ")
    if len(failed) > MAX_FAILED_CHECKS:
        lines.append(f"  ({len(failed) - MAX_FAILED_CHECKS} more failed checks in the report)")
    return lines


def _printable(text: str) -> str:
    """Control characters (ESC, newline, ...) as Python escapes: 'n\\x1b[31m1' stays one inert line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
