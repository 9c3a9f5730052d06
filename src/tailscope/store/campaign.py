"""A campaign directory: the manifest, committed Parquet shards, commit records, claims and staging.

Layout (schema version 2):
    DIR/campaign.json                         the manifest (store/manifest.py), rewritten only under the lock
    DIR/.campaign.lock                        flock(2) target: manifest changes, trial claims, commits
    DIR/shards/<table>/<node>.<txid>.<chunk>.parquet    shard files (Parquet, zstd, page checksums)
    DIR/commits/<txid>.json                   commit record: the operation and the exact shard files it made
                                              visible; a shard no commit record names is invisible
    DIR/staging/<txid>/...                    shards of an operation in progress (invisible; removed on abort)
    DIR/claims/<task>.json                    trials a live writer is running (pid, host, boot id)
    DIR/quarantine/                           damaged shards moved aside by `campaign collect`

A write is a transaction (store/load.py): its shards are written and fsynced under `staging/`, then, under
the lock, renamed into `shards/` and named by one commit record written atomically (temp file, fsync,
rename): that rename is the commit point. A crash or a signal before it leaves nothing visible; a retry
starts clean. Readers take no lock: they list the commit records and read exactly the files those name
(never a glob), so a campaign on a shared file system is read while hundreds of nodes write into it.

Version 1 campaigns (before commit records) are read as before: every shard in `shards/` is visible.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

import tailscope
from tailscope.store.errors import StoreError
from tailscope.store.files import check_replaceable, fsync_dir, safe_name, write_atomic_bytes
from tailscope.store.manifest import FORMAT, Manifest, Plan
from tailscope.store.schema import SCHEMA_VERSION, TABLES

MANIFEST = "campaign.json"
SHARDS = "shards"
COMMITS = "commits"
STAGING = "staging"
CLAIMS = "claims"
QUARANTINE = "quarantine"
LOCK = ".campaign.lock"
__all__ = [
    "FORMAT", "MANIFEST", "Campaign", "StoreError", "conform", "fsync_dir", "new_task_id", "safe_name",
    "utcnow", "write_atomic_bytes",
]  # fmt: skip


def new_task_id() -> str:
    """A writer id unique across nodes and processes (also the shard-name component)."""
    return uuid.uuid4().hex[:12]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@contextlib.contextmanager
def atomic_files() -> Iterator[Callable[[Path, bytes], None]]:
    """Write several files all or none (a report and its CSV tables): `write(path, data)` writes each to a
    temp file beside it (fsynced, its bytes freed at once); only when the block ends without an error are
    they all renamed into place. On any failure (disk full, interrupt, an error between the writes) the
    temp files are removed and no target was touched."""
    temps: list[tuple[Path, Path]] = []

    def write(path: Path, data: bytes) -> None:
        check_replaceable(path)  # a device or FIFO given as the report: refused before any temp file
        tmp = path.with_name(f".{path.name[:150]}.{os.getpid()}.tmp")
        temps.append((tmp, path))
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    try:
        yield write
        for tmp, path in temps:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    for directory in {path.parent for _, path in temps}:
        fsync_dir(directory)


def this_host() -> str:
    return socket.gethostname()


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start_ticks(pid: int) -> int | None:
    """Start of a process in clock ticks since boot (field 22 of /proc/PID/stat): tells pid reuse apart."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(text[text.rindex(")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


def owner_record() -> dict[str, Any]:
    """Who is writing: enough to tell later whether that writer is still alive."""
    pid = os.getpid()
    return {"pid": pid, "host": this_host(), "boot_id": boot_id(), "start": process_start_ticks(pid)}


def owner_alive(owner: dict[str, Any]) -> bool:
    """Whether the writer described by `owner_record()` still runs. A writer on another host (or another boot
    of this one) cannot be checked from here: it is taken as alive on another host, dead after a reboot."""
    if owner.get("host") != this_host():
        return True
    if owner.get("boot_id") and owner.get("boot_id") != boot_id():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    start = process_start_ticks(pid)
    return start is not None and (owner.get("start") is None or start == owner.get("start"))


