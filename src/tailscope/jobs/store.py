"""Where the jobs live: the history's `jobs` and `job_evidence` tables (a history directory, or PostgreSQL),
and the epilog's append.

`append_epilog(location, record)` runs in Slurm's epilog on every node of every job, so it is cheap: it
imports neither pyarrow nor pandas. A directory history gets one small JSON file written atomically in its
spool (jobs/spool.py: `HISTORY/jobs-epilog-spool/`); the next `jobs collect` ingests the spool into the
`job_evidence` table in one transaction and then removes the files it stored (a file ingested twice is one
row: the key is (cluster, job_id, node), the latest epilog wins). `jobs show` reads the table and the files
not yet ingested, and writes nothing. A PostgreSQL history gets one INSERT (jobs/postgres.py).

`open_jobs(location)` gives the store that `jobs collect` writes and the analysis reads (store/schema.py:
JOBS, JOB_EVIDENCE; idempotent: a job collected again unchanged is not written again; a requeued job is one
job, its last run).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tailscope.history.location import is_url
from tailscope.jobs.record import checked
from tailscope.jobs.spool import write_record

if TYPE_CHECKING:  # not on the epilog's path
    import pandas as pd
    import pyarrow as pa

    from tailscope.jobs.tables import WriteResult

__all__ = ["JobsStore", "append_epilog", "open_jobs", "read_epilog"]


def append_epilog(location: str, record: dict[str, Any]) -> None:
    """Store one epilog record (tailscope.jobs.record) in the history at `location` (a directory or a
    postgresql:// URL). Raises EpilogRecordError for a record of the wrong shape, StoreError or OSError when
    it cannot be stored; the epilog turns any of them into one log line and exit 0."""
    rec = checked(record)
    text = str(location)
    if is_url(text):
        from tailscope.jobs.postgres import insert_evidence

        insert_evidence(text, rec)
    else:
        write_record(Path(text), rec)


def read_epilog(location: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every epilog record stored at `location` (the latest per job and node, spooled ones included), and the
    damaged ones left out (one line each)."""
    return open_jobs(location).read_evidence()


class JobsStore(Protocol):
    location: str

    def write_jobs(self, jobs: pa.Table) -> WriteResult:
        """Store finished jobs (a JOBS-schema table); a job already stored unchanged is not written again."""
        ...

    def read_jobs(self) -> tuple[pd.DataFrame, list[str]]:
        """The latest version of every job, and the damaged parts left out."""
        ...

    def last_end(self, cluster: str | None) -> pd.Timestamp | None:
        """The latest end time stored (of `cluster`'s jobs when given): where a collect starts."""
        ...

    def ingest_evidence(self) -> tuple[int, list[str]]:
        """Spooled epilog records into the job_evidence table (a directory; PostgreSQL has nothing to do)."""
        ...

    def read_evidence(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Every epilog record (the latest per job and node), and the damaged ones left out."""
        ...


def open_jobs(location: str | Path) -> JobsStore:
    text = str(location)
    if is_url(text):
        from tailscope.jobs.postgres import PostgresJobs

        return PostgresJobs(text)
    from tailscope.jobs.directory import DirectoryJobs

    return DirectoryJobs(Path(text))
