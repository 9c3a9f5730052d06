"""`export perfcounts`: a node's samples back to the seed sampler's text format (see perfcounts.py).

The header scalars an import remembered (campaign.json `sample_headers`) are written first, then per sample
`tsc[s]`, `walltime[0][s]` (seconds) and `walltime[1][s]` (microseconds) and every series in the arrays of
`perfcounts.ARRAYS`; rows from other sources (the monitor, perf stat) go to
`other_counts["pmu"][unit]["EV"][s]`.
Importing the output gives the same samples rows (t_ns to the microsecond, as the format keeps it).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from tailscope.counters.perfcounts_format import ARRAYS, ArraySpec
from tailscope.importers import ImportInputError
from tailscope.store.campaign import Campaign, write_atomic_bytes
from tailscope.store.read import connect

_BY_PMU: dict[str, ArraySpec] = {}
for _spec in ARRAYS.values():
    if "event" in _spec.layout and _spec.name != "other_counts":
        _BY_PMU[_spec.pmu.split(":")[0]] = _spec
_SOCKET_ARRAYS = {s.name: s for s in ARRAYS.values() if s.layout in (("socket",), ("cpu",))}


def _quote(text: str) -> str:
    if '"' in text or "[" in text or "]" in text or "\n" in text:
        raise ImportInputError(f"event or pmu name {text!r} cannot be written in the perfcounts format")
    return f'"{text}"'


def series_name(pmu: str, unit: int | None, event: str) -> tuple[str, bool]:
    """The array element (without the sample index) a samples row is written as, and whether in hex."""
    kind, _, socket = pmu.partition(":")
    spec = _BY_PMU.get(kind)
    if spec is not None and unit is not None:
        if spec.layout == ("socket", "box", "event") and socket.isdigit():
            return f"{spec.name}[{socket}][{unit}][{_quote(event)}]", spec.hex
        if spec.layout in (("cpu", "event"), ("socket", "event")) and not socket:
            return f"{spec.name}[{unit}][{_quote(event)}]", spec.hex
    same = _SOCKET_ARRAYS.get(event)
    if same is not None and same.pmu == pmu and unit is not None:
        return f"{same.name}[{unit}]", same.hex
    return f"other_counts[{_quote(pmu)}][{-1 if unit is None else unit}][{_quote(event)}]", False


def _number(value: float, hex_: bool, what: str) -> str:
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise ImportInputError(
            f"{what}: value {value} is not a non-negative integer (the format holds raw counts)"
        )
    return hex(int(value)) if hex_ else str(int(value))


def export_perfcounts(
    campaign_dir: Path, output: Path, *, node: str | None = None, source: str | None = None
) -> dict[str, Any]:
    campaign = Campaign.open(campaign_dir)
    con = connect(campaign)
    try:
        node, source, frame = con.sample_series(
            node, source, columns="sample, t_ns, tsc, pmu, unit, event, value"
        )
    finally:
        con.close()
    header = campaign.manifest.sample_headers.get(node, {}).get(source, {})
    lines = [f"{k} = {v!r}" if isinstance(v, float) else f"{k} = {v}" for k, v in header.items()]
    names: dict[tuple[str, Any, str], tuple[str, bool]] = {}
    for (sample, t_ns, tsc), rows in frame.groupby(["sample", "t_ns", "tsc"], sort=True, dropna=False):
        s = int(sample)
        if not pd.isna(tsc):
            lines.append(f"tsc[{s}] = {int(tsc)}")
        seconds, rest = divmod(int(t_ns), 1_000_000_000)
        lines.append(f"walltime[0][{s}] = {seconds}")
        lines.append(f"walltime[1][{s}] = {rest // 1000}")
        for pmu, unit, event, value in zip(
            rows["pmu"], rows["unit"], rows["event"], rows["value"], strict=True
        ):
            u = None if pd.isna(unit) else int(unit)
            key = (pmu, u, event)
            if key not in names:
                names[key] = series_name(pmu, u, event)
            text, hex_ = names[key]
            lines.append(f"{text}[{s}] = {_number(float(value), hex_, f'sample {s} {pmu} {event}')}")
    write_atomic_bytes(Path(output), ("\n".join(lines) + "\n").encode())
    return {"node": node, "source": source, "samples": int(frame["sample"].nunique()), "rows": len(frame)}
