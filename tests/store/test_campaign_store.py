"""The campaign store: manifest, atomic shards, views that count each trial once, damaged input."""

from __future__ import annotations

import json
import multiprocessing
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tailscope.store.campaign import Campaign, StoreError, conform, utcnow
from tailscope.store.load import load_into
from tailscope.store.manifest import Plan
from tailscope.store.read import connect
from tailscope.store.schema import TABLES, SchemaVersionError


def run_row(
    campaign: Campaign,
    node: str,
    trial: int,
    *,
    status: str = "ok",
    value: float | None = 1.0,
    variant: str = "l2sum-aaaa",
    started_offset: int = 0,
) -> dict:
    import datetime as dt

    return {
        "run_id": uuid.uuid4().hex,
        "campaign": campaign.campaign_id,
        "node": node,
        "probe": "l2sum",
        "variant": variant,
        "params": "{}",
        "trial": trial,
        "started_at": utcnow() + dt.timedelta(seconds=started_offset),
        "metric": "bandwidth",
        "value": value if status == "ok" else None,
        "unit": "GB/s",
        "higher_is_better": True,
        "status": status,
        "error": None if status == "ok" else "boom",
        "source": "probe",
        "task": "t",
    }


def table(name: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=TABLES[name].schema)


def commit(c: Campaign, tables: dict[str, pa.Table], node: str) -> list:
    """One transaction of the load path; returns the shard files it made visible."""
    before = {t: set(c.shard_files(t)) for t in TABLES}
    with load_into(c.root, "test") as load:
        load.write_tables(tables, node=node)
    return [p for t in TABLES for p in c.shard_files(t) if p not in before[t]]


def test_create_open_and_refuse_second_create(tmp_path):
    c = Campaign.create(tmp_path / "c", name="demo")
    assert (tmp_path / "c" / "campaign.json").is_file()
    again = Campaign.open(tmp_path / "c")
    assert again.campaign_id == c.campaign_id and again.manifest.name == "demo"
    with pytest.raises(StoreError, match="already exists"):
        Campaign.create(tmp_path / "c")


def test_unknown_schema_version_is_refused_by_name(tmp_path):
    c = Campaign.create(tmp_path / "c")
    manifest = json.loads((c.root / "campaign.json").read_text())
    manifest["schema_version"] = 99
    (c.root / "campaign.json").write_text(json.dumps(manifest))
    with pytest.raises(SchemaVersionError, match="schema version 99"):
        Campaign.open(c.root)


def test_not_a_campaign(tmp_path):
    with pytest.raises(StoreError, match="not a tailscope campaign"):
        Campaign.open(tmp_path)
    (tmp_path / "campaign.json").write_text("{broken")
    with pytest.raises(StoreError, match=r"campaign.json:1: invalid JSON"):
        Campaign.open(tmp_path)


def test_plans_are_merged_not_duplicated(tmp_path):
    c = Campaign.create(tmp_path / "c")
    c.add_plan(Plan("v1", "l2sum", {}, 10))
    c.add_plan(Plan("v1", "l2sum", {}, 20))
    c.add_plan(Plan("v2", "fwq", {}, 5))
    plans = Campaign.open(c.root).manifest.plans
    assert [(p.variant, p.trials) for p in plans] == [("v1", 20), ("v2", 5)]


def test_conform_rejects_missing_required_and_unknown_columns():
    with pytest.raises(StoreError, match="required column 'run_id' missing"):
        conform(pa.table({"iteration": [1]}), "iterations")
    rows = [{"run_id": "r", "iteration": 0, "warmup": False, "seconds": 1.0, "value": 2.0}]
    ok = conform(pa.Table.from_pylist(rows), "iterations")
    assert ok.schema.equals(TABLES["iterations"].schema)
    with pytest.raises(StoreError, match="unknown columns"):
        conform(pa.Table.from_pylist([{**rows[0], "bogus": 1}]), "iterations")
    with pytest.raises(StoreError, match="null values"):
        conform(pa.Table.from_pylist([{**rows[0], "run_id": None}]), "iterations")


