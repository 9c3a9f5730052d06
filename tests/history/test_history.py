"""`tailscope history`: keyed appends in the campaign store's format, change points matched with the facts
and notes of their window, exclusions, damaged shards, compaction, and the `--history` hook of analyze."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path

import pytest

from tailscope.cli import main
from tailscope.history import directory as directory_module
from tailscope.history.directory import DirectoryHistory

sys.path.insert(0, str(Path(__file__).parent))
from campaigns import write_campaign

DAY0 = dt.datetime(2026, 10, 1, 2, 0, tzinfo=dt.UTC)


def _nightly(tmp: Path, count: int, drop_from: int | None = None, thp_from: int | None = None) -> list[Path]:
    """`count` nightly campaigns of nodes n1 and n2; n1 is 10% slower from night `drop_from` on, and its
    THP mode is `never` from night `thp_from` on."""
    out = []
    for night in range(count):
        level = 100.0 * (0.9 if drop_from is not None and night >= drop_from else 1.0)
        thp = "never" if thp_from is not None and night >= thp_from else "madvise"
        root = tmp / f"night{night}"
        write_campaign(
            root, DAY0 + dt.timedelta(days=night), {"n1": level, "n2": 120.0},
            facts={"n1": {"thp_enabled": thp}}, seed=night,
        )  # fmt: skip
        out.append(root)
    return out


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_add_is_keyed_by_campaign_node_variant(tmp_path, capsys):
    (c,) = _nightly(tmp_path, 1)
    h = tmp_path / "H"
    assert main(["history", "add", str(h), str(c)]) == 0
    assert "2 entries added" in capsys.readouterr().out
    assert main(["history", "add", str(h), str(c)]) == 0
    assert "nothing added: its 2 entries are already stored" in capsys.readouterr().out
    write_campaign(c, DAY0, {"n1": 100.0}, trials=6, first_trial=12, seed=9)  # the campaign grew on n1
    assert main(["history", "add", str(h), str(c)]) == 0
    out = capsys.readouterr().out
    assert "0 entries added, 1 updated (the campaign grew), 1 already stored" in out
    entries = DirectoryHistory(h).read().entries
    assert sorted(zip(entries["node"].astype(str), entries["n"], strict=True)) == [("n1", 18), ("n2", 12)]


def test_change_found_with_fact_and_note_json_shape_and_exit_code(tmp_path, capsys):
    nights = _nightly(tmp_path, 8, drop_from=4, thp_from=4)
    h = tmp_path / "H"
    assert main(["history", "add", str(h), *map(str, nights)]) == 0
    assert main(["history", "note", str(h), "n1", "2026-10-04T12:00", "THP switched to never"]) == 0
    capsys.readouterr()
    assert main(["history", "show", str(h), "--json"]) == 1  # n1 is degraded: 10% below its history
    data = _json(capsys)
    (change,) = data["changes"]
    assert set(change) >= {"node", "probe", "variant", "at", "campaign_id", "before", "after", "ratio",
                           "ratio_ci", "facts_changed"}  # fmt: skip
    assert change["node"] == "n1" and change["probe"] == "stream"
    assert change["at"] == "2026-10-05T02:00:00Z"  # the first entry after the change (night 4)
    assert change["ratio"] == pytest.approx(0.9, abs=0.005)
    assert change["ratio_ci"]["lower"] < change["ratio"] < change["ratio_ci"]["upper"] < 1
    thp = {"fact": "thp_enabled", "before": "madvise", "after": "never", "changed_at": "2026-10-05T02:00:00Z"}
    assert thp in change["facts_changed"]
    assert change["notes"] == ["2026-10-04 THP switched to never"]
    assert data["fleet_events"] == []
    verdicts = {n["node"]: n["verdict"] for n in data["nodes"]}
    assert verdicts == {"n1": "degraded", "n2": "healthy"}
    # the same as text, and only n2: healthy, exit 0
    assert main(["history", "show", str(h), "--node", "n2"]) == 0
    assert main(["history", "show", str(h)]) == 1
    text = capsys.readouterr().out
    assert "n1 stream -10.0%" in text and "thp_enabled madvise -> never on 2026-10-05" in text


def test_fact_change_without_performance_change_claims_nothing(tmp_path, capsys):
    nights = _nightly(tmp_path, 8, thp_from=4)
    h = tmp_path / "H"
    assert main(["history", "add", str(h), *map(str, nights)]) == 0
    capsys.readouterr()
    assert main(["history", "show", str(h), "--json"]) == 0
    assert _json(capsys)["changes"] == []


def test_exclude_takes_entries_out_visibly_and_undo_brings_them_back(tmp_path, capsys):
    nights = _nightly(tmp_path, 8, drop_from=4)
    h = tmp_path / "H"
    main(["history", "add", str(h), *map(str, nights)])
    store = DirectoryHistory(h)
    ids = sorted({str(c) for c in store.read().entries["campaign"]}, key=lambda c: c)
    entries = store.read().entries
    late = [str(r.campaign) for r in entries.itertuples() if r.started_at >= DAY0 + dt.timedelta(days=4)]
    for cid in set(late):
        assert main(["history", "exclude", str(h), "n1", cid[:12], "--reason", "fan failure"]) == 0
    capsys.readouterr()
    assert main(["history", "show", str(h), "--node", "n1", "--json"]) == 0
    data = _json(capsys)
    assert data["changes"] == []
    marked = [e for e in data["series"][0]["entries"] if e["excluded"]]
    assert len(marked) == 4 and {e["exclusion_reason"] for e in marked} == {"fan failure"}
    assert len(ids) == 8
    assert main(["history", "exclude", str(h), "n1", late[0][:12], "--undo"]) == 0
    assert main(["history", "exclude", str(h), "n1", "ffffffffffff"]) == 2  # no such entry: one line, exit 2


def test_damaged_shard_is_named_and_the_rest_reads(tmp_path, capsys):
    nights = _nightly(tmp_path, 3)
    h = tmp_path / "H"
    for c in nights:
        main(["history", "add", str(h), str(c)])
    shards = sorted((h / "shards" / "history_entries").iterdir(), key=lambda p: p.stat().st_mtime)
    shards[1].write_bytes(shards[1].read_bytes()[:40])
    capsys.readouterr()
    assert main(["history", "show", str(h)]) == 0
    captured = capsys.readouterr()
    assert str(shards[1]) in captured.err and "damaged shard" in captured.err
    assert "4 entries, 2 nodes" in captured.out  # nights 0 and 2 of n1 and n2


def test_compaction_automatic_and_by_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(directory_module, "AUTO_COMPACT_COMMITS", 5)
    nights = _nightly(tmp_path, 7)
    h = tmp_path / "H"
    for c in nights:
        main(["history", "add", str(h), str(c)])
    records = os.listdir(h / "commits")
    assert len(records) < 7  # five appends were merged into one
    entries = DirectoryHistory(h).read().entries
    assert len(entries) == 14 and not entries.duplicated(["campaign", "node", "variant"]).any()
    assert main(["history", "compact", str(h)]) == 0
    assert len(os.listdir(h / "commits")) == 1
    assert sum(len(os.listdir(h / "shards" / t)) for t in os.listdir(h / "shards")) <= 4
    again = DirectoryHistory(h).read().entries
    assert len(again) == 14
    capsys.readouterr()
    assert main(["history", "add", str(h), str(nights[3])]) == 0
    assert "nothing added" in capsys.readouterr().out


def test_analyze_appends_and_a_failed_append_only_warns(tmp_path, capsys, monkeypatch):
    (c,) = _nightly(tmp_path, 1)
    assert main(["analyze", str(c)]) == (code := main(["analyze", str(c)]))
    h = tmp_path / "H"
    capsys.readouterr()
    assert main(["analyze", str(c), "--history", str(h)]) == code
    assert "2 entries added" in capsys.readouterr().err
    blocker = tmp_path / "a-file"
    blocker.write_text("not a history")
    monkeypatch.setenv("TAILSCOPE_HISTORY", str(blocker))
    assert main(["analyze", str(c)]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tailscope: warning: history") and "not appended" in err[0]


def test_a_campaign_is_not_a_history(tmp_path, capsys):
    (c,) = _nightly(tmp_path, 1)
    assert main(["history", "add", str(c), str(c)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a tailscope campaign, not a history" in err[0]
    assert main(["history", "show", str(tmp_path / "none")]) == 2


def test_campaign_collect_appends_and_a_failed_append_keeps_its_exit_code(tmp_path, capsys):
    (c,) = _nightly(tmp_path, 1)
    code = main(["campaign", "collect", str(c)])
    capsys.readouterr()
    assert main(["campaign", "collect", str(c), "--history", str(tmp_path / "H")]) == code
    assert "2 entries added" in capsys.readouterr().err
    assert main(["campaign", "collect", str(c), "--history", str(c)]) == code  # a campaign is no history
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not appended" in err[0] and "not a history" in err[0]
