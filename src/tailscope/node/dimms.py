"""Memory modules of a node (DIMMs); node/fleet.py compares them (and the other node facts) across a fleet.

SJTU (seed 003) found nodes with 1-rank and 2-rank DDR4 modules mixed, and a memory bandwidth that followed;
other causes of the same symptom are a missing DIMM (a channel unpopulated) and a lower configured speed.
Two sources, in order:

- `dmidecode -t 17` (SMBIOS "Memory Device"; root only: the raw table /sys/firmware/dmi/tables/DMI is mode
  0400): Size, Locator, Bank Locator, Type, Speed, Configured Memory Speed (dmidecode < 3.2: "Configured Clock
  Speed"; units MT/s, older MHz), Rank, Part Number, Manufacturer. An empty slot says "No Module Installed".
- EDAC sysfs (world-readable, kernel Documentation/ABI/testing/sysfs-devices-edac):
  /sys/devices/system/edac/mc/mcN/dimmM/{size (MiB), dimm_label, dimm_location, dimm_mem_type, dimm_dev_type,
  dimm_edac_mode, dimm_ce_count, dimm_ue_count}; drivers that report per rank use rankM/ with the same files,
  two entries of half the size for a 2-rank module (grouped here by dimm_label).

In a VM neither exists (this project's VM: dmidecode finds no table, no EDAC): `collect()` then says which
and why. The parsers are tested with recorded real-format text; they are untested on hardware here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

EDAC_MC = Path("/sys/devices/system/edac/mc")
_SIZE_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


@dataclass(frozen=True)
class Dimm:
    locator: str
    bank_locator: str | None
    populated: bool
    size_bytes: int | None
    type: str | None  # DDR4, DDR5, ...
    speed_mts: int | None  # rated
    configured_speed_mts: int | None
    rank: int | None
    part_number: str | None
    manufacturer: str | None
    source: str  # dmidecode | edac
    ce_count: int | None = None  # EDAC corrected errors
    ue_count: int | None = None


def _size(text: str | None) -> int | None:
    if not text:
        return None
    m = re.fullmatch(r"(\d+)\s*(B|[KMGT]B)", text.strip(), re.IGNORECASE)
    return int(m.group(1)) * _SIZE_UNITS[m.group(2).upper()] if m else None


def _speed(text: str | None) -> int | None:
    m = re.fullmatch(r"(\d+)\s*(MT/s|MHz)", (text or "").strip())
    return int(m.group(1)) if m else None


def _int(text: str | None) -> int | None:
    return int(text) if text and text.strip().isdigit() else None


def _clean(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return None if text in ("", "Unknown", "Not Specified", "NO DIMM", "Not Provided") else text


def parse_dmidecode(text: str) -> list[Dimm]:
    """Every "Memory Device" (type 17) record of `dmidecode` output (-t 17 or the whole table)."""
    dimms = []
    for block in re.split(r"\n(?=Handle 0x)", text):
        if "DMI type 17," not in block:
            continue
        fields: dict[str, str] = {}
        for line in block.splitlines():
            # "\tKey: value" (one tab); deeper lines are lists of the previous key, not fields
            m = re.match(r"^\t([^\t:][^:]*):\s?(.*)$", line)
            if m:
                fields[m.group(1).strip()] = m.group(2).strip()
        size_text = fields.get("Size", "")
        populated = bool(size_text) and "No Module Installed" not in size_text and size_text != "0 B"
        configured = fields.get("Configured Memory Speed", fields.get("Configured Clock Speed"))
        dimms.append(
            Dimm(
                locator=fields.get("Locator", "?"),
                bank_locator=_clean(fields.get("Bank Locator")),
                populated=populated,
                size_bytes=_size(size_text) if populated else None,
                type=_clean(fields.get("Type")) if populated else None,
                speed_mts=_speed(fields.get("Speed")) if populated else None,
                configured_speed_mts=_speed(configured) if populated else None,
                rank=_int(fields.get("Rank")) if populated else None,
                part_number=_clean(fields.get("Part Number")) if populated else None,
                manufacturer=_clean(fields.get("Manufacturer")) if populated else None,
                source="dmidecode",
            )
        )
    return dimms


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def read_edac(root: Path = EDAC_MC) -> list[Dimm]:
    """DIMMs (or ranks, grouped by label) of every memory controller EDAC knows; [] without EDAC."""
    if not root.is_dir():
        return []
    by_label: dict[tuple[str, str], list[Path]] = {}
    for mc in sorted(root.glob("mc[0-9]*")):
        for entry in sorted(mc.glob("dimm[0-9]*")) + sorted(mc.glob("rank[0-9]*")):
            label = _read(entry / "dimm_label") or f"{mc.name}/{entry.name}"
            by_label.setdefault((mc.name, label), []).append(entry)
    dimms = []
    for (_, label), entries in by_label.items():
        sizes = [_int(_read(e / "size")) for e in entries]
        first = entries[0]
        ce = [_int(_read(e / "dimm_ce_count")) for e in entries]
        ue = [_int(_read(e / "dimm_ue_count")) for e in entries]
        populated = any(s for s in sizes)
        ranks = len(entries) if first.name.startswith("rank") else None
        dimms.append(
            Dimm(
                locator=label,
                bank_locator=_read(first / "dimm_location"),
                populated=populated,
                size_bytes=sum(s or 0 for s in sizes) << 20 if populated else None,
                type=_clean(_read(first / "dimm_mem_type")),
                speed_mts=None,
                configured_speed_mts=None,
                rank=ranks,
                part_number=None,
                manufacturer=None,
                source="edac",
                ce_count=sum(c or 0 for c in ce) if any(c is not None for c in ce) else None,
                ue_count=sum(u or 0 for u in ue) if any(u is not None for u in ue) else None,
            )
        )
    return dimms


def edac_error_counts(root: Path = EDAC_MC) -> dict[str, int]:
    """Corrected and uncorrected memory errors EDAC counted since boot, over every memory controller
    (mcN/ce_count and ue_count, which include the errors it could not place on a DIMM: ce_noinfo_count);
    {} without EDAC."""
    totals: dict[str, int] = {}
    try:
        controllers = [e for e in os.scandir(root) if e.name.startswith("mc") and e.name[2:].isdigit()]
    except OSError:
        return totals
    for mc in controllers:
        for name in ("ce_count", "ue_count"):
            value = _int(_read(Path(mc.path) / name))
            if value is not None:
                totals[name] = totals.get(name, 0) + value
    return totals


def collect() -> dict[str, Any]:
    """This node's DIMMs: {"dimms": [...], "dimms_source": ..., "dimms_unreadable": why or None}."""
    reasons = []
    exe = shutil.which("dmidecode")
    if exe is None:
        reasons.append("dmidecode is not installed")
    else:
        proc = subprocess.run([exe, "-t", "17"], capture_output=True, text=True, timeout=30, check=False)
        dimms = parse_dmidecode(proc.stdout) if proc.returncode == 0 else []
        if dimms:
            return {
                "dimms": [asdict(d) for d in dimms],
                "dimms_source": "dmidecode -t 17",
                "dimms_unreadable": None,
            }
        why = (proc.stderr.strip().splitlines() or ["no Memory Device records"])[-1]
        reasons.append(f"dmidecode -t 17: {why} (it needs root and an SMBIOS table; VMs often have none)")
    dimms = read_edac()
    if dimms:
        return {"dimms": [asdict(d) for d in dimms], "dimms_source": "edac sysfs", "dimms_unreadable": None}
    reasons.append(f"no EDAC memory controller under {EDAC_MC} (no EDAC driver loaded, or a VM)")
    return {"dimms": [], "dimms_source": None, "dimms_unreadable": "; ".join(reasons)}


def summary(dimms: list[dict[str, Any]]) -> dict[str, Any]:
    """What a node's memory configuration is, in fields that can be compared across nodes."""
    pop = [d for d in dimms if d["populated"]]
    ranks = sorted({d["rank"] for d in pop if d["rank"] is not None})
    speeds = [d["configured_speed_mts"] for d in pop if d["configured_speed_mts"]]
    return {
        "populated": len(pop),
        "empty_slots": len(dimms) - len(pop),
        "total_bytes": sum(d["size_bytes"] or 0 for d in pop),
        "ranks": ranks,
        "mixed_ranks": len(ranks) > 1,
        "min_configured_speed_mts": min(speeds) if speeds else None,
        "types": sorted({d["type"] for d in pop if d["type"]}),
        "part_numbers": sorted({d["part_number"] for d in pop if d["part_number"]}),
    }
