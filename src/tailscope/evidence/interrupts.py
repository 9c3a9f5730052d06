"""/proc/interrupts per CPU: the total of every source and the local timer (LOC) line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# Lines with one system-wide count, not one per CPU (arch/x86/kernel/irq.c).
_NOT_PER_CPU = {"ERR", "MIS"}


@dataclass(frozen=True)
class Interrupts:
    total: dict[int, int]  # CPU -> every interrupt counted on it
    local_timer: dict[int, int]  # CPU -> the LOC line (x86) or arch_timer (Arm), when present


def parse(text: str) -> Interrupts:
    lines = text.splitlines()
    if not lines:
        return Interrupts({}, {})
    cpus = [int(tok[3:]) for tok in lines[0].split() if tok.startswith("CPU") and tok[3:].isdigit()]
    n = len(cpus)
    sums = [0] * n
    local: dict[int, int] = {}
    for line in lines[1:]:
        name, sep, rest = line.partition(":")
        name = name.strip()
        if not sep or name in _NOT_PER_CPU:
            continue
        toks = rest.split(None, n)[:n]
        if len(toks) == n and all(t.isdigit() for t in toks):
            counts = [int(t) for t in toks]
        else:  # a short line (fewer columns than CPUs): the leading numbers only
            counts = []
            for tok in toks:
                if not tok.isdigit():
                    break
                counts.append(int(tok))
        for i, c in enumerate(counts):
            sums[i] += c
        if len(counts) == n and (name == "LOC" or rest.rstrip().endswith("arch_timer")):
            for cpu, c in zip(cpus, counts, strict=True):
                local[cpu] = local.get(cpu, 0) + c
    return Interrupts(dict(zip(cpus, sums, strict=True)), local)


def read(proc: Path = PROC) -> Interrupts:
    try:
        return parse((proc / "interrupts").read_text())
    except OSError:
        return Interrupts({}, {})
