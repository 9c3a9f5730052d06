"""The seed's derived metrics over an interval of a node's samples (seed 000 post_process.lua,
notes/seed-formats.md).

Counter values in `samples` are raw cumulative register contents. The delta of one series over samples A..B is
the sum of its step deltas, each `after - before` plus 2^width when after < before (so every wrap between
two samples is caught, as the seed's corrected_delta48/32 did). Widths: 48 bits for core and uncore counters
and 32 for RAPL energy/throttle and SMI counts in the seed format; 64 for everything read through Linux
perf_event, whose counts the kernel already extends. Gauges (temperatures, status registers) have no delta.

Formulas (seed):
- TSC GHz = TSC_ratio x 0.1 (header); without it dTSC / dt.  Seconds = dTSC / TSC Hz (else dt of
CLOCK_REALTIME).
- per CPU: GHz = dCoreCycles / dRefCycles x TSC GHz; IPC = dInstructions / dCoreCycles;
  fraction halted = 1 - dRefCycles / dTSC, clamped at 0 as the seed's post-processing does.
- per socket: dram_read_bytes = CAS_COUNT.READS x 64, dram_write_bytes = CAS_COUNT.WRITES x 64 (summed over
  channels), dram_*_gbs = bytes / seconds / 1e9; page conflict = PRE_COUNT.MISS / CAS, miss =
  (ACT.ALL - PRE_COUNT.MISS) / CAS, hit = 1 - miss - conflict, CAS = reads + writes.
- per uncore unit (CHA, IMC channel, ...): the delta of each event; per socket their sums (seed CHA_PKG_SUMS).
Event names are matched in the seed's spelling and in Linux perf's (`instructions`, `cycles`, `ref-cycles`,
`cas_count_read`, `UNC_M_CAS_COUNT:RD`, ...). Uncore rows are located as `uncore_<box>:<socket>` with the
box in
`unit` (the seed format's import) or `uncore_<box>_<n>` with the socket in `unit` (Linux perf's PMU names).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tailscope.counters.errors import MetricsInputError
from tailscope.counters.gauges import is_gauge
from tailscope.counters.perfcounts_format import ARRAYS
from tailscope.counters.perfcounts_format import SOURCE as PERFCOUNTS_SOURCE
from tailscope.store.campaign import Campaign, StoreError
from tailscope.store.read import connect

BYTES_PER_CAS = 64

_ALIASES = {
    "instructions": {
        "inst_retired_any",
        "instructions",
        "inst_retired_any_p",
        "instr_retired_any",
        "retired_instructions",
    },
    "core_cycles": {
        "cpu_clk_unhalted_core",
        "cpu_clk_unhalted_thread",
        "cycles",
        "cpu_cycles",
        "actual_cpu_clock",
        "cpu_clocks_unhalted",
    },
    "ref_cycles": {"cpu_clk_unhalted_ref", "cpu_clk_unhalted_ref_tsc", "ref_cycles", "max_cpu_clock"},
    "cas_reads": {"cas_count_reads", "cas_count_read", "cas_count_rd", "unc_m_cas_count_rd"},
    "cas_writes": {"cas_count_writes", "cas_count_write", "cas_count_wr", "unc_m_cas_count_wr"},
    "act": {"act_all", "act_count", "unc_m_act_count", "unc_m_act_count_all", "act_count_all"},
    "pre_miss": {"pre_count_miss", "pre_count_page_miss", "unc_m_pre_count_page_miss"},
    "task_clock": {"task_clock", "cpu_clock"},  # ns of CPU time (perf's msec, imported as ns)
}
_CORE_ROLES = ("instructions", "core_cycles", "ref_cycles", "task_clock")
_NORMAL = re.compile(r"[^a-z0-9]+")
_MODIFIERS = re.compile(r":[ukhHGIpPSDWeb]+$")
_SEED_WIDTH = {spec.name: spec.width for spec in ARRAYS.values()}
_UNCORE_SEED = re.compile(r"^(uncore_[a-z]+):(\d+)$")
_UNCORE_PERF = re.compile(r"^(uncore_[a-z]+)_(\d+)$")


def base_event(event: str) -> str:
    """An event without perf's modifiers: `cycles:D`, `instructions:u`, `cycles:ppp` -> the base event.

    Only a suffix made of modifier letters (u k h H G I p P S D W e b) is removed, so a libpfm/likwid unit
    mask (`UNC_M_CAS_COUNT:RD`) stays. A PMU prefix (`cpu_core/cycles/`) is the pmu column, not the event.
    """
    return _MODIFIERS.sub("", event)


def role(event: str) -> str | None:
    """Which seed quantity an event name is (instructions, core_cycles, ref_cycles, cas_reads, ...)."""
    name = _NORMAL.sub("_", base_event(event).lower()).strip("_")
    for key, names in _ALIASES.items():
        if name in names:
            return key
    return None


def series_width(source: str, pmu: str, event: str) -> int | None:
    """Counter width for wraparound: the seed format's registers, else 64 (perf_event's counts)."""
    if is_gauge(pmu, event):
        return None
    if source != PERFCOUNTS_SOURCE:
        return 64
    kind = pmu.split(":")[0]
    if kind in ("cpu", "cpu_fixed") or kind.startswith("uncore_"):
        return 48
    if event in _SEED_WIDTH:
        return _SEED_WIDTH[event]
    return None if kind == "package" else 64


def corrected_delta(after: np.ndarray, before: np.ndarray, width: int | None) -> np.ndarray:
    """after - before, plus 2^width where the counter wrapped (after < before)."""
    delta = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    if width is not None:
        delta = np.where(delta < 0, delta + float(2**width), delta)
    return delta


def uncore_location(pmu: str, unit: int | None) -> tuple[str, int, int] | None:
    """(box kind, socket, box index) of an uncore row, or None for other rows."""
    m = _UNCORE_SEED.match(pmu)
    if m and unit is not None:
        return m.group(1), int(m.group(2)), int(unit)
    m = _UNCORE_PERF.match(pmu)
    if m:
        return m.group(1), 0 if unit is None else int(unit), int(m.group(2))
    if pmu.startswith("uncore_") and unit is not None:
        return pmu, 0, int(unit)
    return None


def interval_deltas(frame: pd.DataFrame, first: int, last: int) -> pd.DataFrame:
    """Per series (pmu, unit, event): the wrap-corrected delta over samples first..last, and its width."""
    part = frame[(frame["sample"] >= first) & (frame["sample"] <= last)]
    part = part.sort_values(["pmu", "unit", "event", "sample"], kind="stable")
    keys = ["source", "pmu", "unit", "event"]
    out = []
    for (source, pmu, unit, event), g in part.groupby(keys, sort=True, dropna=False):
        width = series_width(str(source), str(pmu), str(event))
        if width is None or len(g) < 2:
            continue
        values = g["value"].to_numpy(dtype=float)
        steps = corrected_delta(values[1:], values[:-1], width)
        out.append((pmu, None if pd.isna(unit) else int(unit), event, float(steps.sum()), width))
    return pd.DataFrame(out, columns=["pmu", "unit", "event", "delta", "width"])


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 or not math.isfinite(den) else num / den


def compute(frame: pd.DataFrame, first: int, last: int, header: Mapping[str, Any]) -> dict[str, Any]:
    """The derived metrics of one node's samples (one source) over samples first..last."""
    ends = frame[frame["sample"].isin([first, last])].groupby("sample").first()
    if first not in ends.index or last not in ends.index:
        raise MetricsInputError(f"samples {first} and {last} must both exist")
    t0, t1 = int(ends.loc[first, "t_ns"]), int(ends.loc[last, "t_ns"])
    tsc0, tsc1 = ends.loc[first, "tsc"], ends.loc[last, "tsc"]
    d_tsc = None if pd.isna(tsc0) or pd.isna(tsc1) else float(int(tsc1) - int(tsc0))
    wall = (t1 - t0) / 1e9
    if "TSC_ratio" in header:
        tsc_ghz: float | None = float(header["TSC_ratio"]) * 0.1
    elif d_tsc is not None and wall > 0:
        tsc_ghz = d_tsc / wall / 1e9
    else:
        tsc_ghz = None
    seconds = d_tsc / (tsc_ghz * 1e9) if d_tsc is not None and tsc_ghz else wall
    deltas = interval_deltas(frame, first, last)
    result: dict[str, Any] = {
        "from_sample": first,
        "to_sample": last,
        "t0": _iso(t0),
        "t1": _iso(t1),
        "seconds": seconds,
        "tsc_delta": d_tsc,
        "tsc_ghz": tsc_ghz,
        "cpus": _cpu_metrics(deltas, d_tsc, tsc_ghz),
        "system": _system_metrics(deltas, d_tsc, tsc_ghz),
        "gauges": _gauges(frame, last),
        "sockets": _socket_metrics(deltas, seconds),
        "units": _unit_totals(deltas),
        "socket_totals": _socket_totals(deltas),
        "other": {
            f"{r.pmu}/{r.event}" + ("" if r.unit is None else f"/{r.unit}"): r.delta
            for r in deltas.itertuples()
            if not str(r.pmu).startswith("uncore_") and role(str(r.event)) in (None, "task_clock")
        },
    }
    return result


