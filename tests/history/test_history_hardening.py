"""`tailscope history` against what others write into it (issue 30): writers that start at once into a new
directory, control characters and Plotly markup in node names, facts, notes and reasons, passwords in a
PostgreSQL URL, an empty exclusion prefix, a full disk and a damaged history given to `campaign collect`.
(The PostgreSQL halves run against a real server in test_postgres.py.)"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tailscope.cli import main
from tailscope.history.data import entries_table, facts_table
from tailscope.history.directory import HISTORY_NAME, DirectoryHistory
from tailscope.history.location import redact
from tailscope.store.load import load_into
from tailscope.verbs.history import summarize_campaign
from tailscope.verbs.settings import judging_settings

sys.path.insert(0, str(Path(__file__).parent))
from campaigns import concurrent_adds, write_campaign
from synthetic import day_rows, make_fleet
from test_fleet_changes import chromium as chromium  # the report tests' headless Chromium fixture

DAY0 = dt.datetime(2026, 10, 1, 2, 0, tzinfo=dt.UTC)
# what a terminal interprets: C0 and C1 controls, DEL, line separators, bidi overrides and isolates
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


# --- item 9: writers that start at once into a new directory --------------------------------------------
def test_eight_concurrent_adds_into_a_new_directory_all_store_their_entries(tmp_path, capsys):
    """Eight real processes (forked) adding one campaign each to a directory that does not exist yet,
    started 25 ms apart so that some look at it while the first is creating it: before, 2-6 of 8 were
    refused ("not a tailscope history (no campaign.json) and not empty") and their entries lost."""
    settings = judging_settings(None, {})
    summaries = [
        summarize_campaign(
            write_campaign(tmp_path / f"c{i}", DAY0 + dt.timedelta(days=i), {f"n{i}": 1.0}, trials=6, seed=i),
            settings,
        )
        for i in range(8)
    ]
    for attempt in range(2):
        history = tmp_path / f"H{attempt}"
        assert concurrent_adds(str(history), summaries, 0.025) == [0] * 8, capsys.readouterr().err
        entries = DirectoryHistory(history).read().entries
        assert sorted(entries["node"].astype(str)) == [f"n{i}" for i in range(8)]


def test_a_history_another_writer_is_creating_is_not_refused(tmp_path, capsys):
    """The state a second writer used to find: the directory, its lock file and the staged shards of a
    writer (of an older tailscope) whose first commit will create the manifest; nothing else."""
    c0 = write_campaign(tmp_path / "c0", DAY0, {"n0": 100.0}, trials=6)
    c1 = write_campaign(tmp_path / "c1", DAY0 + dt.timedelta(days=1), {"n1": 100.0}, trials=6)
    history = tmp_path / "H"
    summary = summarize_campaign(c0, judging_settings(None, {}))
    with load_into(history, "history add", create=True, name=HISTORY_NAME) as tx:
        tx.write("history_entries", entries_table(list(summary.entries), dt.datetime.now(dt.UTC)), node="n0")
        tx.write("history_facts", facts_table(summary.facts), node="n0")
        with tx.campaign().lock():
            pass  # the lock file exists, as it does once the writer claimed anything
        assert not (history / "campaign.json").exists()
        capsys.readouterr()
        assert main(["history", "add", str(history), str(c1)]) == 0, capsys.readouterr().err
    entries = DirectoryHistory(history).read().entries
    assert sorted(entries["node"].astype(str)) == ["n0", "n1"]


# --- items 10 and 17: what campaigns and users wrote, printed and drawn -----------------------------------
HOSTILE_NODE = "n\x1b[2Jx"
NOTE = "DIMM \u202eB2 replaced <a href='https://evil.example/'>click</a> <span style='color:red'>red</span>"
REASON = "fan \x1b]0;title\x07 failure"


@pytest.fixture(scope="module")
def hostile_history(tmp_path_factory) -> Path:
    """4 nodes x 20 days of stream (0.5% noise); node 0 named with an ESC sequence, 10% slower from day 14
    with its kernel changed then to a value holding U+202E (from one holding ESC); a note with U+202E and
    Plotly markup; an exclusion reason with an OSC sequence."""
    fleet, y, facts = make_fleet(4, 20, probes=1, seed=3)
    y = np.random.default_rng(3).normal(0.0, 0.005, y.shape)
    y[0, 0, 14:] -= 0.1
    fleet.nodes[0] = HOSTILE_NODE
    base = dict(facts[0][0][1])
    facts[0] = [(0, {**base, "kernel": "6.1\x1b[31m"}), (14, {**base, "kernel": "6.2\u202e-amd64"})]
    root = tmp_path_factory.mktemp("hostile") / "H"
    store = DirectoryHistory(root)
    for day in range(fleet.days):
        store.write(*day_rows(fleet, y, facts, day))
    store.note(HOSTILE_NODE, dt.datetime(2025, 12, 14, 12, tzinfo=dt.UTC), NOTE)
    cid = str(store.read().entries.query("node == 'c0001'")["campaign"].iloc[0])
    store.exclude(cid, "c0001", "*", REASON)
    return root


def test_show_prints_every_name_fact_note_and_reason_inert(hostile_history, capsys):
    capsys.readouterr()
    assert main(["history", "show", str(hostile_history), "--series"]) == 1  # node 0 is 10% slower
    out = capsys.readouterr().out
    assert not RAW_CONTROL.search(out), [m.group() for m in RAW_CONTROL.finditer(out)]
    assert "n\\x1b[2Jx stream" in out  # the change line and the series header name it, escaped
    assert "kernel 6.1\\x1b[31m -> 6.2\\u202e-amd64" in out
    assert "note: 2025-12-14 DIMM \\u202eB2 replaced" in out
    assert "excluded: fan \\x1b]0;title\\x07 failure" in out
    assert main(["history", "show", str(hostile_history), "--json", "--series"]) == 1
    raw = capsys.readouterr().out
    assert not RAW_CONTROL.search(raw)  # JSON escapes them: the values, parsed, are exactly what is stored
    data = json.loads(raw)
    assert HOSTILE_NODE in {s["node"] for s in data["series"]}
    (change,) = [c for c in data["changes"] if c["node"] == HOSTILE_NODE]
    assert change["notes"] == [f"2025-12-14 {NOTE}"]
    prom = hostile_history.parent / "h.prom"
    main(["history", "show", str(hostile_history), "--prometheus", str(prom)])
    assert not RAW_CONTROL.search(prom.read_text())


@pytest.mark.browser
def test_report_shows_a_notes_markup_as_typed_never_applied(hostile_history, tmp_path, chromium):
    """Plotly applies `<a href>` (a link) and `<span style>` in its strings: a note's is shown as text."""
    out = tmp_path / "history.html"
    assert main(["history", "report", str(hostile_history), "-o", str(out)]) == 0
    chromium.get(out.as_uri())
    chromium.execute_script("window.tailscopeDraw()")
    found = chromium.execute_script(
        "var d = Array.from(document.querySelectorAll('div.plot'));"
        "return {links: d.map(x => x.querySelectorAll('a').length).reduce((a, b) => a + b, 0),"
        " styled: d.map(x => Array.from(x.querySelectorAll('tspan')).filter("
        "   t => (t.getAttribute('style') || '').includes('red')).length).reduce((a, b) => a + b, 0),"
        " text: d.map(x => x.textContent).join(' ')};"
    )
    assert found["links"] == 0 and found["styled"] == 0
    assert "DIMM \\u202eB2 replaced <a href='https://evil.exam" in found["text"]  # cut at 60 characters
    assert "n\\x1b[2Jx stream-synthetic" in found["text"]  # the timeline's title
    assert "\x1b" not in found["text"] and "\u202e" not in found["text"]


