"""answer.py: the verdict per node is the analysis' (analysis/health.py), the causes are the flagged runs'
top causes (analysis/causes) grouped across probes; nothing is derived here."""

from __future__ import annotations

import dataclasses

from report_builders import CHECKS, HOSTILE, NOTES, demo_analysis

from tailscope.analysis.model import CauseFinding
from tailscope.report.answer import answer_of, run_cause, run_cause_text


def test_node_verdicts_are_the_analysis_own():
    analysis = demo_analysis(checks=CHECKS, notes=NOTES)
    answer = answer_of(analysis, "/c")
    assert [(n.node, n.state) for n in answer.nodes] == sorted([("n1", "degraded"), (HOSTILE, "healthy")])
    (n1,) = [n for n in answer.nodes if n.node == "n1"]
    assert n1.reasons == analysis.nodes[[n.node for n in analysis.nodes].index("n1")].reasons
    # The node's causes as health.py ranked them (cpu-contention: 2 flagged runs, page-placement: 1).
    assert n1.causes == ("cpu-contention", "page-placement")
    assert answer.state == "degraded"
    # A verdict the analysis gives is shown as given, whatever the slow runs would suggest.
    nodes = tuple(dataclasses.replace(n, verdict="inconclusive") for n in analysis.nodes)
    answer = answer_of(dataclasses.replace(analysis, nodes=nodes), "/c")
    assert {n.state for n in answer.nodes} == {"inconclusive"} and answer.state == "inconclusive"


def test_no_node_judged_is_inconclusive_not_healthy():
    analysis = dataclasses.replace(demo_analysis(), nodes=())
    answer = answer_of(analysis)
    assert answer.nodes == () and answer.state == "inconclusive"


def test_causes_grouped_by_the_runs_top_cause_across_probes():
    answer = answer_of(demo_analysis(checks=CHECKS, notes=NOTES), "/c")
    by = {c.cause: c for c in answer.causes}
    assert set(by) == {"cpu-contention", "page-placement"}  # os-noise is only a runner-up: not grouped
    cpu = by["cpu-contention"]
    assert cpu.runs == 2 and {p.split(" ")[0] for p in cpu.probes} == {"fwq", "l2sum"}
    # The evidence quotes the best-explained run's sentence with its values; the catalogue's mitigation.
    assert "stress-ng (pid 4242) took 41% of CPU 0" in cpu.evidence and cpu.confidence == "high"
    assert cpu.mitigation == "what to do about cpu-contention"
    assert cpu.next_command == ""  # no tailscope command tests it
    placement = by["page-placement"]
    assert placement.next_command.count("/c") == 2 and "--page 2m,1g" in placement.next_command
    # Both are named by the degraded node n1; cpu-contention accounts for more slowdown.
    assert [c.cause for c in answer.causes] == ["cpu-contention", "page-placement"]
    assert all(c.verdicts == 1 for c in answer.causes)


def test_a_node_level_finding_is_a_cause_and_ranks_by_verdict():
    analysis = demo_analysis(checks=CHECKS, notes=NOTES)
    hw = CauseFinding(
        cause="hardware-config",
        score=0.8,
        confidence="medium",
        evidence={"differs": {"microcode": {"node": "0x1", "peers": "0x2"}}},
        sentence="node h is 1.0% slower than its peers and differs from them in microcode 0x1 (peers: 0x2)",
        mitigation="make the node's configuration match its peers",
    )
    nodes = tuple(
        dataclasses.replace(n, verdict="degraded", causes=(hw,), drain=True) if n.node == HOSTILE else n
        for n in analysis.nodes
    )
    answer = answer_of(dataclasses.replace(analysis, nodes=nodes), "/c")
    (found,) = [c for c in answer.causes if c.cause == "hardware-config"]
    assert found.runs == 0 and found.nodes == (HOSTILE,) and "microcode 0x1" in found.evidence
    assert found.next_command.startswith("tailscope facts")


def test_run_cause_is_the_top_cause():
    analysis = demo_analysis(checks=CHECKS)
    slow = sorted((r for r in analysis.runs if r.slow), key=lambda r: (r.variant, r.trial))
    assert [run_cause(r) for r in slow] == ["cpu-contention", "page-placement", "cpu-contention"]
    assert run_cause_text(slow[2]).endswith("stress-ng (pid 4242) took 41% of CPU 0")
    normal = next(r for r in analysis.runs if not r.flagged)
    assert run_cause(normal) == "-"
