"""arith's summary in the seed's table shape (SJTU, "The CPI of basic arithmetic instructions").

Rows are instructions (ADD, SUB, MUL, DIV, FMA, SQRT), columns precision x {Absolute, Pipelined}: the latency
of one dependent chain and the reciprocal throughput of twelve independent chains, in core cycles per
instruction. One table per register width the probe measured (scalar, then the SIMD width: sse2, avx2,
avx512f (x86 FP16's avx512fp16 with it, both 512 bits), neon, sve), so a KP920 run reads like the seed:

    arith, neon (128-bit), cycles per instruction
    Instruction        FP16                 FP32                 FP64
                Absolute Pipelined  Absolute Pipelined  Absolute Pipelined
    ADD                2       0.5         2       0.5         2       0.5

Every successful trial counts: a figure is the median of the trials' own medians (each of them pooled by the
probe over its CPUs that did not refuse the pair; the title says "median of N trials" where N > 1). A pair
arith refused as implausible everywhere reads "refused", one refused in some trials or on some CPUs shows the
others' figure with a "*", one it did not measure reads "-". One line under the tables names each pair
refused in any trial or on any CPU, with in how many trials, on which CPUs (summary.checks) and the probe's
reason (`refused_pairs` is the rule, `refusals` the sentence; check --deep's finding has the same sentence).
Used by `tailscope run arith` (terminal) and the report's top-down section (check --deep's arith follow-up).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPS = ("add", "sub", "mul", "div", "fma", "sqrt")
PRECISIONS = ("fp16", "fp32", "fp64")
SAME_WIDTH = {"avx512fp16": "avx512f"}  # x86 FP16 SIMD runs in the same 512-bit registers as AVX-512F


Trials = Mapping[str, Any] | Sequence[Mapping[str, Any]]  # one trial's summary, or every trial's in order


def as_trials(trials: Trials) -> list[Mapping[str, Any]]:
    return [trials] if isinstance(trials, Mapping) else [t for t in trials if isinstance(t, Mapping)]


@dataclass(frozen=True)
class Cell:
    """One (instruction, precision) of a width: latency and reciprocal throughput, or why there is none."""

    absolute: float | None
    pipelined: float | None
    note: str = ""  # "refused" (implausible after repeats), "-" (not measured), PARTIAL (figures marked *)


PARTIAL = "partial"  # refused in some trials or on some CPUs: the figures are the others' (shown with a *)


@dataclass(frozen=True)
class WidthTable:
    width: str
    bits: int | None
    precisions: tuple[str, ...]  # the columns with at least one figure or refusal
    rows: tuple[tuple[str, tuple[Cell, ...]], ...]  # (OP, one cell per precision)
    trials: int = 1  # the trials whose medians the figures are the median of

    @property
    def title(self) -> str:
        bits = f" ({self.bits}-bit)" if self.bits and self.width != "scalar" else ""
        over = f", median of {self.trials} trials" if self.trials > 1 else ""
        return f"arith, {self.width}{bits}, cycles per instruction{over}"


def median_of(stat: Any) -> float | None:
    """A probe statistic's median ({"median": x, ...}), or None."""
    value = stat.get("median") if isinstance(stat, Mapping) else None
    return float(value) if isinstance(value, int | float) else None


Pair = tuple[str, str, str]  # (precision, width, op) as the probe names them


def _pair_of(r: Mapping[str, Any]) -> Pair:
    return (str(r.get("precision")), str(r.get("width")), str(r.get("op")))


