"""A probe's baseline for `check`'s stopping, from history entries (verbs/baseline.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from pathlib import Path

import pandas as pd

from tailscope.analysis.model import Settings
from tailscope.analysis.sequential import Baseline, judge
from tailscope.history.store import open_history
from tailscope.history.summary import Entry
from tailscope.verbs.baseline import COLUMNS, MAX_ENTRIES, baselines_from_entries, baselines_from_history


def entries(rows: list[tuple[str, str, str, float, str, bool]]) -> pd.DataFrame:
    """(campaign, node, variant, median, verdict, excluded) rows, in time order."""
    return pd.DataFrame(
        [
            {
                "campaign": c,
                "node": node,
                "variant": v,
                "median": m,
                "verdict": verdict,
                "excluded": excluded,
                "n": 20,
                "ended_at": pd.Timestamp("2026-11-01", tz="UTC") + pd.Timedelta(days=i),
            }
            for i, (c, node, v, m, verdict, excluded) in enumerate(rows)
        ]
    )


def test_the_nodes_own_healthy_entries_never_a_degraded_inconclusive_or_excluded_one():
    frame = entries(
        [
            ("c1", "n1", "s", 100.0, "healthy", False),
            ("c2", "n1", "s", 102.0, "inconclusive", False),  # may have been busy: not the node's level
            ("c3", "n1", "s", 50.0, "degraded", False),  # a bad spell: not the level to return to
            ("c4", "n1", "s", 10.0, "healthy", True),  # excluded by `history exclude`
            ("c5", "n2", "s", 200.0, "healthy", False),
        ]
    )
    b = baselines_from_entries(frame, "n1", ["s", "other"])
    assert b["other"] is None
    assert b["s"] is not None and b["s"].source == "history" and b["s"].value == 100.0
    assert (b["s"].entries, b["s"].trials) == (1, 20)
    # the campaign being checked is no baseline of itself; the inconclusive entry is none either, and two
    # other nodes are no fleet
    assert baselines_from_entries(frame, "n1", ["s"], exclude_campaign="c1")["s"] is None


def test_only_the_latest_entries_count():
    frame = entries([(f"c{i}", "n1", "s", 100.0 if i < 5 else 90.0, "healthy", False) for i in range(25)])
    b = baselines_from_entries(frame, "n1", ["s"])["s"]
    assert b is not None and b.entries == MAX_ENTRIES and b.value == 90.0


def test_else_the_fleets_latest_per_node_from_three_nodes():
    rows = [(f"c{i}", f"n{i % 3 + 2}", "s", 100.0 + i, "healthy", False) for i in range(6)]
    frame = entries(rows)
    b = baselines_from_entries(frame, "n1", ["s"])["s"]
    assert b is not None and b.source == "fleet" and b.entries == 3 and b.value == 104.0  # 103, 104, 105
    assert baselines_from_entries(entries(rows[:2]), "n1", ["s"])["s"] is None  # two nodes: no fleet


def test_an_unreadable_history_gives_no_baseline_and_one_line(tmp_path):
    (tmp_path / "h").write_text("not a history directory")
    found, warnings = baselines_from_history(str(tmp_path / "h"), "n1", ["s"])
    assert found == {"s": None} and len(warnings) == 1 and "no baseline" in warnings[0]


# --- busy checks in the history (check --between-jobs appends its inconclusive ones too) ------------------
DAY0 = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.UTC)
QUIET = 100.0  # the node's level when nothing else runs
BUSY = 80.0  # what a check measured while others took the probe CPUs


def entries_of(rows: list[tuple[str, float, str]], variant: str = "s") -> list[Entry]:
    """Entries of `variant`, (node, median, verdict) one day apart, each its own campaign, as
    `check --history` appends them."""
    out = []
    for day, (node, median, verdict) in enumerate(rows):
        at = DAY0 + dt.timedelta(days=day)
        end = at + dt.timedelta(seconds=20)
        out.append(Entry(uuid.uuid4().hex, "check", node, "stream", variant, "bandwidth", "GB/s", True, at,
                         end, 4, 0, median, None, None, 0.0, verdict, "{}", ""))  # fmt: skip
    return out


def _write(history: Path, rows: list[tuple[str, float, str]]) -> str:
    """Entries of variant "s" through the history's own write path."""
    open_history(history).write(entries_of(rows), [])
    return str(history)


