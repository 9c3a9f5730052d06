"""check --deep judges against the node's own usual clock and the published per-part tables
(analysis/deep_judge.py, analysis/reference_tables.toml), and calls nothing degraded under an inconclusive
verdict. Each test here failed on the code before: the clock was judged against 0.97 x the TSC, latency by
the order of the levels only, and "deep: dgemm degraded" was printed under INCONCLUSIVE."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tailscope.analysis.deep_judge import NodeReference, judge_arith, judge_latency, usual_clock
from tailscope.analysis.reference_tables import TABLES, cpu_identity, nominal_hz, part_of, parts
from tailscope.node.parts import PARTS
from tailscope.report.models import DIFFERS, DeepResult, Step
from tailscope.verbs.deep import _evidence

CAPPED = json.loads((Path(__file__).parent / "fixtures" / "capped_clock.json").read_text())

SKX_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz

processor\t: 1
vendor_id\t: GenuineIntel
"""
SPR_CPUINFO = (
    "vendor_id : GenuineIntel\ncpu family : 6\nmodel : 143\nmodel name : Intel(R) Xeon(R) Platinum 8480+\n"
)
KP920_CPUINFO = (
    "processor : 0\nBogoMIPS : 200.00\nCPU implementer : 0x48\nCPU architecture: 8\nCPU part : 0xd01\n"
)
ZEN4_CPUINFO = "vendor_id : AuthenticAMD\ncpu family : 25\nmodel : 17\nmodel name : AMD EPYC\n"


def _ref(cpuinfo: str | None, usual: float | None = None, nominal: float | None = None) -> NodeReference:
    part = part_of(cpu_identity(cpuinfo)) if cpuinfo else None
    return NodeReference(part, "test CPU", nominal, "model name", usual, 6 if usual else 0)


def test_a_capped_clock_is_a_finding_against_the_nodes_usual_clock():
    """Recorded on this guest: the core runs at 3.69 GHz, the TSC at 2.596 GHz. Capped to the base (turbo
    off), arith's clock reads 2.60 GHz: 0.97 x the TSC (2.52 GHz) called that as expected; against the
    campaign's usual clock it is 30% below, and check --deep says so."""
    usual, n = usual_clock([{"clock": [{"effective_hz": hz}]} for hz in CAPPED["usual_clock_hz"]], [])
    assert n == 6 and usual == pytest.approx(3.6938e9, rel=1e-4)
    ref = _ref(ZEN4_CPUINFO, usual)
    steady = judge_arith(CAPPED["steady"], ref)
    assert steady.differs is False, steady.finding
    capped = judge_arith(CAPPED["capped"], ref)
    assert capped.differs is True
    assert "the clock is capped: 2.60 GHz, 30% below the node's usual 3.69 GHz" in capped.finding
    assert "the median of 6 clock readings of this campaign" in capped.expected
    # the call site and the terminal lines
    finding, expected, status = _evidence("arith", [CAPPED["capped"]], [], ref)
    assert status == DIFFERS and "capped" in finding
    lines = DeepResult([Step("dgemm", "3 of 40 runs slower", [
        {"probe": "arith", "isolates": "clock", "finding": finding, "expected": expected, "status": status}
    ])], "none", verdict="degraded").lines()  # fmt: skip
    assert any("the clock is capped: 2.60 GHz" in line for line in lines)
    assert any(line.strip().endswith(": differs") for line in lines)


def test_below_the_nominal_frequency_is_a_finding_where_the_node_names_one():
    cpu = cpu_identity(SKX_CPUINFO)
    assert nominal_hz(cpu, None) == (2.4e9, "model name (Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz)")
    assert nominal_hz(cpu, "2100000\n") == (2.1e9, "cpufreq base_frequency")  # the driver's figure wins
    assert nominal_hz(cpu_identity(ZEN4_CPUINFO), None)[0] is None  # AMD names carry no frequency
    ref = _ref(SKX_CPUINFO, usual=None, nominal=2.4e9)
    slow = json.loads(json.dumps(CAPPED["capped"]))
    slow["clock"][0].update(effective_hz=2.0e9, effective_hz_min=2.0e9, effective_hz_max=2.0e9)
    j = judge_arith(slow, ref)
    assert j.differs and "2.00 GHz is below the nominal 2.40 GHz (throttled or capped)" in j.finding


