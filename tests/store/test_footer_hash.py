"""Footer and schema damage is named on every read path (store/footer.py, store/read.py).

Parquet's page checksums leave the footer (schema, column names, offsets) unchecked: a bit flip there read
as a column of NULLs, a renamed column, or a traceback. Each commit record keeps a hash of its shards'
footers, checked when a shard is opened; a shard whose columns are not its table's is refused by name
even without the hash (campaigns written before it)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pytest

from store_tools import write_iterations_csv
from tailscope.cli import main
from tailscope.store.campaign import Campaign
from tailscope.store.errors import StoreError
from tailscope.store.footer import footer_digest
from tailscope.store.read import connect, read_table, validate_shards

FLIPS = 300


def _import(root: Path, name: str, nodes: list[str]) -> None:
    path = write_iterations_csv(
        root / f"{name}.csv", nodes, 3, 4, lambda _, run, it: 100 + run + it / 10, "s"
    )
    assert main(["import", "iterations", str(path), "--campaign", str(root / "c"), "--name", name]) == 0


@pytest.fixture
def campaign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Two imports (two commits), each of two nodes with 3 runs: 4 runs shards, 4 iterations shards."""
    _import(tmp_path, "a", ["n0", "n1"])
    _import(tmp_path, "b", ["n2", "n3"])
    capsys.readouterr()
    return tmp_path / "c"


def _strip_footer_hashes(root: Path) -> None:
    """The commit records as written before footer hashes existed."""
    for record in (root / "commits").glob("*.json"):
        data = json.loads(record.read_text())
        data.pop("footers", None)
        record.write_text(json.dumps(data))


def _flip(data: bytes, position: int, rng: random.Random) -> bytes:
    out = bytearray(data)
    out[position] ^= 1 << rng.randrange(8)
    return bytes(out)


def _footer_length(data: bytes) -> int:
    return int.from_bytes(data[-8:-4], "little") + 8  # the footer and its trailer (length, PAR1)


def _read_or_named(root: Path, shard: Path, truth: pa.Table) -> str:
    """'named' when the read refuses with one line naming the shard, 'same' when it gives the truth; any
    other answer (another exception, different rows, a column of NULLs) fails the test."""
    try:
        data = read_table(Campaign.open(root), "runs")
    except StoreError as exc:
        message = str(exc)
        assert str(shard) in message and "damaged shard" in message and "\n" not in message, message
        return "named"
    assert data.equals(truth), [n for n in truth.column_names if not data.column(n).equals(truth.column(n))]
    return "same"


def test_commit_records_keep_each_shards_footer_hash(campaign):
    c = Campaign.open(campaign)
    for table in ("runs", "iterations"):
        files = c.shard_files(table)
        assert len(files) == 4
        assert c.footer_digests(table) == {f.name: footer_digest(f) for f in files}