def _slowed_check(level: float) -> list[float]:
    """Four quiet trials of a node at `level` (0.3% noise): what a short check between jobs measures."""
    return [level * (1 + d) for d in (0.002, -0.003, 0.001, -0.001)]


def test_a_node_busy_at_its_last_checks_keeps_the_level_it_had_when_quiet(tmp_path):
    rows = [("n1", QUIET * f, "healthy") for f in (1.0, 1.01, 0.99)]
    rows += [("n1", BUSY + i, "inconclusive") for i in range(12)]  # its latest 12 checks: all busy
    found, warnings = baselines_from_history(_write(tmp_path / "h", rows), "n1", ["s"])
    b = found["s"]
    assert warnings == [] and b is not None and b.source == "history"
    assert (b.value, b.entries) == (QUIET, 3)
    # a real slowdown of 10% is seen against it
    assert judge(_slowed_check(0.9 * QUIET), True, b, Settings()).level.state == "below"


def test_an_inconclusive_check_never_becomes_the_baseline_that_hides_a_slowdown(tmp_path):
    history = tmp_path / "h"
    # a new node whose first checks between jobs were busy; three others like it: no fleet either
    rows = [(node, BUSY, "inconclusive") for node in ("n1", "n2", "n3", "n4")]
    _write(history, rows)
    slowed = _slowed_check(0.88 * QUIET)  # the node 12% below its quiet level
    assert baselines_from_history(str(history), "n1", ["s"])[0] == {"s": None}
    # what it would have hidden: against the busy level the slowed node is "within 5%", and once appended as
    # healthy that slowed level would be the node's own
    hidden = judge(slowed, True, Baseline(BUSY, "history", 1, 4), Settings())
    assert hidden.level.state == "within" and not hidden.degraded
    assert judge(slowed, True, None, Settings()).level.state == "none"  # no level claim: inconclusive
    # a quiet `check` gives the node its level; busy checks after it change nothing
    _write(history, [("n1", QUIET, "healthy"), ("n1", BUSY, "inconclusive"), ("n1", BUSY, "inconclusive")])
    b = baselines_from_history(str(history), "n1", ["s"])[0]["s"]
    assert b is not None and (b.value, b.entries) == (QUIET, 1)
    judged = judge(slowed, True, b, Settings())
    assert judged.level.state == "below" and judged.degraded


def test_the_fleet_baseline_is_the_other_nodes_latest_healthy_levels(tmp_path):
    rows = [(node, QUIET + i, "healthy") for i, node in enumerate(("n2", "n3", "n4"))]
    rows += [(node, BUSY, "inconclusive") for node in ("n2", "n3", "n4")]  # their latest checks: busy
    b = baselines_from_history(_write(tmp_path / "h", rows), "n1", ["s"])[0]["s"]
    assert b is not None and b.source == "fleet" and (b.value, b.entries) == (QUIET + 1, 3)


def test_read_entries_is_what_read_gives_of_those_entries(tmp_path):
    """The baseline's read (HistoryStore.read_entries) takes its rows from the history as read() does: the
    latest version of an entry, exclusions applied; only those of the variants and nodes asked for."""
    store = open_history(tmp_path / "h")
    first = entries_of([(n, QUIET + i, "healthy") for i, n in enumerate(("n1", "n2", "n1", "n3"))])
    store.write(first + entries_of([("n1", 7.0, "healthy")], variant="t"), [])
    store.write([dataclasses.replace(first[0], n=8, median=QUIET - 1, verdict="inconclusive")], [])  # it grew
    store.exclude(first[2].campaign, "n1", "s", "a bad disk")
    whole = store.read().entries
    for nodes in (["n1"], None):
        frame, damaged = store.read_entries(["s"], nodes=nodes, columns=COLUMNS)
        want = whole.loc[(whole["variant"] == "s") & (whole["node"].isin(nodes) if nodes else True)]
        assert damaged == [] and len(frame) == len(want) == (2 if nodes else 4)
        got = frame.sort_values("campaign")[[*COLUMNS, "excluded"]].astype(str).reset_index(drop=True)
        assert got.equals(
            want.sort_values("campaign")[[*COLUMNS, "excluded"]].astype(str).reset_index(drop=True)
        )
    grown = frame.loc[frame["campaign"] == first[0].campaign].iloc[0]
    assert (grown["n"], grown["verdict"]) == (8, "inconclusive")
    assert frame.loc[frame["campaign"] == first[2].campaign, "excluded"].tolist() == [True]
