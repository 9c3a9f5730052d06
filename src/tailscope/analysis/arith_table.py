"""arith's summary in the seed's table shape (SJTU, "The CPI of basic arithmetic instructions").

Rows are instructions (ADD, SUB, MUL, DIV, FMA, SQRT), columns precision x {Absolute, Pipelined}: the latency
of one dependent chain and the reciprocal throughput of twelve independent chains, in core cycles per
instruction. One table per register width the probe measured (scalar, then the SIMD width: sse2, avx2,
avx512f (x86 FP16's avx512fp16 with it, both 512 bits), neon, sve), so a KP920 run reads like the seed:

    arith, neon (128-bit), cycles per instruction
    Instruction        FP16                 FP32                 FP64
                Absolute Pipelined  Absolute Pipelined  Absolute Pipelined
    ADD                2       0.5         2       0.5         2       0.5

A figure arith refused as implausible reads "refused", one it did not measure "-"; a line under the tables
names each refused pair and the probe's reason (`refusals`, the same sentence check --deep's finding has).
Used by `tailscope run arith` (terminal) and the report's top-down section (check --deep's arith follow-up).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPS = ("add", "sub", "mul", "div", "fma", "sqrt")
PRECISIONS = ("fp16", "fp32", "fp64")
SAME_WIDTH = {"avx512fp16": "avx512f"}  # x86 FP16 SIMD runs in the same 512-bit registers as AVX-512F


@dataclass(frozen=True)
class Cell:
    """One (instruction, precision) of a width: latency and reciprocal throughput, or why there is none."""

    absolute: float | None
    pipelined: float | None
    note: str = ""  # "refused" (implausible after repeats), "-" (not measured)


@dataclass(frozen=True)
class WidthTable:
    width: str
    bits: int | None
    precisions: tuple[str, ...]  # the columns with at least one figure or refusal
    rows: tuple[tuple[str, tuple[Cell, ...]], ...]  # (OP, one cell per precision)

    @property
    def title(self) -> str:
        bits = f" ({self.bits}-bit)" if self.bits and self.width != "scalar" else ""
        return f"arith, {self.width}{bits}, cycles per instruction"


def _median(stat: Any) -> float | None:
    value = stat.get("median") if isinstance(stat, Mapping) else None
    return float(value) if isinstance(value, int | float) else None


def arith_tables(summary: Mapping[str, Any]) -> list[WidthTable]:
    """The summary's `table` rows regrouped: one WidthTable per width, scalar first, in the probe's order."""
    cells: dict[str, dict[tuple[str, str], Cell]] = {}
    bits: dict[str, int | None] = {}
    for r in summary.get("table") or []:
        if not isinstance(r, Mapping) or r.get("op") not in OPS or r.get("precision") not in PRECISIONS:
            continue
        width = str(r.get("width"))
        width = SAME_WIDTH.get(width, width)
        bits.setdefault(width, r.get("bits") if isinstance(r.get("bits"), int) else None)
        refused = bool(r.get("refused"))
        cell = Cell(_median(r.get("latency_cycles")), _median(r.get("rthroughput_cycles")),
                    "refused" if refused else "")  # fmt: skip
        cells.setdefault(width, {})[(str(r["op"]), str(r["precision"]))] = cell
    order = sorted(cells, key=lambda w: w != "scalar")  # stable: scalar, then the probe's order
    out = []
    for width in order:
        got = cells[width]
        precisions = tuple(p for p in PRECISIONS if any(k[1] == p for k in got))
        rows = tuple(
            (op.upper(), tuple(got.get((op, p), Cell(None, None, "-")) for p in precisions)) for op in OPS
        )
        out.append(WidthTable(width, bits[width], precisions, rows))
    return out


def refusals(summary: Mapping[str, Any]) -> str | None:
    """The sentence naming every pair arith refused as implausible, with the probe's reason
    (native/probes/arith_cycles.h: throughput_above_latency, latency_below_floor, clock_moved), or None.
    `tailscope run arith` prints it under its tables and `check --deep` puts it in arith's finding: the
    tables' cells only read "refused"."""
    rows = [r for r in summary.get("table") or [] if isinstance(r, Mapping) and r.get("refused")]
    if not rows:
        return None
    named = ", ".join(f"{r.get('precision')} {r.get('width')} {r.get('op')} ({r['refused']})" for r in rows)
    return f"arith refused as implausible after repeats: {named}"


def _figure(value: float | None, note: str) -> str:
    if note:
        return note
    if value is None:
        return "-"
    return f"{value:.2f}"


def _pair(absolute: str, pipelined: str) -> str:
    return f"{absolute:>9s}{pipelined:>10s} "


def render_text(summary: Mapping[str, Any]) -> list[str]:
    """The tables as terminal lines (empty when the summary has no table)."""
    lines: list[str] = []
    for t in arith_tables(summary):
        if lines:
            lines.append("")
        lines.append(t.title)
        lines.append(f"{'Instruction':<12s}" + "".join(f"{p.upper():^20s}" for p in t.precisions).rstrip())
        lines.append(f"{'':<12s}" + "".join(_pair("Absolute", "Pipelined") for _ in t.precisions).rstrip())
        for op, row in t.rows:
            cols = "".join(_pair(_figure(c.absolute, c.note), _figure(c.pipelined, c.note)) for c in row)
            lines.append(f"{op:<12s}{cols}".rstrip())
    refused = refusals(summary)
    if lines and refused:
        lines += ["", refused]
    return lines


def table_data(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tables as plain data (stored in deep.json with arith's follow-up; the report renders them)."""
    return [
        {
            "title": t.title,
            "precisions": list(t.precisions),
            "rows": [[op, [[c.absolute, c.pipelined, c.note] for c in row]] for op, row in t.rows],
        }
        for t in arith_tables(summary)
    ]


def figure_text(value: float | None, note: str) -> str:
    """One cell's text, as the terminal table writes it (the report uses the same)."""
    return _figure(value, note)


def campaign_tables(campaign: Path, variant_ids: Sequence[str]) -> list[str]:
    """`tailscope run arith`'s terminal tables: each variant's last successful trial (nothing if none)."""
    from tailscope.store.read import connect

    con = connect(campaign)
    try:
        summaries = [con.ok_summaries(v) for v in variant_ids]
    finally:
        con.close()
    lines: list[str] = []
    for rows in summaries:
        last = next((json.loads(s) for s, _ in reversed(rows) if s), None)
        if last is not None:
            lines += ([""] if lines else []) + render_text(last)
    return lines
