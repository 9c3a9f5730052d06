"""perf stat -I -x, and likwid-perfctr CSV importers: layouts, <not counted>/<not supported>, "
"errors, real perf."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from store_tools import stored
from tailscope.cli import main
from tailscope.importers import ImportInputError, likwid_csv, perf_csv
from tailscope.store.campaign import Campaign
from tailscope.store.views import connect

# Written by perf 6.1 on this VM (perf stat -I 200 -x, ...), see perf_csv.py.
AGGREGATED = """# started on Mon Nov 23 11:20:00 2026

     0.200250136,1.00,msec,task-clock,1004427,100.00,0.005,CPUs utilized
     0.200250136,1,,context-switches,1004427,100.00,995.593,/sec
     0.200250136,<not supported>,,cycles,0,100.00,,
     0.400777061,<not counted>,msec,task-clock,0,100.00,,
     0.400777061,<not counted>,,context-switches,0,100.00,,
     0.400777061,<not supported>,,cycles,0,100.00,,
     0.506766654,0.07,msec,task-clock,70915,100.00,0.000,CPUs utilized
     0.506766654,4,,context-switches,70915,100.00,0.000,/sec
     0.506766654,<not supported>,,cycles,0,100.00,,
"""
PER_CPU = """     0.200271377,CPU0,203.39,msec,task-clock,203392930,100.00,1.017,CPUs utilized
     0.200271377,CPU1,203.44,msec,task-clock,203441031,100.00,1.017,CPUs utilized
     0.200271377,CPU0,25,,context-switches,203408042,100.00,122.914,/sec
     0.200271377,CPU1,21,,context-switches,203441422,100.00,103.224,/sec
     0.404069707,CPU0,200.82,msec,task-clock,200821292,100.00,1.004,CPUs utilized
     0.404069707,CPU1,200.78,msec,task-clock,200783376,100.00,1.004,CPUs utilized
     0.404069707,CPU0,29,,context-switches,200806711,100.00,144.407,/sec
     0.404069707,CPU1,13,,context-switches,200782895,100.00,64.746,/sec
"""
PER_SOCKET = """     0.200259289,S0,2,415.04,msec,task-clock,415033799,100.00,2.075,CPUs utilized
     0.200259289,S0,2,1077519742,,msr/tsc/,415045076,100.00,2.596,G/sec
     0.200259289,S1,2,1077519000,,msr/tsc/,415045076,100.00,2.596,G/sec
     0.407967599,S0,2,401.16,msec,task-clock,401164087,100.00,2.006,CPUs utilized
     0.407967599,S0,2,1041455142,,msr/tsc/,401153601,100.00,2.596,G/sec
     0.407967599,S1,2,1041455000,,msr/tsc/,401153601,100.00,2.596,G/sec