def _core_entry(d: dict[str, float], d_tsc: float | None, tsc_ghz: float | None) -> dict[str, Any]:
    """IPC, GHz and fraction halted of one CPU, or of one PMU over the whole system.

    GHz = dCoreCycles / dRefCycles x TSC GHz (the seed's formula) when both are known; else, for Linux perf
    imports, dCycles / dTaskClock (cycles per ns of CPU time, perf stat's own GHz).
    """
    inst, core, ref, clock = (d.get(k) for k in _CORE_ROLES)
    ghz, basis = None, None
    if core is not None and ref is not None and tsc_ghz is not None and ref > 0:
        ghz, basis = core / ref * tsc_ghz, "ref_cycles"
    elif core is not None and clock:
        ghz, basis = core / clock, "task_clock"
    halted = None
    if ref is not None and d_tsc:
        halted = max(0.0, 1.0 - ref / d_tsc)
    return {
        "instructions": inst,
        "core_cycles": core,
        "ref_cycles": ref,
        "task_clock_ns": clock,
        "ghz": ghz,
        "ghz_from": basis,
        "ipc": _ratio(inst, core) if inst is not None and core is not None else None,
        "fraction_halted": halted,
    }


def _core_pmu(pmu: str) -> str | None:
    """The core PMU a row counts on: `cpu` (also cpu_fixed, software), or a hybrid part's own (`cpu_core`,
    `cpu_atom`), which are kept apart; None for uncore and other PMUs."""
    if pmu in ("cpu", "cpu_fixed", "software", "msr"):
        return "cpu"
    if pmu.startswith("cpu_"):
        return pmu
    return None


