"""Files in the layouts users' perf and likwid write (issue 15): the stored rows checked one by one against
the file, and `metrics --json` giving IPC and GHz for each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store_tools import stored
from tailscope.cli import main


def metrics_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    capsys.readouterr()
    assert main(["metrics", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --- likwid 4.x: Core N columns, the program's own output (stdout and stderr) mixed in ---------------------
LIKWID4 = """\
Running with 2 threads, N = 40000000
Warning: could not set affinity (stderr)
--------------------------------------------------------------------------------
CPU name:\tIntel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz
STRUCT,Info,3
CPU name:,Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz
CPU type:,Intel Xeon Haswell EN/EP/EX processor
CPU clock:,2.50 GHz
TABLE,Group 1 Raw,FLOPS_DP,6
Event,Counter,Core 0,Core 1
Runtime (RDTSC) [s],TSC,2.000000e+00,2.000000e+00
INSTR_RETIRED_ANY,FIXC0,4000000000,3000000000
CPU_CLK_UNHALTED_CORE,FIXC1,5000000000,4000000000
CPU_CLK_UNHALTED_REF,FIXC2,5000000000,5000000000
FP_ARITH_INST_RETIRED_SCALAR_DOUBLE,PMC0,123456,-
TEMP_CORE,TMP0,45,47
TABLE,Group 1 Raw STAT,FLOPS_DP,6
Event,Counter,Sum,Min,Max,Avg
INSTR_RETIRED_ANY STAT,FIXC0,7000000000,3000000000,4000000000,3500000000
TABLE,Group 1 Metric,FLOPS_DP,3
Metric,Core 0,Core 1
Runtime (RDTSC) [s],2.0,2.0
solver done in 2.01 s
"""


def test_likwid4_core_columns_with_program_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lk4.csv"
    path.write_text(LIKWID4)
    campaign = tmp_path / "c"
    assert main(["import", "likwid-csv", str(path), "--campaign", str(campaign), "--node", "n1"]) == 0
    assert "likwid 4.x" in capsys.readouterr().out
    rows = stored(campaign, "SELECT pmu, unit, event, value, width FROM counters ORDER BY pmu, event, unit")
    expected = [
        ("cpu", 0, "FP_ARITH_INST_RETIRED_SCALAR_DOUBLE", 123456.0, 64),
        ("cpu_fixed", 0, "CPU_CLK_UNHALTED_CORE", 5e9, 64),
        ("cpu_fixed", 1, "CPU_CLK_UNHALTED_CORE", 4e9, 64),
        ("cpu_fixed", 0, "CPU_CLK_UNHALTED_REF", 5e9, 64),
        ("cpu_fixed", 1, "CPU_CLK_UNHALTED_REF", 5e9, 64),
        ("cpu_fixed", 0, "INSTR_RETIRED_ANY", 4e9, 64),
        ("cpu_fixed", 1, "INSTR_RETIRED_ANY", 3e9, 64),
        ("thermal", 0, "TEMP_CORE", 45.0, None),  # a gauge: width null, no delta
        ("thermal", 1, "TEMP_CORE", 47.0, None),
    ]
    assert rows == expected
    assert stored(campaign, "SELECT trial, value, tsc_hz FROM runs") == [(0, 2.0, 2.5e9)]
    m = metrics_json(capsys, str(campaign), "--trial", "0")
    assert m["cpus"]["0"]["ipc"] == pytest.approx(0.8) and m["cpus"]["1"]["ipc"] == pytest.approx(0.75)
    assert m["cpus"]["0"]["ghz"] == pytest.approx(2.5) and m["cpus"]["1"]["ghz"] == pytest.approx(2.0)
    assert m["gauges"] == {"thermal/TEMP_CORE/0": 45.0, "thermal/TEMP_CORE/1": 47.0}
    capsys.readouterr()
    assert main(["metrics", str(campaign), "--trial", "3"]) == 2
    assert "0 runs with counters at trial 3" in capsys.readouterr().err
    assert not [k for k in m["other"] if "TEMP" in k]


# --- likwid 5.x MEM group: 8 memory channel boxes on each of 2 sockets -------------------------------------
def likwid5_mem() -> tuple[str, dict[tuple[str, int, str], float]]:
    """The file, and the counters it must store: (pmu, unit, event) -> value."""
    threads = [0, 1, 24, 25]  # sockets 0 and 1, first thread of each holds the uncore counts
    lines = [
        "STRUCT,Info,3,,,",
        "CPU name:,Intel(R) Xeon(R) Platinum 8160 CPU @ 2.10GHz,,,,",
        "CPU type:,Intel Skylake SP processor,,,,",
        "CPU clock:,2.10 GHz,,,,",
        "TABLE,Group 1 Raw,MEM,20,,",
        "Event,Counter," + ",".join(f"HWThread {t}" for t in threads),
        "Runtime (RDTSC) [s],TSC,3.0,3.0,3.0,3.0",
    ]
    expect: dict[tuple[str, int, str], float] = {}
    core = {"INSTR_RETIRED_ANY": ("FIXC0", 1e9), "CPU_CLK_UNHALTED_CORE": ("FIXC1", 2e9),
            "CPU_CLK_UNHALTED_REF": ("FIXC2", 2.1e9)}  # fmt: skip
    for event, (reg, base) in core.items():
        vals = [base + 1000 * i for i in range(len(threads))]
        lines.append(f"{event},{reg}," + ",".join(str(int(v)) for v in vals))
        for t, v in zip(threads, vals, strict=True):
            expect[("cpu_fixed", t, event)] = v
    per_box = {
        "CAS_COUNT_RD": [65, 565, 76, 545, 70, 71, 72, 0],
        "CAS_COUNT_WR": [10, 20, 30, 40, 50, 60, 70, 80],
    }
    for event, counts in per_box.items():
        reg = "C0" if event.endswith("RD") else "C1"
        for box in range(8):
            s0 = counts[box]
            s1 = counts[box] * 3 + 1
            lines.append(f"{event},MBOX{box}{reg},{s0},0,{s1},0")  # uncore: 0 on the non-lead threads
            expect[("uncore_imc:0", box, event)] = float(s0)
            expect[("uncore_imc:1", box, event)] = float(s1)
    lines += [
        "TABLE,Group 1 Raw STAT,MEM,20,,",
        "Event,Counter,Sum,Min,Max,Avg",
        "TABLE,Group 1 Metric,MEM,10,,",
        "Metric,HWThread 0,HWThread 1,HWThread 24,HWThread 25",
    ]
    return "\n".join(lines) + "\n", expect


def test_likwid5_mem_stores_one_row_per_memory_channel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expect = likwid5_mem()
    path = tmp_path / "mem.csv"
    path.write_text(text)
    campaign = tmp_path / "c"
    assert main(["import", "likwid-csv", str(path), "--campaign", str(campaign), "--node", "n1"]) == 0
    rows = stored(campaign, "SELECT pmu, unit, event, value FROM counters")
    assert {(p, u, e): v for p, u, e, v in rows} == expect and len(rows) == len(expect)
    # box 7 of socket 0 read 0 reads: still a row (a dead channel is what this is for)
    assert ("uncore_imc:0", 7, "CAS_COUNT_RD", 0.0) in rows
    m = metrics_json(capsys, str(campaign), "--trial", "0")
    assert m["cpus"]["0"]["ipc"] == pytest.approx(0.5) and m["cpus"]["0"]["ghz"] == pytest.approx(2.0)
    assert m["units"]["imc"]["0"]["3"]["CAS_COUNT_RD"] == 545.0
    reads0 = sum([65, 565, 76, 545, 70, 71, 72, 0])
    assert m["sockets"]["0"]["cas_reads"] == reads0
    assert m["sockets"]["0"]["dram_read_bytes"] == reads0 * 64
    assert m["sockets"]["1"]["cas_reads"] == sum(3 * c + 1 for c in [65, 565, 76, 545, 70, 71, 72, 0])


def test_likwid_twice_is_refused_and_stores_nothing_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, _ = likwid5_mem()
    path = tmp_path / "mem.csv"
    path.write_text(text)
    campaign = tmp_path / "c"
    args = ["import", "likwid-csv", str(path), "--campaign", str(campaign), "--node", "n1"]
    assert main(args) == 0
    before = stored(campaign, "SELECT count(*) FROM counters")
    copy = tmp_path / "copy-of-mem.csv"
    copy.write_bytes(path.read_bytes())
    assert main(["import", "likwid-csv", str(copy), "--campaign", str(campaign), "--node", "n1"]) == 2
    err = capsys.readouterr().err
    assert "already imported" in err and "mem.csv" in err and err[-1] == "\n" and err.count("\n") == 1
    assert stored(campaign, "SELECT count(*) FROM runs") == [(1,)]
    assert stored(campaign, "SELECT count(*) FROM counters") == before


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("+--------+---------+\n| Event | Counter |\n", r":1: likwid-perfctr's text table .* not supported"),
        ("# GID|MetricsCount|CpuCount|Total runtime|...\n", r":1: likwid-perfctr timeline mode"),
        ("Event,core 0,core 1\nINSTR,1,2\n", r":1: likwid 3.x CSV"),
        (
            "TABLE,Group 1 Raw,L2,5\nEvent,Counter,Thread 0\n",
            r":2: column 'Thread 0' is neither 'HWThread N'",
        ),
        (
            f"TABLE,Group 1 Raw,L2,5\nEvent,Counter,HWThread {2**64}\n",
            r":2: HWThread 18446744073709551616: HW ",
        ),
        (  # found by the importer fuzzer: a box number the store's int32 unit cannot hold
            "TABLE,Group 1 Raw,MEM,5\nEvent,Counter,HWThread 0\nCAS_COUNT_RD,MBOX21474836480C0,1\n",
            r":3: counter MBOX21474836480C0: box number above 2147483647",
        ),
    ],
)
def test_likwid_unsupported_layouts_say_what_they_are(tmp_path: Path, text: str, pattern: str) -> None:
    import re

    path = tmp_path / "x.csv"
    path.write_text(text)
    from tailscope.importers import ImportInputError
    from tailscope.importers.likwid_csv import parse

    with pytest.raises(ImportInputError) as info:
        parse(path)
    assert re.search(pattern, str(info.value)), str(info.value)
    assert str(path) in str(info.value)


# --- perf stat -a -I without -A: system-wide rows, no CPU column --------------------------------------------
PERF_SYSTEM = """\
# started on Tue Nov 24 10:00:00 2026

     1.001000000,8004.12,msec,cpu-clock,8004120000,100.00,8.000,CPUs utilized
     1.001000000,12000000000,,cycles,8004120000,100.00,1.499,GHz
     1.001000000,18000000000,,instructions,8004120000,100.00,1.50,insn per cycle
     1.001000000,5400000000,,cycles:D,8004120000,100.00,,
     2.002000000,8001.00,msec,cpu-clock,8001000000,100.00,8.000,CPUs utilized
     2.002000000,16000000000,,cycles,8001000000,100.00,1.999,GHz
     2.002000000,20000000000,,instructions,8001000000,100.00,1.25,insn per cycle
     2.002000000,5500000000,,cycles:D,8001000000,100.00,,
