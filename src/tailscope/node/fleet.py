"""Node configuration compared across a fleet: the one comparison behind the `hardware-config` cause.

A node whose configuration differs from the majority of its peers (seed 003, SJTU: mixed 1-rank and 2-rank
DIMMs, a lower configured memory speed; also a missing DIMM, other microcode or BIOS, another governor) is
named with each differing field, its value and the majority's. The memory fields come from the node's DIMMs
(node/dimms.py `summary`: populated modules, total bytes, ranks, slowest configured speed, types); the others
are node facts (node/facts.py). A node that mixes ranks within itself is named even without peers.

The majority is the most common value among the nodes that report the field, and it must be a strict
majority of them (over half) with 3 nodes or more reporting: with a tie, or fewer nodes, there is no
reference to differ from and nothing is flagged for that field. The CPU model is compared over the whole
fleet, every other field among the nodes of the same CPU model (two node types in one campaign differ in
microcode, BIOS and DIMMs by design).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tailscope.node.dimms import summary

MIN_NODES = 3  # nodes that must report a field before a majority means anything
GIB = 1 << 30

# DIMM summary fields, then node facts, in the order findings are listed.
DIMM_FIELDS = ("populated", "total_bytes", "ranks", "min_configured_speed_mts", "types")
FACT_FIELDS = (
    "cpu_model_name", "cpu_stepping", "microcode", "bios_vendor", "bios_version", "bios_date", "sockets",
    "cores", "threads", "numa_nodes", "l2_bytes", "l3_bytes", "memory_bytes", "kernel", "cpufreq_driver",
    "cpufreq_max_khz", "governor", "turbo", "thp_enabled", "thp_defrag",
)  # fmt: skip
COMPARED = DIMM_FIELDS + FACT_FIELDS


@dataclass(frozen=True)
class ConfigFinding:
    """A node whose configuration differs from the majority of its peers (cause `hardware-config`)."""

    node: str
    field: str
    value: Any
    majority: Any  # None for ranks mixed within the node
    message: str
    cause: str = "hardware-config"


def node_config(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The compared fields of one node from its facts: a `collect()` dict, or a `nodes` table row whose
    `facts` column holds them as JSON (the row's own columns win)."""
    merged: dict[str, Any] = {}
    raw = facts.get("facts")
    if isinstance(raw, str) and raw:
        try:
            loaded = json.loads(raw)
        except ValueError:
            loaded = {}
        if isinstance(loaded, dict):
            merged.update(loaded)
    merged.update({k: v for k, v in facts.items() if k != "facts" and v is not None})
    # node/dimms.py's records only: campaigns from before it stored dmidecode's raw fields ("Size", "Rank")
    dimms = [d for d in merged.get("dimms") or [] if isinstance(d, dict) and "populated" in d]
    row: dict[str, Any] = summary(dimms)
    for name in FACT_FIELDS:
        row[name] = merged.get(name)
    return row


def fleet_findings(facts_by_node: Mapping[str, Mapping[str, Any]]) -> list[ConfigFinding]:
    """Nodes that differ from the strict majority in a compared field, and nodes that mix DIMM ranks."""
    rows = {node: node_config(facts) for node, facts in facts_by_node.items()}
    findings = []
    for node, row in sorted(rows.items()):
        if row["mixed_ranks"]:
            findings.append(
                ConfigFinding(
                    node,
                    "ranks",
                    row["ranks"],
                    None,
                    f"{node}: DIMMs of {' and '.join(map(str, row['ranks']))} ranks mixed on one node "
                    "(SJTU: mixed 1-rank/2-rank nodes had lower memory bandwidth)",
                )
            )
    for field in COMPARED:
        # the CPU model fleet-wide; every other field among the nodes of the same CPU model (microcode, BIOS,
        # caches and DIMMs of two node types differ by design, not by mistake)
        groups: dict[Any, list[str]] = {}
        for n, r in rows.items():
            groups.setdefault(None if field == "cpu_model_name" else r["cpu_model_name"], []).append(n)
        same_cpu = " with the same CPU" if len(groups) > 1 else ""
        for members in groups.values():
            values = {n: _key(field, rows[n][field]) for n in members if not _absent(field, rows[n][field])}
            if len(values) < MIN_NODES:
                continue
            top, n_top = Counter(values.values()).most_common(1)[0]
            if n_top * 2 <= len(values):
                continue  # no strict majority: no reference to differ from
            for node, value in sorted(values.items()):
                if value != top and not (field == "ranks" and rows[node]["mixed_ranks"]):
                    findings.append(
                        ConfigFinding(
                            node,
                            field,
                            rows[node][field],
                            _unkey(top),
                            f"{node}: {field} is {rows[node][field]}, {n_top} of {len(values)} "
                            f"nodes{same_cpu} have {_unkey(top)}",
                        )
                    )
    return sorted(findings, key=lambda f: (f.node, COMPARED.index(f.field) if f.field in COMPARED else -1))


def findings_by_node(facts_by_node: Mapping[str, Mapping[str, Any]]) -> dict[str, list[ConfigFinding]]:
    out: dict[str, list[ConfigFinding]] = {}
    for f in fleet_findings(facts_by_node):
        out.setdefault(f.node, []).append(f)
    return out


def _absent(field: str, value: Any) -> bool:
    """No value to compare: unreadable, or (DIMM fields) no DIMM table read on that node."""
    if value is None or value == [] or value == "":
        return True
    return field in DIMM_FIELDS and value == 0


def _key(field: str, value: Any) -> Any:
    """The value compared: hashable, integral floats as ints (1048576.0 from a column with nulls equals
    1048576), MemTotal to the GiB (it moves by a few MiB between identical nodes: firmware and kernel
    reservations; a missing DIMM moves it by 8 GiB or more)."""
    if isinstance(value, list):
        return tuple(_key(field, v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if field == "memory_bytes" and isinstance(value, int):
        return round(value / GIB) * GIB
    return value


def _unkey(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
