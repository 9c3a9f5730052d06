"""What every cause shares: the finding it returns, how a score becomes a confidence, number wording.

A cause is a module with NAME (its catalogue name), READS (the evidence features it reads, context.py),
MITIGATION (what to do) and `assess(ctx) -> CauseFinding | None`. Its score is the share of the run's
slowdown that its evidence accounts for (1 = all of it), so the causes of one run rank on one scale.
Causes found by elimination (no direct evidence without a PMU) have a fixed modest score and low confidence.
"""

from __future__ import annotations

from typing import Any, Literal

from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct

MIN_SLOWDOWN = 0.001  # scores divide by the slowdown; below this a run is "as fast as usual"


def explained_score(explained: float, slowdown: float) -> float:
    """The share of `slowdown` that a loss of `explained` (same units: fraction of time) accounts for."""
    if explained <= 0.0:
        return 0.0
    return float(min(1.0, explained / max(slowdown, MIN_SLOWDOWN)))


def confidence_of(score: float, direct: bool) -> Literal["high", "medium", "low"]:
    """High: direct evidence accounting for at least half the slowdown; medium: direct evidence for a
    fifth; low: less, or a finding by elimination."""
    if not direct:
        return "low"
    if score >= 0.5:
        return "high"
    if score >= 0.2:
        return "medium"
    return "low"


def finding(
    name: str,
    ctx: RunContext,
    score: float,
    sentence: str,
    mitigation: str,
    evidence: dict[str, Any],
    *,
    direct: bool = True,
) -> CauseFinding:
    clean = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in evidence.items() if v is not None}
    return CauseFinding(
        cause=name,
        score=round(float(score), 4),
        confidence=confidence_of(score, direct),
        evidence=clean,
        sentence=f"trial {ctx.trial} ({pct(ctx.slowdown)} slower): {sentence}",
        mitigation=mitigation,
    )


def vs_usual(now: float | None, usual: float | None, fmt: str = "pct") -> str:
    """'43% (usual 1.0%)' style wording of a value against the node's usual one."""

    def text(v: float) -> str:
        if fmt == "pct":
            return pct(v)
        if fmt == "rate":
            return f"{v:,.0f}/s"
        if fmt == "mhz":
            return f"{v:,.0f} MHz"
        return f"{v:,.0f}"

    if now is None:
        return "not recorded"
    return text(now) + (f" (usual {text(usual)})" if usual is not None else "")
