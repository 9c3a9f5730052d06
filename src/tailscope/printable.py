"""Text from campaigns and files (node names, job ids, comm names) printed to a terminal safely."""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls: a node name holding ESC [ ... would move the cursor or recolour the screen
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: object) -> str:
    """`text` with every control character shown as a visible escape (`\\x1b`), never interpreted."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", str(text))
