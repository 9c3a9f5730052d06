"""The streaming perfcounts reader gives exactly the whole-file readers' rows, block size whatever, and hands
anything unusual back to them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tailscope.cli import main
from tailscope.importers import perfcounts
from tailscope.importers.fast_csv import FastReaderFallback
from tailscope.importers.perfcounts import StreamSummary, stream_tables

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "counters"))
import seed_file

from installed import tailscope_env

pytestmark = pytest.mark.skipif(perfcounts._perfscan() is None, reason="native scanner not built")


def sorted_rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


@pytest.mark.parametrize("block", [64, 333, 4096, 1 << 20])
def test_stream_equals_whole_file(tmp_path: Path, block: int) -> None:
    path = tmp_path / "c1.perfcounts.lua"
    path.write_text(seed_file.big_text(7, cpus=3, chas=2, channels=2))
    summary = StreamSummary()
    tables = list(stream_tables(path, "n1", perfcounts.SOURCE, summary, block=block))
    assert len(tables) > (1 if block < 4096 else 0)
    whole = perfcounts.samples_table(perfcounts.parse(path), "n1")
    assert sorted_rows(pa.concat_tables(tables)) == sorted_rows(whole)
    assert summary.samples == 7 and summary.rows == whole.num_rows
    assert summary.header == perfcounts.parse(path).header


@pytest.mark.parametrize(
    "edit",
    [
        lambda ls: [*ls[-3:], *ls[:-3]],  # not in sample order
        lambda ls: [*ls, "late_header_scalar = 5"],  # a header line after the samples
        lambda ls: ls[:-1],  # the last sample lacks a series
    ],
)
def test_unusual_files_go_back_to_the_whole_file_readers(tmp_path: Path, edit) -> None:
    path = tmp_path / "c1.perfcounts.lua"
    path.write_text("\n".join(edit(seed_file.big_text(4, cpus=2, chas=1, channels=1).splitlines())) + "\n")
    with pytest.raises(FastReaderFallback):
        list(stream_tables(path, "n1", perfcounts.SOURCE, StreamSummary(), block=256))


def test_import_streams_and_says_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c1.perfcounts.lua"
    path.write_text(seed_file.big_text(5, cpus=2, chas=1, channels=1))
    counts = perfcounts.import_perfcounts(path, tmp_path / "a")
    assert counts["streamed"] and counts["samples"] == 5
    assert main(["import", "perfcounts", str(path), "--campaign", str(tmp_path / "b")]) == 0
    assert "imported 5 samples" in capsys.readouterr().out


def test_the_duplicate_count_reads_pyarrow_alone_and_agrees_with_sql(tmp_path: Path) -> None:
    # store.read.samples_of (what the importer asks before it writes) gives DuckDB's count per (node, source),
    # and a damaged samples shard is one line naming it: exit 2, nothing stored.
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect, samples_of

    campaign = tmp_path / "c"
    for node, samples in (("n1", 4), ("n2", 6)):
        path = tmp_path / f"{node}.perfcounts.lua"
        path.write_text(seed_file.big_text(samples, cpus=2, chas=1, channels=1))
        assert main(["import", "perfcounts", str(path), "--campaign", str(campaign)]) == 0
    con = connect(campaign)
    sql = dict(
        ((n, s), c)
        for n, s, c in con.execute("SELECT node, source, count(*) FROM samples GROUP BY ALL").fetchall()
    )
    con.close()
    opened = Campaign.open(campaign)
    for (node, source), count in sql.items():
        assert samples_of(opened, node, source) == count > 0
    assert samples_of(opened, "n3", perfcounts.SOURCE) == 0
    assert samples_of(opened, "n1", "imported:perf-csv") == 0
    shard = opened.shard_files("samples")[0]
    shard.write_bytes(shard.read_bytes()[:-20])  # the footer cut off
    path = tmp_path / "n3.perfcounts.lua"
    path.write_text(seed_file.big_text(3, cpus=2, chas=1, channels=1) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tailscope", "import", "perfcounts", str(path), "--campaign", str(campaign)],
        capture_output=True, text=True, timeout=120,
        env=tailscope_env(),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and f"{shard}: damaged shard" in proc.stderr
    assert not any("n3" in p.name for p in Campaign.open(campaign).shard_files("samples"))
