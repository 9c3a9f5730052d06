"""The importers' one check of a node name, with the file:line it came from.

Every importer (iterations, hpl/hpcc and the program formats, likwid-csv) checks the node name of its trials
here and builds their runs rows with the one builder every writer of a runs row uses (store/runs_row.py), so a
runs row has one shape whatever wrote it. A node name is data, never syntax: one with a control character (a
newline, an ESC that would reach a terminal, a NUL) is refused at import with the file:line it came from.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from tailscope.importers import ImportInputError

# Unicode categories refused in a node name: controls (C0, DEL, C1), format characters (bidi overrides that
# reorder a terminal line) and the line/paragraph separators.
_REFUSED = {"Cc", "Cf", "Zl", "Zp"}
MAX_NODE = 255  # a host name's limit (HOST_NAME_MAX 64, a FQDN 255)


def node_problem(name: str) -> str | None:
    """Why `name` cannot be a node name, or None."""
    if not name.strip():
        return "is empty"
    if len(name) > MAX_NODE:
        return f"is {len(name)} characters long (at most {MAX_NODE})"
    for ch in name:
        if unicodedata.category(ch) in _REFUSED:
            return f"holds the control character U+{ord(ch):04X}"
    return None


def check_node(name: str, where: str) -> str:
    """`name` when it is a valid node name, else ImportInputError "{where}: node name ... (expected ...)"."""
    problem = node_problem(name)
    if problem is not None:
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise ImportInputError(
            f"{where}: node name {shown!r} {problem} (expected a host name: letters, digits, '.', '-', '_')"
        )
    return name


def has_refused_node(names: Sequence[str]) -> bool:
    """True when one of `names` is not a valid node name (a vectorised reader then falls back to the line
    reader, which names the line)."""
    return any(node_problem(n) is not None for n in names)