@dataclass(frozen=True)
class Refusal:
    """A pair arith refused in at least one trial or on at least one CPU (summary.checks per CPU and pair;
    a table row's `refused` where it was refused on every CPU)."""

    pair: Pair
    trials: int  # the trials in which some CPU refused it
    of_trials: int
    cpus: dict[int, int]  # CPU -> trials in which it refused the pair
    of_cpus: tuple[int, ...]  # the CPUs that measured it
    reasons: tuple[str, ...]  # the probe's outcomes (arith_cycles.h), first seen first
    measured: bool  # figures remain: from the trials and CPUs that did not refuse it

    def text(self) -> str:
        words = " ".join(self.pair)
        if self.of_trials > 1:
            words += f" in {self.trials} of {self.of_trials} trials"
        if len(self.of_cpus) > 1 and self.cpus:  # measured on several CPUs: which refused it
            listed = ",".join(str(c) for c in self.of_cpus)
            sep = "," if self.of_trials > 1 else ""
            refusing = sorted(self.cpus)
            if set(self.cpus.values()) != {self.trials}:  # CPUs that refused it in different trials
                each = " and ".join(f"CPU {c} in {self.cpus[c]}" for c in refusing)
                words += f"{sep} on {each} of CPUs {listed}"
            elif refusing == list(self.of_cpus):
                words += f"{sep} on every CPU ({listed})"
            else:
                some = ",".join(map(str, refusing))
                words += f"{sep} on CPU{'s' if len(refusing) > 1 else ''} {some} of CPUs {listed}"
        return f"{words} ({', '.join(self.reasons)})"


def refused_pairs(trials: Trials) -> list[Refusal]:
    """Every pair refused in any trial or on any CPU, in the table's order: the one rule behind the
    "refused" and "*" cells and the sentence under the tables."""
    runs = as_trials(trials)
    seen: dict[Pair, dict[str, Any]] = {}
    for s in runs:
        table = [r for r in s.get("table") or [] if isinstance(r, Mapping)]
        checks = [c for c in s.get("checks") or [] if isinstance(c, Mapping)]
        for r in table:
            pair = _pair_of(r)
            got = seen.setdefault(pair, {"trials": 0, "cpus": {}, "of": set(), "why": {}, "measured": False})
            mine = [c for c in checks if _pair_of(c) == pair]
            got["of"].update(int(c["cpu"]) for c in mine if isinstance(c.get("cpu"), int))
            refusing = [c for c in mine if c.get("refused")]
            for c in refusing:
                got["why"][str(c.get("outcome"))] = None
                if isinstance(c.get("cpu"), int):
                    got["cpus"][c["cpu"]] = got["cpus"].get(c["cpu"], 0) + 1
            if r.get("refused") and not refusing:  # a summary without checks: refused on every CPU
                got["why"][str(r["refused"])] = None
            got["trials"] += bool(refusing or r.get("refused"))
            got["measured"] |= median_of(r.get("latency_cycles")) is not None
    return [
        Refusal(pair, g["trials"], len(runs), g["cpus"], tuple(sorted(g["of"])), tuple(g["why"]),
                g["measured"])
        for pair, g in seen.items()
        if g["trials"]
    ]


def refusals(trials: Trials) -> str | None:
    """The sentence naming every pair arith refused as implausible in any trial or on any CPU, with the
    probe's reason (native/probes/arith_cycles.h: throughput_above_latency, latency_below_floor,
    clock_moved), or None. `tailscope run arith` prints it under its tables and `check --deep` puts it in
    arith's finding: the tables' cells only read "refused", or a figure with a * where other trials or CPUs
    measured the pair."""
    refused = refused_pairs(trials)
    if not refused:
        return None
    named = ", ".join(r.text() for r in refused)
    partial = any(r.measured for r in refused)
    marked = "; figures marked * are from the trials and CPUs that did not refuse them" if partial else ""
    return f"arith refused as implausible after repeats: {named}{marked}"


FIGURES = ("latency_cycles", "rthroughput_cycles")


def pooled_table(trials: Trials) -> list[dict[str, Any]]:
    """The trials' `table` rows as one: per pair, the median of the trial medians of the trials that
    measured it (a trial's own figures pool its CPUs that did not refuse the pair); null figures and the
    probe's reason where no trial measured it."""
    runs = as_trials(trials)
    rows: dict[Pair, dict[str, Any]] = {}
    figures: dict[Pair, tuple[list[float], list[float]]] = {}
    for s in runs:
        for r in s.get("table") or []:
            if not isinstance(r, Mapping):
                continue
            pair = _pair_of(r)
            rows.setdefault(pair, {k: v for k, v in r.items() if k not in FIGURES})
            lat, thr = median_of(r.get("latency_cycles")), median_of(r.get("rthroughput_cycles"))
            if lat is not None and thr is not None:
                figures.setdefault(pair, ([], []))[0].append(lat)
                figures[pair][1].append(thr)
    out = []
    for pair, row in rows.items():
        lat_thr = figures.get(pair)
        if lat_thr is None:
            out.append({**row, "latency_cycles": None, "rthroughput_cycles": None})
            continue
        medians = [{"median": statistics.median(v), "n": len(v)} for v in lat_thr]
        out.append({**row, "latency_cycles": medians[0], "rthroughput_cycles": medians[1]})
        out[-1].pop("refused", None)
    return out


