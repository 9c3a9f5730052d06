"""The jobs tables in the site's PostgreSQL history (`postgresql://USER@HOST/DB`).

Created by tailscope beside the history's tables: `tailscope_history_meta` holds `jobs_schema_version`;
creation takes the history's advisory lock (so a thousand epilogs finding no table create it once). The
columns are store/schema.py's JOBS and JOB_EVIDENCE. A job is one row per (cluster, job_id), replaced only
when it changed (a requeued job's last run); an epilog record one row per (cluster, job_id, node), the later
replacing the earlier.

`insert_evidence` is the epilog's path: psycopg only (no pandas, no pyarrow unless the tables must first be
created), one INSERT, a 5 s connect timeout and a 5 s statement timeout.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from tailscope.history import pgconnect
from tailscope.history.location import redact
from tailscope.history.pgconnect import Database, connect
from tailscope.jobs.record import encode, key, latest_records
from tailscope.jobs.tables import SIGNATURE, WriteResult

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

SCHEMA_VERSION = 1
META_KEY = "jobs_schema_version"
CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT_MS = 5000  # the epilog's insert; collect and show set none

MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE IF NOT EXISTS jobs ({jobs}, PRIMARY KEY (cluster, job_id))",
        "CREATE INDEX IF NOT EXISTS jobs_end ON jobs (cluster, end_at)",
        "CREATE TABLE IF NOT EXISTS job_evidence ({job_evidence}, PRIMARY KEY (cluster, job_id, node))",
    ],
}


def migrate(con: Any, location: str) -> None:
    """Create the jobs tables (once per database: under the history's advisory lock)."""
    from tailscope.history.postgres import column_definitions

    columns = {t: column_definitions(t) for t in ("jobs", "job_evidence")}
    pgconnect.migrate(con, location, what="jobs", key=META_KEY, version=SCHEMA_VERSION, migrations=MIGRATIONS,
                      columns=columns)  # fmt: skip


_INSERT_EVIDENCE = (
    "INSERT INTO job_evidence (cluster, job_id, node, at, facts_digest, record, added_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, now()) ON CONFLICT (cluster, job_id, node) DO UPDATE SET "
    "at = EXCLUDED.at, facts_digest = EXCLUDED.facts_digest, record = EXCLUDED.record, added_at = now() "
    "WHERE job_evidence.at <= EXCLUDED.at"
)


def insert_evidence(url: str, record: dict[str, Any]) -> None:
    """One epilog record, one INSERT (the tables created first when this database has none yet)."""
    import psycopg

    cluster, job, node = key(record)
    at = dt.datetime.fromisoformat(str(record["at"]).replace("Z", "+00:00"))
    values = (cluster, job, node, at, str(record.get("facts_digest") or ""), encode(record).decode())
    with connect(url, connect_timeout_s=CONNECT_TIMEOUT_S, statement_timeout_ms=STATEMENT_TIMEOUT_MS) as con:
        try:
            with con.transaction():
                con.execute(_INSERT_EVIDENCE, values)
        except psycopg.errors.UndefinedTable:
            migrate(con, redact(url))
            with con.transaction():
                con.execute(_INSERT_EVIDENCE, values)


class PostgresJobs(Database):
    def _migrate(self, con: Any) -> None:
        migrate(con, self.location)

    def write_jobs(self, jobs: pa.Table) -> WriteResult:
        from tailscope.store.schema import TABLES

        names = TABLES["jobs"].names
        rows = jobs.to_pylist()
        now = dt.datetime.now(dt.UTC)
        with self._connect() as con, con.transaction(), con.cursor() as cur:
            cur.execute("CREATE TEMP TABLE incoming (LIKE jobs) ON COMMIT DROP")
            with cur.copy(f"COPY incoming ({', '.join(names)}) FROM STDIN") as copy:
                for r in rows:
                    copy.write_row([*(r[n] for n in names[:-1]), now])
            keys = ("cluster", "job_id")
            updates = ", ".join(f"{n} = EXCLUDED.{n}" for n in names if n not in keys)
            differs = " OR ".join(f"jobs.{n} IS DISTINCT FROM EXCLUDED.{n}" for n in SIGNATURE)
            cur.execute(
                f"INSERT INTO jobs ({', '.join(names)}) SELECT DISTINCT ON (cluster, job_id) "
                f"{', '.join(names)} FROM incoming ORDER BY cluster, job_id, end_at DESC "
                f"ON CONFLICT (cluster, job_id) DO UPDATE SET {updates} WHERE {differs} RETURNING (xmax = 0)"
            )
            written = [bool(r[0]) for r in cur.fetchall()]
        added = sum(written)
        return WriteResult(added, len(written) - added, len(rows) - len(written))

    def read_jobs(self) -> tuple[pd.DataFrame, list[str]]:
        import pandas as pd

        from tailscope.store.schema import TABLES

        spec = TABLES["jobs"]
        with self._connect() as con, con.cursor() as cur:
            cur.execute(f"SELECT {', '.join(spec.names)} FROM jobs")
            frame = pd.DataFrame(cur.fetchall(), columns=spec.names)
        for col in spec.columns:
            if str(col.type).startswith("timestamp"):
                frame[col.name] = pd.to_datetime(frame[col.name], utc=True).astype("datetime64[us, UTC]")
        return frame, []

    def last_end(self, cluster: str | None) -> pd.Timestamp | None:
        import pandas as pd

        with self._connect() as con, con.cursor() as cur:
            if cluster is None:
                cur.execute("SELECT max(end_at) FROM jobs")
            else:
                cur.execute("SELECT max(end_at) FROM jobs WHERE cluster = %s", (cluster,))
            row = cur.fetchone()
        return None if row is None or row[0] is None else pd.Timestamp(row[0])

    def ingest_evidence(self) -> tuple[int, list[str]]:
        return 0, []  # each epilog inserted its own row

    def read_evidence(self) -> tuple[list[dict[str, Any]], list[str]]:
        records, damaged = [], []
        with self._connect() as con, con.cursor() as cur:
            cur.execute("SELECT cluster, job_id, node, record FROM job_evidence")
            for cluster, job, node, text in cur.fetchall():
                try:
                    records.append(json.loads(text))
                except ValueError:
                    damaged.append(
                        f"{self.location}: epilog record of job {job} on {node} ({cluster}): not JSON"
                    )
        return latest_records(records), damaged
