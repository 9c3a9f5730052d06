"""Bytes between sockets per parallel region from uncore counters read at region begin and end.

The OMPT tool opens the events named with `--uncore` on every unit of every socket (perf_event, the kernel's
sysfs uncore PMUs: uncore_upi_* on Skylake-SP and later, uncore_imc_*, AMD's data-fabric PMUs where exposed)
and reads them when a parallel region begins and ends. A delta is taken modulo the counter width (one wrap)
and scaled by time_enabled / time_running when the kernel multiplexed the counter. Bytes per count: a UPI data
flit carries 64/9 bytes of a cache line (8 data flits and a header per 64-byte line; Intel's uncore guide),
a memory-controller CAS moves 64 bytes. On a 2-socket node a link's received data comes from the other socket;
with more sockets the link's peer is not known from the counters and the row keeps src_socket = -1.

Untested on hardware: this machine has no uncore PMU; tests replay recorded counter values.
"""

from __future__ import annotations

import pandas as pd

DEFAULT_BYTES_PER_COUNT = {"upi": 64.0 / 9.0, "qpi": 64.0 / 9.0, "imc": 64.0, "cas": 64.0}


def bytes_per_count(event: str, pmu: str, overrides: dict[str, float] | None = None) -> float:
    if overrides and event in overrides:
        return overrides[event]
    name = f"{pmu} {event}".lower()
    for key, factor in DEFAULT_BYTES_PER_COUNT.items():
        if key in name:
            return factor
    return 64.0


def deltas(uncore: pd.DataFrame) -> pd.DataFrame:
    """Per (parallel, pmu, unit, socket, event): the scaled count between region begin and end."""
    cols = ["parallel", "pmu", "unit", "socket", "event", "count", "ticks"]
    if uncore.empty:
        return pd.DataFrame(columns=cols)
    key = ["parallel", "pmu", "unit", "socket", "event"]
    begin = uncore[uncore["endpoint"] == "begin"].set_index(key)
    end = uncore[uncore["endpoint"] == "end"].set_index(key)
    joined = begin.merge(end, left_index=True, right_index=True, suffixes=("_b", "_e"))
    rows = []
    for k, r in joined.iterrows():
        width = int(r["width_b"])
        mod = 1 << width if width < 64 else 1 << 64
        raw = (int(r["value_e"]) - int(r["value_b"])) % mod
        enabled = int(r["enabled_e"]) - int(r["enabled_b"])
        running = int(r["running_e"]) - int(r["running_b"])
        scaled = raw * enabled / running if 0 < running < enabled else float(raw)
        rows.append(
            {**dict(zip(key, k, strict=True)), "count": scaled, "ticks": int(r["tsc_e"]) - int(r["tsc_b"])}
        )
    return pd.DataFrame(rows, columns=cols)


def link_traffic(
    uncore: pd.DataFrame, sockets: list[int], tsc_hz: float, overrides: dict[str, float] | None = None
) -> pd.DataFrame:
    """Traffic rows (store `traffic` without run_id): link events as bytes into the socket counting them."""
    cols = ["parallel", "src_socket", "dst_socket", "bytes", "seconds", "source", "event", "link"]
    d = deltas(uncore)
    rows = []
    for r in d.itertuples(index=False):
        nbytes = r.count * bytes_per_count(r.event, r.pmu, overrides)
        is_link = any(k in f"{r.pmu} {r.event}".lower() for k in ("upi", "qpi", "xgmi"))
        dst = int(r.socket)
        src = (next(s for s in sockets if s != dst) if len(sockets) == 2 else -1) if is_link else dst
        rows.append(
            {
                "parallel": int(r.parallel),
                "src_socket": src,
                "dst_socket": dst,
                "bytes": nbytes,
                "seconds": r.ticks / tsc_hz,
                "source": "uncore",
                "event": r.event,
                "link": f"{r.pmu}_{r.unit}" if is_link else None,
            }
        )
    return pd.DataFrame(rows, columns=cols)
