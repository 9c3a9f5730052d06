"""What `check --deep` expects of its micro-architecture follow-ups, and whether they showed it.

The clock is judged against the node's own usual clock, not against the TSC: the campaign's median
effective clock (every clock reading its runs stored: the probes' summary `clock` and the evidence's
`effective_mhz`) and the nominal frequency where the node names one (cpufreq base_frequency, the model
name's "@ 2.60GHz"). A node that runs at 3.7 GHz and is capped to 2.6 GHz reads 30% below its usual clock
here; the former rule (0.97 x the TSC rate, 2.52 GHz on that node) called it as expected.

Latency per level and arith per instruction are judged against the published per-part tables
(reference_tables.toml, a source per row) where the part is known: a level or an instruction outside its
range is a finding with both figures. Where the part is not in the tables, only what holds on every part is
judged (each level slower than the one before it; arith's own plausibility check, native/probes/
arith_cycles.h), and the finding says no table applied. Under a hypervisor that masks the model
(node/parts.py) the part is inferred from the ISA flags and caches: its table is used only where the
inference is unambiguous, and the expectation says "virtual machine: part inferred"; otherwise only the
clock-relative figures are judged.

Nothing here runs a probe or reads the store: `node_reference` takes what the caller read.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from tailscope.analysis.arith_table import Trials, as_trials, median_of, pooled_table, refusals
from tailscope.analysis.reference_tables import Part, parts, this_node
from tailscope.node.host import THIS, Host

CLOCK_SLACK = 0.05  # the clock may read this far below the node's usual clock (noise) before it differs
NOMINAL_SLACK = 0.03  # below the nominal (base) frequency by more than this: throttled or capped
# widths whose reciprocal throughput per instruction is the table's: scalar, and aarch64's 128-bit NEON (the
# seed's KP920 "Pipelined" column: two 128-bit FP pipes, the same per instruction for scalar and NEON; x86's
# wider registers run on fewer ports on some parts, so only their latency is judged)
THROUGHPUT_WIDTHS = ("scalar", "neon")
CLOCK_DRIFT = 0.03  # lowest vs highest clock of one arith run (its kernels' own clocks)
LEVEL_SLACK = 0.95  # a cache level may read 5% faster than the one before it (noise) before it differs
TABLE_SLACK = 0.10  # a latency may read 10% outside its published range (chase and timer noise)
ARITH_SLACK_CYCLES = 0.25  # an instruction latency may read a quarter cycle outside its range
SOURCES = "sources per row in analysis/reference_tables.toml"


@dataclass(frozen=True)
class NodeReference:
    """What this node's figures are judged against."""

    part: Part | None
    cpu_words: str  # "AuthenticAMD family 25 model 17 (AMD EPYC)": what identified (or failed to) the part
    nominal_hz: float | None
    nominal_source: str
    usual_hz: float | None  # the campaign's median clock
    usual_readings: int  # clock readings it is the median of
    inferred: str | None = None  # "virtual machine: part inferred: likely ..." where the model is masked


@dataclass(frozen=True)
class Judgement:
    finding: str  # what was measured, with every figure outside its range and the range
    expected: str  # what a healthy component shows ("" when nothing applies)
    differs: bool | None  # None: nothing was judged


def usual_clock(
    summaries: Iterable[Mapping[str, Any]], effective_mhz: Iterable[float]
) -> tuple[float | None, int]:
    """(median clock in Hz, readings) over the runs' summary clocks and the evidence's effective_mhz."""
    hz = [
        float(c["effective_hz"])
        for s in summaries
        for c in (s.get("clock") or [])
        if isinstance(c, Mapping) and isinstance(c.get("effective_hz"), int | float) and c["effective_hz"] > 0
    ]
    hz += [float(m) * 1e6 for m in effective_mhz if m and m > 0]
    return (statistics.median(hz), len(hz)) if hz else (None, 0)