def test_parts_are_recognised_from_cpuinfo():
    assert part_of(cpu_identity(SKX_CPUINFO)).id == "skylake-sp"
    assert part_of(cpu_identity(SPR_CPUINFO)).id == "sapphire-rapids"
    assert part_of(cpu_identity(KP920_CPUINFO)).id == "kunpeng920"
    assert part_of(cpu_identity(ZEN4_CPUINFO)).id == "zen4"
    assert part_of(cpu_identity("vendor_id : GenuineIntel\ncpu family : 6\nmodel : 42\n")) is None


def _level(name: str, ns: float, cycles: float) -> dict:
    return {"name": name, "ns": {"median": ns}, "cycles": {"median": cycles}}


def test_a_cache_level_outside_its_published_range_is_a_finding_with_both_figures():
    """L3 at 286 cycles (77 ns at 3.7 GHz) passed the order rule; on Sapphire Rapids it is far outside the
    published 25-45 ns."""
    levels = {"working_sets": [_level("L1", 1.4, 5.0), _level("L2", 4.6, 16.0), _level("L3", 77.3, 286.0),
                               _level("DRAM", 120.0, 444.0)]}  # fmt: skip
    j = judge_latency(levels, _ref(SPR_CPUINFO))
    assert j.differs is True
    assert "L3 77.3 ns, published 25-45 ns for Sapphire Rapids" in j.finding
    assert "L1 5-6 cycles" in j.expected and "reference_tables.toml" in j.expected
    healthy = {"working_sets": [_level("L1", 1.4, 5.0), _level("L2", 4.6, 16.0), _level("L3", 33.0, 122.0),
                                _level("DRAM", 120.0, 444.0)]}  # fmt: skip
    assert judge_latency(healthy, _ref(SPR_CPUINFO)).differs is False
    # a part without a table: the order of the levels only, said so
    unknown = judge_latency(levels, _ref(None))
    assert unknown.differs is False and "no published latency table for this part" in unknown.expected


def test_an_instruction_outside_its_published_range_is_a_finding():
    recorded = CAPPED["steady"]  # Zen 4: fp64 fma 4.00, add 3.00 ... inside AMD's table
    assert judge_arith(recorded, _ref(ZEN4_CPUINFO)).differs is False
    slow = json.loads(json.dumps(recorded))
    for r in slow["table"]:
        if (r["precision"], r["op"]) == ("fp64", "fma"):
            r["latency_cycles"]["median"] = 5.0
    j = judge_arith(slow, _ref(ZEN4_CPUINFO))
    assert j.differs is True
    assert "fp64 scalar fma latency 5.00 cycles, published 4 cycles for Zen 4" in j.finding
    # Kunpeng 920's halved FP64 FMA throughput is its published figure, not a finding (SJTU table)
    row = {"precision": "fp64", "width": "scalar", "op": "fma", "latency_cycles": {"median": 6.0},
           "rthroughput_cycles": {"median": 1.0}}  # fmt: skip
    kp = {"clock": [], "table": [row]}
    assert judge_arith(kp, _ref(KP920_CPUINFO)).differs is False
    row["rthroughput_cycles"]["median"] = 2.0
    halved_again = judge_arith(kp, _ref(KP920_CPUINFO)).finding
    assert "reciprocal throughput 2.00 cycles, published 1 cycles" in halved_again
    assert "no published instruction table" in judge_arith(recorded, _ref(None)).expected


def test_nothing_is_called_degraded_under_an_inconclusive_verdict(tmp_path):
    from tailscope.report.deep_section import deep_section
    from tailscope.report.models import load_deep

    step = Step("dgemm", "3 of 30 runs slower than the node median by the threshold")
    busy = DeepResult([step], "no hardware counters", verdict="inconclusive")
    assert not any("degraded" in line and "not called degraded" not in line for line in busy.lines())
    assert busy.lines()[0].startswith("deep: dgemm followed up (the verdict is inconclusive")
    assert "<b>Degraded:</b>" not in deep_section(busy)
    (tmp_path / "deep.json").write_text(json.dumps({"steps": [{"probe": "dgemm", "why": "x"}], "counters": "",
                                                    "verdict": "inconclusive"}))  # fmt: skip
    assert load_deep(tmp_path).inconclusive
    assert DeepResult([step], "").lines()[0].startswith("deep: dgemm degraded: ")