def test_views_count_each_trial_once_and_prefer_ok(tmp_path):
    c = Campaign.create(tmp_path / "c")
    failed = run_row(c, "n1", 0, status="failed")
    ok = run_row(c, "n1", 0, value=5.0, started_offset=10)
    dup_first = run_row(c, "n1", 1, value=6.0)
    dup_second = run_row(c, "n1", 1, value=7.0, started_offset=5)
    commit(c, {"runs": table("runs", [failed, dup_first])}, "n1")
    commit(c, {"runs": table("runs", [ok, dup_second])}, "n1")
    con = connect(c)
    got = con.execute("SELECT trial, status, value FROM runs ORDER BY trial").fetchall()
    assert got == [(0, "ok", 5.0), (1, "ok", 6.0)]
    assert con.execute("SELECT count(*) FROM runs_all").fetchone()[0] == 4


def test_orphan_child_rows_are_invisible(tmp_path):
    """Child rows whose run is not stored are invisible in the views (and present in `<table>_all`)."""
    c = Campaign.create(tmp_path / "c")
    run = run_row(c, "n1", 0)
    it = {"run_id": run["run_id"], "iteration": 0, "warmup": False, "seconds": 1.0, "value": 1.0}
    orphan = {**it, "run_id": "never-committed"}
    commit(c, {"iterations": table("iterations", [it, orphan]), "runs": table("runs", [run])}, "n1")
    con = connect(c)
    assert con.execute("SELECT run_id FROM iterations").fetchall() == [(run["run_id"],)]
    assert con.execute("SELECT count(*) FROM iterations_all").fetchone()[0] == 2


def test_empty_campaign_has_typed_empty_views(tmp_path):
    c = Campaign.create(tmp_path / "c")
    con = connect(c)
    for name in TABLES:
        assert con.execute(f"SELECT count(*) FROM {name}").fetchone()[0] == 0
    cols = [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
    assert cols == TABLES["runs"].names


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_damaged_shard_is_named_and_nothing_else_is_touched(tmp_path, damage):
    c = Campaign.create(tmp_path / "c")
    (good,) = commit(c, {"runs": table("runs", [run_row(c, "n1", 0)])}, "n1")
    (bad,) = commit(c, {"runs": table("runs", [run_row(c, "n1", 1)])}, "n1")
    data = bad.read_bytes()
    bad.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"x" * 100, "empty": b""}[damage])
    before = good.read_bytes()
    with pytest.raises(StoreError) as info:
        connect(c).execute("SELECT count(*) FROM runs")
    message = str(info.value)
    assert str(bad) in message and "not a readable Parquet shard" in message
    assert "campaign collect" in message and "--resume" in message
    assert "\n" not in message
    assert good.read_bytes() == before


def test_shard_names_are_sanitised_and_bounded(tmp_path):
    c = Campaign.create(tmp_path / "c")
    (path,) = commit(c, {"runs": table("runs", [run_row(c, "n/1", 0)])}, "n/../1")
    assert path.parent == c.shard_dir("runs") and path.name.startswith("n_.._1.")
    (long,) = commit(c, {"runs": table("runs", [run_row(c, "x" * 300, 0)])}, "x" * 300)
    assert len(long.name) < 140  # a 300-character node name never gives ENAMETOOLONG
    assert connect(c).execute("SELECT max(length(node)) FROM runs").fetchone()[0] == 300
    assert not list(c.root.rglob("*.tmp"))


def _writer(root: str, index: int) -> None:
    c = Campaign.open(root)
    node = f"node{index:03d}"
    runs = [run_row(c, node, t, value=float(index * 100 + t)) for t in range(5)]
    its = [
        {"run_id": r["run_id"], "iteration": i, "warmup": i == 0, "seconds": 0.1, "value": 1.0}
        for r in runs
        for i in range(3)
    ]
    with load_into(c.root, "test") as load:
        load.write_tables({"iterations": table("iterations", its), "runs": table("runs", runs)}, node=node)


