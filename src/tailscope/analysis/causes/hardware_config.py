"""hardware-config: a node fact that differs from its peers (CPU model, microcode, memory, kernel, knobs).

A node-level cause (the node's every run is affected, so it cannot explain a run against its own node):
used by the node verdict (analysis/health.py) for a node the fleet screen flags. Peers' value = the most
common value over the campaign's nodes (needs 3 nodes or more with the fact recorded).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from tailscope.analysis.model import CauseFinding

NAME = "hardware-config"
READS = ("nodes table facts",)
COMPARED = (
    "cpu_model_name", "cpu_stepping", "microcode", "sockets", "cores", "threads", "numa_nodes", "l2_bytes",
    "l3_bytes", "memory_bytes", "kernel", "thp_enabled", "thp_defrag", "governor", "turbo",
)  # fmt: skip
MIN_PEERS = 3
MITIGATION = "make the node's configuration match its peers (BIOS, microcode, DIMMs, kernel, governor, THP)"


def assess_node(
    node: str, facts: Mapping[str, Mapping[str, Any]], slowdown: float | None
) -> CauseFinding | None:
    """The facts in which `node` differs from the most common value over `facts` (node -> facts)."""
    if node not in facts or len(facts) < MIN_PEERS:
        return None
    differs: dict[str, Any] = {}
    for name in COMPARED:
        values = [str(f.get(name)) for f in facts.values() if f.get(name) is not None]
        mine = facts[node].get(name)
        if mine is None or len(values) < MIN_PEERS:
            continue
        common, count = Counter(values).most_common(1)[0]
        if str(mine) != common and count > len(values) / 2:
            differs[name] = {"node": mine, "peers": common}
    if not differs:
        return None
    text = "; ".join(f"{k} {v['node']} (peers: {v['peers']})" for k, v in differs.items())
    slower = f"{slowdown * 100:.1f}% slower than its peers and " if slowdown else ""
    return CauseFinding(
        cause=NAME,
        score=0.8 if slowdown else 0.3,
        confidence="medium",
        evidence={"differs": differs},
        sentence=f"node {node} is {slower}differs from them in {text}",
        mitigation=MITIGATION,
    )
