"""Reading the iterations of some runs reads only the shards of the commits that stored them, and gives
exactly the rows (and columns, types) the full view gives for those runs (issue 11)."""

from __future__ import annotations

import pandas as pd
import pytest
from test_campaign_store import run_row, table

from tailscope.store.campaign import Campaign, StoreError
from tailscope.store.load import load_into
from tailscope.store.read import connect


def _store(c: Campaign, node: str, trials: range, *, retry_of: dict | None = None) -> list[dict]:
    runs = [run_row(c, node, t, value=float(t + 1)) for t in trials]
    if retry_of is not None:  # a second attempt of a stored trial: the earlier ok one stays visible
        runs.append({**retry_of, "run_id": f"{retry_of['run_id']}-again", "started_offset": None})
        runs[-1].pop("started_offset")
    its = [
        {"run_id": r["run_id"], "iteration": i, "warmup": i == 0, "seconds": 0.1, "value": r["value"] or 1.0}
        for r in runs
        for i in range(4)
    ]
    with load_into(c.root, "test") as load:
        load.write_tables({"runs": table("runs", runs), "iterations": table("iterations", its)}, node=node)
    return runs


def test_iterations_of_some_runs_read_their_commits_only(tmp_path):
    c = Campaign.create(tmp_path / "c")
    stored = [_store(c, f"n{i}", range(3)) for i in range(6)]
    stored.append(_store(c, "n0", range(3, 5), retry_of=stored[0][1]))  # a hidden second attempt
    wanted = [stored[1][0]["run_id"], stored[4][2]["run_id"], stored[6][0]["run_id"], stored[0][1]["run_id"]]
    hidden = f"{stored[0][1]['run_id']}-again"

    with connect(Campaign.open(c.root)) as con:
        full = con.df("SELECT * FROM iterations WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [wanted])
    read_files: list = []
    with connect(Campaign.open(c.root)) as con:
        shards = con._child_shards("iterations", wanted)
        read_files[:] = shards or []
        part = con.iterations(wanted)
        some = con.iterations_of_runs(run_ids=[*wanted, hidden])
        assert "iterations_all" not in con._loaded  # the whole table was never read
    assert len(read_files) == 4 < len(c.shard_files("iterations"))  # commits of n0, n1, n4, n0 again
    def ordered(frame: pd.DataFrame) -> pd.DataFrame:  # a view's row order is DuckDB's, not a promise
        return frame.sort_values(["run_id", "iteration"], ignore_index=True)

    pd.testing.assert_frame_equal(ordered(part), ordered(full))
    assert len(part) == 16 and set(part["run_id"]) == set(wanted)
    assert hidden not in set(some["run_id"])  # a hidden attempt's rows stay hidden, as in the view
    columns = ["run_id", "iteration", "thread", "kernel", "cpu", "warmup", "seconds", "value"]
    assert list(some.columns) == columns


def test_runs_read_narrow_then_any_query_still_sees_every_column(tmp_path):
    c = Campaign.create(tmp_path / "c")
    for i in range(3):
        _store(c, f"n{i}", range(4))
    with connect(Campaign.open(c.root)) as con:
        full = con.runs()
    with connect(Campaign.open(c.root)) as con:
        narrow = con.runs(columns=["run_id", "value"])
        assert list(narrow.columns) == ["run_id", "value"]
        pd.testing.assert_frame_equal(narrow, full[["run_id", "value"]])
        assert con._runs_columns is not None  # only those (and the view's own) were read
        # a column the narrow read left out, by name: read then
        tasks = con.execute("SELECT DISTINCT task FROM runs").fetchall()
        assert tasks == [("t",)] and con._runs_columns is None
    with connect(Campaign.open(c.root)) as con:
        con.runs(columns=["run_id"])
        everything = con.table("runs")  # SELECT *: every column, not the narrow ones
        assert list(everything.columns) == list(full.columns) and len(everything) == 12


@pytest.mark.parametrize("failed", [False, True])
def test_narrow_runs_frame_is_duckdbs(tmp_path, failed):
    # runs(columns=) sorts and converts with Arrow when every trial has one attempt: the frame DuckDB's
    # ORDER BY and .df() give, dtypes included (nullable ints, an all-null error column, the time zone).
    c = Campaign.create(tmp_path / "c")
    for i in (2, 0, 1):
        _store(c, f"n{i}", range(5))
    if failed:  # an error text in some rows: a string column with values and nulls
        row = {**run_row(c, "n9", 0, status="failed"), "threads": 4}
        with load_into(c.root, "test") as load:
            load.write("runs", table("runs", [row]), node="n9")
    columns = ["run_id", "node", "variant", "trial", "started_at", "value", "error", "threads", "status"]
    with connect(Campaign.open(c.root)) as con:
        fast = con.runs(columns=columns)
        assert not con._runs_table  # the Arrow path was taken
        slow = con.df(f"SELECT {', '.join(columns)} FROM runs ORDER BY variant, node, trial")
    pd.testing.assert_frame_equal(fast, slow)
    assert list(fast["node"]) == sorted(fast["node"])


def test_iterations_of_runs_by_arrow_are_the_views_rows(tmp_path):
    # every trial one attempt: iterations_of_runs(run_ids=) filters with Arrow; the same rows and dtypes as
    # the view, and an orphan's rows (a run_id no commit stored as a run) stay out as in the view
    c = Campaign.create(tmp_path / "c")
    stored = [_store(c, f"n{i}", range(3)) for i in range(4)]
    orphan = {"run_id": "never-a-run", "iteration": 0, "warmup": False, "seconds": 0.1, "value": 1.0}
    with load_into(c.root, "test") as load:  # with a run of its own, so the commit is like any other
        runs = [run_row(c, "n9", 0)]
        its = [{**orphan, "run_id": runs[0]["run_id"]}, orphan]
        load.write_tables({"runs": table("runs", runs), "iterations": table("iterations", its)}, node="n9")
    wanted = [stored[0][0]["run_id"], stored[3][2]["run_id"], runs[0]["run_id"], "never-a-run"]
    columns = "run_id, iteration, thread, kernel, cpu, warmup, seconds, value"
    with connect(Campaign.open(c.root)) as con:
        query = f"SELECT {columns} FROM iterations WHERE run_id IN (SELECT unnest(?::VARCHAR[]))"
        view = con.df(query, [wanted])
    with connect(Campaign.open(c.root)) as con:
        fast = con.iterations_of_runs(run_ids=wanted)
        assert "iterations_all" not in con._loaded and not con._runs_table

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.sort_values(["run_id", "iteration"], ignore_index=True)

    pd.testing.assert_frame_equal(ordered(fast), ordered(view))
    assert len(fast) == 9 and "never-a-run" not in set(fast["run_id"])


def test_a_truncated_shard_the_read_leaves_out_is_still_named(tmp_path):
    c = Campaign.create(tmp_path / "c")
    stored = [_store(c, f"n{i}", range(3)) for i in range(3)]
    other = Campaign.open(c.root).shard_files("iterations")
    with connect(Campaign.open(c.root)) as con:
        mine = con._child_shards("iterations", [stored[0][0]["run_id"]])
    (victim,) = [f for f in other if f not in mine][:1]
    victim.write_bytes(victim.read_bytes()[:200])
    with connect(Campaign.open(c.root)) as con, pytest.raises(StoreError) as caught:
        con.iterations_of_runs(run_ids=[stored[0][0]["run_id"]])
    assert str(victim) in str(caught.value) and "campaign collect" in str(caught.value)
    victim.unlink()
    with connect(Campaign.open(c.root)) as con, pytest.raises(StoreError, match="missing"):
        con.iterations_of_runs(run_ids=[stored[0][0]["run_id"]])