"""


def test_perf_system_wide_has_its_own_metrics_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sys.csv"
    path.write_text(PERF_SYSTEM)
    campaign = tmp_path / "c"
    assert main(["import", "perf-csv", str(path), "--campaign", str(campaign), "--node", "n1"]) == 0
    assert "guessed" not in capsys.readouterr().out
    rows = stored(campaign, "SELECT sample, pmu, unit, event, value FROM samples ORDER BY event, sample")
    assert rows == [
        (0, "software", None, "cpu-clock", 0.0),
        (1, "software", None, "cpu-clock", pytest.approx(8004.12e6)),
        (2, "software", None, "cpu-clock", pytest.approx((8004.12 + 8001.00) * 1e6)),
        (0, "cpu", None, "cycles", 0.0),
        (1, "cpu", None, "cycles", 12e9),
        (2, "cpu", None, "cycles", 28e9),
        (0, "cpu", None, "cycles:D", 0.0),
        (1, "cpu", None, "cycles:D", 5.4e9),
        (2, "cpu", None, "cycles:D", 10.9e9),
        (0, "cpu", None, "instructions", 0.0),
        (1, "cpu", None, "instructions", 18e9),
        (2, "cpu", None, "instructions", 38e9),
    ]
    m = metrics_json(capsys, str(campaign))
    assert m["cpus"] == {}
    system = m["system"]["cpu"]
    assert system["ipc"] == pytest.approx(38 / 28)  # cycles, not cycles:D (the plain event wins)
    assert (
        system["ghz"] == pytest.approx(28e9 / ((8004.12 + 8001.00) * 1e6))
        and system["ghz_from"] == "task_clock"
    )
    m1 = metrics_json(capsys, str(campaign), "--from-sample", "1", "--to-sample", "2")
    assert m1["system"]["cpu"]["ipc"] == pytest.approx(1.25) and m1["system"]["cpu"]["ghz"] == pytest.approx(
        16e9 / 8001.00e6
    )


def test_perf_cycles_with_modifier_counts_as_cycles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "     0.5,CPU0,250.0,msec,task-clock,1,100.00,,\n"
        "     0.5,CPU0,500000000,,cycles:D,1,100.00,,\n"
        "     0.5,CPU0,750000000,,instructions:u,1,100.00,,\n"
        "     0.5,CPU1,250.0,msec,task-clock,1,100.00,,\n"
        "     0.5,CPU1,600000000,,cycles:ppp,1,100.00,,\n"
        "     0.5,CPU1,300000000,,instructions:k,1,100.00,,\n"
    )
    path = tmp_path / "mods.csv"
    path.write_text(text)
    campaign = tmp_path / "c"
    assert main(["import", "perf-csv", str(path), "--campaign", str(campaign), "--node", "n1"]) == 0
    assert "start time guessed from the file's modification time" in capsys.readouterr().out
    rows = stored(
        campaign, "SELECT pmu, unit, event, value FROM samples WHERE sample = 1 ORDER BY unit, event"
    )
    assert rows == [
        ("cpu", 0, "cycles:D", 5e8),
        ("cpu", 0, "instructions:u", 7.5e8),
        ("software", 0, "task-clock", 2.5e8),
        ("cpu", 1, "cycles:ppp", 6e8),
        ("cpu", 1, "instructions:k", 3e8),
        ("software", 1, "task-clock", 2.5e8),
    ]
    m = metrics_json(capsys, str(campaign))
    assert m["cpus"]["0"]["ipc"] == pytest.approx(1.5) and m["cpus"]["0"]["ghz"] == pytest.approx(2.0)
    assert m["cpus"]["1"]["ipc"] == pytest.approx(0.5) and m["cpus"]["1"]["ghz"] == pytest.approx(2.4)


# --- hybrid parts: cpu_core/ and cpu_atom/ PMUs, kept apart -------------------------------------------------
PERF_HYBRID = """\
# started on Tue Nov 24 10:00:00 2026

     1.000500000,16000.00,msec,task-clock,16000000000,100.00,16.0,CPUs utilized
     1.000500000,30000000000,,cpu_core/cycles/,8000000000,100.00,,
     1.000500000,10000000000,,cpu_atom/cycles/,8000000000,100.00,,
     1.000500000,60000000000,,cpu_core/instructions/,8000000000,100.00,,
     1.000500000,8000000000,,cpu_atom/instructions/,8000000000,100.00,,
     1.000500000,1000,,cpu_atom/instructions/u,8000000000,100.00,,
