"""The drain lines of `tailscope verdict --drain`: node names are data, never Slurm syntax.

scontrol reads `nodename=` as a Slurm host list: `c0001,c0002` names two nodes, `c[0001-0008]` eight, and
`ALL` every node of the cluster. A node name comes from a campaign (a probe's host name, an imported file's
node column), so a name holding such syntax would drain healthy nodes it never judged. Each drain line names
one node that is a plain host name (letters, digits, '.', '_', '-'; not ALL in any case), one node per
scontrol call; any other name is refused with the reason, never passed on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tailscope.printable import printable

# A host name as Slurm takes it literally: no ',' (a list), '[' ']' (a range), space, '=' or quote.
PLAIN_NODE = re.compile(r"[A-Za-z0-9._-]+")
REASON_MAX = 200  # characters of the drain reason (Slurm keeps reasons short; the report has the rest)


@dataclass(frozen=True)
class DrainPlan:
    commands: list[list[str]]  # one scontrol argv per node to drain
    refused: list[str]  # one line per node that is not drained, saying why


def plain_node(name: str) -> bool:
    """Whether scontrol reads `name` as exactly this one node (not a list, a range or every node)."""
    return PLAIN_NODE.fullmatch(name) is not None and name.upper() != "ALL"


def drain_plan(nodes: Iterable[tuple[str, str]]) -> DrainPlan:
    """`scontrol update` argv for each (node, reason) whose name is a plain host name; the others refused."""
    commands, refused = [], []
    for node, reason in nodes:
        if not plain_node(node):
            refused.append(
                f"node {printable(node)} not drained: not a plain host name (letters, digits, '.', '_', '-'; "
                "not ALL), and scontrol reads names as host lists (a,b  c[1-8]  ALL); drain it by hand"
            )
            continue
        commands.append(
            [
                "scontrol",
                "update",
                f"nodename={node}",
                "state=drain",
                f"reason=tailscope: {reason_text(reason)}",
            ]
        )
    return DrainPlan(commands, refused)


def reason_text(reason: str) -> str:
    """The reason as one line of plain text (no double quote, no control character), at most REASON_MAX."""
    return printable(reason.replace('"', "'"))[:REASON_MAX]
