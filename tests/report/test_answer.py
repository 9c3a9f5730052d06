"""answer.py: the one place the verdict and causes come from, derived today or taken from the analysis."""

from __future__ import annotations

from report_builders import CHECKS, HOSTILE, NOTES, demo_analysis

from tailscope.report.answer import answer_of, run_cause


def test_derived_verdict_and_causes():
    answer = answer_of(demo_analysis(checks=CHECKS, notes=NOTES), "/c")
    states = {n.node: n.state for n in answer.nodes}
    assert states == {"n1": "degraded", HOSTILE: "degraded"}
    (n1,) = [n for n in answer.nodes if n.node == "n1"]
    assert n1.reasons[0].startswith("node n1, l2sum-1a2b: 2 of 10 runs were slow")  # the failed limit first
    assert answer.provisional
    causes = [c.cause for c in answer.causes]
    assert len(causes) == len(set(causes))  # one finding per cause
    assert all(c.next_command.count("/c") >= 1 for c in answer.causes if c.cause != "node")


def test_the_analysis_verdicts_and_causes_are_used_when_given():
    analysis = demo_analysis(checks=CHECKS, notes=NOTES)
    given = ({"node": "n1", "verdict": "inconclusive", "reasons": ["threshold inside the noise"]},
             {"node": HOSTILE, "verdict": "healthy", "reasons": []})  # fmt: skip
    object.__setattr__(analysis, "nodes", given)
    slow = [r for r in analysis.runs if r.slow]
    for i, r in enumerate(slow):
        cause = "page_conflict" if i == 0 else "co_runner"
        object.__setattr__(r, "causes", [{"cause": cause, "score": 0.9, "evidence": f"evidence {i}"}])
    answer = answer_of(analysis, "/c")
    assert [(n.node, n.state) for n in answer.nodes] == sorted([("n1", "inconclusive"), (HOSTILE, "healthy")])
    assert not answer.provisional
    assert sorted(c.cause for c in answer.causes) == sorted(
        {"page_conflict", "co_runner"}
        & {"page_conflict" if i == 0 else "co_runner" for i in range(len(slow))}
    )
    assert run_cause(slow[0]) == "page_conflict"
    assert any("evidence 0" in c.evidence for c in answer.causes)
