"""The one load path: every writer (the local runner, the Slurm steps, every importer, the monitor) stores
through a `Transaction`, so an operation is all or nothing.

    with load_into(campaign_dir, operation="import likwid-csv", create=True) as load:
        trials = load.claim_next_trials(node, variant, count)   # numbers nobody stored or holds (locked)
        load.write("runs", table, node=node)                   # staged; call as often as needed (streaming)
        load.add_plan(plan)                                    # manifest changes, applied at commit
    # normal exit: everything visible at once; an exception, SIGINT or SIGTERM: nothing visible, nothing left

Commit (under the campaign lock, SIGINT/SIGTERM deferred): create the manifest if this operation creates the
campaign, apply the manifest changes, rename the staged shards into `shards/`, fsync, then write the commit
record (the commit point). Abort: remove the staging directory and the claim, and the campaign directory
itself when this operation created it and nothing else is in it.

A run's iterations are written in the transaction that writes the run (every writer does: the runner, the
importers, trace): the read path reads the iterations of some runs from the shards of their commits only
(store/read.py, `iterations(run_ids)`). A writer that adds iterations to a run stored earlier breaks that.

Trial numbers are claimed under the campaign lock: a claim file names the trials and the writer (pid, host,
boot id), so two writers never store one trial twice, and a writer that died leaves a claim that the next one
recognises as stale (same host) and ignores.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tailscope.store.campaign import (
    CLAIMS,
    COMMITS,
    LOCK,
    MANIFEST,
    SHARDS,
    STAGING,
    Campaign,
    CommitRecord,
    describe_owner,
    fsync_dir,
    new_task_id,
    owner_alive,
    owner_record,
    safe_name,
    utcnow,
    write_atomic_bytes,
)
from tailscope.store.errors import CampaignBusyError, StoreError
from tailscope.store.files import named
from tailscope.store.footer import footer_digest
from tailscope.store.manifest import Manifest, Plan
from tailscope.store.schema import TABLES

PARQUET_OPTIONS: dict[str, Any] = {"write_page_checksum": True}
# The codec of a shard: LZ4 below ZSTD_FROM_BYTES of Arrow data, zstd from there on. A zstd column chunk
# costs ~30 us to open whatever its size, and a campaign is mostly small shards (one node's chunk of trials):
# reading the 18 columns `analyze` needs from 1,000 runs shards took 0.79 s with zstd and 0.49 s with LZ4
# (6% larger files); a large shard (background samples) keeps zstd's smaller file.
ZSTD_FROM_BYTES = 1 << 20


def shard_codec(data: pa.Table) -> str:
    return "zstd" if data.nbytes >= ZSTD_FROM_BYTES else "lz4"


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns written with a Parquet dictionary: all but floating point ones. Measured values are
    nearly all distinct, so a dictionary is built and then dropped (76,000 samples: 3 of the 9 ms of the
    write); names, units and sample numbers repeat and shrink with one."""
    return [f.name for f in schema if not pa.types.is_floating(f.type)]


def statistics_columns(schema: pa.Schema) -> list[str]:
    """The columns whose min/max each shard's footer keeps: numbers, times and `node` (what a reader outside
    tailscope filters shards by). The other text columns' min/max cost 0.6 ms each per 76,000-sample shard
    (a quarter of its write) and nothing reads them: tailscope's read path reads whole shards."""
    return [f.name for f in schema if f.name == "node" or not pa.types.is_string(f.type)]


