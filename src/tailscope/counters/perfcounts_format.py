"""The seed sampler's perfcounts format: its sample arrays, their index layout, pmu and register width.

Shared by the importer (importers/perfcounts.py reads the files) and the derived metrics (counters/metrics.py
undoes the registers' wraparound by these widths), so counters never import an importer.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = "imported:perfcounts"  # the samples' source column for this format


@dataclass(frozen=True)
class ArraySpec:
    """One sample array of the format: its indices before the sample number and where its rows go."""

    name: str
    layout: tuple[str, ...]  # index kinds before the sample: "cpu", "socket", "box", "event", "pmu", "unit"
    pmu: str  # "{socket}" is replaced by the socket index
    width: int | None  # counter width in bits; None for gauges (no deltas)
    hex: bool = False  # the sampler writes these in hexadecimal


def _specs(*specs: ArraySpec) -> dict[str, ArraySpec]:
    return {s.name: s for s in specs}


ARRAYS: dict[str, ArraySpec] = _specs(
    ArraySpec("tsc", (), "tsc", 63),  # the samples' tsc column is int64
    ArraySpec("walltime", ("part",), "walltime", 34),  # seconds until 2514; t_ns is int64
    ArraySpec("core_fixed_counts", ("cpu", "event"), "cpu_fixed", 48),
    ArraySpec("core_counts", ("cpu", "event"), "cpu", 48),
    ArraySpec("aperf", ("cpu",), "msr", 64),
    ArraySpec("mperf", ("cpu",), "msr", 64),
    ArraySpec("cha_counts", ("socket", "box", "event"), "uncore_cha:{socket}", 48),
    ArraySpec("imc_counts", ("socket", "box", "event"), "uncore_imc:{socket}", 48),
    ArraySpec("ha_counts", ("socket", "box", "event"), "uncore_ha:{socket}", 48),
    ArraySpec("qpi_counts", ("socket", "box", "event"), "uncore_qpi:{socket}", 48),
    ArraySpec("upi_counts", ("socket", "box", "event"), "uncore_upi:{socket}", 48),
    ArraySpec("pcu_counts", ("socket", "event"), "uncore_pcu", 48),
    ArraySpec("ubox_uclk", ("socket",), "uncore_ubox", 48),
    ArraySpec("rapl_pkg_energy", ("socket",), "power", 32),
    ArraySpec("rapl_dram_energy", ("socket",), "power", 32),
    ArraySpec("rapl_pkg_throttled", ("socket",), "power", 32),
    ArraySpec("smi_count", ("socket",), "package", 32),
    ArraySpec("pkg_temperature", ("socket",), "package", None),
    ArraySpec("pkg_therm_status", ("socket",), "package", None, hex=True),
    ArraySpec("pkg_core_perf_limit_reasons", ("socket",), "package", None, hex=True),
    ArraySpec("pkg_ring_perf_limit_reasons", ("socket",), "package", None, hex=True),
    ArraySpec("other_counts", ("pmu", "unit", "event"), "{pmu}", None),
)
