"""Core-count scaling: one probe on 1, 2, ..., all of its CPUs, and min/median/max per core count.

SJTU's STREAM figure (seed 003): "recording the minimum, the average, and the best bandwidth in a 1- to
all-core STREAM benchmark", repeated, showed run-to-run variation of multi-core memory bandwidth on KP920.
Here it is one command, `tailscope run stream --trials N --scaling`: the probe resolves its CPU list once
(`--cpus`, default one thread per physical core, in the probe's order: socket by socket, ascending), and
variant k runs on the first k of those CPUs (compact filling: one socket's cores before the next's). Each
core count is its own variant, so the campaign keeps every trial and the usual analysis applies per count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tailscope.campaign.runner import ProbeUsageError, cpu_ranges, preflight
from tailscope.probes.catalogue import ParamValue, ProbeVariant
from tailscope.store.read import connect


class ScalingUsageError(ProbeUsageError):
    """A scaling request that cannot be carried out (the message says which option; exit 2)."""


def scaling_variants(
    probe: str, params: dict[str, ParamValue], counts: list[int] | None = None
) -> list[ProbeVariant]:
    """Variants of `probe` on the first k CPUs of its resolved CPU list, for k in counts (default 1..all)."""
    config = preflight(ProbeVariant(probe, dict(params)))
    cpus: list[int] = list(config["cpus"])
    if len(cpus) < 2:
        raise ScalingUsageError(f"--scaling: {probe} resolves to {len(cpus)} CPU here; nothing to scale over")
    wanted = counts or list(range(1, len(cpus) + 1))
    for k in wanted:
        if not 1 <= k <= len(cpus):
            raise ScalingUsageError(f"--scaling: {k} cores requested, the CPU list has {len(cpus)}")
    return [ProbeVariant(probe, {**params, "cpus": cpu_ranges(cpus[:k])}) for k in wanted]


@dataclass(frozen=True)
class ScalingRow:
    node: str
    probe: str
    threads: int
    trials: int
    min: float
    median: float
    max: float
    unit: str


def scaling_table(campaign: Path, probe: str) -> list[ScalingRow]:
    """min/median/max of the headline value per (node, thread count) over the campaign's ok trials."""
    con = connect(campaign)
    try:
        rows = con.value_spread_by_threads(probe)
    finally:
        con.close()
    return [ScalingRow(str(r[0]), str(r[1]), int(r[2]), int(r[3]), r[4], r[5], r[6], str(r[7])) for r in rows]


def render_scaling(rows: list[ScalingRow]) -> list[str]:
    if not rows:
        return ["scaling: no successful trials"]
    unit = rows[0].unit
    out = [f"{'node':12s} {'cores':>5s} {'trials':>6s} {'min':>10s} {'median':>10s} {'max':>10s}  [{unit}]"]
    for r in rows:
        out.append(f"{r.node:12s} {r.threads:5d} {r.trials:6d} {r.min:10.3f} {r.median:10.3f} {r.max:10.3f}")
    return out
