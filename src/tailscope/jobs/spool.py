"""The epilog's spool in a history directory: `HISTORY/jobs-epilog-spool/`, one small JSON file per (cluster,
job, node), written atomically (temp file, fsync, rename) by `append_epilog`; created on the first record,
even before any collect made the history (history/directory.py lets a directory holding only the spool become
a history). Nothing here imports pyarrow or pandas: it runs in every epilog."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailscope.jobs.record import MAX_RECORD_BYTES, EpilogRecordError, checked, encode, key
from tailscope.store.files import safe_name, write_atomic_bytes

SPOOL = "jobs-epilog-spool"  # history/directory.py names it too: what an otherwise empty directory may hold
STALE_TEMP_S = 3600.0  # a temp file older than this is an epilog killed mid-write: removed by the next ingest


def spool_name(record: dict[str, Any]) -> str:
    """One file per (cluster, job, node): readable, and unique by a hash of the exact key (two keys that the
    file-name cleaning would make alike stay apart)."""
    cluster, job, node = key(record)
    digest = hashlib.sha1("\x00".join((cluster, job, node)).encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe_name(job)[:40]}.{safe_name(node)[:40]}.{digest}.json"


def write_record(root: Path, record: dict[str, Any]) -> Path:
    """A checked record into `root`'s spool (the directory made when missing)."""
    spool = Path(root) / SPOOL
    spool.mkdir(parents=True, exist_ok=True)
    path = spool / spool_name(record)
    write_atomic_bytes(path, encode(record))
    return path


@dataclass
class Spooled:
    """The records found in a spool, the files they came from, and the files that could not be read."""

    records: list[dict[str, Any]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)
    bad_files: list[Path] = field(default_factory=list)


def read_spool(root: Path) -> Spooled:
    """Every record in `root`'s spool (bounded reads; a file that is not a record is named, not fatal)."""
    out = Spooled()
    spool = Path(root) / SPOOL
    try:
        names = sorted(os.listdir(spool))
    except FileNotFoundError:
        return out
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        path = spool / name
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_RECORD_BYTES + 1)
        except FileNotFoundError:  # ingested meanwhile by another collect
            continue
        try:
            if len(data) > MAX_RECORD_BYTES:
                raise ValueError(f"more than {MAX_RECORD_BYTES} bytes")
            out.records.append(checked(json.loads(data)))
            out.files.append(path)
        except (ValueError, EpilogRecordError) as exc:
            out.damaged.append(f"{path}: not an epilog record ({exc}); left out")
            out.bad_files.append(path)
    return out


def remove_stale_temps(root: Path, now: float | None = None) -> int:
    """Remove the temp files of epilogs killed mid-write (older than STALE_TEMP_S); how many."""
    now = time.time() if now is None else now
    removed = 0
    with contextlib.suppress(FileNotFoundError), os.scandir(Path(root) / SPOOL) as entries:
        for entry in entries:
            if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    if now - entry.stat().st_mtime > STALE_TEMP_S:
                        os.unlink(entry.path)
                        removed += 1
    return removed
