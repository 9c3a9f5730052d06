"""arith prints the seed's table shape on both architectures (analysis/arith_table.py): rows ADD, SUB, MUL,
DIV, FMA, SQRT; columns precision x {Absolute, Pipelined}; one table per register width. Fed with recorded
summaries: x86 (this project's EPYC, default sizes) and aarch64 (the cross build under qemu-user, max CPU)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tailscope.analysis.arith_table import arith_tables, render_text, table_data
from tailscope.report.deep_section import arith_tables_html, deep_section
from tailscope.report.models import DeepResult, Step

FIXTURES = Path(__file__).parent / "fixtures"
X86 = json.loads((FIXTURES / "arith_x86_epyc.json").read_text())["summary"]
ARM = json.loads((FIXTURES / "arith_aarch64_qemu_max.json").read_text())["summary"]
ROWS = ["ADD", "SUB", "MUL", "DIV", "FMA", "SQRT"]


def _blocks(lines: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for line in lines:
        if line:
            out[-1].append(line)
        else:
            out.append([])
    return out


def _check_shape(block: list[str], precisions: list[str]) -> None:
    assert block[1].split() == ["Instruction", *precisions]
    assert block[2].split() == ["Absolute", "Pipelined"] * len(precisions)
    assert [line.split()[0] for line in block[3:]] == ROWS
    for line in block[3:]:
        assert len(line.split()) == 1 + 2 * len(precisions), line


def _median(summary: dict[str, Any], precision: str, width: str, op: str, col: str) -> float:
    row = next(r for r in summary["table"] if (r["precision"], r["width"], r["op"]) == (precision, width, op))
    return float(row[col]["median"])


def test_x86_summary_prints_one_seed_table_per_width():
    blocks = _blocks(render_text(X86))
    assert [b[0] for b in blocks] == [
        "arith, scalar, cycles per instruction",
        "arith, avx512f (512-bit), cycles per instruction",
    ]
    for b in blocks:
        _check_shape(b, ["FP32", "FP64"])  # no FP16: the recorded EPYC (fixture) has no AVX512-FP16
    fma = next(line for line in blocks[0] if line.startswith("FMA")).split()
    lat, thr = (_median(X86, "fp64", "scalar", "fma", c) for c in ("latency_cycles", "rthroughput_cycles"))
    assert (float(fma[3]), float(fma[4])) == pytest.approx((lat, thr), abs=0.005)


def test_aarch64_summary_prints_scalar_neon_and_sve_tables_with_fp16():
    blocks = _blocks(render_text(ARM))
    assert [b[0] for b in blocks] == [
        "arith, scalar, cycles per instruction",
        "arith, neon (128-bit), cycles per instruction",
        "arith, sve (512-bit), cycles per instruction",
    ]
    for b in blocks:
        _check_shape(b, ["FP16", "FP32", "FP64"])
    div = next(line for line in blocks[1] if line.startswith("DIV")).split()
    assert float(div[1]) == pytest.approx(_median(ARM, "fp16", "neon", "div", "latency_cycles"), abs=0.005)


def test_refused_and_missing_figures_are_named():
    """A refused pair reads "refused", an op a width lacks (x86 SSE2 has no FMA) reads "-"."""
    s = copy.deepcopy(X86)
    row = next(r for r in s["table"] if (r["precision"], r["width"], r["op"]) == ("fp64", "scalar", "div"))
    row.update(latency_cycles=None, rthroughput_cycles=None, refused="throughput_above_latency")
    s["table"] = [r for r in s["table"] if not (r["width"] == "avx512f" and r["op"] == "fma")]
    blocks = _blocks(render_text(s))
    assert next(line for line in blocks[0] if line.startswith("DIV")).split()[3:] == ["refused", "refused"]
    assert next(line for line in blocks[1] if line.startswith("FMA")).split()[1:] == ["-"] * 4


def test_refused_pairs_are_named_under_the_table_as_deep_names_them():
    """`tailscope run arith` showed a refused pair only as "refused" cells; check --deep's finding named the
    pair and the probe's reason. Both now print the one sentence (arith_table.refusals)."""
    from tailscope.analysis.deep_judge import NodeReference, judge_arith

    s = copy.deepcopy(X86)
    refuse = (("scalar", "div", "throughput_above_latency"), ("avx512f", "add", "latency_below_floor"))
    for width, op, why in refuse:
        row = next(r for r in s["table"] if (r["precision"], r["width"], r["op"]) == ("fp64", width, op))
        row.update(latency_cycles=None, rthroughput_cycles=None, refused=why)
    sentence = ("arith refused as implausible after repeats: fp64 scalar div (throughput_above_latency), "
                "fp64 avx512f add (latency_below_floor)")  # fmt: skip
    lines = render_text(s)
    assert lines[-2:] == ["", sentence]
    assert next(line for line in lines if line.startswith("DIV")).split()[3:] == ["refused", "refused"]
    ref = NodeReference(None, "a test CPU", None, "", None, 0)
    assert sentence in judge_arith(s, ref).finding
    assert not any("refused" in line for line in render_text(X86))  # nothing refused: no such line


