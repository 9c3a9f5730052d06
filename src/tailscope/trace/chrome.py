"""Chrome trace-event JSON (opens in Perfetto's UI or chrome://tracing in the user's own browser).

pid = the socket a thread started on (named `socket S`), tid = the OpenMP thread; each region is a B/E pair in
the nesting order of `timeline.edges` (the OTF2 export's order too); remote traffic per socket pair is a
counter track (`ph: C`, bytes/s while the region runs); `ts` is microseconds since the first event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from tailscope.trace.timeline import DEFAULT_BINS_MIBS, bin_names, edges, messages


def chrome_trace(
    regions: pd.DataFrame, traffic: pd.DataFrame, *, bins_mibs: tuple[float, ...] = DEFAULT_BINS_MIBS
) -> dict[str, Any]:
    all_edges = list(edges(regions))
    msgs = messages(traffic, regions, bins_mibs)
    t0 = min([e.ns for e in all_edges] + [m.begin_ns for m in msgs], default=0)
    thread_socket = {
        int(k): int(v) for k, v in regions.groupby("thread")["socket"].agg(lambda x: x.mode().iloc[0]).items()
    }
    events: list[dict[str, Any]] = []
    for s in sorted(set(thread_socket.values()) | {m.src for m in msgs} | {m.dst for m in msgs}):
        events.append(
            {"ph": "M", "name": "process_name", "pid": s, "tid": 0, "args": {"name": f"socket {s}"}}
        )
    for t, s in sorted(thread_socket.items()):
        events.append({"ph": "M", "name": "thread_name", "pid": s, "tid": t, "args": {"name": f"thread {t}"}})
    for e in all_edges:
        events.append(
            {
                "ph": "B" if e.enter else "E",
                "name": e.label,
                "cat": e.label.split(" @ ")[0],
                "pid": thread_socket.get(e.thread, 0),
                "tid": e.thread,
                "ts": (e.ns - t0) / 1000.0,
            }
        )
    names = bin_names(bins_mibs)
    for m in msgs:
        seconds = max((m.end_ns - m.begin_ns) / 1e9, 1e-9)
        track = f"socket {m.src} -> {m.dst} bytes/s"
        events.append(
            {
                "ph": "C",
                "name": track,
                "pid": m.dst,
                "ts": (m.begin_ns - t0) / 1000.0,
                "args": {"value": m.nbytes / seconds},
            }
        )
        events.append(
            {"ph": "C", "name": track, "pid": m.dst, "ts": (m.end_ns - t0) / 1000.0, "args": {"value": 0}}
        )
        events.append(
            {
                "ph": "i",
                "s": "p",
                "name": f"{m.nbytes} B from socket {m.src} ({names[m.bin]})",
                "pid": m.dst,
                "tid": 0,
                "ts": (m.end_ns - t0) / 1000.0,
                "args": {"source": m.source},
            }
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"producer": "tailscope trace", "clock": "CLOCK_MONOTONIC"},
    }


def write_chrome(
    path: Path,
    regions: pd.DataFrame,
    traffic: pd.DataFrame,
    *,
    bins_mibs: tuple[float, ...] = DEFAULT_BINS_MIBS,
) -> Path:
    path.write_text(json.dumps(chrome_trace(regions, traffic, bins_mibs=bins_mibs)))
    return path
