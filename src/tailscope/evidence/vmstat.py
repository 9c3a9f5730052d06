"""/proc/vmstat: the node-wide THP, reclaim, compaction and NUMA counters a trial's evidence keeps."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")
# EVIDENCE.md's list; a key the kernel does not have is absent from the rows, never zero.
KEYS = (
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_collapse_alloc",
    "pgmajfault",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "compact_stall",
    "compact_fail",
    "allocstall_normal",
    "allocstall_movable",
    "numa_hit",
    "numa_miss",
    "numa_foreign",
    "numa_local",
    "numa_other",
)


def parse(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        value = value.strip()
        if value.lstrip("-").isdigit():
            out[key] = int(value)
    return out


_NEEDLES = tuple((key, f"\n{key} ", f"{key} ") for key in KEYS)


def parse_wanted(text: str) -> dict[str, int]:
    """Only the KEYS (the file has ~170 lines; this is what the collector reads twice per trial): each key
    is found in C (str.find) rather than every line split in Python."""
    out = {}
    for key, line, first in _NEEDLES:
        at = text.find(line) + 1
        if at == 0 and not text.startswith(first):
            continue
        start = at + len(first)
        end = text.find("\n", start)
        value = text[start : end if end >= 0 else len(text)].strip()
        if value.lstrip("-").isdigit():
            out[key] = int(value)
    return out


def read(proc: Path = PROC) -> dict[str, int]:
    try:
        return parse_wanted((proc / "vmstat").read_text())
    except (OSError, ValueError):
        return {}


def deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in KEYS if k in before and k in after}