@pytest.mark.slow
def test_64_concurrent_writers_lose_nothing(tmp_path):
    c = Campaign.create(tmp_path / "c")
    ctx = multiprocessing.get_context("forkserver")
    procs = [ctx.Process(target=_writer, args=(str(c.root), i)) for i in range(64)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    con = connect(c)
    assert con.execute("SELECT count(*), count(DISTINCT node) FROM runs").fetchone() == (320, 64)
    assert con.execute("SELECT count(*) FROM iterations").fetchone()[0] == 960
    values = {r[0] for r in con.execute("SELECT value FROM runs").fetchall()}
    assert values == {float(i * 100 + t) for i in range(64) for t in range(5)}
    # Every shard is complete and readable on its own (what `tailscope campaign collect` checks).
    shards = c.shard_files("runs") + c.shard_files("iterations")
    assert len(shards) == 128
    assert sum(pq.read_table(p).num_rows for p in shards) == 320 + 960
    assert not list(c.root.rglob("*.tmp"))


def test_small_shards_are_lz4_and_large_ones_zstd(tmp_path):
    """A shard's codec follows its size (store/load.py shard_codec): LZ4 for the small shards a campaign is
    mostly made of (cheap to open per column chunk), zstd for a large one; both read back the same rows."""
    import pyarrow.parquet as pq

    from tailscope.store.load import ZSTD_FROM_BYTES
    from tailscope.store.read import read_table

    c = Campaign.create(tmp_path / "c")
    runs = table("runs", [run_row(c, "n0", t) for t in range(3)])
    n = ZSTD_FROM_BYTES // 40 + 1  # rows of ~50 bytes of Arrow data each: just over the limit
    samples = pa.table(
        {
            "node": pa.array(["n0"] * n), "sample": pa.array(range(n), pa.int64()),
            "t_ns": pa.array(range(n), pa.int64()), "tsc": pa.array([None] * n, pa.int64()),
            "source": pa.array(["monitor"] * n), "pmu": pa.array(["cpu"] * n),
            "unit": pa.array([0] * n, pa.int32()), "event": pa.array(["cycles"] * n),
            "value": pa.array([float(i) for i in range(n)]),
        },
        schema=TABLES["samples"].schema,
    )  # fmt: skip
    assert runs.nbytes < ZSTD_FROM_BYTES <= samples.nbytes
    shards = commit(c, {"runs": runs, "samples": samples}, "n0")
    codecs = {p.parent.name: pq.ParquetFile(p).metadata.row_group(0).column(0).compression for p in shards}
    assert codecs == {"runs": "LZ4", "samples": "ZSTD"}
    assert read_table(c, "samples").column("value").to_pylist()[-1] == float(n - 1)
    assert read_table(c, "runs").num_rows == 3


def test_a_campaign_object_sees_each_new_commit_in_its_shards_and_footers(tmp_path):
    """shard_files and footer_digests are kept between calls (a report asks ~19 times); a commit made
    through another Campaign object (as another process would) is seen at the next call all the same."""
    reader = Campaign.create(tmp_path / "c")
    assert reader.shard_files("runs") == [] and reader.footer_digests("runs") == {}
    writer = Campaign.open(tmp_path / "c")
    seen = []
    for node in ("n1", "n2", "n3"):
        (new,) = commit(writer, {"runs": table("runs", [run_row(writer, node, 0)])}, node)
        seen.append(new)
        assert reader.shard_files("runs") == sorted(seen)
        assert set(reader.footer_digests("runs")) == {p.name for p in seen}
    reader.shard_files("runs").clear()  # a caller's list is its own
    assert reader.shard_files("runs") == sorted(seen)


DAMAGED_RECORDS = [
    b"{not json",
    b"\xff\xfe{}",
    b'{"txid": "t", "shards": {"runs": ["../x.parquet"]}}',
    b'{"shards": {}}',
    b"[]",
    b'{"txid": "t", "shards": {"runs": "a"}, "footers": 3}',
]


@pytest.mark.parametrize("text", DAMAGED_RECORDS)
def test_a_damaged_commit_record_is_named_with_what_to_do(tmp_path, text):
    c = Campaign.create(tmp_path / "c")
    commit(c, {"runs": table("runs", [run_row(c, "n1", 0)])}, "n1")
    (tmp_path / "c" / "commits" / "zz-bad.json").write_bytes(text)
    with pytest.raises(StoreError, match=r"zz-bad\.json: damaged commit record .*campaign collect"):
        Campaign.open(tmp_path / "c").shard_files("runs")