def _keep(d: dict[str, float], what: str, event: str, delta: float) -> None:
    """One value per role: the event as written without modifiers wins over `cycles:u` and the like (a file
    may count both); otherwise the first one seen."""
    plain = base_event(event) == event
    marker = f"_{what}_plain"
    if what not in d or (plain and not d.get(marker)):
        d[what] = delta
        d[marker] = 1.0 if plain else 0.0


def _cpu_metrics(deltas: pd.DataFrame, d_tsc: float | None, tsc_ghz: float | None) -> dict[str, Any]:
    """Per CPU (rows with a CPU in `unit`)."""
    per_cpu: dict[int, dict[str, float]] = {}
    for r in deltas.itertuples():
        what = role(str(r.event))
        if what in _CORE_ROLES and r.unit is not None and _core_pmu(str(r.pmu)) is not None:
            _keep(per_cpu.setdefault(int(r.unit), {}), what, str(r.event), float(r.delta))
    return {
        str(cpu): _core_entry(d, d_tsc, tsc_ghz)
        for cpu, d in sorted(per_cpu.items())
        if set(d) & {"instructions", "core_cycles", "ref_cycles"}
    }


def _system_metrics(deltas: pd.DataFrame, d_tsc: float | None, tsc_ghz: float | None) -> dict[str, Any]:
    """System-wide rows (no CPU column: `perf stat -a -I` without -A), per core PMU: {"cpu": {...}} or, on a
    hybrid part, {"cpu_core": {...}, "cpu_atom": {...}}. The task clock (a software event) is shared by
    all."""
    per_pmu: dict[str, dict[str, float]] = {}
    clock: float | None = None
    for r in deltas.itertuples():
        what = role(str(r.event))
        pmu = _core_pmu(str(r.pmu))
        if what not in _CORE_ROLES or r.unit is not None or pmu is None:
            continue
        if what == "task_clock":
            clock = float(r.delta) if clock is None else max(clock, float(r.delta))
        else:
            _keep(per_pmu.setdefault(pmu, {}), what, str(r.event), float(r.delta))
    out: dict[str, Any] = {}
    for pmu, d in sorted(per_pmu.items()):
        if clock is not None:
            d["task_clock"] = clock
        out[pmu] = _core_entry(d, None, tsc_ghz)
    return out