def node_reference(
    summaries: Iterable[Mapping[str, Any]], effective_mhz: Iterable[float], host: Host = THIS
) -> NodeReference:
    """The reference of `host` (this node, or a recorded one): its part (read from /proc/cpuinfo, or inferred
    where a hypervisor masks the model: node.facts.part_facts), nominal frequency and the campaign's usual
    clock."""
    from tailscope.node.facts import cpu_facts

    cpu, nominal, source = this_node(host)
    words = (
        f"CPU implementer {cpu.arm_implementer:#x} part {cpu.arm_part:#x}"
        if cpu.arm_implementer is not None and cpu.arm_part is not None
        else f"{cpu.vendor} family {cpu.family} model {cpu.model} ({cpu.model_name})"
    )
    facts = cpu_facts(host)
    table = facts.get("cpu_part_table")
    part = parts().get(table) if table else None
    usual, n = usual_clock(summaries, effective_mhz)
    return NodeReference(part, words, nominal, source, usual, n, facts.get("cpu_part_note"))


def _no_table(what: str, ref: NodeReference) -> str:
    """Why no published table applied: the part is not in the tables, or (masked model) not known for sure."""
    if ref.inferred and ref.part is None:
        return f"no published {what} table: {ref.inferred}; only the clock-relative figures are judged"
    return f"no published {what} table for this part ({ref.cpu_words})"


def _inferred(ref: NodeReference) -> list[str]:
    return [ref.inferred] if ref.inferred and ref.part is not None else []


def _ghz(hz: float) -> str:
    return f"{hz / 1e9:.2f} GHz"


def judge_clock(clock: Mapping[str, Any], ref: NodeReference) -> tuple[list[str], list[str], list[str]]:
    """(parts of the finding, expectations, what differed) of one arith run's clock."""
    eff = float(clock.get("effective_hz") or 0.0)
    parts, expected, bad = [f"effective clock {_ghz(eff)}"], [], []
    if ref.usual_hz:
        floor = (1.0 - CLOCK_SLACK) * ref.usual_hz
        expected.append(
            f"effective clock at least {_ghz(floor)} ({1 - CLOCK_SLACK:g} x the node's usual "
            f"{_ghz(ref.usual_hz)}, the median of {ref.usual_readings} clock readings of this campaign)"
        )
        if eff < floor:
            bad.append(
                f"the clock is capped: {_ghz(eff)}, {1 - eff / ref.usual_hz:.0%} below the node's usual "
                f"{_ghz(ref.usual_hz)}"
            )
    if ref.nominal_hz:
        floor = (1.0 - NOMINAL_SLACK) * ref.nominal_hz
        expected.append(
            f"at least {_ghz(floor)} ({1 - NOMINAL_SLACK:g} x the nominal {_ghz(ref.nominal_hz)}, "
            f"{ref.nominal_source})"
        )
        if eff < floor:
            bad.append(f"{_ghz(eff)} is below the nominal {_ghz(ref.nominal_hz)} (throttled or capped)")
    # the lowest and highest of its kernels' clocks (arith since the in-loop clock), else before vs after
    seen = [clock.get(k) for k in ("effective_hz_min", "effective_hz_max")]
    if not all(seen):
        seen = [clock.get(k) for k in ("effective_hz_before", "effective_hz_after")]
    low, high = (min(seen), max(seen)) if all(seen) else (None, None)
    if low and high:
        expected.append(f"steady within {CLOCK_DRIFT:.0%} over the run")
        if (high - low) / low > CLOCK_DRIFT:
            bad.append(f"the clock moved between {_ghz(low)} and {_ghz(high)} during the run")
    return parts, expected, bad