def test_x86_fp16_simd_shares_the_512_bit_table():
    """AVX512-FP16's width (avx512fp16) is the 512-bit registers of avx512f: one table, FP16 a column."""
    s = copy.deepcopy(X86)
    extra = [dict(r, precision="fp16", width="avx512fp16") for r in s["table"] if r["width"] == "avx512f"]
    s["table"] = extra[:6] + s["table"]
    tables = arith_tables(s)
    assert [t.width for t in tables] == ["scalar", "avx512f"]
    assert tables[1].precisions == ("fp16", "fp32", "fp64")


def test_report_renders_the_same_table():
    html = arith_tables_html(table_data(ARM))
    assert html.count("<table") == 3
    heads = re.findall(r"<th>([^<]*)</th>", html)[:7]
    assert heads == ["Instruction", "FP16 Absolute", "FP16 Pipelined", "FP32 Absolute", "FP32 Pipelined",
                     "FP64 Absolute", "FP64 Pipelined"]  # fmt: skip
    assert len(re.findall(r"<tr><td>(ADD|SUB|MUL|DIV|FMA|SQRT)</td>", html)) == 18


def test_deep_section_shows_the_arith_follow_ups_table():
    """check --deep stores the table with arith's follow-up (deep.json); the report's section shows it."""
    follow_up = {"probe": "arith", "isolates": "clock", "finding": "f", "expected": "e",
                 "status": "as expected", "arith_table": table_data(X86)}  # fmt: skip
    html = deep_section(DeepResult([Step("dgemm", "3 of 40 runs slower", [follow_up])], "none"))
    assert "arith, avx512f (512-bit), cycles per instruction" in html
    assert html.count("<td>SQRT</td>") == 2
    plain = deep_section(DeepResult([Step("dgemm", "slower", [dict(follow_up, arith_table=None)])], "none"))
    assert "cycles per instruction" not in plain


