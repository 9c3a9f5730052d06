"""A probe's baseline for `check`'s stopping, from history entries (verbs/baseline.py)."""

from __future__ import annotations

import pandas as pd

from tailscope.verbs.baseline import MAX_ENTRIES, baselines_from_entries, baselines_from_history


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


def test_the_nodes_own_history_first_without_degraded_or_excluded_entries():
    frame = entries(
        [
            ("c1", "n1", "s", 100.0, "healthy", False),
            ("c2", "n1", "s", 102.0, "inconclusive", False),
            ("c3", "n1", "s", 50.0, "degraded", False),  # a bad spell: not the level to return to
            ("c4", "n1", "s", 10.0, "healthy", True),  # excluded by `history exclude`
            ("c5", "n2", "s", 200.0, "healthy", False),
        ]
    )
    b = baselines_from_entries(frame, "n1", ["s", "other"])
    assert b["other"] is None
    # healthy entries where there are any: the inconclusive campaign may have been busy
    assert b["s"] is not None and b["s"].source == "history" and b["s"].value == 100.0
    assert (b["s"].entries, b["s"].trials) == (1, 20)
    # without a healthy one, the usable others; the campaign being checked is no baseline of itself
    b = baselines_from_entries(frame, "n1", ["s"], exclude_campaign="c1")["s"]
    assert b is not None and b.value == 102.0


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