# --- item 11: passwords of a PostgreSQL URL ------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:s3cret@db/site", "postgresql://u@db/site"),
        ("postgresql://:s3cret@db/site", "postgresql://db/site"),
        ("postgresql://u@db/site?password=s3cret&sslmode=require", "postgresql://u@db/site?sslmode=require"),
        ("postgresql://u@db/site?sslpassword=s3cret", "postgresql://u@db/site"),
        ("postgres://u:s3cret@h1:5432,h2:5433/site", "postgres://u@h1:5432,h2:5433/site"),
        ("postgresql://u:s3cret@[::1]:5432/site", "postgresql://u@[::1]:5432/site"),
        ("postgresql://u@/site?host=/run/pg", "postgresql://u@/site?host=/run/pg"),
        ("postgresql://u:s3/cret@db/site", "postgresql://u..."),  # libpq: host u, port s3, db cret@db/site
        ("postgresql://u:s3@cret@db/site", "postgresql://u..."),  # libpq: password s3, host cret@db
        ("postgresql://u:s3cret%zz@db/site", "postgresql://u..."),  # libpq cannot read it
        ("postgresql://u:s3cret@db/site?bogus=1", "postgresql://u..."),
        ("/shared/history", "/shared/history"),
    ],
)
def test_a_url_is_shown_without_its_password(url, shown):
    pytest.importorskip("psycopg")
    assert redact(url) == shown


