"""terminal.py: the whole summary pinned line by line for hand-made analyses."""

from __future__ import annotations

from report_builders import CHECKS, HOSTILE, NOTES, demo_analysis, group, run_verdict, variant_summary

from tailscope.analysis.model import CampaignAnalysis, Settings, Verdict
from tailscope.report.terminal import MAX_NOTES, render_summary


def test_whole_summary():
    lines = render_summary(demo_analysis(checks=CHECKS, notes=NOTES))
    pad = " " * (len(HOSTILE) - 4)  # the node column is as wide as the longest name
    assert lines == [
        "campaign c0ffee: 2 variants, 2 nodes, 30 ok runs, 1 failed",
        f"probe  node  {pad}n   median [95% CI]            CV    slow >5%  slow >10%  kinds",
        f"fwq    n1    {pad}10  100.0 [99.5, 100.5] us     0.5%  1/10      1/10       1 unclassified",
        f"l2sum  {HOSTILE}  10  98.00 [97.90, 98.10] GB/s  0.5%  0/10      0/10       -",
        f"l2sum  n1    {pad}10  95.12 [94.98, 95.20] GB/s  4.1%  2/10!     1/10       "
        "1 systematic, 1 transient",
        "verdict: DEGRADED (1 of 2 nodes degraded)",
        "  n1: degraded: cpu-contention, page-placement",
        "    - node n1, l2sum-1a2b: 2 of 10 runs were slow",
        f"  {HOSTILE}: healthy",
        "    - every probe within the limits",
        "limits: slow-run rate at most 1%",
        "notes:",
        "  - first note: node n1 has slow runs",
        f"  - second note about {HOSTILE}",
        "  - third note",
    ]


def test_never_pass_above_a_failing_probe():
    """Issue 14: `verdict: PASS (no limits set)` was printed under `l2sum 95/200! slow`. There is no
    PASS any more: each node's verdict is printed, with the limits it was judged by."""
    lines = render_summary(demo_analysis(checks=CHECKS))
    assert not any("PASS" in line for line in lines)
    n1 = lines.index("  n1: degraded: cpu-contention, page-placement")
    assert lines.index("verdict: DEGRADED (1 of 2 nodes degraded)") < n1
    assert "limits: slow-run rate at most 1%" in lines


def test_all_checks_passed_line():
    lines = render_summary(demo_analysis(checks=CHECKS[1:]))
    assert "verdict: HEALTHY (2 nodes)" in lines
    assert "  n1: healthy" in lines


def test_variant_shown_where_a_probe_has_several_and_notes_are_capped():
    runs = (run_verdict("l2sum-aaaa", "n1", 0, 1.0), run_verdict("l2sum-bbbb", "n1", 0, 1.0))
    groups = (
        group("l2sum-aaaa", "n1", n=1, ci=(None, None), cv=None),
        group("l2sum-bbbb", "n1", n=1, ci=(None, None), cv=None),
    )
    notes = tuple(f"note {i}" for i in range(MAX_NOTES + 2))
    analysis = CampaignAnalysis(
        "c",
        Settings(),
        (variant_summary("l2sum-aaaa", nodes=1, n=1), variant_summary("l2sum-bbbb", nodes=1, n=1)),
        groups,
        runs,
        Verdict(True, ()),
        notes,
    )
    lines = render_summary(analysis)
    assert lines[1] == "probe       node  n  median [95% CI]          CV  slow >5%  slow >10%  kinds"
    assert lines[2] == "l2sum-aaaa  n1    1  100.0 [no CI, n=1] GB/s  -   0/1       0/1        -"
    assert lines[3].startswith("l2sum-bbbb  n1")
    assert lines[-1] == "  (2 more notes in the report and in --json)"
    assert lines[-2] == f"  - note {MAX_NOTES - 1}"


def test_long_notes_wrap_and_control_characters_are_inert():
    note = "node n\x1b[31m1: " + "slow " * 40
    analysis = demo_analysis(notes=(note,))
    lines = render_summary(analysis)
    start = lines.index("notes:") + 1
    assert lines[start].startswith("  - node n\\x1b[31m1: slow slow")
    assert all(len(line) <= 100 for line in lines[start:])
    assert lines[start + 1].startswith("    slow")
    assert not any("\x1b" in line for line in lines)


def test_empty_analysis():
    analysis = CampaignAnalysis("c1", Settings(), (), (), (), Verdict(True, ()), ("campaign c1: no runs",))
    assert render_summary(analysis) == [
        "campaign c1: 0 variants, 0 nodes, 0 ok runs, 0 failed",
        "no successful runs to analyse",
        "verdict: INCONCLUSIVE (no node has ok runs to judge)",
        "notes:",
        "  - campaign c1: no runs",
    ]
