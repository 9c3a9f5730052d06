"""Regions as an ordered stream of enter/leave events per thread, and traffic as messages in bandwidth bins:
what both exports (OTF2 and Chrome trace JSON) are made from, so they cannot disagree."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from tailscope.trace.records import region_labels

MIB = 1024 * 1024
# Seed 004's bins: <100 MiB/s, <200 MiB/s, <1 GiB/s, ...; the last bin is open.
DEFAULT_BINS_MIBS = (100.0, 200.0, 1024.0, 10240.0)


@dataclass(frozen=True)
class Edge:
    """Enter (True) or leave (False) of `label` at `ns` on `thread`."""

    thread: int
    ns: int
    enter: bool
    label: str


def edges(regions: pd.DataFrame) -> Iterator[Edge]:
    """Per thread, in time order, nested (regions were paired with a stack; depth is the nesting)."""
    ordered = regions.sort_values(["thread", "mono_begin_ns", "depth"])
    labels = region_labels(ordered)
    stack: list[tuple[int, str]] = []  # (end ns, label) of the open regions
    cursor = 0  # time of the last edge: never goes backwards on a location
    current = None
    rows = zip(
        ordered["thread"].tolist(),
        ordered["depth"].tolist(),
        ordered["mono_begin_ns"].tolist(),
        ordered["mono_end_ns"].tolist(),
        labels,
        strict=True,
    )
    for thread, depth, begin_ns, end_ns, label in rows:
        if thread != current:
            while stack:
                end, open_label = stack.pop()
                cursor = max(end, cursor)
                yield Edge(int(current), cursor, False, open_label)  # type: ignore[arg-type]
            current, cursor = thread, 0
        while len(stack) > int(depth):
            end, open_label = stack.pop()
            cursor = max(end, cursor)
            yield Edge(int(thread), cursor, False, open_label)
        begin = max(int(begin_ns), cursor)
        end = max(int(end_ns), begin)
        if stack:  # a child never outlasts its parent (TSC -> ns rounding)
            end = min(end, stack[-1][0])
            begin = min(begin, end)
        cursor = begin
        yield Edge(int(thread), begin, True, label)
        stack.append((end, label))
    while stack:
        end, open_label = stack.pop()
        cursor = max(end, cursor)
        yield Edge(int(current), cursor, False, open_label)  # type: ignore[arg-type]


def parse_bins(text: str) -> tuple[float, ...]:
    """`--bins 100,200,1024`: finite, positive, strictly increasing MiB/s edges (nan, inf or a repeated edge
    would make a bin no message can fall in, or one no name can be given)."""
    from tailscope.trace.errors import TraceInputError

    try:
        edges = tuple(float(b) for b in text.split(","))
    except ValueError:
        raise TraceInputError(f"--bins {text}: expected MiB/s edges like 100,200,1024") from None
    if not all(math.isfinite(b) and b > 0 for b in edges):
        raise TraceInputError(f"--bins {text}: expected finite positive MiB/s edges like 100,200,1024")
    if any(a >= b for a, b in itertools.pairwise(edges)):
        raise TraceInputError(f"--bins {text}: expected strictly increasing MiB/s edges like 100,200,1024")
    return edges


def bin_of(bytes_per_s: float, bins_mibs: tuple[float, ...] = DEFAULT_BINS_MIBS) -> int:
    for i, edge in enumerate(bins_mibs):
        if bytes_per_s < edge * MIB:
            return i
    return len(bins_mibs)


def bin_names(bins_mibs: tuple[float, ...] = DEFAULT_BINS_MIBS) -> list[str]:
    def fmt(v: float) -> str:
        return f"{v / 1024:g} GiB/s" if v >= 1024 else f"{v:g} MiB/s"

    return [f"< {fmt(b)}" for b in bins_mibs] + [f">= {fmt(bins_mibs[-1])}"]


@dataclass(frozen=True)
class Message:
    """Bytes moved from socket `src` to socket `dst` during one parallel region instance."""

    src: int
    dst: int
    begin_ns: int
    end_ns: int
    nbytes: int
    bin: int
    source: str


def messages(
    traffic: pd.DataFrame, regions: pd.DataFrame, bins_mibs: tuple[float, ...] = DEFAULT_BINS_MIBS
) -> list[Message]:
    """Remote traffic (src != dst, both known) as messages spanning their region (like seed 004's)."""
    par = regions[regions["kind"] == "parallel"].drop_duplicates("parallel")
    span = dict(
        zip(
            par["parallel"].tolist(),
            zip(par["mono_begin_ns"].tolist(), par["mono_end_ns"].tolist(), strict=True),
            strict=True,
        )
    )
    out = []
    remote = traffic[(traffic["src_socket"] != traffic["dst_socket"]) & (traffic["src_socket"] >= 0)]
    for r in remote.itertuples(index=False):
        if r.parallel not in span or r.bytes <= 0:
            continue
        begin, end = span[r.parallel]
        seconds = max(float(r.seconds), 1e-9)
        out.append(
            Message(
                int(r.src_socket),
                int(r.dst_socket),
                int(begin),
                int(end),
                round(r.bytes),
                bin_of(r.bytes / seconds, bins_mibs),
                str(r.source),
            )
        )
    return sorted(out, key=lambda m: (m.begin_ns, m.src, m.dst))
