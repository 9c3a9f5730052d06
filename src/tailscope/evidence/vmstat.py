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


_WANTED = frozenset(KEYS)


def parse_wanted(text: str) -> dict[str, int]:
    """Only the KEYS (the file has ~170 lines; this is what the collector reads twice per trial)."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in _WANTED:
            out[key] = int(value)
    return out


def read(proc: Path = PROC) -> dict[str, int]:
    try:
        return parse_wanted((proc / "vmstat").read_text())
    except (OSError, ValueError):
        return {}


def deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in KEYS if k in before and k in after}