"""


def samples(campaign: Path) -> list[tuple]:
    return stored(
        campaign, "SELECT sample, pmu, unit, event, value FROM samples ORDER BY pmu, unit, event, sample"
    )


def test_aggregated_with_not_counted_and_not_supported(tmp_path: Path) -> None:
    path = tmp_path / "perf.csv"
    path.write_text(AGGREGATED)
    assert main(["import", "perf-csv", str(path), "--campaign", str(tmp_path / "c"), "--node", "n1"]) == 0
    rows = samples(tmp_path / "c")
    cs = [r for r in rows if r[3] == "context-switches"]
    # cumulative from a zero sample 0; the <not counted> interval 2 stores no row
    assert [(r[0], r[4]) for r in cs] == [(0, 0.0), (1, 1.0), (3, 5.0)]
    assert {r[1] for r in cs} == {"software"} and all(r[2] is None for r in cs)
    task = [r for r in rows if r[3] == "task-clock"]
    assert task[-1][4] == pytest.approx(1.07e6)  # msec -> ns
    assert not [r for r in rows if r[3] == "cycles"]
    parsed, _ = perf_csv.parse(path)
    assert parsed.unsupported == {"cycles"} and parsed.not_counted == 2 and parsed.started_ns is not None


def test_per_cpu_and_per_socket(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text(PER_CPU)
    (tmp_path / "b.csv").write_text(PER_SOCKET)
    assert (
        main(
            ["import", "perf-csv", str(tmp_path / "a.csv"), "--campaign", str(tmp_path / "a"), "--node", "n"]
        )
        == 0
    )
    assert (
        main(
            ["import", "perf-csv", str(tmp_path / "b.csv"), "--campaign", str(tmp_path / "b"), "--node", "n"]
        )
        == 0
    )
    a = samples(tmp_path / "a")
    assert ("software", 1, "context-switches", 34.0) in [(r[1], r[2], r[3], r[4]) for r in a]
    b = samples(tmp_path / "b")
    tsc1 = [r for r in b if r[1] == "msr" and r[2] == 1]
    assert [r[4] for r in tsc1] == [0.0, 1077519000.0, 1077519000.0 + 1041455000.0]
    assert perf_csv.split_event("uncore_imc_0/cas_count_read/") == ("uncore_imc_0", "cas_count_read")
    assert perf_csv.split_event("cpu_atom/instructions/u") == ("cpu_atom", "instructions:u")
    assert perf_csv.split_event("cycles:u") == ("cpu", "cycles:u")


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("0.1,abc,,context-switches,1,100.00,,\n", r":1: value 'abc' is not a number"),
        ("0.1,5,,cs,1,100.00,,\n0.05,6,,cs,1,100.00,,\n", r":2: time 0.05 is before"),
        ("0.1,5,,cs,1,100.00,,\n0.1,6,,cs,1,100.00,,\n", r":2: cs appears twice"),
        ("0.1,5\n", r":1: 2 fields"),
        ("0.1,CPU0,5,,cs,1,100,,\n0.2,5,,cs,1,100,,\n", r":2: aggregated line in a file of per-cpu lines"),
        ("0.1,S0-D0-C1,1,5,,cs,1,100,,\n", r"per-core output"),
        ("0.1,-5,,cs,1,100,,\n", r"negative"),
        ("# only a comment\n", r"no counted values"),
        ("0.1," + "9" * 70000 + ",,cs\n", r":1: line longer than"),
        ("x,5,,cs,1,100,,\n", r":1: time 'x' is not a number"),
    ],
)
def test_perf_csv_errors(tmp_path: Path, text: str, pattern: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ImportInputError, match=pattern):
        perf_csv.parse(path)
    assert main(["import", "perf-csv", str(path), "--campaign", str(tmp_path / "c")]) == 2
    assert str(path) in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf not installed")
def test_real_perf_stat_output(tmp_path: Path) -> None:
    out = tmp_path / "real.csv"
    subprocess.run(
        ["perf", "stat", "-I", "100", "-x,", "-o", str(out), "-e", "task-clock,context-switches,page-faults",
         "--", "python3", "-c", "import time; t=time.time()\nwhile time.time()-t<0.35: pass"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    parsed, _ = perf_csv.parse(out)
    assert parsed.intervals >= 3 and parsed.started_ns is not None
    assert main(["import", "perf-csv", str(out), "--campaign", str(tmp_path / "c"), "--node", "n"]) == 0
    task = [r for r in samples(tmp_path / "c") if r[3] == "task-clock"]
    # the cumulative task clock is the sum of perf's per-interval msec values, in ns (CPU time, not the 0.35 s
    # of wall time: on a busy machine the loop gets less)
    msec = [float(line.split(",")[1]) for line in out.read_text().splitlines()
            if line.strip() and not line.startswith("#") and line.split(",")[3] == "task-clock"
            and not line.split(",")[1].startswith("<")]  # fmt: skip
    assert task[-1][4] == pytest.approx(sum(msec) * 1e6) and task[-1][4] > 0


LIKWID = """STRUCT,Info,3,,
CPU name:,Intel(R) Xeon(R) Platinum 8160 CPU @ 2.10GHz,,,
CPU type:,Intel Skylake SP processor,,,
CPU clock:,2.1 GHz,,,
TABLE,Group 1 Raw,L2,5,,
Event,Counter,HWThread 0,HWThread 1
Runtime (RDTSC) [s],TSC,{runtime},{runtime}
INSTR_RETIRED_ANY,FIXC0,{inst},2000000
CPU_CLK_UNHALTED_CORE,FIXC1,3000000,3100000
L2_LINES_IN_ALL,PMC0,{fills},4000
CAS_COUNT_RD,MBOX0C0,777,-
TABLE,Group 1 Raw STAT,L2,5,,
Event,Counter,Sum,Min,Max,Avg
INSTR_RETIRED_ANY STAT,FIXC0,3000000,1000000,2000000,1500000
TABLE,Group 1 Metric,L2,2,,
Metric,HWThread 0,HWThread 1
Runtime (RDTSC) [s],1.0,1.0
"""


def test_likwid_files_become_runs_with_counters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign = tmp_path / "c"
    for k in range(8):
        path = tmp_path / f"run{k}.csv"
        slow = k == 5
        path.write_text(
            LIKWID.format(
                runtime=1.5 if slow else 1.0 + 0.001 * k, inst=1000000 + k, fills=900000 if slow else 3000 + k
            )
        )
        assert main(["import", "likwid-csv", str(path), "--campaign", str(campaign), "--node", "n1"]) == 0
    con = connect(Campaign.open(campaign))
    try:
        runs = con.execute("SELECT trial, value, probe FROM runs ORDER BY trial").fetchall()
        counters = con.execute(
            "SELECT pmu, unit, event, value FROM counters WHERE run_id = (SELECT run_id FROM runs "
            "WHERE trial = 5)"
        ).fetchall()
    finally:
        con.close()
    assert [r[0] for r in runs] == list(range(8)) and runs[5][1] == 1.5 and runs[0][2] == "imported:likwid-L2"
    assert ("cpu", 0, "L2_LINES_IN_ALL", 900000.0) in counters
    # the uncore box MBOX0 of the socket whose lead thread is HW thread 0: pmu uncore_imc:<socket>, unit = box
    assert ("uncore_imc:0", 0, "CAS_COUNT_RD", 777.0) in counters and not [
        c for c in counters if c[2] == "CAS_COUNT_RD" and c[1] == 1
    ]
    assert not [c for c in counters if "STAT" in c[2]]
    capsys.readouterr()
    main(["analyze", str(campaign), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["attribution"]["variants"][0]["counters"][0]["counter"] == "cpu/L2_LINES_IN_ALL"


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("hello\n", r"no 'TABLE,Group N Raw"),
        (
            "TABLE,Group 1 Raw,L2,5\nEvent,Counter,HWThread 0\nX,PMC0,abc\n",
            r":3: value 'abc' is not a number",
        ),
        ("TABLE,Group 1 Raw,L2,5\nEvent,Counter,HWThread 0\nX,PMC0,1,2\n", r":3: 4 fields, expected 3"),
        (
            "TABLE,Group 1 Raw,L2,5\nEvent,Counter,Thread 0\n",
            r":2: column 'Thread 0' is neither 'HWThread N'",
        ),
        ("TABLE,Group 1 Raw,L2,5\n", r":1: table has no 'Event,Counter"),
        ("TABLE,Group 1 Raw,L2,5\nEvent,Counter,HWThread 0\nX,PMC0,5\n", r"cannot time the run"),
    ],
)
def test_likwid_errors(tmp_path: Path, text: str, pattern: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ImportInputError, match=pattern):
        likwid_csv.import_likwid_csv(path, tmp_path / "c", node="n")
    assert not (tmp_path / "c").exists()  # a failed import creates no campaign
    assert likwid_csv.pmu_of("MBOX3C1") == "uncore_imc" and likwid_csv.pmu_of("FIXC2") == "cpu_fixed"


def test_perf_csv_samples_survive_export_to_the_seed_format(tmp_path: Path) -> None:
    """Samples of another source go to other_counts["pmu"][unit]["EV"] and come back unchanged."""
    (tmp_path / "a.csv").write_text(PER_SOCKET)
    assert (
        main(
            ["import", "perf-csv", str(tmp_path / "a.csv"), "--campaign", str(tmp_path / "a"), "--node", "n"]
        )
        == 0
    )
    out = tmp_path / "n.perfcounts.lua"
    assert main(["export", "perfcounts", str(tmp_path / "a"), "-o", str(out)]) == 0
    assert 'other_counts["msr"][1]["tsc"]' in out.read_text()
    assert main(["import", "perfcounts", str(out), "--campaign", str(tmp_path / "b")]) == 0
    assert samples(tmp_path / "a") == samples(tmp_path / "b")
