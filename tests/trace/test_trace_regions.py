"""Regions told apart by code address, bytes touched per region, OTF2 source attributes and a forked
child, on a real program (tests/trace/regions.c, built with gcc and clang, -O2 -g) traced by the real OMPT
tool on libomp.

regions.c first touches arrays of 8, 4 and 2 MiB serially, then runs three parallel regions, each adding to
one array, ITERATIONS times; with `fork`, it then forks and the child runs one more round. gcc's line table
puts two of the three GOMP_parallel calls on one line, clang gives them line 0: grouped by file:line they
merged."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from trace_tools import COMPILERS, build_openmp, needs_otf2_print, otf2_definitions, pragma_lines

from tailscope.cli import main
from tailscope.store.campaign import Campaign
from tailscope.store.views import connect
from tailscope.trace.placement import parse_numa_maps
from tailscope.trace.records import region_labels
from tailscope.trace.run import TraceRequest, load_trace, run_trace
from tailscope.trace.summary import region_table, render

SOURCE = Path(__file__).parent / "regions.c"
PRAGMAS = pragma_lines(SOURCE, "omp parallel for")  # regions 0, 1, 2
MIB = 2**20
SIZES_MIB = (8, 4, 2)  # region 0 touches a, 1 touches b, 2 touches c
ITERATIONS = 5


@pytest.fixture(scope="module", params=sorted(COMPILERS))
def built(request, tmp_path_factory) -> tuple[str, Path]:
    name = request.param
    return name, build_openmp(name, SOURCE, tmp_path_factory.mktemp(f"regions-{name}") / f"regions-{name}")


def _trace(binary: Path, campaign: Path, *extra: str, touched: str = "first"):
    outcome = run_trace(
        TraceRequest(
            command=[str(binary), *map(str, SIZES_MIB), str(ITERATIONS), "0", *extra],
            campaign=campaign,
            extra_env={"OMP_NUM_THREADS": "2", "TAILSCOPE_OMPT_TOUCHED": touched},
        )
    )
    assert outcome.exit_code == 0
    return outcome


@pytest.fixture(scope="module")
def traced(built, tool_library, tmp_path_factory):
    name, binary = built
    return name, _trace(binary, tmp_path_factory.mktemp("campaign"))


@pytest.fixture(scope="module")
def forked(built, tool_library, tmp_path_factory):
    name, binary = built
    return name, _trace(binary, tmp_path_factory.mktemp("campaign"), "fork", touched="every")


def _parent(outcome):
    r = outcome.regions
    return r[r["process"] == r.loc[r["thread"] == 0, "process"].iloc[0]]


def _labels_in_order(regions) -> list[str]:
    """Labels of the first three parallel instances: regions 0, 1, 2 (SHIFT 0)."""
    par = regions[regions["kind"] == "parallel"].sort_values("parallel").head(3)
    return region_labels(par)


def test_three_regions_stay_three(traced):
    compiler, outcome = traced
    par = outcome.regions[outcome.regions["kind"] == "parallel"]
    table = region_table(outcome.regions, outcome.traffic)
    assert len(table) == 3, table
    assert sorted(table["instances"]) == [ITERATIONS] * 3
    assert len(set(_labels_in_order(_parent(outcome)))) == 3
    if compiler == "gcc":  # the case of the defect: two distinct regions on one line of the line table
        lines = par.drop_duplicates(["object", "offset"])[["file", "line"]]
        assert lines.duplicated().any(), lines
    assert par.groupby(["object", "offset"]).ngroups == 3
    # the outlined function of each region (gcc: DWARF call-site value of GOMP_parallel's argument; clang:
    # the loop inside it), at its own pragma's line
    first = _parent(outcome)
    first = first[first["kind"] == "parallel"].sort_values("parallel").head(3)
    assert first["outlined"].nunique() == 3
    assert first["outlined_line"].tolist() == PRAGMAS
    assert all(Path(f).name == "regions.c" for f in first["outlined_file"])


def test_bytes_touched_per_region_measured(traced):
    _, outcome = traced
    table = region_table(outcome.regions, outcome.traffic).set_index("region")
    footprint = max(
        sum(parse_numa_maps(p.read_text(), str(p))[0].values())
        for p in (outcome.trace_dir / "ompt" / "numa").glob("*.txt")
    )
    assert footprint >= sum(SIZES_MIB) * MIB  # the program's data: all three arrays
    for label, size in zip(_labels_in_order(_parent(outcome)), SIZES_MIB, strict=True):
        row = table.loc[label]
        assert row["measured"]
        # the array, plus a few pages of stacks, runtime and tool buffers; never the program's footprint
        # (the defect: every region read as the whole data set). The accessed bits the figure reads are a
        # lower bound: the kernel clears them too (reclaim's aging; DAMON's access sampling, which runs on the
        # development VM): seen 3.86 MiB of a 4 MiB array at load 25 and 3.46 MiB on a quiet machine, each
        # once in a full suite. So at least 3/4 of the array, and at most the array and a MiB
        assert 0.75 * size * MIB <= row["touched"] <= size * MIB + MIB, (label, row["touched"] / MIB)
    # the tool measured the first two instances of each region (the very first one also started the
    # runtime's threads); the placement model spreads each instance's bytes (its own, else its region's
    # last), not the footprint
    par = outcome.regions[outcome.regions["kind"] == "parallel"].set_index("parallel")
    assert par.groupby(["object", "offset"])["touched_bytes"].count().tolist() == [2, 2, 2]
    model = outcome.traffic[outcome.traffic["source"] == "placement-model"]
    moved = model.groupby("parallel")["bytes"].sum()
    assert len(moved) == len(par)
    for pid, nbytes in moved.items():
        own = par.loc[pid, "touched_bytes"]
        if pd.notna(own):
            assert nbytes == pytest.approx(own, rel=1e-9)
        else:
            assert nbytes < 0.8 * footprint
    assert table["touched"].max() < 0.8 * footprint
    text = render(outcome.regions, outcome.traffic, outcome.placement, "x")
    assert f"touched {SIZES_MIB[0]:>10}" not in text  # the figure is printed as MiB with a decimal
    assert re.search(r"touched +[78]\.\d MiB", text), text  # the 8 MiB region, within the bound above


def test_bytes_not_measured_are_labelled_footprint(traced):
    _, outcome = traced
    unmeasured = outcome.regions.assign(touched_bytes=None)
    table = region_table(unmeasured, outcome.traffic)
    assert not table["measured"].any()
    text = render(unmeasured, outcome.traffic, outcome.placement, "x")
    assert "touched" not in text.split("\n", 1)[1].split("communication")[0]
    assert text.count("footprint") >= 3


def test_forked_child_keeps_its_regions(forked):
    _, outcome = forked
    r = outcome.regions
    assert outcome.child_processes == 1 and outcome.lost_processes == 0
    assert outcome.unmatched == 0
    parent_pid = int(r.loc[r["thread"] == 0, "process"].iloc[0])
    child = r[r["process"] != parent_pid]
    assert child["process"].nunique() == 1
    assert len(child[child["kind"] == "parallel"]) == 3  # one round of the three regions
    assert set(child["thread"]).isdisjoint(set(r.loc[r["process"] == parent_pid, "thread"]))
    tasks = child[child["kind"] == "implicit_task"]
    assert tasks.groupby("parallel")["thread_num"].apply(sorted).tolist() == [[0, 1]] * 3
    # measured in its own process (TAILSCOPE_OMPT_TOUCHED=every): each region about its array or more (its
    # first region also starts the child's runtime threads)
    child_par = child[child["kind"] == "parallel"].sort_values("parallel")
    for nbytes, size in zip(child_par["touched_bytes"], SIZES_MIB, strict=True):
        assert nbytes >= size * MIB


@needs_otf2_print
def test_otf2_regions_carry_source_file_and_line(traced):
    _, outcome = traced
    out = otf2_definitions(outcome.otf2)
    regions = re.findall(r'^REGION .*Name: "([^"]*)".*File: "([^"]*)".*Begin: (\d+), End: (\d+)', out, re.M)
    assert regions, out
    par = outcome.regions[outcome.regions["kind"] == "parallel"]
    labels = _labels_in_order(par)
    by_name = {name: (file, int(begin), int(end)) for name, file, begin, end in regions}
    # each region's definition: regions.c and its own pragma's line, whatever line the call has
    for label, line in zip(labels, PRAGMAS, strict=True):
        assert label in by_name, (label, sorted(by_name))
        file, begin, end = by_name[label]
        assert Path(file).name == "regions.c" and begin == end == line, (label, by_name[label])


@needs_otf2_print
def test_otf2_forked_child_threads_are_locations(forked):
    _, outcome = forked
    out = otf2_definitions(outcome.otf2)
    locations = re.findall(r'^LOCATION .*Name: "([^"]*)"', out, re.M)
    r = outcome.regions
    pid = int(r.loc[~r.index.isin(_parent(outcome).index), "process"].iloc[0])
    forked_locations = sorted(loc for loc in locations if "(pid " in loc)
    assert forked_locations == [f"thread 2 (pid {pid})", f"thread 3 (pid {pid})"]


def test_cli_touched_off_prints_the_footprint(built, tool_library, tmp_path, monkeypatch, capsys):
    compiler, binary = built
    if compiler != "gcc":
        pytest.skip("one compiler is enough for the option")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    campaign = tmp_path / "c"
    args = ["trace", "--campaign", str(campaign), "--touched", "off", "--numa", "first", "--"]
    assert main([*args, str(binary), *map(str, SIZES_MIB), "2", "0"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("  parallel @")]
    assert len(rows) == 3 and all(" footprint " in line for line in rows), out
    assert "ran with the bytes measured" not in out
    regions = load_trace(Campaign.open(campaign), _only_run_id(campaign))["regions"]
    assert regions["touched_bytes"].isna().all()


def _only_run_id(campaign: Path) -> str:
    con = connect(campaign)
    try:
        return str(con.execute("SELECT run_id FROM runs").fetchone()[0])
    finally:
        con.close()
