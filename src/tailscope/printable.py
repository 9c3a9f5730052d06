"""Text from campaigns and files (node names, job ids, comm names) printed to a terminal safely."""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls: a node name holding ESC [ ... would move the cursor or recolour the
# screen.
# Also the Unicode line and paragraph separators (U+2028, U+2029: a new line in some terminals and viewers)
# and the bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069: they reorder what follows them
# on the line, so a name could show as another node's).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """`text` with every control character shown as a visible escape (`\\x1b`, `\\u202e`), never
    interpreted: one printed name stays one inert piece of one line."""
    return _CONTROL.sub(_escape, str(text))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def prometheus_label(text: object) -> str:
    """`text` as a Prometheus label value in a node_exporter textfile: shown as the terminal shows it
    (printable), then with the format's escapes (backslash, double quote, line feed)."""
    return printable(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
