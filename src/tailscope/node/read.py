"""Reading /proc and sysfs: a file that is absent or unreadable gives None, never an exception.

The small readers every node module shares (facts, arm, knobs, hugepages, addr's detection); they import
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

SYS_CPU = Path("/sys/devices/system/cpu")


def read_text(path: str | Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def read_int(path: str | Path) -> int | None:
    text = read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def bracketed(text: str | None) -> str | None:
    """The selected value of a sysfs choice file such as `always [madvise] never`."""
    if text is None:
        return None
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text


def cpuinfo_block(text: str) -> dict[str, str]:
    """The fields of /proc/cpuinfo's first block (its first processor), `key : value` lines up to the first
    blank line after them; a key written twice keeps its first value."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_ranges(cpus: Sequence[int]) -> str:
    """`[0, 1, 2, 5]` -> `0-2,5` (the kernel's cpulist notation; parse_cpu_list reads it back)."""
    parts: list[str] = []
    start = prev = None
    for cpu in [*cpus, None]:
        if start is not None and (cpu is None or cpu != prev + 1):
            parts.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = None
        if cpu is not None and start is None:
            start = cpu
        prev = cpu
    return ",".join(parts)


def parse_cpu_list(text: str | None) -> list[int]:
    """Kernel cpulist format (`0-3,8,10-11`), as in /sys/devices/system/cpu/online; not the probes' syntax."""
    cpus: list[int] = []
    if not text:
        return cpus
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def parse_size(text: str | None) -> int | None:
    """Sizes as sysfs caches and meminfo write them: `2048K`, `300M`, `16384 kB`."""
    if not text:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not match:
        return None
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]
    return int(match.group(1)) * scale