"""


def test_perf_hybrid_core_and_atom_are_kept_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hybrid.csv"
    path.write_text(PERF_HYBRID)
    campaign = tmp_path / "c"
    assert main(["import", "perf-csv", str(path), "--campaign", str(campaign), "--node", "n1"]) == 0
    rows = stored(campaign, "SELECT pmu, event, value FROM samples WHERE sample = 1 ORDER BY pmu, event")
    assert rows == [
        ("cpu_atom", "cycles", 1e10),
        ("cpu_atom", "instructions", 8e9),
        ("cpu_atom", "instructions:u", 1000.0),
        ("cpu_core", "cycles", 3e10),
        ("cpu_core", "instructions", 6e10),
        ("software", "task-clock", 1.6e10),
    ]
    m = metrics_json(capsys, str(campaign))
    assert set(m["system"]) == {"cpu_core", "cpu_atom"}
    assert m["system"]["cpu_core"]["ipc"] == pytest.approx(2.0)
    assert m["system"]["cpu_atom"]["ipc"] == pytest.approx(0.8)
    assert m["system"]["cpu_core"]["ghz"] == pytest.approx(30e9 / 16e9)
    assert m["system"]["cpu_atom"]["ghz"] == pytest.approx(10e9 / 16e9)


# --- perf --no-merge uncore boxes, per socket ---------------------------------------------------------------
def test_perf_uncore_boxes_one_row_per_box(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = []
    for socket in (0, 1):
        for box in range(4):
            lines.append(
                f"1.0,S{socket},1,{100 * (box + 1) + socket},,uncore_imc_{box}/cas_count_read/,1,100.00,,"
            )
    path = tmp_path / "imc.csv"
    path.write_text("\n".join(lines) + "\n")
    campaign = tmp_path / "c"
    assert main(["import", "perf-csv", str(path), "--campaign", str(campaign), "--node", "n1"]) == 0
    rows = stored(campaign, "SELECT pmu, unit, event, value FROM samples WHERE sample = 1 ORDER BY pmu, unit")
    assert rows == [
        (f"uncore_imc:{s}", b, "cas_count_read", float(100 * (b + 1) + s)) for s in (0, 1) for b in range(4)
    ]
    m = metrics_json(capsys, str(campaign))
    assert m["sockets"]["1"]["cas_reads"] == sum(100 * (b + 1) + 1 for b in range(4))
    assert m["units"]["imc"]["0"]["2"]["cas_count_read"] == 300.0


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("1.0;5;;cs;1;100.00;;\n", r":1: fields separated by ';': perf stat -x with another separator"),
        ("1.0\t5\t\tcs\t1\t100.00\n", r":1: fields separated by a tab"),
        (
            "\n Performance counter stats for 'system wide':\n\n   1,234  cs\n",
            r":2: the human-readable `perf stat` table is not supported",
        ),
        (
            "#           time             counts unit events\n     1.001  1,234  cs\n",
            r":1: the human-readable",
        ),
        ("     1.001040420          1,234,567      cycles\n", r":1: this looks like the human-readable"),
        ("1e308,5,,cs,1,100.00,,\n", r":1: time 1e308 s is out of range"),
        (f"{2**63},5,,cs,1,100.00,,\n", r":1: time 9223372036854775808 s is out of range"),
        (f"1.0,CPU{2**100},5,,cs,1,100.00,,\n", r":1: CPU 1267650600228229401496703205376 is above"),
        ("1.0,N0,2,5,,cs,1,100.00,,\n", r":1: per-node output"),
    ],
)
def test_perf_other_layouts_and_overflow_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, pattern: str
) -> None:
    import re

    path = tmp_path / "p.csv"
    path.write_text(text)
    assert main(["import", "perf-csv", str(path), "--campaign", str(tmp_path / "c"), "--node", "n"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(pattern, err), err
    assert not (tmp_path / "c" / "campaign.json").exists()


def test_bom_is_accepted_by_every_text_importer(tmp_path: Path) -> None:
    bom = "\ufeff"
    (tmp_path / "it.csv").write_text(bom + "node,run,iteration,value\nn1,a,0,2.0\n")
    (tmp_path / "perf.csv").write_text(bom + PERF_SYSTEM)
    (tmp_path / "lk.csv").write_text(bom + LIKWID4)
    (tmp_path / "h.perfcounts.lua").write_text(
        bom + "TSC_ratio = 21\nReference_TSC = 0\nReference_WallTime = 1.0\n"
        'tsc[0] = 100\ncore_counts[0]["X"][0] = 5\ntsc[1] = 200\ncore_counts[0]["X"][1] = 7\n'
    )
    c = str(tmp_path / "c")
    assert main(["import", "iterations", str(tmp_path / "it.csv"), "--campaign", c, "--lower-is-better"]) == 0
    assert main(["import", "perf-csv", str(tmp_path / "perf.csv"), "--campaign", c, "--node", "p"]) == 0
    assert main(["import", "likwid-csv", str(tmp_path / "lk.csv"), "--campaign", c, "--node", "l"]) == 0
    assert main(["import", "perfcounts", str(tmp_path / "h.perfcounts.lua"), "--campaign", c]) == 0
    assert stored(Path(c), "SELECT sample, value FROM samples WHERE node = 'h' ORDER BY sample") == [
        (0, 5.0),
        (1, 7.0),
    ]
    assert stored(Path(c), "SELECT count(*) FROM iterations") == [(1,)]


def test_perf_per_cpu_uncore_boxes_get_their_socket_from_the_cpu(tmp_path: Path) -> None:
    """perf -A prints an uncore box's count on the CPU of its PMU's cpumask (one per socket): CPU0 and CPU24
    of a 2-socket part become sockets 0 and 1, in CPU order."""
    lines = [
        f"1.0,CPU{cpu},{100 * (box + 1) + cpu},,uncore_imc_{box}/cas_count_read/,1,100.00,,"
        for cpu in (0, 24)
        for box in range(2)
    ]
    lines += ["1.0,CPU0,5,,cycles,1,100.00,,", "1.0,CPU24,6,,cycles,1,100.00,,"]
    path = tmp_path / "a.csv"
    path.write_text("\n".join(lines) + "\n")
    campaign = tmp_path / "c"
    assert main(["import", "perf-csv", str(path), "--campaign", str(campaign), "--node", "n1"]) == 0
    rows = stored(campaign, "SELECT pmu, unit, value FROM samples WHERE sample = 1 ORDER BY pmu, unit")
    assert rows == [
        ("cpu", 0, 5.0), ("cpu", 24, 6.0),
        ("uncore_imc:0", 0, 100.0), ("uncore_imc:0", 1, 200.0),
        ("uncore_imc:1", 0, 124.0), ("uncore_imc:1", 1, 224.0),
    ]  # fmt: skip
