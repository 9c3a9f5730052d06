"""/proc/interrupts per CPU: the total of every source and the local timer (LOC) line."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# Lines with one system-wide count, not one per CPU (arch/x86/kernel/irq.c).
_NOT_PER_CPU = {"ERR", "MIS"}


@dataclass(frozen=True)
class Interrupts:
    total: dict[int, int]  # CPU -> every interrupt counted on it
    local_timer: dict[int, int]  # CPU -> the LOC line (x86) or arch_timer (Arm), when present


def parse(text: str, cpus: Collection[int] | None = None) -> Interrupts:
    """Per-CPU totals and local-timer counts; with `cpus`, only those CPUs' columns are converted (a node
    with many CPUs has a wide file: every line is still split, in C, but only the wanted counts are
    turned into numbers)."""
    lines = text.splitlines()
    if not lines:
        return Interrupts({}, {})
    header = [int(tok[3:]) for tok in lines[0].split() if tok.startswith("CPU") and tok[3:].isdigit()]
    n = len(header)
    picked = [(i, c) for i, c in enumerate(header) if cpus is None or c in cpus]
    sums = dict.fromkeys((c for _, c in picked), 0)
    local: dict[int, int] = {}
    for line in lines[1:]:
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        name = name.strip()
        if name in _NOT_PER_CPU:
            continue
        toks = rest.split(None, n)[:n]
        full = len(toks) == n and "".join(toks).isdigit()
        if full:
            for i, c in picked:
                sums[c] += int(toks[i])
            if name == "LOC" or rest.rstrip().endswith("arch_timer"):
                for i, c in picked:
                    local[c] = local.get(c, 0) + int(toks[i])
            continue
        leading = 0  # a short line (fewer columns than CPUs): the leading numbers only
        for tok in toks:
            if not tok.isdigit():
                break
            leading += 1
        for i, c in picked:
            if i < leading:
                sums[c] += int(toks[i])
    return Interrupts(sums, local)


def read(proc: Path = PROC) -> Interrupts:
    try:
        return parse((proc / "interrupts").read_text())
    except OSError:
        return Interrupts({}, {})


def row_totals(text: str, names: Collection[str]) -> dict[str, int]:
    """The named rows of /proc/interrupts summed over every CPU (`MCE`: machine check exceptions, `TRM`:
    thermal event interrupts, `THR`: threshold APIC (corrected-error) interrupts, `DFR`: deferred errors:
    arch/x86/kernel/irq.c); a row the kernel does not print is absent, never zero."""
    out: dict[str, int] = {}
    wanted = set(names)
    for line in text.splitlines()[1:]:
        name, sep, rest = line.partition(":")
        name = name.strip()
        if not sep or name not in wanted:
            continue
        total = 0
        for tok in rest.split():
            if not tok.isdigit():
                break
            total += int(tok)
        out[name] = total
    return out
