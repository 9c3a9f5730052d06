"""check --deep judges an aarch64 arith run against the Kunpeng 920 table (analysis/reference_tables.toml, the
SJTU seed's "CPI of basic arithmetic instructions") as it judges x86 parts: the aarch64 flavours (scalar,
neon) map to the table's (precision, op) rows, SUB included, and a throughput outside the published one is a
finding with both figures. The summary is in arith's recorded format with the seed's figures."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tailscope.analysis.deep_judge import Judgement, NodeReference, judge_arith
from tailscope.analysis.reference_tables import cpu_identity, part_of

KP920 = json.loads((Path(__file__).parent / "fixtures" / "kp920_arith.json").read_text())["summary"]
KP920_CPUINFO = (
    "processor : 0\nBogoMIPS : 200.00\nCPU implementer : 0x48\nCPU architecture: 8\nCPU part : 0xd01\n"
)


def _ref() -> NodeReference:
    part = part_of(cpu_identity(KP920_CPUINFO))
    assert part is not None and "Kunpeng 920" in part.name
    return NodeReference(part, "CPU implementer 0x48 part 0xd01", 2.6e9, "cpuinfo_max_freq", 2.6e9, 6)


def _judged_with(precision: str, width: str, op: str, figure: str, median: float) -> Judgement:
    """The seed's KP920 run with one instruction's `figure` (latency_cycles, rthroughput_cycles) changed."""
    summary = copy.deepcopy(KP920)
    key = (precision, width, op)
    row = next(r for r in summary["table"] if (r["precision"], r["width"], r["op"]) == key)
    row[figure]["median"] = median
    return judge_arith(summary, _ref())


def test_the_seeds_kp920_figures_are_as_expected():
    """Every instruction of the seed's table (FP64 FMA and MUL at pipelined 1, FP16 DIV/SQRT at 46 cycles)
    is inside its published range: the run is as expected, all 36 (3 precisions x 6 ops x scalar, neon)."""
    j = judge_arith(KP920, _ref())
    assert j.differs is False, j.finding
    assert "36 instruction latencies inside the published ranges for HiSilicon Kunpeng 920" in j.expected


def test_fp64_fma_throughput_halved_again_is_a_finding_with_both_figures():
    """NEON FP64 FMA at 2 cycles per instruction (the seed's KP920 does 1): a finding naming 2.00 and 1."""
    j = _judged_with("fp64", "neon", "fma", "rthroughput_cycles", 2.0)
    assert j.differs is True
    assert "fp64 neon fma reciprocal throughput 2.00 cycles, published 1 cycles for Kunpeng 920" in j.finding


def test_sub_rows_are_judged():
    """SUB (new in arith) maps to the seed's SUB row: a 4-cycle scalar FP32 SUB differs from its 2."""
    j = _judged_with("fp32", "scalar", "sub", "latency_cycles", 4.0)
    assert j.differs is True
    assert "fp32 scalar sub latency 4.00 cycles, published 2 cycles" in j.finding
