"""`import perfcounts` of several sampler files: one transaction, one commit, every file or none; a file
that streamed part of its samples before the whole-file readers took over is stored once."""

from __future__ import annotations

import functools
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from tailscope.cli import main
from tailscope.importers import perfcounts
from tailscope.store.campaign import COMMITS, Campaign
from tailscope.store.load import load_into
from tailscope.store.read import connect, samples_by_node, samples_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "counters"))
import seed_file

pytestmark = pytest.mark.skipif(perfcounts._perfscan() is None, reason="native scanner not built")


def sampler_file(directory: Path, node: str, samples: int) -> Path:
    path = directory / f"{node}.perfcounts.lua"
    text = seed_file.big_text(samples, cpus=2, chas=1, channels=1)
    seconds = 1532379481 + sum(map(ord, node))  # each node's file its own bytes (a file is imported once)
    path.write_text(text.replace("Reference_WallTime = 1532379481.", f"Reference_WallTime = {seconds}.", 1))
    return path


def stored(campaign: Path) -> pd.DataFrame:
    with connect(Campaign.open(campaign)) as con:
        return con.df("SELECT * FROM samples ORDER BY node, sample, pmu, unit, event")


def commits(campaign: Path) -> list[str]:
    return sorted(p.name for p in (campaign / COMMITS).glob("*.json"))


def test_several_files_are_one_commit_with_each_files_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [sampler_file(tmp_path, node, n) for node, n in (("n1", 3), ("n2", 5), ("n3", 4))]
    together, alone = tmp_path / "together", tmp_path / "alone"
    assert main(["import", "perfcounts", *map(str, files), "--campaign", str(together)]) == 0
    out = capsys.readouterr().out
    assert "imported 3 files in one commit: 12 samples" in out and "of 3 nodes (n1, n2, n3)" in out
    for path in files:
        assert main(["import", "perfcounts", str(path), "--campaign", str(alone)]) == 0
    assert len(commits(together)) == 1 and len(commits(alone)) == 3
    pd.testing.assert_frame_equal(stored(together), stored(alone))
    record = Campaign.open(together).commit_records()[0]
    assert sorted(s["description"] for s in record.sources) == sorted(map(str, files))
    headers = Campaign.open(together).manifest.sample_headers
    assert sorted(headers) == ["n1", "n2", "n3"]
    opened = Campaign.open(together)
    assert samples_by_node(opened, perfcounts.SOURCE) == {
        n: samples_of(opened, n, perfcounts.SOURCE) for n in ("n1", "n2", "n3")
    }


@pytest.mark.parametrize("bad_at", [0, 2])
def test_one_bad_file_among_several_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad_at: int
) -> None:
    campaign = tmp_path / "c"
    first = sampler_file(tmp_path, "n0", 3)
    assert main(["import", "perfcounts", str(first), "--campaign", str(campaign)]) == 0
    before, records = stored(campaign), commits(campaign)
    files = [sampler_file(tmp_path, node, 3) for node in ("n1", "n2", "n3")]
    lines = files[bad_at].read_text().splitlines()
    lines[40] = lines[40].replace("=", "= x", 1)  # line 41
    files[bad_at].write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["import", "perfcounts", *map(str, files), "--campaign", str(campaign)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{files[bad_at]}:41:" in err, err  # line 41 of the file
    assert commits(campaign) == records
    pd.testing.assert_frame_equal(stored(campaign), before)
    assert not list((campaign / "staging").glob("*/samples/*.parquet"))
    for thread in threading.enumerate():  # the scan thread ahead of the failed file stops too
        if thread.name == "tailscope-scan":
            thread.join(timeout=10)
            assert not thread.is_alive()


def test_a_file_streamed_in_part_then_read_whole_is_stored_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header line after the samples: the stream has staged shards of n2 before it hands the file to the
    whole-file readers; those shards are rolled back (n1's stay) and n2's rows are stored once."""
    monkeypatch.setattr(perfcounts, "stream_tables", functools.partial(perfcounts.stream_tables, block=256))
    first = sampler_file(tmp_path, "n1", 4)
    late = sampler_file(tmp_path, "n2", 4)
    late.write_text(late.read_text() + "late_header_scalar = 5\n")
    campaign = tmp_path / "c"
    files = perfcounts.import_perfcounts_files([first, late], campaign)
    assert [f["streamed"] for f in files] == [True, False]
    frame = stored(campaign)
    whole = perfcounts.samples_table(perfcounts.parse(late), "n2")
    assert (frame["node"] == "n2").sum() == whole.num_rows
    assert not frame.duplicated(["node", "sample", "pmu", "unit", "event"]).any()
    record = Campaign.open(campaign).commit_records()[0]
    on_disk = sorted(p.name for p in (campaign / "shards" / "samples").iterdir())
    assert on_disk == sorted(record.shards["samples"])  # no shard of the rolled-back stream is left
    assert sum(1 for n in on_disk if n.startswith("n1.")) > 1  # n1 streamed in several blocks


def test_savepoint_rollback_removes_what_was_staged_since(tmp_path: Path) -> None:
    table = perfcounts.samples_table(perfcounts.parse(sampler_file(tmp_path, "n1", 2)), "n1")
    with load_into(tmp_path / "c", "test", create=True) as load:
        load.write("samples", table, node="n1")
        load.record_source("a" * 64, "first")
        point = load.savepoint()
        load.write("samples", table, node="n2")
        load.record_source("b" * 64, "second")
        staged = sorted((load.staging / "samples").iterdir())
        load.rollback_to(point)
        assert [p.exists() for p in staged] == [True, False]
        assert load.rows_staged == {"samples": table.num_rows}
        with pytest.raises(Exception, match="the same bytes as first"):
            load.record_source("a" * 64, "again")
    record = Campaign.open(tmp_path / "c").commit_records()[0]
    assert [s["description"] for s in record.sources] == ["first"]
    assert len(record.shards["samples"]) == 1 and record.shards["samples"][0].startswith("n1.")
    assert len(stored(tmp_path / "c")) == table.num_rows


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["perfcounts", "{n1}", "{n2}", "--node", "x"], "--node x: one node for 2 files"),
        (["perfcounts", "{n1}", "{n1}"], "named twice"),
        (["perfcounts", "{n1}", "{other_n1}"], "node n1 again"),
        (["hpl", "{n1}", "{n2}"], "import hpl: 2 files given, expected one"),
        (["perfcounts", "{n1}", "--node", " "], "--node ' ': expected a node name"),
        (["perfcounts", "{n1}", "{other}"], "other: not a regular file"),
    ],
)
def test_several_files_that_cannot_go_together_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    (tmp_path / "other").mkdir()
    names = {
        "n1": sampler_file(tmp_path, "n1", 2),
        "n2": sampler_file(tmp_path, "n2", 2),
        "other_n1": sampler_file(tmp_path / "other", "n1", 3),
        "other": tmp_path / "other",
    }
    args = [a.format(**names) for a in argv]
    assert main(["import", *args, "--campaign", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "c").exists()