# --- signals ------------------------------------------------------------------------------------
@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for a short critical section; a signal that arrives is delivered after it.

    In the main thread their handlers are swapped for one that notes them, and a noted signal is raised
    again once the old handlers are back. A handler is the process's: the kernel hands a signal sent to the
    process to any thread that does not block it (a store read's worker, an evidence collector), and Python
    runs its handler in the main thread all the same, so blocking the main thread's signal mask alone let a
    Ctrl-C through mid-section whenever another thread was alive. Elsewhere (only the main thread may set
    handlers, and Python runs none in other threads) the calling thread's mask blocks them.
    """
    wanted = (signal.SIGINT, signal.SIGTERM)
    import threading

    old = {s: signal.getsignal(s) for s in wanted}
    if threading.current_thread() is not threading.main_thread() or None in old.values():
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)  # (a handler set outside Python: kept)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    arrived: list[int] = []

    def note(signum: int, frame: object) -> None:
        arrived.append(signum)

    for s in wanted:
        signal.signal(s, note)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for s in dict.fromkeys(arrived):  # each once, in the order they came: the old handler takes it now
            signal.raise_signal(s)


# --- claims -------------------------------------------------------------------------------------
@dataclass
class Claim:
    key: str
    node: str
    trials: dict[str, list[int]]
    owner: dict[str, Any]
    operation: str

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "node": self.node,
            "trials": self.trials,
            "owner": self.owner,
            "operation": self.operation,
        }


def _claims_dir(root: Path) -> Path:
    return root / CLAIMS


def live_claims(root: Path, *, exclude: str | None = None) -> list[Claim]:
    """Claims of writers that still run (call under the lock: stale claims of dead local writers go)."""
    directory = _claims_dir(root)
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        path = directory / name
        try:
            data = json.loads(path.read_text())
            claim = Claim(
                str(data["key"]),
                str(data["node"]),
                {str(v): [int(t) for t in ts] for v, ts in data["trials"].items()},
                dict(data["owner"]),
                str(data.get("operation", "")),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            with contextlib.suppress(OSError):
                path.unlink()  # a claim file cut short by a crash claims nothing
            continue
        if claim.key == exclude:
            continue
        if not owner_alive(claim.owner):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        out.append(claim)
    return out


def write_claim(root: Path, claim: Claim) -> None:
    directory = _claims_dir(root)
    directory.mkdir(exist_ok=True)
    write_atomic_bytes(directory / f"{safe_name(claim.key)}.json", json.dumps(claim.to_json()).encode())


def release_claim(root: Path, key: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_claims_dir(root) / f"{safe_name(key)}.json")


def held_trials(claims: Iterable[Claim], node: str) -> dict[str, dict[int, Claim]]:
    """variant -> trial -> the claim holding it, for one node."""
    out: dict[str, dict[int, Claim]] = {}
    for claim in claims:
        if claim.node != node:
            continue
        for variant, trials in claim.trials.items():
            for trial in trials:
                out.setdefault(variant, {})[trial] = claim
    return out


# --- the transaction ----------------------------------------------------------------------------
class AlreadyImported(StoreError):
    """A file whose content (sha256 of its bytes) the campaign already holds: checked inside the lock."""


@dataclass(frozen=True)
class Savepoint:
    """How much a transaction had staged at one moment (Transaction.savepoint)."""

    staged: dict[str, int]  # table -> shards staged
    rows: dict[str, int]
    sources: int
    changes: int


@dataclass
class Transaction:
    root: Path
    operation: str
    txid: str = field(default_factory=new_task_id)
    name: str | None = None
    create: bool = False
    new_manifest: Manifest | None = None  # the manifest to create the campaign with (default: a fresh one)

    manifest: Manifest = field(init=False)
    created_root: bool = field(init=False, default=False)
    exists: bool = field(init=False, default=False)
    _changes: list[Callable[[Manifest], None]] = field(init=False, default_factory=list)
    _staged: dict[str, list[str]] = field(init=False, default_factory=dict)
    _rows: dict[str, int] = field(init=False, default_factory=dict)
    _footers: dict[str, dict[str, str]] = field(init=False, default_factory=dict)  # table -> name -> hash
    _sources: list[dict[str, str]] = field(init=False, default_factory=list)
    _chunks: dict[tuple[str, str], int] = field(init=False, default_factory=dict)
    _claimed: dict[str, dict[str, list[int]]] = field(init=False, default_factory=dict)  # node -> variant
    _imported: dict[str, CommitRecord] | None = field(init=False, default=None)  # sha256 -> its commit
    _done: bool = field(init=False, default=False)
    committed: bool = field(init=False, default=False)  # the commit point was passed (the data is visible)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        if (self.root / MANIFEST).is_file():
            self.exists = True
            self.manifest = Campaign.open(self.root).manifest
        elif not self.create:
            Campaign.open(self.root)  # raises the clear "not a campaign" error
        else:
            if self.root.exists() and not self.root.is_dir():
                raise StoreError(f"{self.root}: not a directory (expected a campaign directory)")
            self.created_root = not self.root.exists()
            self.manifest = self.new_manifest or Campaign.new_manifest(self.root, self.name)
        self.root.mkdir(parents=True, exist_ok=True)

    # --- what the operation writes ---------------------------------------------------------------
    @property
    def campaign_id(self) -> str:
        return self.manifest.campaign_id

    @property
    def staging(self) -> Path:
        return self.root / STAGING / self.txid

    def campaign(self) -> Campaign:
        """The campaign as this transaction sees it (its manifest includes the pending changes)."""
        return Campaign(self.root, self.manifest)

    def write(self, table: str, data: pa.Table, *, node: str) -> None:
        """Stage one shard of `table` (checked against the schema); nothing is visible before commit."""
        from tailscope.store.campaign import conform

        if self._done:
            raise RuntimeError("transaction already finished")
        if data.num_rows == 0:
            return
        data = conform(data, table)
        key = (table, node)
        chunk = self._chunks.get(key, 0) + 1
        self._chunks[key] = chunk
        name = f"{safe_name(node)}.{self.txid}.{chunk:06d}.parquet"
        if not self.staging.is_dir():  # created whole (with its owner) so a collector never sees it half-made
            fresh = self.root / STAGING / f".{self.txid}.new"
            with signals_deferred():
                fresh.mkdir(parents=True)
                (fresh / OWNER).write_text(json.dumps(owner_record()))
                os.rename(fresh, self.staging)
        directory = self.staging / table
        directory.mkdir(exist_ok=True)
        path = directory / name
        try:
            with open(path, "wb") as fh:
                pq.write_table(
                    data,
                    fh,
                    compression=shard_codec(data),
                    use_dictionary=dictionary_columns(data.schema),
                    write_statistics=statistics_columns(data.schema),
                    **PARQUET_OPTIONS,
                )
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:  # the disk is full: name the campaign (the staged file goes with the abort)
            raise named(exc, self.root) from exc
        self._footers.setdefault(table, {})[name] = footer_digest(path)
        self._staged.setdefault(table, []).append(name)
        self._rows[table] = self._rows.get(table, 0) + data.num_rows

    def write_tables(self, tables: Mapping[str, pa.Table], *, node: str) -> None:
        for table, data in tables.items():
            self.write(table, data, node=node)

    @property
    def rows_staged(self) -> dict[str, int]:
        return dict(self._rows)

    def savepoint(self) -> Savepoint:
        """What is staged now, to go back to with `rollback_to` (an importer that stages one file of several
        and finds that file must be read again another way)."""
        return Savepoint(
            {table: len(names) for table, names in self._staged.items()},
            dict(self._rows),
            len(self._sources),
            len(self._changes),
        )

    def rollback_to(self, point: Savepoint) -> None:
        """Unstage every shard and source staged since `point` (their files are removed). Manifest changes
        are applied as they are made, so none may have been made since."""
        if self._done:
            raise RuntimeError("transaction already finished")
        if len(self._changes) != point.changes:
            raise RuntimeError("the manifest was changed after the savepoint: it cannot be rolled back")
        for table in list(self._staged):
            names = self._staged[table]
            keep = point.staged.get(table, 0)
            for name in names[keep:]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.staging / table / name)
            del names[keep:]
            if not names:
                del self._staged[table]
        self._rows = dict(point.rows)
        del self._sources[point.sources :]

    def change_manifest(self, change: Callable[[Manifest], None]) -> None:
        """Apply `change` now to this transaction's view and again, under the lock, at commit."""
        change(self.manifest)
        self._changes.append(change)

    def add_plan(self, plan: Plan) -> None:
        self.change_manifest(lambda m: m.add_plan(Plan(**vars(plan))))

    def record_source(self, sha256: str, description: str) -> None:
        """Remember the imported file's digest; a file already imported into this campaign, or already
        staged by this transaction (the same file named twice), is refused."""
        with self._locked():  # the commit records read whole, never beside a commit being written
            if self.exists:
                if self._imported is None:  # read once: an import of many files asks once per file
                    self._imported = self.campaign().imported_sources()
                self._refuse_imported(self._imported, sha256, description)
        for staged in self._sources:
            if staged["sha256"] == sha256:
                raise StoreError(
                    f"{description}: the same bytes as {staged['description']}, named earlier in this "
                    "import; nothing was stored"
                )
        self._sources.append({"sha256": sha256, "description": description})

    def _refuse_imported(self, imported: Mapping[str, CommitRecord], sha256: str, description: str) -> None:
        previous = imported.get(sha256)
        if previous is not None:
            raise AlreadyImported(
                f"{description}: already imported into {self.root} ({previous.operation}, "
                f"{previous.committed_at}); nothing was stored twice"
            )

    def _refuse_imported_meanwhile(self) -> None:
        """At commit, under the lock: the sources checked by record_source again, against the commits made
        since (two imports of one file at once both pass record_source; the second to commit is refused)."""
        if self._sources and self.exists:
            imported = self.campaign().imported_sources()
            for source in self._sources:
                self._refuse_imported(imported, source["sha256"], source["description"])

    # --- trial numbers ---------------------------------------------------------------------------
    def claim_next_trials(self, node: str, variant: str, count: int) -> list[int]:
        """`count` new trial numbers of (node, variant) after every stored or held one, held until commit."""
        from tailscope.store.read import stored_trials

        with self._locked():
            taken = set(stored_trials(self.campaign(), node).get(variant, {})) if self.exists else set()
            taken |= set(held_trials(live_claims(self.root, exclude=self.txid), node).get(variant, {}))
            taken |= set(self._claimed.get(node, {}).get(variant, []))
            start = max(taken) + 1 if taken else 0
            trials = list(range(start, start + count))
            self._claimed.setdefault(node, {}).setdefault(variant, []).extend(trials)
            write_claim(self.root, self._claim(node))
        return trials

    def _claim(self, node: str) -> Claim:
        return Claim(self.txid, node, self._claimed.get(node, {}), owner_record(), self.operation)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self.campaign().lock():
            if (self.root / MANIFEST).is_file() and not self.exists:
                self.exists = True  # another writer created the campaign meanwhile: adopt its manifest
                self.manifest = Campaign.open(self.root).manifest
                for change in self._changes:
                    change(self.manifest)
            yield

    # --- commit and abort ------------------------------------------------------------------------
    def commit(self) -> None:
        if self._done:
            return
        if not self.exists and not self._staged and not (self.root / MANIFEST).exists():
            self.abort()  # an operation that stored nothing creates no campaign
            return
        with signals_deferred(), self._locked():
            self._refuse_imported_meanwhile()
            campaign = self.campaign()
            if self.exists:
                campaign.update_manifest(lambda m: [c(m) for c in self._changes], locked=True)
            else:
                write_atomic_bytes(self.root / MANIFEST, self.manifest.dump())
                self.exists = True
            if self._staged:
                touched = set()
                for table, names in self._staged.items():
                    target = self.root / SHARDS / table
                    target.mkdir(parents=True, exist_ok=True)
                    for name in names:
                        os.replace(self.staging / table / name, target / name)
                    touched.add(target)
                for directory in touched:
                    fsync_dir(directory)
                (self.root / COMMITS).mkdir(exist_ok=True)
                record = {
                    "txid": self.txid,
                    "operation": self.operation,
                    "committed_at": utcnow().isoformat(timespec="seconds"),
                    "owner": owner_record(),
                    "shards": self._staged,
                    "rows": self._rows,
                    "sources": self._sources,
                    "footers": {
                        t: {n: self._footers[t][n] for n in names} for t, names in self._staged.items()
                    },
                }
                write_atomic_bytes(self.root / COMMITS / f"{self.txid}.json", json.dumps(record).encode())
            self.committed = True
            release_claim(self.root, self.txid)
            self._remove_staging()
            remove_stale_staging(self.root)
            self._done = True

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        with signals_deferred():
            release_claim(self.root, self.txid)
            self._remove_staging()
            if self.created_root and not (self.root / MANIFEST).exists():
                remove_empty_campaign(self.root)

    def _remove_staging(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        shutil.rmtree(self.root / STAGING / f".{self.txid}.new", ignore_errors=True)
        for directory in (self.root / STAGING, self.root / CLAIMS):
            with contextlib.suppress(OSError):
                directory.rmdir()  # only when empty


OWNER = "owner.json"


def remove_stale_staging(root: Path) -> list[Path]:
    """Remove the staging directories of writers that died (SIGKILL, power loss): their shards were never
    committed. Call under the campaign lock."""
    removed = []
    try:
        names = os.listdir(root / STAGING)
    except FileNotFoundError:
        return removed
    for name in names:
        if name.startswith("."):
            continue  # being created right now
        directory = root / STAGING / name
        try:
            owner = json.loads((directory / OWNER).read_text())
        except (OSError, ValueError):
            owner = {}  # cut short by a crash
        if not owner or not owner_alive(owner):
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def remove_empty_campaign(root: Path) -> None:
    """Remove what a failed operation created in a directory it created; anything else stays."""
    for sub in (STAGING, CLAIMS, COMMITS, SHARDS):
        path = root / sub
        if sub == SHARDS:
            for table in TABLES:
                with contextlib.suppress(OSError):
                    (path / table).rmdir()
        with contextlib.suppress(OSError):
            path.rmdir()
    with contextlib.suppress(OSError):
        (root / LOCK).unlink()
    with contextlib.suppress(OSError):
        root.rmdir()


@contextlib.contextmanager
def load_into(
    root: Path,
    operation: str,
    *,
    create: bool = False,
    name: str | None = None,
    manifest: Manifest | None = None,
) -> Iterator[Transaction]:
    """A transaction on the campaign at `root` (created at commit when `create` and it does not exist, with
    `manifest` when given)."""
    tx = Transaction(Path(root), operation, name=name, create=create, new_manifest=manifest)
    try:
        yield tx
    except BaseException:
        tx.abort()
        raise
    try:
        tx.commit()
    except AlreadyImported:  # refused at commit: nothing was moved, the staged shards go
        tx.abort()
        raise


# --- trials of a run ----------------------------------------------------------------------------
@dataclass
class RunClaim:
    """The trials one `tailscope run` (or Slurm step) holds for its whole duration."""

    root: Path
    node: str
    key: str
    trials: dict[str, list[int]]

    def release(self) -> None:
        release_claim(self.root, self.key)


def claim_run_trials(
    campaign: Campaign,
    node: str,
    *,
    key: str,
    wanted: Mapping[str, list[int] | int],
    operation: str = "run",
) -> RunClaim:
    """Under the lock: for each variant either a list of trial numbers wanted (those stored ok or held by a
    live writer are skipped) or a count of new trials after every stored or held one. Raises
    `CampaignBusyError` naming the holder when another writer holds every trial this run would do."""
    from tailscope.store.read import stored_trials

    with campaign.lock():
        stored = stored_trials(campaign, node) if (campaign.root / MANIFEST).is_file() else {}
        others = live_claims(campaign.root, exclude=key)
        held = held_trials(others, node)
        mine: dict[str, list[int]] = {}
        blocked: set[str] = set()
        for variant, want in wanted.items():
            have = stored.get(variant, {})
            holders = held.get(variant, {})
            if isinstance(want, int):
                taken = set(have) | set(holders)
                start = max(taken) + 1 if taken else 0
                mine[variant] = list(range(start, start + want))
            else:
                free = [t for t in want if have.get(t) != "ok" and t not in holders]
                blocked |= {describe_owner(holders[t].owner) for t in want if t in holders}
                mine[variant] = free
        if blocked and not any(mine.values()):
            raise CampaignBusyError(
                f"{campaign.root}: every trial this command would run is being run by "
                f"{', '.join(sorted(blocked))}; wait for it to finish, or add trials with --trials N"
            )
        claim = Claim(key, node, mine, owner_record(), operation)
        write_claim(campaign.root, claim)
    return RunClaim(campaign.root, node, key, mine)
