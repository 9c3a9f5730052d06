"""Fuzzing every importer: any mutation of a valid file is imported or refused with one line naming the file
(and the line), never a crash. The fast suite runs FAST examples per importer; the slow suite >= 10,000.

The readers are called in-process (the import's whole parsing path; writing is the load's business); the
command line is fuzzed in test_fuzz_cli.py (exit 0 or 2, one line on stderr, nothing stored). For
iterations, the fast pyarrow reader and the line reader must agree on every input the fast one takes."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tailscope.cli import main
from tailscope.importers import ImportInputError, iterations_csv, likwid_csv, perf_csv, perfcounts
from tailscope.importers.fast_csv import FastReaderFallback

FAST = 150
SLOW = 10_000

ITERATIONS = (
    "node,run,iteration,value,unit,warmup,seconds\n"
    "n1,a,0,100.5,GFLOPS,true,1.0\n"
    "n1,a,1,99.0,GFLOPS,false,1.0\n"
    "n2,b,0,98.0,GFLOPS,false,1.1\n"
    "n1,a,2,97.5,GFLOPS,false,0.9\n"
    "n2,b,1,96.0,GFLOPS,false,1.2\n"
)
PERF = (
    "# started on Tue Nov 24 10:00:00 2026\n\n"
    "     1.000500000,CPU0,250.0,msec,task-clock,1,100.00,,\n"
    "     1.000500000,CPU0,500000000,,cycles:D,1,100.00,,\n"
    "     1.000500000,CPU0,750000000,,cpu_core/instructions/u,1,100.00,,\n"
    "     1.000500000,CPU1,<not counted>,,cycles:D,1,100.00,,\n"
    "     1.000500000,CPU1,12,,uncore_imc_3/cas_count_read/,1,100.00,,\n"
    "     2.000600000,CPU0,251.0,msec,task-clock,1,100.00,,\n"
    "     2.000600000,CPU0,510000000,,cycles:D,1,100.00,,\n"
    "     2.000600000,CPU0,760000000,,cpu_core/instructions/u,1,100.00,,\n"
    "     2.000600000,CPU1,7,,cycles:D,1,100.00,,\n"
    "     2.000600000,CPU1,13,,uncore_imc_3/cas_count_read/,1,100.00,,\n"
)
LIKWID = (
    "program output\nSTRUCT,Info,3,,\nCPU name:,X,,,\nCPU clock:,2.10 GHz,,,\n"
    "TABLE,Region solve,Group 1 Raw,MEM,5,,\nEvent,Counter,HWThread 0,HWThread 1\n"
    "Runtime (RDTSC) [s],TSC,1.0e+00,1.0e+00\nINSTR_RETIRED_ANY,FIXC0,1000,2000\nTEMP_CORE,TMP0,40,41\n"
    "CAS_COUNT_RD,MBOX0C0,30,0\nCAS_COUNT_RD,MBOX1C0,31,-\n"
    "TABLE,Group 1 Metric,MEM,2,,\nMetric,HWThread 0,HWThread 1\n"
    "TABLE,Group 2 Raw,L2,5,,\nEvent,Counter,HWThread 0,HWThread 1\nINSTR_RETIRED_ANY,FIXC0,1,2\n"
)
PERFCOUNTS = (
    "TSC_ratio = 21\nReference_TSC = 100\nReference_WallTime = 1532379481.5\nIA32_FIXED_CTR_CTRL[0] = 0x333\n"
    + "".join(
        f'tsc[{s}] = {1000 + s}\ncore_fixed_counts[0]["Inst_Retired.Any"][{s}] = {5 * s}\n'
        f'imc_counts[0][1]["CAS_COUNT.READS"][{s}] = {7 * s}\npkg_therm_status[0][{s}] = 0x8839\n'
        f"ib_recv_bytes[{s}] = {s * 100}\niio_pcie0_in_bytes[1][{s}] = {s}\n"
        for s in range(3)
    )
)

_TOKENS = st.sampled_from(
    [",", ",,", '"', "\n", "\r\n", "\ufeff", "\x00", "é", "-", "nan", "inf", "-inf", "1e308", "-5",
     str(2**31), str(2**63), str(2**64), f"CPU{2**100}", f"HWThread {2**64}", f"Core {2**64}", "CPU7",
     "S0", "S0-D0-C1", "N0", "<not counted>", "<not supported>", "msec", "TABLE,Group 2 Raw,X,1",
     "Event,Counter,HWThread 5", "STRUCT,Info,3", "Runtime (RDTSC) [s],TSC,", "0x", "[0]", '["X"]',
     "tsc", " = ", "[99999999999999999999]", "0xffffffffffffffffffff", "# started on Mon Xyz 99 1:1:1 2026",
     "true", "maybe", "GB/s", "s", "Performance counter stats for", "1.0;5;;cs;1", "+-----+", "| x |"]
)  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, text: str) -> bytes:
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["chars", "chars", "insert", "delete", "dup", "swap", "truncate"]))
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        if kind == "chars" and lines:
            line = lines[i]
            k = draw(st.integers(0, len(line)))
            cut = draw(st.integers(0, 6))
            new = draw(_TOKENS | st.text(max_size=5))
            lines[i] = line[:k] + new + line[k + cut :]
        elif kind == "insert":
            lines.insert(i, draw(_TOKENS | st.text(max_size=20)))
        elif kind == "delete" and lines:
            del lines[i]
        elif kind == "dup" and lines:
            lines.insert(i, lines[i])
        elif kind == "swap" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "truncate" and lines:
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: draw(st.integers(0, len(lines[-1])))]
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return data


def _one_line_naming(path: Path, exc: ImportInputError) -> None:
    message = str(exc)
    assert "\n" not in message, message
    assert re.match(rf"^{re.escape(str(path))}(:\d+)?: \S", message), message


def _raw(path: Path, reader: Callable[..., Any]) -> tuple[Any, pa.Table]:
    """What one reader makes of `path`: its summary and the raw rows it spills (the file's line aside). The
    runs, their sums and the duplicate check are functions of these rows (importers/spill.py)."""
    summary = iterations_csv.IterationsSummary()
    tables = list(reader(path, summary, higher_is_better=True))
    table = pa.concat_tables(tables) if tables else iterations_csv.RAW_SCHEMA.empty_table()
    return summary, table.drop_columns(["line"])


def check_iterations(path: Path) -> None:
    try:
        slow, slow_rows = _raw(path, iterations_csv.iteration_chunks)
    except ImportInputError as exc:
        _one_line_naming(path, exc)
        slow = slow_rows = None
    try:
        fast, fast_rows = _raw(path, iterations_csv.fast_iteration_chunks)
    except FastReaderFallback:
        return
    assert slow is not None, "the fast reader took what the line reader refuses"
    assert slow.rows == fast.rows and fast.unit == slow.unit
    assert fast.higher_is_better == slow.higher_is_better
    assert fast_rows.equals(slow_rows), "the readers spill different rows"


def check_perf(path: Path) -> None:
    try:
        summary, chunks = perf_csv.parse(path)
    except ImportInputError as exc:
        _one_line_naming(path, exc)
        chunks = None
    else:
        rows = sum(c.num_rows for c in chunks)
        assert rows == summary.rows and rows >= summary.series
    fast = perf_csv.PerfSummary()
    try:
        fast_chunks = list(perf_csv.fast_sample_chunks(path, "node", fast))
    except FastReaderFallback:
        return
    assert chunks is not None, "the fast reader took what the line reader refuses"
    fields = ("mode", "intervals", "series", "unsupported", "not_counted", "digest", "started_ns")
    assert [getattr(fast, f) for f in fields] == [getattr(summary, f) for f in fields]
    assert sorted((tuple(r.values()) for c in fast_chunks for r in c.to_pylist()), key=repr) == sorted(
        (tuple(r.values()) for c in chunks for r in c.to_pylist()), key=repr
    )


def check_likwid(path: Path) -> None:
    try:
        summary, chunks = likwid_csv.parse(path)
    except ImportInputError as exc:
        _one_line_naming(path, exc)
        return
    assert sum(c.num_rows for c in chunks) == summary.rows


def check_perfcounts(path: Path) -> None:
    try:
        whole: pa.Table | None = perfcounts.samples_table(perfcounts.parse(path), "n1")
    except ImportInputError as exc:
        _one_line_naming(path, exc)
        whole = None
    if perfcounts._perfscan() is None:
        return
    try:  # the streaming reader, in small blocks: the same rows, or it leaves the file to the readers above
        streamed = list(
            perfcounts.stream_tables(path, "n1", perfcounts.SOURCE, perfcounts.StreamSummary(), 97)
        )
    except FastReaderFallback:
        return
    except ImportInputError as exc:
        _one_line_naming(path, exc)
        assert whole is None, f"the streaming reader refused what the whole-file readers take: {exc}"
        return
    assert whole is not None, "the streaming reader took what the whole-file readers refuse"
    rows = sorted((tuple(r.values()) for t in streamed for r in t.to_pylist()), key=repr)
    assert rows == sorted((tuple(r.values()) for r in whole.to_pylist()), key=repr)


CASES: dict[str, tuple[str, str, Callable[[Path], None]]] = {
    "iterations": (ITERATIONS, "it.csv", check_iterations),
    "perf-csv": (PERF, "perf.csv", check_perf),
    "likwid-csv": (LIKWID, "likwid.csv", check_likwid),
    "perfcounts": (PERFCOUNTS, "n1.perfcounts.lua", check_perfcounts),
}


def _fuzz(name: str, examples: int) -> Callable[..., None]:
    text, file_name, check = CASES[name]

    @settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(data=mutated(text))
    def run(tmp_path: Path, data: bytes) -> None:
        path = tmp_path / file_name
        path.write_bytes(data)
        check(path)

    return run


@pytest.mark.parametrize("name", list(CASES))
def test_valid_files_import(name: str, tmp_path: Path) -> None:
    text, file_name, _ = CASES[name]
    path = tmp_path / file_name
    path.write_text(text)
    argv = ["import", name, str(path), "--campaign", str(tmp_path / "c")]
    argv += ["--higher-is-better"] if name == "iterations" else ["--node", "n1"]
    assert main(argv) == 0


test_iterations_fuzz = _fuzz("iterations", FAST)
test_perf_csv_fuzz = _fuzz("perf-csv", FAST)
test_likwid_csv_fuzz = _fuzz("likwid-csv", FAST)
test_perfcounts_fuzz = _fuzz("perfcounts", FAST)
test_iterations_fuzz_slow = pytest.mark.slow(_fuzz("iterations", SLOW))
test_perf_csv_fuzz_slow = pytest.mark.slow(_fuzz("perf-csv", SLOW))
test_likwid_csv_fuzz_slow = pytest.mark.slow(_fuzz("likwid-csv", SLOW))
test_perfcounts_fuzz_slow = pytest.mark.slow(_fuzz("perfcounts", SLOW))


# Through the command line (main(), exit codes, nothing stored by a refusal, hpl and the campaign spec too):
# test_fuzz_cli.py.


def test_random_bytes_never_crash(tmp_path: Path) -> None:
    import random

    rnd = random.Random(5)
    for k in range(200):
        data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300)))
        for _, file_name, check in CASES.values():
            path = tmp_path / f"{k}-{file_name}"
            path.write_bytes(data)
            with contextlib.suppress(ImportInputError):
                check(path)


def test_what_the_fuzzers_found(tmp_path: Path) -> None:
    """Inputs the slow fuzzers once crashed on or the readers disagreed about."""
    bad_reference = PERFCOUNTS.replace("Reference_TSC = 100", "Reference_TSC =9223372036854775808100")
    path = tmp_path / "n1.perfcounts.lua"
    path.write_text(bad_reference)
    with pytest.raises(ImportInputError, match=r"Reference_TSC 9223372036854775808100 is not a TSC value"):
        perfcounts.parse(path)
    path.write_text(PERFCOUNTS.replace("Reference_WallTime = 1532379481.5", "Reference_WallTime = 1e300"))
    with pytest.raises(ImportInputError, match=r"beyond year 2262"):
        perfcounts.parse(path)
    it = tmp_path / "it.csv"
    it.write_bytes(ITERATIONS.replace("n1,a,1,", "\x00n1,a,1,").encode())
    check_iterations(it)  # node "\x00n1": a control character, refused by both readers
    summary = iterations_csv.IterationsSummary()
    with pytest.raises(ImportInputError, match=r"it.csv:\d+: node name '\\x00n1' holds the control"):
        list(iterations_csv.iteration_chunks(it, summary, higher_is_better=True))
    with pytest.raises(FastReaderFallback):
        list(iterations_csv.fast_iteration_chunks(it, summary, higher_is_better=True))
    it.write_bytes(b',node,run,iteration,value,unit,"warmup,seconds\nn1,a,1,99.0,GFLOPS,false,1.0\n')
    check_iterations(it)  # a quoted header name spanning lines: still one line
    it.write_bytes(b"\r" + ITERATIONS.encode())
    check_iterations(it)  # a CR before the header: the line reader refuses it, the fast reader defers
    with pytest.raises(FastReaderFallback):
        list(iterations_csv.fast_iteration_chunks(it, summary, higher_is_better=True))
    it.write_bytes(ITERATIONS.replace("\nn1,a,0,", "\n\rn1,a,0,").encode())
    check_iterations(it)  # a CR starting a data line (found by the slow fuzzer in CI): the same rule
    with pytest.raises(FastReaderFallback):
        list(iterations_csv.fast_iteration_chunks(it, summary, higher_is_better=True))
    it.write_bytes(ITERATIONS.replace("\n", "\r\n").encode())
    fast_crlf = list(iterations_csv.fast_iteration_chunks(it, iterations_csv.IterationsSummary(),
                                                          higher_is_better=True))
    assert fast_crlf  # CRLF line ends are lines, not stray CRs: the fast reader keeps them
