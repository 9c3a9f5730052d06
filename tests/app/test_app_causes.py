"""The cause catalogue on application runs: a cause that needs a probe's own measurements says it does not
apply (page-placement: tailscope records physical pages only for its probes)."""

from __future__ import annotations

from tailscope.analysis.causes import page_placement
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import KindEvidence


def _ctx(probe: str) -> RunContext:
    level = KindEvidence(20, 20, 1.0, 0.88, 0.86, 0.01)  # every iteration 12% low: a level shift
    return RunContext(
        run_id="r5",
        node="n1",
        probe=probe,
        variant=f"{probe}-1",
        trial=5,
        slowdown=0.12,
        kind="systematic",
        kind_evidence=level,
        has_evidence=True,
        now={},
        usual={},
        cpus=(0,),
        corunners=(),
    )


def test_page_placement_does_not_apply_to_an_application():
    found = page_placement.assess(_ctx("app:lmp"))
    assert found is not None and found.evidence["applies"] is False
    assert "page placement does not apply to an application" in found.sentence
    assert found.score == page_placement.SCORE_NOT_FOUND and found.confidence == "low"
    assert "tailscope run l2sum --page" in found.mitigation
    # a probe's level shift is still page-placement by elimination
    probe = page_placement.assess(_ctx("l2sum"))
    assert probe is not None and probe.score == page_placement.SCORE and "applies" not in probe.evidence
