"""The jobs tables in a history directory: appended through the history's transactions (one commit record
per collect, the history's lock, its compaction keeping the latest row per key), read through its one read
path (a damaged shard is named and left out)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from tailscope.history.directory import DirectoryHistory
from tailscope.jobs.record import encode, key, latest_records
from tailscope.jobs.spool import read_spool, remove_stale_temps
from tailscope.jobs.tables import WriteResult, changes, latest_jobs
from tailscope.store.campaign import utcnow
from tailscope.store.schema import TABLES


class DirectoryJobs:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.location = str(self.root)
        self.history = DirectoryHistory(self.root)

    def write_jobs(self, jobs: pa.Table) -> WriteResult:
        stored, _ = self.read_jobs()
        incoming = jobs.to_pandas()
        write, result = changes(incoming, stored)
        if write.any():
            rows = pa.Table.from_pandas(
                incoming[write.to_numpy()].assign(added_at=utcnow()),
                schema=TABLES["jobs"].schema,
                preserve_index=False,
            )
            self.history.append({"jobs": rows}, "jobs collect")
        return result

    def read_jobs(self) -> tuple[pd.DataFrame, list[str]]:
        table, damaged = self.history.read_table("jobs")
        return latest_jobs(table.to_pandas()), damaged

    def last_end(self, cluster: str | None) -> pd.Timestamp | None:
        table, _ = self.history.read_table("jobs", ["cluster", "end_at"])
        frame = table.to_pandas()
        if cluster is not None:
            frame = frame[frame["cluster"] == cluster]
        return None if frame.empty else pd.Timestamp(frame["end_at"].max())

    def ingest_evidence(self) -> tuple[int, list[str]]:
        remove_stale_temps(self.root)
        spooled = read_spool(self.root)
        for path in spooled.bad_files:  # kept for a person to read, out of the way of the next ingest
            with contextlib.suppress(OSError):
                os.replace(path, path.with_name(f".{path.name}.bad"))
        if spooled.records:
            now = utcnow()
            rows = [_evidence_row(r, now) for r in spooled.records]
            self.history.append(
                {"job_evidence": pa.Table.from_pylist(rows, schema=TABLES["job_evidence"].schema)},
                "jobs epilog ingest",
            )
            for path in spooled.files:  # stored: a crash before these unlinks stores them again, once per key
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        return len(spooled.records), spooled.damaged

    def read_evidence(self) -> tuple[list[dict[str, Any]], list[str]]:
        table, damaged = self.history.read_table("job_evidence", ["record"])
        records: list[dict[str, Any]] = []
        for text in table.column("record").to_pylist():
            try:
                records.append(json.loads(text))
            except ValueError:
                damaged.append(f"{self.root}: an epilog record in job_evidence is not JSON; left out")
        spooled = read_spool(self.root)  # not yet ingested (show writes nothing)
        return latest_records(records + spooled.records), damaged + spooled.damaged


def _evidence_row(record: dict[str, Any], now: Any) -> dict[str, Any]:
    cluster, job, node = key(record)
    return {
        "cluster": cluster,
        "job_id": job,
        "node": node,
        "at": pd.Timestamp(record["at"]).to_pydatetime(),
        "facts_digest": str(record.get("facts_digest") or ""),
        "record": encode(record).decode(),
        "added_at": now,
    }