def test_every_footer_bit_flip_is_named(campaign):
    c = Campaign.open(campaign)
    truth = read_table(c, "runs")
    shard = c.shard_files("runs")[1]
    original = shard.read_bytes()
    length = _footer_length(original)
    rng = random.Random(11)
    seen = {"named": 0, "same": 0}
    for _ in range(FLIPS):
        shard.write_bytes(_flip(original, len(original) - rng.randrange(1, length + 1), rng))
        seen[_read_or_named(campaign, shard, truth)] += 1
    assert seen == {"named": FLIPS, "same": 0}
    # the careful path (`campaign collect`) names it too
    shard.write_bytes(_flip(original, len(original) - length // 2, rng))
    assert [d.path for d in validate_shards(Campaign.open(campaign))[1]] == [shard]


def test_a_flip_anywhere_is_named_or_harmless(campaign):
    """Page data has its CRC, the footer its hash: the few flips left (page statistics the reader does not
    use) change nothing."""
    c = Campaign.open(campaign)
    truth = read_table(c, "runs")
    shard = c.shard_files("runs")[2]
    original = shard.read_bytes()
    rng = random.Random(5)
    seen = {"named": 0, "same": 0}
    for _ in range(FLIPS * 2 // 3):
        shard.write_bytes(_flip(original, rng.randrange(len(original)), rng))
        seen[_read_or_named(campaign, shard, truth)] += 1
    assert seen["named"] >= FLIPS // 2, seen


def test_footer_flips_without_a_hash_never_give_a_traceback_or_nulls(campaign):
    """Campaigns written before footer hashes still read; damage there is named or harmless, never a
    UnicodeDecodeError (a column name no longer UTF-8) nor a column read as NULL (a renamed column)."""
    _strip_footer_hashes(campaign)
    c = Campaign.open(campaign)
    truth = read_table(c, "runs")
    assert c.footer_digests("runs") == {} and truth.num_rows == 12
    shard = c.shard_files("runs")[0]
    original = shard.read_bytes()
    length = _footer_length(original)
    rng = random.Random(3)
    seen = {"named": 0, "same": 0}
    for _ in range(FLIPS * 2 // 3):
        shard.write_bytes(_flip(original, len(original) - rng.randrange(1, length + 1), rng))
        seen[_read_or_named(campaign, shard, truth)] += 1
    assert seen["named"] >= FLIPS // 3, seen


@pytest.mark.parametrize("hashes", [True, False], ids=["footer hash", "written before hashes"])
def test_a_renamed_column_is_one_error_naming_the_shard(campaign, capsys, hashes):
    """`value` -> `valuf` in a runs shard: analyze used the other shards' runs and said nothing."""
    if not hashes:
        _strip_footer_hashes(campaign)
    shard = Campaign.open(campaign).shard_files("runs")[3]
    data = shard.read_bytes()
    footer = len(data) - _footer_length(data)
    assert data.count(b"value", footer) >= 1  # the column's name (and the metric's, named value too)
    shard.write_bytes(data[:footer] + data[footer:].replace(b"value", b"valuf"))
    assert main(["analyze", str(campaign)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{shard}: damaged shard" in err and "campaign collect" in err
    if not hashes:
        assert "unknown columns ['valuf']" in err


def test_shards_a_read_leaves_out_are_checked_too(campaign):
    """iterations(run_ids) reads only the shards of the commits that stored those runs; a changed footer in
    another commit's shard is still named (as a truncated one is)."""
    c = Campaign.open(campaign)
    con = connect(c)
    first = sorted(f.name for f in c.shard_files("iterations"))
    mine = con.execute("SELECT run_id FROM runs WHERE variant LIKE '%a%' AND node = 'n0'").fetchall()
    other = next(f for f in c.shard_files("iterations") if f.name.startswith("n2."))
    data = other.read_bytes()
    other.write_bytes(_flip(data, len(data) - 20, random.Random(1)))
    with pytest.raises(StoreError, match=f"{other}: damaged shard: its Parquet footer"):
        connect(Campaign.open(campaign)).iterations([r[0] for r in mine])
    assert first == sorted(f.name for f in c.shard_files("iterations"))


def test_runs_of_variant_counts_each_trial_once_as_the_view_does(campaign):
    """The import's question, answered by Arrow (no DuckDB), is the runs view's count."""
    c = Campaign.open(campaign)
    con = connect(c)
    for variant in ("imported:a", "imported:b", "imported:none"):
        sql = con.execute("SELECT count(*) FROM runs WHERE variant = ?", [variant]).fetchone()[0]
        assert connect(c).runs_of_variant(variant) == sql == (6 if variant != "imported:none" else 0)



def test_runs_of_variant_counts_a_retried_trial_once(tmp_path):
    from test_campaign_store import commit, run_row, table

    c = Campaign.create(tmp_path / "c")
    failed, ok = run_row(c, "n1", 0, status="failed"), run_row(c, "n1", 0, started_offset=10)
    other = run_row(c, "n2", 0)
    commit(c, {"runs": table("runs", [failed, other])}, "n1")
    commit(c, {"runs": table("runs", [ok])}, "n1")
    con = connect(c)
    assert con.execute("SELECT count(*) FROM runs WHERE variant = 'l2sum-aaaa'").fetchone()[0] == 2
    assert connect(c).runs_of_variant("l2sum-aaaa") == 2


def test_samples_by_node_checks_the_footer(tmp_path, capsys):
    """The importers' question before they write (pyarrow alone) names a changed footer too."""
    from tailscope.store.read import samples_by_node

    path = tmp_path / "perf.csv"
    path.write_text(
        "# started on Tue Nov 24 10:00:00 2026\n\n"
        + "".join(f"     {t}.000500000,CPU0,{250 + t},msec,task-clock,1,100.00,,\n" for t in (1, 2, 3))
    )
    assert main(["import", "perf-csv", str(path), "--campaign", str(tmp_path / "c"), "--node", "n1"]) == 0
    c = Campaign.open(tmp_path / "c")
    (shard,) = c.shard_files("samples")
    assert sum(samples_by_node(c, "imported:perf-csv").values()) > 0
    data = shard.read_bytes()
    shard.write_bytes(_flip(data, len(data) - 30, random.Random(2)))
    with pytest.raises(StoreError, match=f"{shard}: damaged shard: its Parquet footer"):
        samples_by_node(Campaign.open(tmp_path / "c"), "imported:perf-csv")
