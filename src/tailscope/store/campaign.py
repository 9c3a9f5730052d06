"""A campaign directory: `campaign.json` (the manifest) plus Parquet shards, one per (table, node, task,
chunk).

Layout:
    DIR/campaign.json                     manifest: format, schema version, id, created, tool version, plans
    DIR/shards/<table>/<node>.<task>.<chunk>.parquet

Writers never share a file: each writer process has its own `task` id and numbers its own chunks, so hundreds
of nodes can write into one directory on a shared file system without locks. Every shard is written to a
temporary name, fsynced, then renamed (atomic on POSIX file systems); a reader never sees half a shard.
Within one chunk the `runs` shard is written last: it is the commit record, and the views only show child rows
(iterations, pages, counters) of runs that exist (see `views.py`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tailscope import __version__
from tailscope.store.schema import SCHEMA_VERSION, TABLES, check_schema_version

MANIFEST = "campaign.json"
SHARDS = "shards"
FORMAT = "tailscope-campaign"

# A node or task name becomes part of a file name: keep letters, digits, '-', '_' and '.', replace the rest.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class StoreError(Exception):
    """Bad or unreadable store content; the message names the file and what was expected."""


def safe_name(text: str) -> str:
    cleaned = _UNSAFE.sub("_", text).strip(".")
    return cleaned or "_"


def new_task_id() -> str:
    """A writer id unique across nodes and processes (also the shard-name component)."""
    return uuid.uuid4().hex[:12]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically: temp file in the same directory, fsync, rename, fsync directory."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


@dataclass
class Campaign:
    """An open campaign directory."""

    root: Path
    manifest: dict[str, Any]

    # --- creation and opening -------------------------------------------------------------------------
    @classmethod
    def create(cls, root: Path, *, name: str | None = None) -> Campaign:
        root = Path(root)
        if (root / MANIFEST).exists():
            raise StoreError(f"{root / MANIFEST}: a campaign already exists here")
        root.mkdir(parents=True, exist_ok=True)
        for table in TABLES:
            (root / SHARDS / table).mkdir(parents=True, exist_ok=True)
        manifest = {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "campaign_id": uuid.uuid4().hex,
            "name": name or root.name,
            "created": utcnow().isoformat(timespec="seconds"),
            "tool_version": __version__,
            "plans": [],
        }
        write_atomic_bytes(root / MANIFEST, _dump(manifest))
        return cls(root, manifest)

    @classmethod
    def open(cls, root: Path) -> Campaign:
        root = Path(root)
        path = root / MANIFEST
        if not path.is_file():
            raise StoreError(f"{root}: not a tailscope campaign (no {MANIFEST})")
        try:
            manifest = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise StoreError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise StoreError(f'{path}: not a tailscope campaign manifest (expected "format": "{FORMAT}")')
        check_schema_version(manifest.get("schema_version"), str(path))
        for table in TABLES:
            (root / SHARDS / table).mkdir(parents=True, exist_ok=True)
        return cls(root, manifest)

    @classmethod
    def open_or_create(cls, root: Path, *, name: str | None = None) -> Campaign:
        if (Path(root) / MANIFEST).exists():
            return cls.open(root)
        return cls.create(root, name=name)

    @property
    def campaign_id(self) -> str:
        return str(self.manifest["campaign_id"])

    # --- manifest ----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _manifest_lock(self) -> Iterator[None]:
        lock_path = self.root / ".campaign.lock"
        with open(lock_path, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def update_manifest(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Re-read, change and atomically rewrite the manifest under a lock (local writers only)."""
        with self._manifest_lock():
            current = json.loads((self.root / MANIFEST).read_text())
            change(current)
            write_atomic_bytes(self.root / MANIFEST, _dump(current))
            self.manifest = current

    def add_plan(self, plan: dict[str, Any]) -> None:
        """Record that `plan["trials"]` trials of `plan["variant"]` are wanted (per node); idempotent."""

        def change(manifest: dict[str, Any]) -> None:
            plans = manifest.setdefault("plans", [])
            for existing in plans:
                if existing["variant"] == plan["variant"]:
                    existing["trials"] = max(int(existing["trials"]), int(plan["trials"]))
                    return
            plans.append(plan)

        self.update_manifest(change)

    # --- shards --------------------------------------------------------------------------------------------
    def shard_dir(self, table: str) -> Path:
        if table not in TABLES:
            raise KeyError(f"unknown table {table!r}")
        return self.root / SHARDS / table

    def shard_files(self, table: str) -> list[Path]:
        return sorted(self.shard_dir(table).glob("*.parquet"))

    def write_shard(self, table: str, data: pa.Table, *, node: str, task: str, chunk: int) -> Path:
        """Write one shard atomically after checking it against the table's schema."""
        data = conform(data, table)
        path = self.shard_dir(table) / f"{safe_name(node)}.{safe_name(task)}.{chunk:06d}.parquet"
        if path.exists():
            raise StoreError(f"{path}: shard already exists (task ids must be unique per writer)")
        sink = pa.BufferOutputStream()
        pq.write_table(data, sink, compression="zstd")
        write_atomic_bytes(path, sink.getvalue().to_pybytes())
        return path

    def write_chunk(self, tables: dict[str, pa.Table], *, node: str, task: str, chunk: int) -> list[Path]:
        """Write the shards of one chunk: child tables first, `runs` (the commit record) last."""
        written = []
        for name in sorted(tables, key=lambda t: t == "runs"):
            if tables[name].num_rows:
                written.append(self.write_shard(name, tables[name], node=node, task=task, chunk=chunk))
        return written


def conform(data: pa.Table, table: str) -> pa.Table:
    """Return `data` with exactly the table's columns, order and types; refuse missing required columns."""
    spec = TABLES[table]
    arrays = []
    for col in spec.columns:
        if col.name in data.column_names:
            arr = data.column(col.name)
            if not arr.type.equals(col.type):
                arr = arr.cast(col.type)
        elif col.nullable:
            arr = pa.nulls(data.num_rows, type=col.type)
        else:
            raise StoreError(f"table {table}: required column {col.name!r} missing")
        if not col.nullable and arr.null_count:
            raise StoreError(f"table {table}: column {col.name!r} has {arr.null_count} null values")
        arrays.append(arr)
    extra = set(data.column_names) - set(spec.names)
    if extra:
        raise StoreError(f"table {table}: unknown columns {sorted(extra)}")
    return pa.Table.from_arrays(arrays, schema=spec.schema)


def _dump(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
