"""The epilog's append (`append_epilog`) and reading the records back: a history directory's spool (cheap: no
pyarrow or pandas imported), its ingestion into the job_evidence table, and PostgreSQL's one INSERT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from installed import PACKAGE_ROOT
from tailscope.history.directory import DirectoryHistory
from tailscope.jobs.record import EpilogRecordError
from tailscope.jobs.spool import SPOOL, STALE_TEMP_S, remove_stale_temps
from tailscope.jobs.store import append_epilog, open_jobs, read_epilog


def record(job: str = "101", node: str = "c001", at: str = "2026-11-02T10:00:05Z", **extra) -> dict:
    base = {
        "version": 1,
        "cluster": "alpha",
        "job_id": job,
        "node": node,
        "at": at,
        "job_start": "2026-11-02T09:00:00+00:00",
        "span_s": 3605.0,
        "evidence": {"thermal.package_throttle_count": 3, "cpufreq.min_khz": 1200000, "mce.count.total": 0},
        "facts_digest": "abc123",
        "epilog_cpu_s": 0.12,
        "epilog_wall_s": 0.2,
        "errors": [],
    }
    return {**base, **extra}


def test_a_directory_spool_record_per_job_and_node_and_the_latest_wins(tmp_path):
    history = tmp_path / "H"  # not there yet: the first epilog makes it
    append_epilog(str(history), record())
    append_epilog(str(history), record(node="c002"))
    append_epilog(str(history), record(at="2026-11-02T10:00:09Z", evidence={"load.avg1": 2.5}))  # again
    files = sorted(p.name for p in (history / SPOOL).iterdir())
    assert len(files) == 2 and all(f.endswith(".json") for f in files)
    got, damaged = read_epilog(str(history))
    assert damaged == []
    by_node = {r["node"]: r for r in got}
    assert set(by_node) == {"c001", "c002"}
    assert by_node["c001"]["evidence"] == {"load.avg1": 2.5}
    assert by_node["c001"]["at"] == "2026-11-02T10:00:09Z"
    assert by_node["c002"]["job_start"] == "2026-11-02T09:00:00Z"  # normalised to UTC


def test_the_epilog_path_imports_neither_pyarrow_nor_pandas(tmp_path):
    code = (
        "import json, sys\n"
        "from tailscope.jobs.store import append_epilog\n"
        f"append_epilog({str(tmp_path / 'H')!r}, json.loads(sys.argv[1]))\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyarrow', 'pandas', 'numpy', 'duckdb'}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT))
    argv = [sys.executable, "-c", code, json.dumps(record())]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert len(list((tmp_path / "H" / SPOOL).glob("*.json"))) == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"version": 2}, "version"),
        ({"job_id": ""}, "job_id"),
        ({"node": "c001\x1b[2J"}, "node"),
        ({"at": "yesterday"}, "at"),
        ({"at": "2026-11-02T10:00:00"}, "at"),  # no zone
        ({"span_s": float("nan")}, "span_s"),
        ({"evidence": {"x": [1]}}, "evidence.x"),
        ({"errors": "none"}, "errors"),
        ({"figures": {"ns_per_day": {"value": -1, "higher_is_better": True}}}, "figures.ns_per_day.value"),
        ({"evidence": {f"e{i}": "x" * 500 for i in range(200)}}, "record"),  # over 64 KiB
    ],
)
def test_a_record_of_the_wrong_shape_is_one_line_naming_the_field(tmp_path, change, field):
    with pytest.raises(EpilogRecordError) as err:
        append_epilog(str(tmp_path / "H"), record(**change))
    text = str(err.value)
    assert text.startswith(f"epilog record: {field}: expected") and "\n" not in text
    assert not (tmp_path / "H" / SPOOL).exists() or not any((tmp_path / "H" / SPOOL).iterdir())


def test_a_directory_holding_only_the_spool_becomes_a_history_and_collect_ingests_it(tmp_path):
    root = tmp_path / "H"
    for job in ("1", "2", "3"):
        append_epilog(str(root), record(job=job))
    (root / SPOOL / "junk.json").write_text("{not json")
    jobs = open_jobs(str(root))
    stored, damaged = jobs.ingest_evidence()
    assert stored == 3 and len(damaged) == 1 and "junk.json" in damaged[0]
    assert not list((root / SPOOL).glob("*.json"))  # ingested (the junk set aside as .junk.json.bad)
    assert (root / SPOOL / ".junk.json.bad").exists()
    table, _ = DirectoryHistory(root).read_table("job_evidence")
    assert sorted(table.column("job_id").to_pylist()) == ["1", "2", "3"]
    append_epilog(str(root), record(job="3", at="2026-11-02T11:00:00Z", evidence={"mce.count": 1}))
    got, damaged = read_epilog(str(root))  # table + the spooled newer record of job 3
    assert damaged == [] and len(got) == 3
    assert next(r for r in got if r["job_id"] == "3")["evidence"] == {"mce.count": 1}
    assert jobs.ingest_evidence() == (1, [])
    assert jobs.ingest_evidence() == (0, [])
    got2, _ = read_epilog(str(root))
    assert sorted(map(json.dumps, got2)) == sorted(map(json.dumps, got))
    assert DirectoryHistory(root).read().entries.empty  # still a history the history verbs read


def test_stale_temp_files_of_killed_epilogs_are_removed_fresh_ones_kept(tmp_path):
    spool = tmp_path / SPOOL
    spool.mkdir()
    old, new = spool / ".a.json.123.tmp", spool / ".b.json.124.tmp"
    old.write_text("{")
    new.write_text("{")
    now = time.time()
    os.utime(old, (now - STALE_TEMP_S - 5, now - STALE_TEMP_S - 5))
    assert remove_stale_temps(tmp_path, now) == 1
    assert not old.exists() and new.exists()


psycopg = pytest.importorskip("psycopg")


def test_postgresql_one_insert_per_record_tables_created_on_first_use(postgres_server):
    from pgserver import fresh_database

    url = fresh_database(postgres_server, "epilog")
    append_epilog(url, record())  # no table yet: created, then inserted
    append_epilog(url, record(node="c002"))
    append_epilog(url, record(at="2026-11-02T10:00:09Z", evidence={"load.avg1": 2.5}))
    append_epilog(url, record(at="2026-11-02T09:59:00Z", evidence={"stale": 1}))  # older: does not replace
    got, damaged = read_epilog(url)
    assert damaged == []
    by_node = {r["node"]: r for r in got}
    assert set(by_node) == {"c001", "c002"} and by_node["c001"]["evidence"] == {"load.avg1": 2.5}
    with psycopg.connect(url) as con:
        assert con.execute("SELECT count(*) FROM job_evidence").fetchone() == (2,)
        assert con.execute(
            "SELECT value FROM tailscope_history_meta WHERE key = 'jobs_schema_version'"
        ).fetchone() == ("1",)
