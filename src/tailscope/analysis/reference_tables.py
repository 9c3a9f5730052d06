"""The published per-part tables `check --deep` judges against (reference_tables.toml beside this module),
and which part this node is.

A part is recognised by node/parts.py's catalogue (the one place that knows which CPU is which part): x86 by
vendor, family and model (`vendor_id`, `cpu family`, `model`), aarch64 by `CPU implementer` and `CPU part`
(Kunpeng 920: 0x48, 0xd01); a catalogue part names its table here. Its nominal frequency is cpufreq's
`base_frequency` where the driver gives it (intel_pstate, amd-pstate), else the `@ 2.60GHz` of the model name
(Intel names carry it; AMD names do not), else unknown. Nothing here measures anything.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tailscope.node.host import THIS, Host

TABLES = Path(__file__).with_name("reference_tables.toml")
# the frequency in an Intel model name: "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz" -> 2.40
_GHZ = re.compile(r"@\s*([0-9]+(?:\.[0-9]+)?)\s*GHz", re.IGNORECASE)


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    unit: str
    source: str

    def contains(self, value: float, slack: float = 0.0) -> bool:
        """Inside [low, high], widened by `slack` (a fraction of the bound) on each side."""
        return self.low * (1.0 - slack) <= value <= self.high * (1.0 + slack)

    def text(self) -> str:
        span = f"{self.low:g}" if self.low == self.high else f"{self.low:g}-{self.high:g}"
        return f"{span} {self.unit}"


@dataclass(frozen=True)
class Part:
    id: str
    name: str
    short: str  # "Zen 4": the name in findings
    verified: bool
    latency: dict[str, Range] = field(default_factory=dict)  # level -> range
    arith_latency: dict[tuple[str, str], Range] = field(default_factory=dict)  # (precision, op) -> range
    arith_rthroughput: dict[tuple[str, str], Range] = field(default_factory=dict)


@dataclass(frozen=True)
class CpuIdentity:
    """What /proc/cpuinfo (first processor) says the CPU is."""

    vendor: str = ""
    family: int | None = None
    model: int | None = None
    model_name: str = ""
    arm_implementer: int | None = None
    arm_part: int | None = None


@cache
def parts() -> dict[str, Part]:
    """Every part of the tables, by id."""
    doc = tomllib.loads(TABLES.read_text())
    out = {}
    for pid, p in doc["parts"].items():
        lat = {r["level"]: Range(r["low"], r["high"], r["unit"], r["source"]) for r in p.get("latency", [])}
        al, at = {}, {}
        for r in p.get("arith", []):
            key = (r["precision"], r["op"])
            al[key] = Range(r["latency"][0], r["latency"][1], "cycles", r["source"])
            if "rthroughput" in r:
                at[key] = Range(r["rthroughput"][0], r["rthroughput"][1], "cycles", r["source"])
        short = p.get("short", p["name"])
        out[pid] = Part(pid, p["name"], short, bool(p.get("verified", False)), lat, al, at)
    return out


def part_of(cpu: CpuIdentity) -> Part | None:
    """The part this CPU is by its model number (aarch64: MIDR part), or None where the tables do not know it.
    A masked model (a hypervisor's) is inferred from flags and caches by node.facts.part_facts instead."""
    from tailscope.node.parts import by_midr, by_model

    known = (
        by_midr(cpu.arm_implementer, cpu.arm_part)
        if cpu.arm_implementer is not None
        else by_model(cpu.vendor, cpu.family, cpu.model)
    )
    return parts().get(known.table) if known is not None and known.table else None


def _int(text: str) -> int | None:
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def cpu_identity(cpuinfo: str) -> CpuIdentity:
    """The first processor's identity from the text of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor only
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return CpuIdentity(
        vendor=fields.get("vendor_id", ""),
        family=_int(fields.get("cpu family", "")),
        model=_int(fields.get("model", "")),
        model_name=fields.get("model name", ""),
        arm_implementer=_int(fields.get("CPU implementer", "")),
        arm_part=_int(fields.get("CPU part", "")),
    )


def nominal_hz(cpu: CpuIdentity, base_frequency_khz: str | None) -> tuple[float | None, str]:
    """(the nominal frequency in Hz, where it came from); (None, why) when neither source gives it."""
    if base_frequency_khz and base_frequency_khz.strip().isdigit() and int(base_frequency_khz) > 0:
        return int(base_frequency_khz) * 1e3, "cpufreq base_frequency"
    m = _GHZ.search(cpu.model_name)
    if m:
        return float(m.group(1)) * 1e9, f"model name ({cpu.model_name})"
    return None, "no cpufreq base_frequency and no '@ GHz' in the model name"


def this_node(host: Host = THIS) -> tuple[CpuIdentity, float | None, str]:
    """The CPU identity and nominal frequency of `host` (this node, or a recorded one: node/host.py)."""
    cpu = cpu_identity(host.text("/proc/cpuinfo") or "")
    base = host.text("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency")
    hz, source = nominal_hz(cpu, base)
    return cpu, hz, source
