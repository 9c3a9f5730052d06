"""Every figure a run reports, beyond its headline: the `figures` of each run in `analyze --json`.

A figure has one shape wherever it comes from (the importers' and `run --format`'s `summary.figures`, the
program-reader interface's `Figure`):

    {"name": str, "value": float, "unit": str, "higher_is_better": bool, "params": {str: str|int|float}}

`params` says which figure of several it is (a cache level, an operation and precision, a message size, a
kernel); it is omitted when empty. Values are the medians over a run's timed iterations where the probe
gives statistics. Per probe (the probe's `summary` JSON, docs/probes.md):

    latency   latency_ns and latency_cycles per working set: params {level: ws_16384, bytes: 16384}
    arith     latency_cycles and rthroughput_cycles per (precision, width, op): params {precision, width, op}
              (a pair arith refused has no figure); effective_hz per CPU: params {cpu}
    mpi-p2p   latency_us and bandwidth_gbs per message size: params {bytes}
    stream    gbs and best_gbs per kernel: params {kernel: copy|scale|add|triad}
    c2c       one_way_ns per CPU pair: params {a, b, shared}; group_median_ns per shared level
    dgemm     gflops (median per call); hpl gflops per solve; l2sum team_gbs; fwq noise_fraction
    imported  and `run -- CMD` runs: their `summary.figures` as stored (name, value, unit, direction, params)

A summary this module does not know gives no figure (never an error): the headline is still the run's value.
The caller reads the stored summaries (verbs/analyze.py): this module reads no store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

Figure = dict[str, Any]


def _fig(name: str, value: Any, unit: str, higher: bool, **params: Any) -> Figure | None:
    if isinstance(value, Mapping):  # a statistics object {min, median, max, mean, n}
        value = value.get("median")
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    out: Figure = {"name": name, "value": float(value), "unit": unit, "higher_is_better": higher}
    kept = {k: v for k, v in params.items() if v is not None}
    if kept:
        out["params"] = kept
    return out


def _latency(s: Mapping[str, Any]) -> Iterator[Figure | None]:
    for w in s.get("working_sets", []):
        level = {"level": w.get("name"), "bytes": w.get("bytes")}
        yield _fig("latency_ns", w.get("ns"), "ns", False, **level)
        yield _fig("latency_cycles", w.get("cycles"), "cycles", False, **level)


def _arith(s: Mapping[str, Any]) -> Iterator[Figure | None]:
    for r in s.get("table", []):
        key = {"precision": r.get("precision"), "width": r.get("width"), "op": r.get("op")}
        yield _fig("latency_cycles", r.get("latency_cycles"), "cycles", False, **key)
        yield _fig("rthroughput_cycles", r.get("rthroughput_cycles"), "cycles", False, **key)
    for c in s.get("clock", []):
        yield _fig("effective_hz", c.get("effective_hz"), "Hz", True, cpu=c.get("cpu"))


def _mpi_p2p(s: Mapping[str, Any]) -> Iterator[Figure | None]:
    for r in s.get("sizes", []):
        yield _fig("latency_us", r.get("latency_us"), "us", False, bytes=r.get("bytes"))
        yield _fig("bandwidth_gbs", r.get("bandwidth_gbs"), "GB/s", True, bytes=r.get("bytes"))


def _stream(s: Mapping[str, Any]) -> Iterator[Figure | None]:
    for kernel, k in (s.get("kernels") or {}).items():
        if isinstance(k, Mapping):
            yield _fig("gbs", k.get("gbs"), "GB/s", True, kernel=kernel)
            yield _fig("best_gbs", k.get("best_gbs"), "GB/s", True, kernel=kernel)


def _c2c(s: Mapping[str, Any]) -> Iterator[Figure | None]:
    for p in s.get("pairs", []):
        yield _fig("one_way_ns", p.get("ns"), "ns", False, a=p.get("a"), b=p.get("b"), shared=p.get("shared"))
    for level, g in (s.get("groups") or {}).items():
        if isinstance(g, Mapping):
            yield _fig("group_median_ns", g.get("median_ns"), "ns", False, shared=level)


Reader = Callable[[Mapping[str, Any]], Iterator[Figure | None]]


def _single(name: str, key: str, unit: str, higher: bool) -> Reader:
    def figures(s: Mapping[str, Any]) -> Iterator[Figure | None]:
        yield _fig(name, s.get(key), unit, higher)

    return figures


PROBE_FIGURES: dict[str, Reader] = {
    "latency": _latency,
    "arith": _arith,
    "mpi-p2p": _mpi_p2p,
    "stream": _stream,
    "c2c": _c2c,
    "dgemm": _single("gflops", "gflops_per_call", "GFLOPS", True),
    "hpl": _single("gflops", "gflops_per_solve", "GFLOPS", True),
    "l2sum": _single("team_gbs", "team_gbs", "GB/s", True),
    "fwq": _single("noise_fraction", "noise_fraction", "fraction", False),
}


def _stored(s: Mapping[str, Any]) -> Iterator[Figure | None]:
    """`summary.figures` of imported and application runs (READER.md): kept as stored, checked."""
    for f in s.get("figures") or []:
        if not isinstance(f, Mapping) or not isinstance(f.get("name"), str):
            continue
        params = f.get("params") if isinstance(f.get("params"), Mapping) else {}
        yield _fig(
            f["name"], f.get("value"), str(f.get("unit", "")), bool(f.get("higher_is_better", True)), **params
        )


def figures_of(probe: str, summary: str | Mapping[str, Any] | None) -> list[Figure]:
    """The figures of one run from its stored summary (JSON text or an object); [] when it has none."""
    if summary is None:
        return []
    if isinstance(summary, str):
        try:
            summary = json.loads(summary)
        except ValueError:
            return []
    if not isinstance(summary, Mapping):
        return []
    found = list(_stored(summary))
    reader = PROBE_FIGURES.get(probe)
    if reader is not None:
        found += list(reader(summary))
    return [f for f in found if f is not None]


def with_figures(analysis: Any, stored: Iterable[tuple[Any, Any, Any]]) -> Any:
    """`analysis` (a CampaignAnalysis) with every run's `figures` from its stored summary: what `analyze
    --json` writes. `stored`: (run_id, probe, summary JSON) of the campaign's runs (the caller reads them);
    only the runs the analysis holds are filled, the rest of it is unchanged."""
    import dataclasses

    from tailscope.analysis.run_columns import RunVerdicts

    by_run = {str(r): tuple(figures_of(str(p), s)) for r, p, s in stored if isinstance(s, str) and s}
    runs = RunVerdicts.of(analysis.runs).with_figures(by_run)
    return dataclasses.replace(analysis, runs=runs)