def arith_tables(trials: Trials) -> list[WidthTable]:
    """The trials' table (`pooled_table`) regrouped: one WidthTable per width, scalar first, in the probe's
    order; a pair refused somewhere but measured elsewhere is marked PARTIAL."""
    runs = as_trials(trials)
    partial = {r.pair for r in refused_pairs(runs) if r.measured}
    cells: dict[str, dict[tuple[str, str], Cell]] = {}
    bits: dict[str, int | None] = {}
    for r in pooled_table(runs):
        if r.get("op") not in OPS or r.get("precision") not in PRECISIONS:
            continue
        width = str(r.get("width"))
        width = SAME_WIDTH.get(width, width)
        bits.setdefault(width, r.get("bits") if isinstance(r.get("bits"), int) else None)
        note = "refused" if r.get("refused") else PARTIAL if _pair_of(r) in partial else ""
        cell = Cell(median_of(r.get("latency_cycles")), median_of(r.get("rthroughput_cycles")), note)
        cells.setdefault(width, {})[(str(r["op"]), str(r["precision"]))] = cell
    order = sorted(cells, key=lambda w: w != "scalar")  # stable: scalar, then the probe's order
    out = []
    for width in order:
        got = cells[width]
        precisions = tuple(p for p in PRECISIONS if any(k[1] == p for k in got))
        rows = tuple(
            (op.upper(), tuple(got.get((op, p), Cell(None, None, "-")) for p in precisions)) for op in OPS
        )
        out.append(WidthTable(width, bits[width], precisions, rows, len(runs)))
    return out


def _figure(value: float | None, note: str) -> str:
    if note and note != PARTIAL:
        return note
    if value is None:
        return "-"
    return f"{value:.2f}" + ("*" if note == PARTIAL else "")


def _pair(absolute: str, pipelined: str) -> str:
    return f"{absolute:>9s}{pipelined:>10s} "


def render_text(trials: Trials) -> list[str]:
    """The tables as terminal lines (empty when no trial has a table), the refusals' sentence under them."""
    lines: list[str] = []
    for t in arith_tables(trials):
        if lines:
            lines.append("")
        lines.append(t.title)
        lines.append(f"{'Instruction':<12s}" + "".join(f"{p.upper():^20s}" for p in t.precisions).rstrip())
        lines.append(f"{'':<12s}" + "".join(_pair("Absolute", "Pipelined") for _ in t.precisions).rstrip())
        for op, row in t.rows:
            cols = "".join(_pair(_figure(c.absolute, c.note), _figure(c.pipelined, c.note)) for c in row)
            lines.append(f"{op:<12s}{cols}".rstrip())
    refused = refusals(trials)
    if lines and refused:
        lines += ["", refused]
    return lines


def table_data(trials: Trials) -> list[dict[str, Any]]:
    """The tables as plain data (stored in deep.json with arith's follow-up; the report renders them)."""
    return [
        {
            "title": t.title,
            "precisions": list(t.precisions),
            "rows": [[op, [[c.absolute, c.pipelined, c.note] for c in row]] for op, row in t.rows],
        }
        for t in arith_tables(trials)
    ]


def figure_text(value: float | None, note: str) -> str:
    """One cell's text, as the terminal table writes it (the report uses the same)."""
    return _figure(value, note)


def campaign_tables(campaign: Path, variant_ids: Sequence[str]) -> list[str]:
    """`tailscope run arith`'s terminal tables: each variant's successful trials (nothing if none)."""
    from tailscope.store.read import connect

    con = connect(campaign)
    try:
        summaries = [con.ok_summaries(v) for v in variant_ids]
    finally:
        con.close()
    lines: list[str] = []
    for rows in summaries:
        trials = [json.loads(s) for s, _ in rows if s]
        if trials:
            lines += ([""] if lines else []) + render_text(trials)
    return lines