def _gauges(frame: pd.DataFrame, last: int) -> dict[str, float]:
    """Readings (temperatures) at the interval's last sample: `pmu/event[/unit]` -> value."""
    out: dict[str, float] = {}
    part = frame[frame["sample"] == last]
    for r in part.itertuples():
        if is_gauge(str(r.pmu), str(r.event)):
            key = f"{r.pmu}/{r.event}" + ("" if pd.isna(r.unit) else f"/{int(r.unit)}")
            out[key] = float(r.value)
    return out


def _socket_metrics(deltas: pd.DataFrame, seconds: float) -> dict[str, Any]:
    sums: dict[int, dict[str, float]] = {}
    for r in deltas.itertuples():
        where = uncore_location(str(r.pmu), r.unit)
        what = role(str(r.event))
        if where is None or where[0] != "uncore_imc" or what is None:
            continue
        socket = sums.setdefault(where[1], {})
        socket[what] = socket.get(what, 0.0) + float(r.delta)
    out: dict[str, Any] = {}
    for socket, d in sorted(sums.items()):
        reads, writes = d.get("cas_reads"), d.get("cas_writes")
        entry: dict[str, Any] = {
            "cas_reads": reads,
            "cas_writes": writes,
            "act": d.get("act"),
            "pre_miss": d.get("pre_miss"),
            "dram_read_bytes": None if reads is None else reads * BYTES_PER_CAS,
            "dram_write_bytes": None if writes is None else writes * BYTES_PER_CAS,
        }
        entry["dram_read_gbs"] = _per_second(entry["dram_read_bytes"], seconds)
        entry["dram_write_gbs"] = _per_second(entry["dram_write_bytes"], seconds)
        hit = miss = conflict = None
        if reads is not None and writes is not None and "act" in d and "pre_miss" in d:
            cas = reads + writes
            conflict = _ratio(d["pre_miss"], cas)
            miss = _ratio(d["act"] - d["pre_miss"], cas)
            hit = None if conflict is None or miss is None else 1.0 - miss - conflict
        entry.update({"page_hit": hit, "page_miss": miss, "page_conflict": conflict})
        out[str(socket)] = entry
    return out


def _per_second(value: float | None, seconds: float) -> float | None:
    return None if value is None or seconds <= 0 else value / seconds / 1e9


def _unit_totals(deltas: pd.DataFrame) -> dict[str, Any]:
    """{"cha": {socket: {box: {event: delta}}}, "imc": ...}: per uncore unit, each event's delta."""
    out: dict[str, Any] = {}
    for r in deltas.itertuples():
        where = uncore_location(str(r.pmu), r.unit)
        if where is None:
            continue
        kind, socket, box = where
        out.setdefault(kind.removeprefix("uncore_"), {}).setdefault(str(socket), {}).setdefault(str(box), {})[
            str(r.event)
        ] = float(r.delta)
    return out


def _socket_totals(deltas: pd.DataFrame) -> dict[str, Any]:
    """{socket: {"cha": {event: sum over the socket's CHAs}, ...}} (the seed's CHA_PKG_SUMS lines)."""
    out: dict[str, Any] = {}
    for r in deltas.itertuples():
        where = uncore_location(str(r.pmu), r.unit)
        if where is None:
            continue
        kind, socket, _ = where
        events = out.setdefault(str(socket), {}).setdefault(kind.removeprefix("uncore_"), {})
        events[str(r.event)] = events.get(str(r.event), 0.0) + float(r.delta)
    return out