def test_every_table_row_cites_a_source_and_is_well_formed():
    doc = tomllib.loads(TABLES.read_text())
    assert {"skylake-sp", "sapphire-rapids", "zen4", "kunpeng920"} <= set(doc["parts"]) == set(parts())
    for pid, p in doc["parts"].items():
        assert p["name"] and p["short"] and "match" not in p, pid  # which CPUs: node/parts.py, one place
        assert any(c.table == pid for c in PARTS), f"no part of node/parts.py names the table {pid}"
        for row in p.get("latency", []):
            assert row["level"] in ("L1", "L2", "L3", "DRAM") and row["unit"] in ("cycles", "ns"), (pid, row)
            assert 0 < row["low"] <= row["high"] and len(row["source"]) > 20, (pid, row)
        for row in p.get("arith", []):
            assert row["precision"] in ("fp16", "fp32", "fp64"), (pid, row)
            assert row["op"] in ("add", "sub", "mul", "div", "fma", "sqrt"), (pid, row)
            for key in ("latency", "rthroughput"):
                if key in row:
                    low, high = row[key]
                    assert 0 < low <= high, (pid, row)
            assert len(row["source"]) > 20, (pid, row)


def test_deep_names_a_pair_refused_in_any_trial_and_on_any_cpu():
    """check --deep judged arith's last successful trial only: three recorded trials with --cpus 0,1 whose
    first and second had a pair refused on one CPU (the probe's own refusals) read as if nothing had been
    refused. The finding now has run's sentence over every trial, and the stored table marks the pairs."""
    from tailscope.analysis.arith_table import refusals, table_data

    fixtures = Path(__file__).parents[1] / "analysis" / "fixtures"
    trials = json.loads((fixtures / "arith_x86_cpus01_3trials.json").read_text())["trials"]
    finding, _, _ = _evidence("arith", trials, [1.0, 1.0, 1.0], _ref(None))
    assert "fp64 scalar fma in 1 of 3 trials, on CPU 0 of CPUs 0,1 (latency_below_floor)" in finding
    assert "fp32 avx512f add in 1 of 3 trials, on CPU 1 of CPUs 0,1 (latency_below_floor)" in finding
    assert refusals(trials) in finding  # the one sentence, as `run arith` prints it
    scalar = table_data(trials)[0]
    assert scalar["title"].endswith("median of 3 trials")
    fma = dict(scalar["rows"])["FMA"][scalar["precisions"].index("fp64")]
    assert fma[2] == "partial"


def test_an_unambiguous_inference_is_judged_against_its_table(tmp_path):
    """A KVM guest shown as "AMD EPYC" (family 25 model 17) with Zen 4's caches and AVX-512: the part is
    inferred (Zen 4, one part fits), its table applies, and the expectation says the part was inferred."""
    from tailscope.analysis.deep_judge import node_reference
    from tailscope.node.host import Host

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
        "flags\t\t: fpu sse2 avx2 fma vaes avx512f avx512_bf16 hypervisor\n\n")
    cpu = tmp_path / "sys/devices/system/cpu"
    (cpu / "cpu0/topology").mkdir(parents=True)
    (cpu / "online").write_text("0\n")
    zen4 = ((1, "Data", "32K"), (2, "Unified", "1024K"), (3, "Unified", "32768K"))
    for k, (level, kind, size) in enumerate(zen4):
        index = cpu / f"cpu0/cache/index{k}"
        index.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", "0")):
            (index / name).write_text(f"{value}\n")
    ref = node_reference([], [], Host(tmp_path, machine_name="x86_64"))
    assert ref.part is not None and ref.part.id == "zen4"
    assert ref.inferred.startswith("virtual machine: part inferred: likely AMD Zen 4")
    j = judge_latency({"working_sets": [_level("L1", 1.0, 4.0), _level("L2", 4.0, 14.0)]}, ref)
    assert "inside the published ranges for" in j.expected and ref.inferred in j.expected
