"""The report's "Pages and mitigation" section: each node's THP mode and huge-page pools (per NUMA node), the
statement that guest-physical addresses say nothing about host slices when a node is a VM, and the advice of
`node.hugepages.mitigation` (reserving 2 MiB and 1 GiB pages, huge pages for unmodified binaries, the seed's
1 GiB offset sweep) with its commands. Everything comes from the facts recorded in the `nodes` table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pandas as pd

from tailscope.node.hugepages import Advice, mitigation, pools_from_facts, vm_statement
from tailscope.report.markup import esc, table, td

__all__ = ["pages_section", "virtual_nodes"]

STATUS_TOPICS = {"status", "virtual machine"}  # shown as tables and the VM statement, not as advice


def _latest_facts(nodes: pd.DataFrame | None) -> dict[str, dict[str, Any]]:
    """node -> its latest facts (the JSON column, with the row's own columns filling what it lacks)."""
    if nodes is None or nodes.empty or "node" not in nodes.columns:
        return {}
    latest = nodes.sort_values(["node", "collected_at"], kind="stable") if "collected_at" in nodes else nodes
    latest = latest.groupby("node", sort=True).tail(1)
    out: dict[str, dict[str, Any]] = {}
    for _, row in latest.iterrows():
        try:
            facts = json.loads(row["facts"]) if isinstance(row.get("facts"), str) else {}
        except json.JSONDecodeError:
            facts = {}
        if not isinstance(facts, dict):
            facts = {}
        for column in ("virtualization", "thp_enabled", "thp_defrag"):
            if facts.get(column) is None and column in row and isinstance(row[column], str):
                facts[column] = row[column]
        out[str(row["node"])] = facts
    return out


def virtual_nodes(nodes: pd.DataFrame | None) -> dict[str, str]:
    """node -> hypervisor for the nodes whose facts say they are virtual machines."""
    return {
        node: str(facts["virtualization"])
        for node, facts in _latest_facts(nodes).items()
        if facts.get("virtualization") not in (None, "none", "")
    }


def install_limits(nodes: pd.DataFrame | None) -> list[str]:
    """The lines of node/build.py (libraries missing at build time, what running without root cost) that the
    nodes' recorded facts carry, each once, naming the nodes where not all share it."""
    from tailscope.node.build import limit_lines

    return _once_each(_latest_facts(nodes), limit_lines)


def inferred_parts(nodes: pd.DataFrame | None) -> list[str]:
    """"virtual machine: part inferred: likely ... (what it rests on)" of the nodes whose recorded facts say a
    hypervisor masked their CPU model (node.facts.part_facts), each once, naming the nodes where not all share
    it."""
    return _once_each(_latest_facts(nodes), _part_note)


def _part_note(facts: dict[str, Any]) -> list[str]:
    return [str(facts["cpu_part_note"])] if facts.get("cpu_part_note") else []


Lines = Callable[[dict[str, Any]], list[str]]


def _once_each(latest: dict[str, dict[str, Any]], lines_of: Lines) -> list[str]:
    by_line: dict[str, list[str]] = {}
    for node, facts in latest.items():
        for line in lines_of(facts):
            by_line.setdefault(line, []).append(node)
    return [
        line if len(where) == len(latest) else f"{line} (node{'s' * (len(where) > 1)} {', '.join(where)})"
        for line, where in by_line.items()
    ]


def _cell(text: object, num: bool = False) -> str:
    return td("-" if text is None else text, num=num)


def _advice_html(advice: Advice, nodes: list[str], all_nodes: int) -> str:
    who = "" if len(nodes) == all_nodes else f" (node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)})"
    out = [
        f"<h3>{esc(advice.topic[:1].upper() + advice.topic[1:] + who)}</h3>",
        f'<p class="explain">{esc(advice.text)}</p>',
    ]
    if advice.commands:
        out.append("<pre><code>" + esc("\n".join(advice.commands)) + "</code></pre>")
    return "\n".join(out)


def pages_section(nodes: pd.DataFrame | None) -> str:
    head = '<section id="pages"><h2>Pages and mitigation</h2>'
    facts_of = _latest_facts(nodes)
    if not facts_of:
        return head + "<p>No node facts were recorded: the pages status is unknown.</p></section>"
    out = [
        head,
        '<p class="explain">'
        + esc(
            "Slow runs can depend on the physical pages a run got: on 2 MiB pages the high address bits "
            "of each page change from run to run, and through the L3 slice / snoop-filter hash some "
            "combinations evict L2-resident data (the seed's rare slow HPL/DGEMM runs). 1 GiB pages make "
            "the addresses of an L2-sized array contiguous and the same every run. Below: each node's "
            "page settings as recorded, then what to do."
        )
        + "</p>",
    ]
    virtual = virtual_nodes(nodes)
    if virtual:
        statement = vm_statement(virtual)
        statement = statement[0].upper() + statement[1:]
        out.append(f'<p class="notes" id="vm-addresses"><b>Virtual machine.</b> {esc(statement)}.</p>')
    rows = []
    for node, facts in facts_of.items():
        rows.append(
            [
                _cell(node),
                _cell(facts.get("thp_enabled")),
                _cell(facts.get("thp_defrag")),
                _cell(facts.get("virtualization")),
                _cell(facts.get("glibc")),
            ]
        )
    out.append(table(["node", "THP", "THP defrag", "virtualization", "glibc"], rows))
    pool_rows = []
    for node, facts in facts_of.items():
        for p in pools_from_facts(facts):
            pool_rows.append(
                [
                    _cell(node),
                    _cell("all" if p.numa_node is None else f"node{p.numa_node}"),
                    _cell(p.size_text),
                    _cell(p.total, num=True),
                    _cell(p.free, num=True),
                    _cell(p.surplus, num=True),
                ]
            )
    if pool_rows:
        out.append(table(["node", "NUMA node", "page size", "reserved", "free", "surplus"], pool_rows))
    else:
        out.append("<p>No huge-page pools were recorded (facts from an older tailscope or no hugetlb).</p>")
    # advice: the same text for every node is shown once; otherwise per group of nodes
    groups: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    order: list[tuple[str, str, tuple[str, ...]]] = []
    for node, facts in facts_of.items():
        for a in mitigation(facts):
            if a.topic in STATUS_TOPICS:
                continue
            key = (a.topic, a.text, a.commands)
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(node)
    for key in order:
        out.append(_advice_html(Advice(*key), groups[key], len(facts_of)))
    out.append("</section>")
    return "\n".join(out)