def test_an_unreadable_url_is_one_line_without_the_password(tmp_path, capsys):
    pytest.importorskip("psycopg")
    for url in ("postgresql://u:s3cret%zz@db/site", "postgresql://u:s3/cret@db/site"):
        assert main(["history", "show", url]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cret" not in err and "tailscope: error: postgresql://u..." in err


# --- item 18: an empty exclusion prefix --------------------------------------------------------------
def test_an_empty_or_ambiguous_exclusion_prefix_is_refused_and_nothing_stored(tmp_path, capsys):
    fleet, y, facts = make_fleet(4, 20, probes=1, seed=1)  # campaign ids 000...01, 000...02, ...
    h = tmp_path / "H"
    for day in range(3):
        DirectoryHistory(h).write(*day_rows(fleet, y, facts, day))
    node = fleet.nodes[0]
    before = _snapshot(h)
    capsys.readouterr()
    for prefix in ("", "  ", "0000"):
        assert main(["history", "exclude", str(h), node, prefix]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("tailscope: error:"), err
        assert ("is empty" in err) if not prefix.strip() else (f"matches 3 campaigns of node {node}" in err)
    assert _snapshot(h) == before
    assert main(["history", "exclude", str(h), node, "0" * 31 + "2"]) == 0
    assert int(DirectoryHistory(h).read().entries["excluded"].sum()) == 1


# --- item 19: a full disk during `run`; `campaign collect` of a damaged history ----------------------------
@pytest.mark.root
def test_a_full_disk_during_run_names_the_campaign_and_keeps_finished_trials(tmp_path, capsys):
    mount = Path(tempfile.mkdtemp(prefix="tailscope-full-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        campaign = mount / "c"
        argv = ["run", "fwq", "--trials", "2", "--campaign", str(campaign), "--no-progress", "--no-evidence"]
        assert main(argv) in (0, 1)
        with open(mount / "filler", "wb", buffering=0) as fh:  # the file system, to its last block
            try:
                while True:
                    fh.write(b"\0" * 65536)
            except OSError:
                pass
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"tailscope: error: {campaign}"), err
        assert "No space left on device" in err[0]
        (mount / "filler").unlink()
        from tailscope.store.campaign import Campaign
        from tailscope.store.read import read_table

        assert read_table(Campaign.open(campaign), "runs").num_rows == 2  # the first run's trials
    finally:
        subprocess.run(["umount", str(mount)], check=False)
        shutil.rmtree(mount, ignore_errors=True)


def test_collect_of_a_damaged_history_says_how_to_restore_its_entries(tmp_path, capsys):
    h = tmp_path / "H"
    nights = [write_campaign(tmp_path / f"c{i}", DAY0 + dt.timedelta(days=i), {"n1": 100.0}, trials=6)
              for i in range(3)]  # fmt: skip
    for c in nights:
        assert main(["history", "add", str(h), str(c)]) == 0
    shard = sorted((h / "shards" / "history_entries").iterdir(), key=lambda p: p.stat().st_mtime)[1]
    shard.write_bytes(shard.read_bytes()[:40])
    capsys.readouterr()
    assert main(["history", "compact", str(h)]) == 2
    err = capsys.readouterr().err
    assert "run --resume" not in err and f"tailscope history add {h} CAMPAIGN" in err
    assert main(["campaign", "collect", str(h)]) == 1
    out, err = capsys.readouterr()
    assert "run --resume" not in out + err and "trials" not in out
    assert f"`tailscope history add {h} CAMPAIGN...` adds those campaigns again" in err
    assert main(["history", "compact", str(h)]) == 0  # the damaged append is out of the way
    for c in nights:
        assert main(["history", "add", str(h), str(c)]) == 0
    assert len(DirectoryHistory(h).read().entries) == 3
    capsys.readouterr()
    assert main(["campaign", "collect", str(h)]) == 0


# --- found on the acceptance pass: a node whose every entry is excluded ----------------------------------
def test_show_of_a_node_whose_every_entry_is_excluded_is_an_answer_not_a_traceback(tmp_path, capsys):
    """`history show --node N` (and --json, report) where every entry of N was excluded: nothing of N is left
    to judge, which is said; the empty selection split into series was a ValueError traceback, exit 1."""
    h = tmp_path / "H"
    c = write_campaign(tmp_path / "c", DAY0, {"n1": 100.0, "n2": 100.0}, trials=6)
    assert main(["history", "add", str(h), str(c)]) == 0
    cid = str(DirectoryHistory(h).read().entries["campaign"].iloc[0])
    assert main(["history", "exclude", str(h), "n1", cid]) == 0
    capsys.readouterr()
    for extra in ([], ["--series"], ["--json"]):
        assert main(["history", "show", str(h), "--node", "n1", *extra]) == 0
        out, err = capsys.readouterr()
        assert err == "" and "n2" not in out
    assert main(["history", "show", str(h), "--node", "n1", "--series"]) == 0
    assert "excluded" in capsys.readouterr().out  # the excluded entry is still shown, marked
    assert main(["history", "report", str(h), "-o", str(tmp_path / "h.html")]) == 0
