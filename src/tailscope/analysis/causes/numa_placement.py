"""numa-placement: the run's memory came from a remote NUMA node more often than usual.

Reads /proc/vmstat numa_hit, numa_miss, numa_other (node-wide deltas over the trial): the remote fraction
(miss + other) / (hit + miss + other) against the usual. Only on nodes with more than one NUMA node.
Explained slowdown: half the excess remote fraction (remote accesses cost ~1.5-2x; stated, not measured).
"""

from __future__ import annotations

from tailscope.analysis.causes.base import explained_score, finding, vs_usual
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding

NAME = "numa-placement"
READS = ("numa_remote_fraction", "numa_hit", "numa_miss", "numa_other", "facts.numa_nodes")
MIN_EXCESS = 0.05
REMOTE_PENALTY = 0.5
MITIGATION = (
    "bind memory and threads together (numactl --localalloc or --membind, OMP_PROC_BIND=close, OMP_PLACES); "
    "check that the node's memory is balanced across sockets"
)


def assess(ctx: RunContext) -> CauseFinding | None:
    numa_nodes = ctx.facts.get("numa_nodes")
    if numa_nodes is not None and int(numa_nodes) <= 1:
        return None
    excess = ctx.excess("numa_remote_fraction")
    if excess is None or excess < MIN_EXCESS:
        return None
    explained = REMOTE_PENALTY * excess
    sentence = (
        "memory came from a remote NUMA node: remote fraction "
        f"{vs_usual(ctx.value('numa_remote_fraction'), ctx.typical('numa_remote_fraction'))} of allocations"
    )
    evidence = {
        "numa_remote_fraction": ctx.value("numa_remote_fraction"),
        "usual_numa_remote_fraction": ctx.typical("numa_remote_fraction"),
        "numa_miss": ctx.value("numa_miss"),
        "numa_other": ctx.value("numa_other"),
        "numa_nodes": numa_nodes,
    }
    return finding(NAME, ctx, explained_score(explained, ctx.slowdown), sentence, MITIGATION, evidence)
