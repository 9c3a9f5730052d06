"""`--history postgresql://`: a real PostgreSQL 15 server (Debian's binaries; initdb and pg_ctl as an
unprivileged user in a temporary directory, the socket in it): creation and migration, 8 concurrent
writers storing every entry exactly once, identical `history show` answers from the database and the
directory store, and an unreachable server or unknown role as one line that leaves the campaign untouched."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import sys
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")

from tailscope.cli import main  # noqa: E402
from tailscope.history.directory import DirectoryHistory  # noqa: E402
from tailscope.history.postgres import PostgresHistory  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from campaigns import concurrent_adds, write_campaign  # noqa: E402
from synthetic import day_rows, make_fleet  # noqa: E402

from pgserver import fresh_database  # noqa: E402


@pytest.fixture
def server(postgres_server):
    return postgres_server  # one server for the session (tests/pgserver.py), shared with tests/jobs


def _fresh_db(server: tuple[str, Path], name: str) -> str:
    return fresh_database(server, name)


def _writer(url: str, worker: int, workers: int, nodes: int, days: int) -> None:
    fleet, y, facts = make_fleet(nodes, days, probes=2, seed=5)
    store = PostgresHistory(url)
    for day in range(days):
        if day % workers == worker or day == 0:  # day 0: written by every writer at once
            store.write(*day_rows(fleet, y, facts, day))


def test_eight_writers_every_entry_once_and_the_same_answer_as_the_directory(server, tmp_path, capsys):
    url = _fresh_db(server, "fleet")
    nodes, days = 90, 40
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(url, w, 8, nodes, days)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 8
    with psycopg.connect(url) as con:
        total, distinct = con.execute(
            "SELECT count(*), count(DISTINCT (campaign, node, variant)) FROM history_entries"
        ).fetchone()
        version = con.execute(
            "SELECT value FROM tailscope_history_meta WHERE key = 'schema_version'"
        ).fetchone()
    assert total == distinct == nodes * days * 2
    assert version == ("1",)
    fleet, y, facts = make_fleet(nodes, days, probes=2, seed=5)
    directory = DirectoryHistory(tmp_path / "H")
    for day in range(days):
        directory.write(*day_rows(fleet, y, facts, day))
    answers = []
    for location in (url, str(tmp_path / "H")):
        code = main(["history", "show", location, "--json"])
        answers.append((code, json.loads(capsys.readouterr().out)))
    assert answers[0] == answers[1]
    assert answers[0][1]["changes"] and answers[0][1]["fleet_events"]
    series = []
    for location in (url, str(tmp_path / "H")):
        main(["history", "show", location, "--node", "c0001", "--json"])
        series.append(json.loads(capsys.readouterr().out)["series"])
    assert series[0] == series[1] and len(series[0]) == 2 and len(series[0][0]["entries"]) == days


def test_add_again_note_exclude_through_the_cli(server, tmp_path, capsys):
    url = _fresh_db(server, "cli")
    root = write_campaign(tmp_path / "c", dt.datetime(2026, 11, 1, tzinfo=dt.UTC), {"n1": 100.0, "n2": 99.0})
    assert main(["history", "add", url, str(root)]) == 0
    assert main(["history", "add", url, str(root)]) == 0
    out = capsys.readouterr().out
    assert "2 entries added" in out and "nothing added: its 2 entries are already stored" in out
    assert main(["history", "note", url, "n1", "2026-11-01", "DIMM B2 replaced"]) == 0
    cid = str(PostgresHistory(url).read().entries["campaign"].iloc[0])
    assert main(["history", "exclude", url, "n1", cid[:8]]) == 0
    data = PostgresHistory(url).read()
    assert data.notes["text"].tolist() == ["DIMM B2 replaced"]
    assert data.entries.set_index("node")["excluded"].to_dict() == {"n1": True, "n2": False}


def test_unreachable_server_and_unknown_role_are_one_line(server, tmp_path, capsys):
    _url, base = server
    root = write_campaign(tmp_path / "c", dt.datetime(2026, 11, 1, tzinfo=dt.UTC), {"n1": 100.0})
    before = sorted((p.relative_to(root), p.stat().st_mtime_ns) for p in root.rglob("*"))
    code = main(["analyze", str(root)])
    capsys.readouterr()
    for bad in (f"postgresql://nobody@/hist?host={base}", "postgresql://postgres:secret@127.0.0.1:1/hist"):
        assert main(["history", "show", bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "cannot connect" in err[0] and "secret" not in err[0]
        assert main(["analyze", str(root), "--history", bad]) == code  # the analysis' own exit code
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("tailscope: warning: history") and "secret" not in err[0]
    assert sorted((p.relative_to(root), p.stat().st_mtime_ns) for p in root.rglob("*")) == before


# --- issue 30: concurrent first adds, passwords, exclusion prefixes -------------------------------------
def test_eight_concurrent_first_adds_into_a_new_database_all_store_their_entries(server, tmp_path, capsys):
    """Eight processes adding one campaign each to a database nothing was written to yet (the tables are made
    by the first to take the advisory lock): every entry stored once."""
    from tailscope.verbs.history import summarize_campaign
    from tailscope.verbs.settings import judging_settings

    url = _fresh_db(server, "first_night")
    day0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    settings = judging_settings(None, {})
    campaigns = [write_campaign(tmp_path / f"c{i}", day0, {f"n{i}": 1.0}, trials=6, seed=i) for i in range(8)]
    summaries = [summarize_campaign(c, settings) for c in campaigns]
    assert concurrent_adds(url, summaries, 0.02) == [0] * 8, capsys.readouterr().err
    entries = PostgresHistory(url).read().entries
    assert sorted(entries["node"].astype(str)) == [f"n{i}" for i in range(8)]


def test_the_password_is_never_printed(server, tmp_path, capsys):
    """Trust authentication: the server takes any password, so each URL below connects and every line the
    commands print can be checked; and the ones libpq cannot read, or reads with a password spilled into
    another part, are refused in one line without it."""
    url = _fresh_db(server, "pwtest")  # postgresql://postgres@/pwtest?host=BASE
    root = write_campaign(tmp_path / "c", dt.datetime(2026, 11, 1, tzinfo=dt.UTC), {"n1": 100.0})
    code = main(["analyze", str(root)])
    with_password = [
        url.replace("postgres@", "postgres:Zx9secret@"),
        url + "&password=Zx9secret",
        url.replace("postgres@", ":Zx9secret@") + "&user=postgres",
    ]
    capsys.readouterr()
    for location in with_password:
        assert main(["history", "add", location, str(root)]) == 0
        assert main(["history", "note", location, "n1", "2026-11-01", "fan replaced"]) == 0
        assert main(["history", "compact", location]) == 0
        assert main(["analyze", str(root), "--history", location]) == code  # the nightly append's line
        out, err = capsys.readouterr()
        assert "secret" not in out + err and "nothing added" in err and "note for n1" in out
    for location in (url.replace("postgres@", "postgres:Zx9%zzsecret@"),
                     url.replace("postgres@", "postgres:Zx9/secret@")):  # fmt: skip
        assert main(["history", "show", location]) == 2
        assert main(["analyze", str(root), "--history", location]) == code
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert len(lines) == 2 and "secret" not in out + err, err


def test_an_empty_or_wildcard_exclusion_prefix_excludes_nothing(server, tmp_path, capsys):
    url = _fresh_db(server, "prefixes")
    root = write_campaign(tmp_path / "c", dt.datetime(2026, 11, 1, tzinfo=dt.UTC), {"n1": 100.0})
    assert main(["history", "add", url, str(root)]) == 0
    capsys.readouterr()
    for prefix in ("", "%", "_"):  # '' is every id's prefix; % and _ are LIKE's wildcards
        assert main(["history", "exclude", url, "n1", prefix]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("tailscope: error:"), err
    assert not PostgresHistory(url).read().entries["excluded"].any()


def test_the_baselines_read_is_the_same_from_the_database_and_the_directory(server, tmp_path):
    """HistoryStore.read_entries (a check's baseline: one node's entries, or every node's of a variant) gives
    the same rows from either store: the server chooses them with WHERE, the directory in Arrow."""
    from tailscope.verbs.baseline import COLUMNS

    url = _fresh_db(server, "entries")
    fleet, y, facts = make_fleet(40, 30, probes=2, seed=5)
    stores = (PostgresHistory(url), DirectoryHistory(tmp_path / "H"))
    for day in range(30):
        rows = day_rows(fleet, y, facts, day)
        for store in stores:
            store.write(*rows)
    variant = str(stores[1].read().entries["variant"].iloc[0])
    for nodes in (["c0003"], None):
        frames = []
        for store in stores:
            frame, damaged = store.read_entries([variant], nodes=nodes, columns=COLUMNS)
            assert damaged == []
            frames.append(
                frame.sort_values(["campaign", "node"])[[*COLUMNS, "excluded"]].reset_index(drop=True)
            )
        assert len(frames[0]) == (30 if nodes else 30 * 40)
        assert frames[0].astype(str).equals(frames[1].astype(str))
