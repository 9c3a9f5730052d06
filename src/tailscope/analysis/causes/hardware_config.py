"""hardware-config: a node configured unlike most of its peers (DIMMs, microcode, BIOS, kernel, knobs).

A node-level cause (the node's every run is affected, so it cannot explain a run against its own node): used
by the node verdict (analysis/health.py). The comparison is node/fleet.py's `fleet_findings`, the one place
that compares node configuration across a fleet (DIMM ranks, sizes, configured speed, populated modules;
CPU, microcode, BIOS, cpufreq, governor, turbo, THP, kernel): a field differs when the node's value is not the
strict majority's over 3 nodes or more, and a node that mixes DIMM ranks is named on its own.

A node that differs and is slower than its peers (drained by the fleet screen) gets score 0.8; one that
differs without being slower still carries the finding (score 0.3), so the configuration is named before it
costs anything, but its verdict does not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tailscope.analysis.model import CauseFinding
from tailscope.node.fleet import COMPARED, ConfigFinding, findings_by_node

NAME = "hardware-config"
READS = ("nodes table facts (node/fleet.py: " + ", ".join(COMPARED) + ")",)
MITIGATION = "make the node's configuration match its peers (DIMMs, BIOS, microcode, kernel, governor, THP)"
SLOWER_SCORE, DIFFERS_SCORE = 0.8, 0.3

__all__ = ["MITIGATION", "NAME", "READS", "ConfigFinding", "assess_node", "fact_text", "fleet"]


def fleet(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, list[ConfigFinding]]:
    """node -> how its configuration differs from its peers' (nodes table rows or collected facts)."""
    return findings_by_node(facts)


def assess_node(node: str, findings: Sequence[ConfigFinding], slowdown: float | None) -> CauseFinding | None:
    """The hardware-config finding of `node` from its fleet findings (`fleet(...)[node]`), or None."""
    if not findings:
        return None
    differs = {f.field: {"node": f.value, "peers": f.majority} for f in findings}
    text = "; ".join(_text(f) for f in findings)
    slower = f"{slowdown * 100:.1f}% slower than its peers and " if slowdown else ""
    return CauseFinding(
        cause=NAME,
        score=SLOWER_SCORE if slowdown else DIFFERS_SCORE,
        confidence="medium",
        evidence={"differs": differs, "findings": [f.message for f in findings]},
        sentence=f"node {node} is {slower}differs from them in {text}",
        mitigation=MITIGATION,
    )


def _text(f: ConfigFinding) -> str:
    if f.majority is None:  # ranks mixed within the node
        return f"{f.field} {fact_text(f.field, f.value)} (mixed on this node)"
    return f"{f.field} {fact_text(f.field, f.value)} (peers: {fact_text(f.field, f.majority)})"


def fact_text(field: str, value: Any) -> str:
    """A compared fact as people read it: sizes in GiB, lists joined with '/' (ranks 1/2)."""
    if field.endswith("_bytes") and isinstance(value, int | float) and value >= 1 << 30:
        return f"{value / (1 << 30):g} GiB"
    if isinstance(value, list):
        return "/".join(str(v) for v in value)
    return str(value)