def test_tailscope_run_arith_prints_the_table(tmp_path):
    """`tailscope run arith` ends with the tables of its trials (the probe built from this tree), pooled."""
    done = subprocess.run(
        [sys.executable, "-m", "tailscope", "run", "arith", "--trials", "2", "--ops", "512", "--no-progress",
         "--campaign", str(tmp_path / "c")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, 3), done.stderr[-2000:]
    out = done.stdout.splitlines()
    title = "arith, scalar, cycles per instruction, median of 2 trials"  # every trial, not the last one
    blocks = _blocks(out[out.index(title) :])
    _check_shape(blocks[0], [p for p in ("FP16", "FP32", "FP64") if p in blocks[0][1]])


# three real runs with --cpus 0,1, one after another; the probe itself refused fp64 scalar fma on CPU 0 in the
# first and fp32 avx512f add on CPU 1 in the second (latency_below_floor), each pooled from the other CPU
CPUS01 = json.loads((FIXTURES / "arith_x86_cpus01_3trials.json").read_text())["trials"]
FIGURES = ("latency_cycles", "rthroughput_cycles")
MARKED = "; figures marked * are from the trials and CPUs that did not refuse them"


def _refuse(summary: dict[str, Any], width: str, op: str, why: str, cpus: tuple[int, ...]) -> None:
    """Refuse fp64 WIDTH OP on CPUS as the probe does: checks refused per CPU, the table row null and
    named only where every CPU refused it."""
    for c in summary["checks"]:
        if (c["precision"], c["width"], c["op"]) == ("fp64", width, op) and c["cpu"] in cpus:
            c.update(refused=True, outcome=why, attempts=3)
    if set(cpus) == {c["cpu"] for c in summary["clock"]}:
        key = ("fp64", width, op)
        row = next(r for r in summary["table"] if (r["precision"], r["width"], r["op"]) == key)
        row.update(latency_cycles=None, rthroughput_cycles=None, refused=why)


def _cells(lines: list[str], title: str, op: str) -> list[str]:
    block = next(b for b in _blocks(lines) if b and b[0] == title)
    return next(line for line in block if line.startswith(op)).split()[1:]


def test_a_pair_refused_in_some_trials_is_named_with_how_many():
    """`run arith` tabled only the last successful trial: a pair refused in an earlier one was never named.
    Every trial now counts: the sentence says in how many trials a pair was refused, and its figures (the
    median of the other trials' medians) carry a * that the sentence explains."""
    trials = [copy.deepcopy(CPUS01[2]) for _ in range(10)]  # the recorded trial the probe refused nothing in
    for t in (2, 5, 7):
        _refuse(trials[t], "scalar", "div", "throughput_above_latency", (0, 1))
    lines = render_text(trials)
    sentence = ("arith refused as implausible after repeats: fp64 scalar div in 3 of 10 trials, on every CPU "
                "(0,1) (throughput_above_latency)" + MARKED)  # fmt: skip
    assert lines[-1] == sentence
    title = "arith, scalar, cycles per instruction, median of 10 trials"
    lat, thr = (_median(CPUS01[2], "fp64", "scalar", "div", c) for c in FIGURES)
    assert _cells(lines, title, "DIV")[2:] == [f"{lat:.2f}*", f"{thr:.2f}*"]  # FP64: from the 7 other trials
    assert "*" not in "".join(_cells(lines, title, "ADD"))
    # the last trial refused it: its cells are no longer what the table shows
    trials[-1], trials[2] = trials[2], trials[-1]
    assert _cells(render_text(trials), title, "DIV")[2:] == [f"{lat:.2f}*", f"{thr:.2f}*"]
    assert render_text(trials)[-1] == sentence
    for t in trials:  # refused in every trial: no figures, no *
        _refuse(t, "scalar", "div", "throughput_above_latency", (0, 1))
    assert _cells(render_text(trials), title, "DIV")[2:] == ["refused", "refused"]
    assert render_text(trials)[-1] == sentence.replace("3 of 10", "10 of 10").removesuffix(MARKED)


def test_a_pair_refused_on_some_cpus_is_named_with_the_cpus():
    """With --cpus 0,1 the probe refused fp64 scalar fma on CPU 0 and pooled CPU 1's figures: the table
    showed them as measured and nothing said CPU 0 refused the pair (run and check --deep alike)."""
    from tailscope.analysis.deep_judge import NodeReference, judge_arith

    lines = render_text(CPUS01[0])  # as the probe wrote it
    sentence = ("arith refused as implausible after repeats: fp64 scalar fma on CPU 0 of CPUs 0,1 "
                "(latency_below_floor)" + MARKED)  # fmt: skip
    assert lines[-1] == sentence
    lat = _median(CPUS01[0], "fp64", "scalar", "fma", "latency_cycles")
    assert _cells(lines, "arith, scalar, cycles per instruction", "FMA")[2] == f"{lat:.2f}*"
    ref = NodeReference(None, "a test CPU", None, "", None, 0)
    assert sentence in judge_arith(CPUS01[0], ref).finding
    assert f"{lat:.2f}*" in arith_tables_html(table_data(CPUS01[0]))  # the report's copy of the table


def test_refusals_over_trials_and_cpus_name_each_cpu_and_trial_count():
    """The three recorded trials: each refusal with its trial count and CPU; a pair refused on CPU 0 in one
    trial and on CPU 1 in another names both CPUs with their counts."""
    trials = copy.deepcopy(CPUS01)
    head = "arith refused as implausible after repeats: "
    assert render_text(trials)[-1] == head + (
        "fp32 avx512f add in 1 of 3 trials, on CPU 1 of CPUs 0,1 (latency_below_floor), "
        "fp64 scalar fma in 1 of 3 trials, on CPU 0 of CPUs 0,1 (latency_below_floor)" + MARKED
    )
    _refuse(trials[2], "scalar", "fma", "clock_moved", (1,))
    assert render_text(trials)[-1].endswith(
        "fp64 scalar fma in 2 of 3 trials, on CPU 0 in 1 and CPU 1 in 1 of CPUs 0,1 "
        "(latency_below_floor, clock_moved)" + MARKED
    )