def _iso(t_ns: int) -> str:
    return (
        dt.datetime.fromtimestamp(t_ns / 1e9, dt.UTC)
        .isoformat(timespec="microseconds")
        .replace("+00:00", "Z")
    )


def parse_time(text: str) -> int:
    """CLOCK_REALTIME ns from epoch seconds (`1532379481.5`) or ISO 8601 (`2018-07-23T20:58:01Z`, "
    "UTC if naive)."""
    try:
        return round(float(text) * 1e9)
    except ValueError:
        pass
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise MetricsInputError(f"time {text!r}: expected epoch seconds or ISO 8601") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return round(stamp.timestamp() * 1e9)


def campaign_metrics(
    campaign_dir: Path,
    *,
    node: str | None = None,
    source: str | None = None,
    from_sample: int | None = None,
    to_sample: int | None = None,
    t0_ns: int | None = None,
    t1_ns: int | None = None,
) -> dict[str, Any]:
    """`tailscope metrics`: the derived metrics of one node's samples over the chosen interval."""
    campaign = Campaign.open(campaign_dir)
    con = connect(campaign)
    try:
        node, source, frame = con.sample_series(node, source)
    finally:
        con.close()
    numbers = np.sort(frame["sample"].unique())
    if t0_ns is not None or t1_ns is not None:
        times = frame.groupby("sample")["t_ns"].first().sort_index()
        inside = times[
            (times >= (t0_ns if t0_ns is not None else times.min()))
            & (times <= (t1_ns if t1_ns is not None else times.max()))
        ]
        if len(inside) < 2:
            raise MetricsInputError(
                f"{campaign_dir}: fewer than two samples of node {node} between the given times "
                f"(samples span {_iso(int(times.min()))} .. {_iso(int(times.max()))})"
            )
        first, last = int(inside.index[0]), int(inside.index[-1])
    else:
        first = int(numbers[0]) if from_sample is None else from_sample
        last = int(numbers[-1]) if to_sample is None else to_sample
    if first not in set(numbers.tolist()) or last not in set(numbers.tolist()) or last <= first:
        raise MetricsInputError(
            f"{campaign_dir}: interval {first}..{last} is not within node {node}'s samples "
            f"{int(numbers[0])}..{int(numbers[-1])} (expected A < B)"
        )
    header = campaign.manifest.sample_headers.get(node, {}).get(source, {})
    result = {"node": node, "source": source}
    result.update(compute(frame, first, last, header))
    return result


def run_metrics(
    campaign_dir: Path, *, trial: int, node: str | None = None, probe: str | None = None
) -> dict[str, Any]:
    """`tailscope metrics DIR --trial N`: the same metrics over one run's counters (likwid-csv imports and
    runs measured with counters): each counter row is a count over the run, so the interval is the run
    (seconds = the run's `seconds`), the TSC rate is the run's `tsc_hz` (likwid's "CPU clock"), and gauges
    (temperatures) are readings, not deltas."""
    con = connect(Campaign.open(campaign_dir))
    try:
        (run_id, node, probe, started, seconds, tsc_hz), counters = con.run_counters(trial, node, probe)
    finally:
        con.close()
    t0 = int(pd.Timestamp(started).value)
    t1 = t0 + round(float(seconds or 0.0) * 1e9)
    start = counters.assign(
        sample=0, t_ns=t0, tsc=None,
        value=[v if is_gauge(str(p), str(e)) else 0.0
               for p, e, v in zip(counters["pmu"], counters["event"], counters["value"], strict=True)],
    )  # fmt: skip
    end = counters.assign(sample=1, t_ns=t1, tsc=None)
    frame = pd.concat([start, end], ignore_index=True)
    header = {"TSC_ratio": float(tsc_hz) / 1e8} if tsc_hz else {}
    result: dict[str, Any] = {"node": node, "probe": probe, "trial": trial, "run_id": run_id}
    result.update(compute(frame, 0, 1, header))
    result["seconds"] = float(seconds) if seconds is not None else result["seconds"]
    return result


__all__ = [
    "MetricsInputError",
    "StoreError",
    "base_event",
    "campaign_metrics",
    "compute",
    "corrected_delta",
    "interval_deltas",
    "is_gauge",
    "parse_time",
    "role",
    "run_metrics",
    "series_width",
    "uncore_location",
]
