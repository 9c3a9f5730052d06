"""A real OpenMP program (the jacobi example, built with gcc and with clang) traced by the real OMPT tool on
LLVM's real libomp: regions once per instance at the right file:line, nesting, thread -> CPU, counter deltas,
the store round trip, and both exports checked (otf2-print, our own OTF2 reader, the Chrome schema)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from chrome_check import check_chrome
from otf2_check import check_archive
from trace_tools import JACOBI, needs_otf2_print, pragma_lines

from tailscope.store.campaign import Campaign
from tailscope.store.views import connect
from tailscope.trace.run import TraceRequest, load_trace, run_trace

N, ITERATIONS = 256, 4
PAGES_TOUCHED_BY_INIT = 2 * N * N * 8 // 4096  # u and v


@pytest.fixture
def traced(jacobi, tool_library, pinned, tmp_path):
    compiler, binary = jacobi
    outcome = run_trace(
        TraceRequest(
            command=[str(binary), str(N), str(ITERATIONS), "parallel"],
            campaign=tmp_path / "campaign",
            events=("task-clock", "page-faults"),
        )
    )
    return compiler, outcome


def test_runtime_detected_and_run_on_libomp(traced):
    compiler, outcome = traced
    assert outcome.exit_code == 0
    assert outcome.runtime.family == ("gnu" if compiler == "gcc" else "llvm")
    assert "libomp" in outcome.runs_on  # gcc's binary ran on libomp through the libgomp.so.1 link
    assert outcome.unmatched == 0
    assert outcome.skipped == []  # both software events opened on every thread


def test_every_parallel_region_once_per_instance_at_its_line(traced):
    _, outcome = traced
    r = outcome.regions
    par = r[r["kind"] == "parallel"]
    assert len(par) == ITERATIONS + 1  # the initialisation region and one per iteration
    assert sorted(par["parallel"]) == list(range(1, ITERATIONS + 2))
    assert set(par["thread"]) == {0}
    init_line = pragma_lines(JACOBI, "parallel for")[0]
    sweep_line = pragma_lines(JACOBI, "omp parallel")[-1]
    assert Path(par["file"].iloc[0]).name == "jacobi.c"
    assert par.sort_values("parallel")["line"].tolist() == [init_line] + [sweep_line] * ITERATIONS
    # one implicit task per team member per instance
    tasks = r[r["kind"] == "implicit_task"]
    assert tasks.groupby("parallel")["thread_num"].apply(sorted).tolist() == [[0, 1]] * (ITERATIONS + 1)


def test_worksharing_constructs_at_their_lines(traced):
    compiler, outcome = traced
    r = outcome.regions
    dynamic = pragma_lines(JACOBI, "schedule(dynamic")[0]
    single = pragma_lines(JACOBI, "omp single")[0]
    loops = r[(r["kind"] == "work") & (r["construct"] == "loop") & (r["parallel"] > 1)]
    # the dynamic sweep loop: once per thread per iteration; gcc puts the call on the `for` line below
    sweep = loops[loops["line"].isin([dynamic, dynamic + 1])]
    assert len(sweep) == 2 * ITERATIONS
    singles = r[r["construct"].isin(["single", "single_other"])]
    assert len(singles) == 2 * ITERATIONS  # one executor and one other per iteration
    assert (
        singles.groupby("parallel")["construct"].apply(sorted)
        == pd.Series([["single", "single_other"]]).repeat(ITERATIONS).values
    ).all()
    if compiler == "clang":
        assert set(singles["line"]) == {single}
        assert not singles["end_inferred"].any()
    else:  # gcc: GOMP_single_start has no end; the tool closes it at the construct's barrier
        assert singles.loc[singles["construct"] == "single", "end_inferred"].all()


def test_nesting_and_thread_to_cpu(traced):
    _, outcome = traced
    r = outcome.regions
    for thread, group in r.groupby("thread"):
        open_: list[tuple[int, int, int]] = []  # (depth, begin, end)
        for row in group.sort_values(["tsc_begin", "depth"]).itertuples(index=False):
            while open_ and open_[-1][0] >= row.depth:
                open_.pop()
            if open_:
                assert open_[-1][0] == row.depth - 1, f"thread {thread}: depth jumps at {row}"
                assert open_[-1][1] <= row.tsc_begin and row.tsc_end <= open_[-1][2], f"{row} outside parent"
            else:
                assert row.depth == 0
            open_.append((row.depth, row.tsc_begin, row.tsc_end))
    # work and sync regions belong to their thread's implicit task of the same parallel region
    tasks = r[r["kind"] == "implicit_task"].set_index(["thread", "parallel"])
    inner = r[r["kind"].isin(["work", "sync"])]
    for row in inner.itertuples(index=False):
        task = tasks.loc[(row.thread, row.parallel)]
        assert task["tsc_begin"] <= row.tsc_begin and row.tsc_end <= task["tsc_end"]
    # OMP_PLACES={0},{1} with close binding: team member i runs on CPU i
    implicit = r[r["kind"] == "implicit_task"]
    assert (implicit["cpu_begin"] == implicit["thread_num"]).all()
    assert (implicit["cpu_end"] == implicit["thread_num"]).all()


def test_counter_deltas_show_the_first_touch(traced):
    _, outcome = traced
    r = outcome.regions
    tasks = r[r["kind"] == "implicit_task"].copy()
    counters = tasks["counters"].map(json.loads)
    tasks["faults"] = counters.map(lambda c: c["page-faults"])
    tasks["task_ns"] = counters.map(lambda c: c["task-clock"])
    faults = tasks.groupby("parallel")["faults"].sum()
    # the parallel initialisation writes every page of u and v for the first time; the sweeps touch none anew
    assert faults.loc[1] >= 0.9 * PAGES_TOUCHED_BY_INIT
    assert (faults.drop(1) < 0.1 * PAGES_TOUCHED_BY_INIT).all()
    # task-clock counts this thread's CPU time: never more than the region's wall time (1% slack for rounding)
    assert (tasks["task_ns"] >= 0).all()
    assert (tasks["task_ns"] <= tasks["seconds"] * 1e9 * 1.01 + 2000).all()


def test_store_round_trip_and_run_row(traced):
    _, outcome = traced
    con = connect(outcome.campaign)
    runs = con.execute("SELECT * FROM runs").df()
    con.close()
    assert runs["run_id"].tolist() == [outcome.run_id]
    assert runs["source"].iloc[0] == "ompt" and runs["status"].iloc[0] == "ok"
    config = json.loads(runs["config"].iloc[0])
    assert config["omp_runtime_version"].startswith("LLVM OMP")
    stored = load_trace(Campaign.open(outcome.campaign), outcome.run_id)
    assert len(stored["regions"]) == len(outcome.regions)
    # one NUMA node here: the placement is all on node 0 and the finding says so
    assert set(stored["placement"]["numa_node"]) == {0}
    assert outcome.finding.kind == "single-node"
    assert (stored["traffic"]["src_socket"] == stored["traffic"]["dst_socket"]).all()
    # the same command traced again is the next trial: the runs view keeps both
    again = run_trace(
        TraceRequest(command=json.loads(runs["params"].iloc[0])["command"], campaign=outcome.campaign)
    )
    con = connect(outcome.campaign)
    trials = con.execute("SELECT run_id, trial FROM runs ORDER BY trial").fetchall()
    con.close()
    assert trials == [(outcome.run_id, 0), (again.run_id, 1)]


@needs_otf2_print
def test_otf2_and_chrome_exports(traced):
    _, outcome = traced
    subprocess.run(["otf2-print", "--silent", str(outcome.otf2)], check=True, capture_output=True)
    summary = check_archive(str(outcome.otf2))
    r = outcome.regions
    for thread, count in r.groupby("thread").size().items():
        assert summary.enters[f"thread {thread}"] == count
    assert summary.messages == []  # one socket: nothing remote
    doc = check_chrome(outcome.chrome)
    begins = [e for e in doc["traceEvents"] if e["ph"] == "B"]
    assert len(begins) == len(r)
