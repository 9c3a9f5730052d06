"""Which advice fits which CPU: snoop-filter and cache-slice advice only where that mechanism is known.

Seed 000 (McCalpin, SC18) found snoop-filter conflicts between the physical addresses of a run's pages on
Intel Xeon Scalable (Skylake-SP; the same mesh and inclusive snoop filter design holds for Cascade Lake and
Ice Lake-SP). Nothing says the same for AMD (Zen has a per-CCX L3 and no such snoop filter) or others, so
there the advice is the vendor-neutral one: compare pages, use 1 GiB pages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# (vendor_id, family, model) -> name; /proc/cpuinfo values as the nodes table stores them.
SNOOP_FILTER_FAMILIES = {
    ("GenuineIntel", 6, 0x55): "Intel Skylake-SP / Cascade Lake",
    ("GenuineIntel", 6, 0x6A): "Intel Ice Lake-SP",
    ("GenuineIntel", 6, 0x6C): "Intel Ice Lake-D",
}


def snoop_filter_family(facts: Mapping[str, Any]) -> str | None:
    """The CPU family name when the snoop-filter conflict mechanism of seed 000 is known for it, else None."""
    try:
        key = (str(facts.get("cpu_vendor")), int(facts.get("cpu_family")), int(facts.get("cpu_model")))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return SNOOP_FILTER_FAMILIES.get(key)


def cpu_name(facts: Mapping[str, Any]) -> str:
    name = facts.get("cpu_model_name") or facts.get("cpu_vendor")
    return str(name) if name else "this CPU"
