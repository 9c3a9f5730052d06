"""Reading the iterations of some runs reads only the shards of the commits that stored them, and gives
exactly the rows (and columns, types) the full view gives for those runs (issue 11)."""

from __future__ import annotations

import pandas as pd
import pytest
from test_campaign_store import run_row, table
from test_promises import FAST

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


def test_arrow_answers_are_the_sql_views_answers_and_open_no_duckdb(tmp_path, monkeypatch):
    """counters, co-runners, node facts and the runs of a real campaign, answered by Arrow without opening
    DuckDB, equal what the SQL views give (issue 11: analyze spends neither DuckDB's import nor its
    connection); a node's later facts win as in the `nodes` view."""
    import datetime as dt

    import pyarrow as pa

    from tailscope.analysis.summary import STORE_RUN_COLUMNS
    from tailscope.cli import main
    from tailscope.store.read import read_table

    monkeypatch.chdir(tmp_path)
    assert main(["run", "l2sum", "--trials", "3", "--campaign", "c", *FAST]) == 0
    c = Campaign.open(tmp_path / "c")
    facts = read_table(c, "nodes")
    assert facts.num_rows == 1 and c.shard_files("counters")
    stored = read_table(c, "runs", ["run_id"]).column("run_id").to_pylist()
    busy = [
        {"run_id": stored[0], "pid": 4242, "comm": "stress-ng", "cmdline": None, "cpu_s": 0.4, "share": 0.41},
        {"run_id": stored[2], "pid": 99, "comm": "kworker/0:1", "cmdline": "", "cpu_s": 0.01, "share": 0.02},
        {"run_id": "never-stored", "pid": 7, "comm": "orphan", "cmdline": None, "cpu_s": 1.0, "share": 1.0},
    ]
    later = facts.to_pylist()[0]
    later["collected_at"] = later["collected_at"] + dt.timedelta(hours=1)
    later["kernel"] = "6.1.0-later"
    other = {**facts.to_pylist()[0], "node": "aaa-first"}  # a node sorted before this one
    with load_into(c.root, "test") as load:
        load.write_tables(
            {
                "nodes": pa.Table.from_pylist([later, other], schema=facts.schema),
                "corunners": table("corunners", busy),
            },
            node="x",
        )

    with connect(Campaign.open(c.root)) as con:
        runs = con.runs(columns=STORE_RUN_COLUMNS)
        ids = runs["run_id"].tolist()
        counters = con.counters(ids, source="os")
        every = con.counters(ids[:2])
        corunners = con.corunners([*ids, "never-stored"])
        nodes = con.nodes()
        iterations = con.iterations(ids[:2])  # every column
        empty = con.table("injections")
        assert con.timeline_samples(1000) is None
        assert con._duckdb is None  # nothing above needed SQL (the report's questions on a plain campaign)
        assert con.hardware_counter_values() == 0  # counters stored (os evidence), none of a hardware PMU
    with connect(Campaign.open(c.root)) as con:
        con.execute("SELECT 1")  # DuckDB open from the start: every answer below is the views'
        sql = {
            "counters": con.df(
                "SELECT run_id, source, pmu, unit, event, value FROM counters WHERE source = 'os'"
            ),
            "every": con.df(
                "SELECT run_id, source, pmu, unit, event, value FROM counters "
                "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))",
                [ids[:2]],
            ),
            "corunners": con.df("SELECT * FROM corunners"),
            "nodes": con.df("SELECT * FROM nodes ORDER BY node"),
            "iterations": con.df(
                "SELECT * FROM iterations WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids[:2]]
            ),
            "injections": con.df("SELECT * FROM injections"),
        }

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:  # a view's row order is DuckDB's, not a promise
        return frame.sort_values(list(frame.columns[:5]), ignore_index=True)

    # the rows added above, not the orphan's (the real run may have recorded co-runners of its own)
    assert len(counters) > 0 and {"kworker/0:1", "stress-ng"} <= set(corunners["comm"])
    assert "orphan" not in set(corunners["comm"])
    for name, arrow in (("counters", counters), ("every", every), ("corunners", corunners)):
        pd.testing.assert_frame_equal(ordered(arrow), ordered(sql[name]), check_index_type=False)
    pd.testing.assert_frame_equal(nodes.reset_index(drop=True), sql["nodes"])
    pd.testing.assert_frame_equal(
        iterations.sort_values(["run_id", "iteration"], ignore_index=True),
        sql["iterations"].sort_values(["run_id", "iteration"], ignore_index=True),
    )
    assert len(iterations) > 0 and len(empty) == 0
    pd.testing.assert_frame_equal(empty, sql["injections"], check_index_type=False)
    assert nodes["node"].tolist()[0] == "aaa-first" and nodes["kernel"].tolist()[1] == "6.1.0-later"


