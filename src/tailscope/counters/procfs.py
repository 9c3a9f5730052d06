"""/proc counters read by the runner just before and after each trial process (source "proc").

The same files the monitor (native/sampler/tsmon.c) samples: /proc/stat fields per CPU (USER_HZ ticks),
/proc/interrupts summed per CPU, /proc/vmstat keys. A trial's row is after - before; the rows name the event
set's counter (`stat_steal`) or the vmstat key (`thp_fault_alloc`), with pmu `proc_stat`, `proc_interrupts`
or `vmstat` and the CPU in `unit` -- the monitor's series names, so per-run and monitor rows line up.
Gauges (cpufreq, thermal) and rusage/perf events are not read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tailscope.counters.eventsets import PROC_STAT_FIELDS, SetEvent

Key = tuple[str, int | None, str]  # (pmu, unit, event)

PROC = Path("/proc")


def _stat(text: str) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *fields = line.split()
            out[int(name[3:])] = [int(f) for f in fields]
    return out


def _interrupts(text: str) -> dict[int, int]:
    lines = text.splitlines()
    if not lines:
        return {}
    cpus = [int(tok[3:]) for tok in lines[0].split() if tok.startswith("CPU")]
    sums = dict.fromkeys(cpus, 0)
    for line in lines[1:]:
        _, _, rest = line.partition(":")
        for cpu, tok in zip(cpus, rest.split(), strict=False):
            if not tok.isdigit():
                break
            sums[cpu] += int(tok)
    return sums


def _vmstat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def snapshot(events: Sequence[SetEvent], proc: Path = PROC) -> dict[Key, int]:
    """Current values of the set's proc: events (files that cannot be read are left out)."""
    values: dict[Key, int] = {}
    wanted = [e for e in events if e.source == "proc"]
    if not wanted:
        return values

    def read(name: str) -> str | None:
        try:
            return (proc / name).read_text()
        except OSError:
            return None

    stat = _stat(read("stat") or "") if any(e.spec.startswith("proc:stat:") for e in wanted) else {}
    irq = _interrupts(read("interrupts") or "") if any(e.spec == "proc:interrupts" for e in wanted) else {}
    vm = _vmstat(read("vmstat") or "") if any(e.spec.startswith("proc:vmstat:") for e in wanted) else {}
    for e in wanted:
        if e.spec.startswith("proc:stat:"):
            field = PROC_STAT_FIELDS.index(e.spec.split(":")[2])
            for cpu, fields in stat.items():
                if field < len(fields):
                    values[("proc_stat", cpu, e.name)] = fields[field]
        elif e.spec == "proc:interrupts":
            for cpu, total in irq.items():
                values[("proc_interrupts", cpu, e.name)] = total
        elif e.spec.startswith("proc:vmstat:"):
            pattern = e.spec.split(":", 2)[2]
            prefix = pattern.endswith("*")
            for key, value in vm.items():
                if (prefix and key.startswith(pattern[:-1])) or key == pattern:
                    values[("vmstat", None, key)] = value
    return values


def delta_rows(before: dict[Key, int], after: dict[Key, int], run_id: str) -> list[dict[str, object]]:
    """counters rows (source proc) of after - before for every key read both times."""
    return [
        {
            "run_id": run_id,
            "source": "proc",
            "pmu": pmu,
            "unit": unit,
            "event": event,
            "value": float(after[key] - before[key]),
            "width": 64,
        }
        for key in sorted(after, key=lambda k: (k[0], -1 if k[1] is None else k[1], k[2]))
        if key in before
        for pmu, unit, event in [key]
    ]