def describe_owner(owner: dict[str, Any]) -> str:
    return f"pid {owner.get('pid')} on {owner.get('host')}"


@dataclass(frozen=True)
class CommitRecord:
    txid: str
    operation: str
    committed_at: str
    shards: dict[str, list[str]]  # table -> file names in shards/<table>/
    sources: list[dict[str, str]]  # {"sha256", "description"} of imported files
    # table -> file name -> hash of the shard's Parquet footer (store/footer.py); empty in records written
    # before footer hashes (their shards are read unchecked, as before)
    footers: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> CommitRecord:
        try:
            data = json.loads(path.read_bytes())  # bytes: 1,000 records in 34-52 ms, 43-63 ms through text
            shards = {str(t): [str(n) for n in names] for t, names in data["shards"].items()}
            for names in shards.values():
                for name in names:
                    if "/" in name or name.startswith("."):
                        raise ValueError(f"shard name {name!r}")
            footers = {
                str(t): {str(n): str(h) for n, h in per_table.items()}
                for t, per_table in data.get("footers", {}).items()
            }
            return cls(
                str(data["txid"]),
                str(data.get("operation", "")),
                str(data.get("committed_at", "")),
                shards,
                [dict(s) for s in data.get("sources", [])],
                footers,
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(
                f"{path}: damaged commit record ({exc}); move it aside and run "
                f"`tailscope campaign collect {path.parent.parent}`"
            ) from exc


@dataclass
class Campaign:
    """An open campaign directory."""

    root: Path
    manifest: Manifest
    # commit records parsed so far, by file name: a record never changes once written, so each is read once
    # per Campaign object however many tables are read (a fleet campaign holds thousands)
    _records: dict[str, CommitRecord] = field(default_factory=dict, init=False, repr=False, compare=False)
    # what shard_files and footer_digests derived from the commit records, while the listing of commit
    # records is the one they were derived from (`_listing`): a report asks ~19 times, 1,000 records each
    _listing: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    _derived: dict[tuple[str, str], Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    # --- creation and opening --------------------------------------------------------------------
    @staticmethod
    def new_manifest(root: Path, name: str | None = None) -> Manifest:
        return Manifest(
            campaign_id=uuid.uuid4().hex,
            name=name or Path(root).resolve().name,
            created=utcnow().isoformat(timespec="seconds"),
            tool_version=tailscope.__version__,  # importlib.metadata: looked up when a campaign is made
            schema_version=SCHEMA_VERSION,
        )

    @classmethod
    def create(cls, root: Path, *, name: str | None = None) -> Campaign:
        """Create an empty campaign (used by `campaign submit`, which writes its scripts beside it). Refused
        when one exists. Writers that store data use `store.load.load_into`, which creates the manifest only
        at the first commit."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        campaign = cls(root, cls.new_manifest(root, name))
        with campaign.lock():
            if (root / MANIFEST).exists():
                raise StoreError(f"{root / MANIFEST}: a campaign already exists here")
            write_atomic_bytes(root / MANIFEST, campaign.manifest.dump())
        return campaign

    @classmethod
    def open(cls, root: Path) -> Campaign:
        root = Path(root)
        path = root / MANIFEST
        if not path.is_file():
            if root.exists() and not root.is_dir():
                raise StoreError(f"{root}: not a directory (expected a tailscope campaign directory)")
            raise StoreError(f"{root}: not a tailscope campaign (no {MANIFEST})")
        return cls(root, Manifest.load(path))

    @classmethod
    def open_or_create(cls, root: Path, *, name: str | None = None) -> Campaign:
        if (Path(root) / MANIFEST).exists():
            return cls.open(root)
        try:
            return cls.create(root, name=name)
        except StoreError:  # another process created it between the check and the lock
            return cls.open(root)

    @property
    def campaign_id(self) -> str:
        return self.manifest.campaign_id

    @property
    def uses_commit_records(self) -> bool:
        return self.manifest.schema_version >= 2

    # --- the lock and the manifest ---------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive campaign lock (flock on DIR/.campaign.lock): local disks, and Lustre/GPFS/NFS with
        flock support. Where the file system refuses flock the error says so (see the README)."""
        with open(self.root / LOCK, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX)
            except OSError as exc:
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    raise StoreError(
                        f"{self.root / LOCK}: the file system does not support flock ({exc.strerror}); "
                        "mount it with flock enabled (Lustre: -o flock; NFS: a lock manager) or use a local "
                        "campaign directory"
                    ) from exc
                raise
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def reload_manifest(self) -> Manifest:
        self.manifest = Manifest.load(self.root / MANIFEST)
        return self.manifest

    def update_manifest(self, change: Callable[[Manifest], None], *, locked: bool = False) -> None:
        """Re-read, change and atomically rewrite the manifest under the lock (unchanged: not rewritten)."""
        context = contextlib.nullcontext() if locked else self.lock()
        with context:
            current = self.reload_manifest()
            before = current.dump()
            change(current)
            after = current.dump()
            if after != before:
                write_atomic_bytes(self.root / MANIFEST, after)

    def add_plan(self, plan: Plan) -> None:
        """Record that `plan.trials` trials of `plan.variant` are wanted (per node); idempotent."""
        self.update_manifest(lambda m: m.add_plan(plan))

    # --- committed shards (the read side) --------------------------------------------------------
    def shard_dir(self, table: str) -> Path:
        if table not in TABLES:
            raise KeyError(f"unknown table {table!r}")
        return self.root / SHARDS / table

    def commit_records(self) -> list[CommitRecord]:
        directory = self.root / COMMITS
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
        except FileNotFoundError:
            return []
        for name in names:
            if name not in self._records:
                self._records[name] = CommitRecord.load(directory / name)
        if names != self._listing:  # a commit came (or went): what was derived from the last listing is stale
            self._listing, self._derived = names, {}
        return [self._records[n] for n in names]

    def shard_files(self, table: str) -> list[Path]:
        """The committed shard files of `table`: exactly the files commit records name (version 1: every
        `.parquet` file in the table's directory). Never a glob: a campaign path may hold `[`, `*`, `\\`."""
        directory = self.shard_dir(table)
        if not self.uses_commit_records:
            try:
                return sorted(directory / n for n in os.listdir(directory) if n.endswith(".parquet"))
            except FileNotFoundError:
                return []
        # sorted by name (one directory: the order of the paths), not as Paths: 1,000 shards of runs sorted
        # as Paths cost 0.03-0.05 s per call, and a read asks several times
        def paths(records: list[CommitRecord]) -> list[Path]:
            return [directory / n for n in sorted(n for r in records for n in r.shards.get(table, []))]

        return list(self._derive(("shards", table), paths))

    def footer_digests(self, table: str) -> dict[str, str]:
        """file name -> the footer hash its commit recorded, for the committed shards of `table` that have
        one (store/footer.py)."""
        if not self.uses_commit_records:
            return {}
        def digests(records: list[CommitRecord]) -> dict[str, str]:
            return {n: h for r in records for n, h in r.footers.get(table, {}).items()}

        return dict(self._derive(("footers", table), digests))

    def _derive(self, key: tuple[str, str], build: Callable[[list[CommitRecord]], Any]) -> Any:
        """`build(commit records)`, kept under `key` while the listing of commit records stays the same."""
        records = self.commit_records()  # a changed listing empties what was kept
        if key not in self._derived:
            self._derived[key] = build(records)
        return self._derived[key]

    def imported_sources(self) -> dict[str, CommitRecord]:
        """sha256 of every imported file -> the commit that stored it."""
        return {s["sha256"]: rec for rec in self.commit_records() for s in rec.sources if "sha256" in s}


def conform(data: pa.Table, table: str) -> pa.Table:
    """Return `data` with exactly the table's columns, order and types; refuse missing required columns."""
    spec = TABLES[table]
    arrays = []
    for col in spec.columns:
        if col.name in data.column_names:
            arr = data.column(col.name)
            if not arr.type.equals(col.type):
                try:
                    arr = arr.cast(col.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise StoreError(
                        f"table {table}: column {col.name!r}: expected {col.type} ({exc})"
                    ) from exc
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