def judge_arith(trials: Trials, ref: NodeReference) -> Judgement:
    """arith: the clock (of its last trial) against the node's usual one and the nominal, each instruction
    (the trials' pooled table, arith_table.pooled_table) against the part's published latency (and scalar
    reciprocal throughput) range; every pair refused in any trial or on any CPU named."""
    runs = as_trials(trials)
    clock = ((runs[-1] if runs else {}).get("clock") or [{}])[0]
    parts, expected, bad = judge_clock(clock, ref)
    rows = pooled_table(trials)
    for r in rows:
        fp64_fma = r.get("precision") == "fp64" and r.get("op") == "fma"
        if fp64_fma and median_of(r.get("latency_cycles")) is not None:
            parts.append(
                f"FP64 {r['width']} fma latency {median_of(r['latency_cycles']):.2f} cycles, reciprocal "
                f"throughput {median_of(r['rthroughput_cycles']):.2f}"
            )
    refused = refusals(trials)
    if refused:
        parts.append(refused)
    part = ref.part
    if part is None or not part.arith_latency:
        expected.append(_no_table("instruction", ref))
    else:
        expected += _inferred(ref)
        checked = 0
        for r in rows:
            key = (str(r.get("precision")), str(r.get("op")))
            lat = median_of(r.get("latency_cycles"))
            published = part.arith_latency.get(key)
            if lat is None or published is None:
                continue
            checked += 1
            slack = max(ARITH_SLACK_CYCLES, 0.05 * published.high)
            if not (published.low - slack <= lat <= published.high + slack):
                bad.append(
                    f"{key[0]} {r.get('width')} {key[1]} latency {lat:.2f} cycles, published "
                    f"{published.text()} for {part.short}"
                )
            thr, published_thr = median_of(r.get("rthroughput_cycles")), part.arith_rthroughput.get(key)
            if r.get("width") in THROUGHPUT_WIDTHS and thr is not None and published_thr is not None:
                slack = max(ARITH_SLACK_CYCLES / 2, 0.05 * published_thr.high)
                if not (published_thr.low - slack <= thr <= published_thr.high + slack):
                    bad.append(
                        f"{key[0]} {r.get('width')} {key[1]} reciprocal throughput {thr:.2f} cycles, "
                        f"published {published_thr.text()} for {part.short}"
                    )
        if checked:
            expected.append(
                f"{checked} instruction latencies inside the published ranges for {part.name} ({SOURCES})"
            )
    finding = "; ".join(parts) + (f" ({'; '.join(bad)})" if bad else "")
    return Judgement(finding, "; ".join(expected), bool(bad) if expected else None)


def judge_latency(summary: Mapping[str, Any], ref: NodeReference) -> Judgement:
    """latency: each level slower than the one before it, and inside the part's published range."""
    sets = [w for w in summary.get("working_sets", []) if median_of(w.get("ns")) is not None]
    finding = ", ".join(
        f"{w['name']} {median_of(w['ns']):.1f} ns ({median_of(w.get('cycles')) or 0:.0f} cycles)"
        for w in sets
    )
    bad = [
        f"{b['name']} ({median_of(b['ns']):.1f} ns) faster than {a['name']} ({median_of(a['ns']):.1f} ns)"
        for a, b in pairwise(sets)
        if median_of(b["ns"]) < LEVEL_SLACK * median_of(a["ns"])  # type: ignore[operator]
    ]
    expected = []
    if len(sets) > 1:
        order = " < ".join(w["name"] for w in sets)
        expected.append(f"each level slower than the one before it ({order})")
    part = ref.part
    judged = []
    if part is not None:
        for w in sets:
            published = part.latency.get(str(w["name"]))
            if published is None:
                continue
            value = median_of(w["cycles"] if published.unit == "cycles" else w["ns"])
            if value is None:
                continue
            judged.append(f"{w['name']} {published.text()}")
            if not published.contains(value, TABLE_SLACK):
                unit = published.unit
                bad.append(f"{w['name']} {value:.1f} {unit}, published {published.text()} for {part.short}")
    if judged:
        name = part.name if part else ""
        expected.append(f"inside the published ranges for {name}: {', '.join(judged)} ({SOURCES})")
        expected += _inferred(ref)
    elif sets:
        expected.append(_no_table("latency", ref))
    if bad:
        finding += f" ({'; '.join(bad)})"
    judged_any = len(sets) > 1 or bool(judged)
    return Judgement(finding, "; ".join(expected), bool(bad) if judged_any else None)
