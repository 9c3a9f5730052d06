"""/proc/buddyinfo: free memory by block size, per NUMA node and zone -- how fragmented free memory is.

Each line is `Node N, zone NAME c0 c1 ... cK`: cI free blocks of 2^I pages (mm/vmstat.c, frag_show_print).
A node whose free memory is all in small blocks cannot give a huge page without compaction (THP faults fall
back to small pages, or stall in direct compaction: vmstat's thp_fault_fallback, compact_stall).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
THP_PMD_SIZE = Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Zone:
    numa_node: int
    zone: str
    free_blocks: tuple[int, ...]  # by order: blocks of 2^order pages


def parse(text: str) -> list[Zone]:
    zones = []
    for line in text.splitlines():
        head, sep, rest = line.partition(", zone ")
        if not sep or not head.startswith("Node "):
            continue
        fields = rest.split()
        if not fields or not head[5:].strip().isdigit() or not all(f.isdigit() for f in fields[1:]):
            continue
        zones.append(Zone(int(head[5:]), fields[0], tuple(int(f) for f in fields[1:])))
    return zones


def huge_order(page_bytes: int = PAGE_BYTES, pmd_path: Path = THP_PMD_SIZE) -> int:
    """The order of a PMD-sized (transparent) huge page: 9 on x86-64 (2 MiB of 4 KiB pages)."""
    try:
        pmd = int(pmd_path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pmd = 2 << 20
    return max(0, (pmd // max(1, page_bytes)).bit_length() - 1)


@dataclass(frozen=True)
class Fragmentation:
    free_bytes: int
    huge_share: float | None  # of free memory, the share in blocks of at least a huge page
    huge_share_min_node: float | None  # the lowest share of any NUMA node with free memory


def summarize(zones: list[Zone], order: int, page_bytes: int = PAGE_BYTES) -> Fragmentation:
    free: dict[int, int] = {}
    huge: dict[int, int] = {}
    for z in zones:
        for o, count in enumerate(z.free_blocks):
            pages = count << o
            free[z.numa_node] = free.get(z.numa_node, 0) + pages
            if o >= order:
                huge[z.numa_node] = huge.get(z.numa_node, 0) + pages
    total = sum(free.values())
    shares = [huge.get(n, 0) / pages for n, pages in free.items() if pages]
    return Fragmentation(
        free_bytes=total * page_bytes,
        huge_share=sum(huge.values()) / total if total else None,
        huge_share_min_node=min(shares) if shares else None,
    )


def read(proc: Path = PROC) -> list[Zone]:
    try:
        return parse((proc / "buddyinfo").read_text())
    except (OSError, UnicodeDecodeError):
        return []