@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Berlin", ":America/New_York", "no/such-zone", ""])
def test_local_zone_is_the_one_duckdb_picks(tz, monkeypatch):
    """The Arrow answers show timestamps in the zone DuckDB would (the SQL answers' zone)."""
    import subprocess
    import sys

    script = (
        "import duckdb; from tailscope.store.read import local_zone; "
        "zone = duckdb.connect().execute(\"SELECT current_setting('TimeZone')\").fetchone()[0]; "
        "print(local_zone(), zone)"
    )
    if tz is None:
        monkeypatch.delenv("TZ", raising=False)
    else:
        monkeypatch.setenv("TZ", tz)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    ours, duckdbs = out.stdout.split()
    assert ours == duckdbs


@pytest.mark.parametrize("change", ["column added since", "narrower integer"])
def test_a_shard_of_an_older_schema_reads_as_the_current_one(tmp_path, change):
    """Each shard file is read on its own (read.py, _scan): a shard written before a nullable column was
    added reads with nulls there, one whose integers are narrower is converted; the other shards' rows and
    the table's types are those of a campaign whose shards are all current."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tailscope.store.read import read_table

    c = Campaign.create(tmp_path / "c")
    for i in range(3):
        runs = [{**run_row(c, f"n{i}", t), "cpus": f"{t}-{t + 1}"} for t in range(4)]
        with load_into(c.root, "test") as load:
            load.write_tables({"runs": table("runs", runs)}, node=f"n{i}")
    current = read_table(Campaign.open(c.root), "runs").sort_by("run_id")
    old = Campaign.open(c.root).shard_files("runs")[1]
    shard = pq.read_table(old)
    old_ids = shard.column("run_id")
    if change == "column added since":
        shard = shard.drop_columns(["cpus"])
    else:
        trial = shard.schema.get_field_index("trial")
        shard = shard.set_column(
            trial, pa.field("trial", pa.int16(), False), shard.column("trial").cast("int16")
        )
    pq.write_table(shard, old, write_page_checksum=True)
    _recommit_footer(c.root, old)  # as the writer of that older shard would have committed it

    for columns in (None, ["run_id", "trial", "cpus"]):
        again = read_table(Campaign.open(c.root), "runs", columns).sort_by("run_id")
        expected = current if columns is None else current.select(columns)
        assert again.schema.equals(expected.schema)
        in_old = pc.is_in(again.column("run_id"), value_set=old_ids)
        assert again.filter(pc.invert(in_old)).equals(expected.filter(pc.invert(in_old)))
        if change == "column added since":
            assert again.filter(in_old).column("cpus").null_count == 4
            assert again.drop_columns(["cpus"]).equals(expected.drop_columns(["cpus"]))
        else:
            assert again.equals(expected)


def _recommit_footer(root, shard) -> None:
    """Record the footer hash of a rewritten shard in the commit record that names it."""
    import json

    from tailscope.store.footer import footer_digest

    for record in (root / "commits").glob("*.json"):
        data = json.loads(record.read_text())
        if shard.name in data["footers"].get("runs", {}):
            data["footers"]["runs"][shard.name] = footer_digest(shard)
            record.write_text(json.dumps(data))


@pytest.mark.parametrize("retry", [False, True])
def test_run_summaries_come_from_the_one_runs_read(tmp_path, monkeypatch, retry):
    # analyze --json: the summaries (for every run's figures) are read with the narrow runs read, not by a
    # second scan of the runs shards; the same rows as SQL over the view, a hidden attempt's left out
    import tailscope.store.read as read

    c = Campaign.create(tmp_path / "c")
    rows = []
    for i in range(3):
        rows += [
            {**run_row(c, f"n{i}", t), "summary": f'{{"team_gbs": {i}.{t}}}' if t % 2 else None}
            for t in range(4)
        ]
    if retry:  # a later failed attempt of n0's trial 1, with a summary of its own: hidden
        rows.append({**run_row(c, "n0", 1, status="failed", started_offset=5), "summary": '{"team_gbs": 9}'})
    with load_into(c.root, "test") as load:
        load.write("runs", table("runs", rows), node="n0")
    with connect(Campaign.open(c.root)) as con:
        view = con.execute("SELECT run_id, probe, summary FROM runs WHERE summary IS NOT NULL").fetchall()
    scans: list[str] = []
    real = read._read_with_files
    monkeypatch.setattr(
        read, "_read_with_files", lambda c, t, *a, **k: scans.append(t) or real(c, t, *a, **k)
    )
    with connect(Campaign.open(c.root), runs_also=("probe", "summary")) as con:
        con.runs(columns=["run_id", "value"])
        summaries = con.run_summaries()
        assert con._runs_table == retry  # both paths: by Arrow, and by SQL over the ranked copy
    assert scans == ["runs"]
    assert sorted(summaries) == sorted(view) and len(view) == 6
    assert all(s != '{"team_gbs": 9}' for _, _, s in summaries)
