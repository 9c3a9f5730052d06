"""The embedded history store: a directory in the campaign store's format.

The same layout, load path and lock as a campaign (store/campaign.py, store/load.py): every append is a
`Transaction` (staged Parquet shards, then one commit record under the flock), so a thousand nodes
appending their nightly check to one directory on a shared file system never see each other's half-written
files, and a killed writer leaves nothing visible. Reads go through `store.read.read_table` (page
checksums verified); a damaged shard is named and left out, the rest of the history reads.

An entry written again (its campaign grew) is a new row with a later `added_at`: the latest wins when read.

Compaction (`history compact`, and after every `AUTO_COMPACT_COMMITS` appends): the appends' shards are
merged into one shard per table, the latest version of every entry only, committed as one transaction;
then, under the lock, the merged commit records and their shards are removed. A reader that listed a
removed record reads again (`_read_all`). Past `FULL_COMPACT_COMMITS` compacted shards everything is merged
into one. A year of daily appends from 1,000 nodes is so a few dozen files, not 365,000.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tailscope.history.data import (
    AddResult,
    HistoryData,
    apply_exclusions,
    as_categories,
    campaign_prefix,
    classify,
    entries_table,
    entry_columns,
    facts_table,
    latest_entries,
    one_campaign,
    parse_facts,
)
from tailscope.history.summary import CampaignSummary, Entry, FactSet
from tailscope.store.campaign import (
    CLAIMS,
    COMMITS,
    LOCK,
    MANIFEST,
    SHARDS,
    STAGING,
    Campaign,
    CommitRecord,
    utcnow,
    write_atomic_bytes,
)
from tailscope.store.errors import StoreError
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES

if TYPE_CHECKING:
    import pandas as pd

HISTORY_NAME = "tailscope history"  # the manifest's name: what tells a history from a campaign
HISTORY_TABLES = ("history_entries", "history_facts", "history_notes", "history_exclusions")
JOBS_TABLES = ("jobs", "job_evidence")  # tailscope.jobs: in the same transactions and compactions
# What a directory may hold before anything was added: the epilog's spool (tailscope.jobs.store.SPOOL), which
# an epilog creates on its first job, before any collect made the history.
SPOOL = "jobs-epilog-spool"
ADD, COMPACT = "history add", "history compact"
AUTO_COMPACT_COMMITS = 64  # appends not yet compacted that trigger a compaction
FULL_COMPACT_COMMITS = 16  # compacted shards that trigger a full one
KEYS = {t: TABLES[t].key for t in (*HISTORY_TABLES, *JOBS_TABLES)}
# What a history directory may hold before its manifest exists: the lock file of the writer creating it (and
# the staging and claims of an older tailscope's writer, which created the manifest at its first commit),
# and the epilog's spool.
UNBORN = frozenset({LOCK, STAGING, CLAIMS, SPOOL})


class DirectoryHistory:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.location = str(self.root)

    # --- opening ----------------------------------------------------------------------------------
    def _campaign(self, *, locked: bool = False) -> Campaign | None:
        """The history, or None where there is none yet (no directory, or one another writer is creating)."""
        if not (self.root / MANIFEST).is_file():
            if self.root.exists() and not self.root.is_dir():
                raise StoreError(f"{self.root}: not a directory (expected a tailscope history directory)")
            if self.root.is_dir() and any(p.name not in UNBORN for p in self.root.iterdir()):
                if not locked and (self.root / LOCK).exists():
                    # a store directory: its creator may be writing the manifest (its temp file is here) right
                    # now; look again once it is done
                    with Campaign(self.root, Campaign.new_manifest(self.root, HISTORY_NAME)).lock():
                        return self._campaign(locked=True)
                raise StoreError(f"{self.root}: not a tailscope history (no {MANIFEST}) and not empty")
            return None
        campaign = Campaign.open(self.root)
        if campaign.manifest.name != HISTORY_NAME:
            raise StoreError(
                f"{self.root}: a tailscope campaign, not a history; give `history` a directory of its own"
            )
        return campaign

    def _create(self) -> Campaign:
        """The history, its manifest written under the lock by the first writer if there is none: writers
        that start at once into a new directory (the first night of a fleet) all find it; none is refused
        for a directory another one is still creating."""
        campaign = self._campaign()
        if campaign is not None:
            return campaign
        self.root.mkdir(parents=True, exist_ok=True)
        fresh = Campaign(self.root, Campaign.new_manifest(self.root, HISTORY_NAME))
        with fresh.lock():
            campaign = self._campaign(locked=True)  # another writer may have created it meanwhile
            if campaign is None:
                write_atomic_bytes(self.root / MANIFEST, fresh.manifest.dump())
                campaign = fresh
        return campaign

    def _open(self) -> Campaign:
        campaign = self._campaign()
        if campaign is None:
            raise StoreError(f"{self.root}: no history here yet (nothing was added)")
        return campaign

    # --- writing ----------------------------------------------------------------------------------
    def add(self, summary: CampaignSummary) -> AddResult:
        campaign = self._campaign()
        stored = self._stored_keys(campaign, {summary.campaign}) if campaign is not None else {}
        known = self._known_facts(campaign) if campaign is not None else set()
        entries, result = classify(summary, stored)
        facts = [f for f in summary.facts if (f.node, f.digest) not in known]
        if entries or facts:
            self.write(entries, facts)
        return result

    def write(self, entries: Sequence[Entry], facts: Sequence[FactSet]) -> None:
        """Append entries and fact sets in one transaction (then compact when due)."""
        now = utcnow()
        nodes = {e.node for e in entries} | {f.node for f in facts}
        shard_node = next(iter(nodes)) if len(nodes) == 1 else "fleet"
        self._create()
        with load_into(self.root, ADD) as tx:
            if tx.manifest.name != HISTORY_NAME:
                raise StoreError(f"{self.root}: a tailscope campaign, not a history")
            tx.write("history_entries", entries_table(entries, now), node=shard_node)
            tx.write("history_facts", facts_table(facts), node=shard_node)
        self._compact_when_due()

    def append(self, tables: dict[str, pa.Table], operation: str) -> None:
        """Append rows of any of the history's tables in one transaction (then compact when due)."""
        self._create()
        with load_into(self.root, operation) as tx:
            if tx.manifest.name != HISTORY_NAME:
                raise StoreError(f"{self.root}: a tailscope campaign, not a history")
            for table, data in tables.items():
                tx.write(table, data, node="fleet")
        self._compact_when_due()

    def read_table(self, table: str, columns: Sequence[str] | None = None) -> tuple[pa.Table, list[str]]:
        """Every committed row of one of the history's tables (every version: the caller keeps the latest)
        and the damaged shards left out; an empty table when nothing was added yet."""
        campaign = self._campaign()
        if campaign is None:
            spec = TABLES[table].schema
            wanted = spec if columns is None else pa.schema([spec.field(c) for c in columns])
            return wanted.empty_table(), []
        return self._read_all(campaign, table, columns)

    def _write_rows(self, table: str, rows: list[dict[str, Any]], node: str) -> None:
        self._create()
        with load_into(self.root, table.replace("history_", "history ")) as tx:
            tx.write(table, pa.Table.from_pylist(rows, schema=TABLES[table].schema), node=node)

    def note(self, node: str, at: dt.datetime, text: str) -> None:
        self._write_rows(
            "history_notes", [{"node": node, "at": at, "text": text, "added_at": utcnow()}], node
        )

    def exclude(self, campaign: str, node: str, variant: str, reason: str, excluded: bool = True) -> int:
        campaign = campaign_prefix(campaign)
        data = self.read()
        entries = data.entries
        mask = (entries["node"].astype(str) == node) & entries["campaign"].astype(str).str.startswith(
            campaign
        )
        if mask.any():
            chosen = one_campaign(entries.loc[mask, "campaign"].astype(str), campaign, node, str(self.root))
            mask &= entries["campaign"].astype(str) == chosen
        if variant != "*":
            mask &= (entries["variant"].astype(str) == variant) | (entries["probe"].astype(str) == variant)
        hits = entries[mask]
        if hits.empty:
            raise StoreError(f"{self.root}: no entry of node {node} in campaign {campaign} ({variant})")
        now = utcnow()
        rows = [
            {"campaign": str(r.campaign), "node": node, "variant": str(r.variant), "excluded": excluded,
             "reason": reason, "added_at": now}
            for r in hits.itertuples(index=False)
        ]  # fmt: skip
        self._write_rows("history_exclusions", rows, node)
        return len(rows)

    # --- reading ----------------------------------------------------------------------------------
    def _stored_keys(
        self, campaign: Campaign, campaigns: set[str]
    ) -> dict[tuple[str, str, str], tuple[int, Any]]:
        """key -> (n, ended_at) of the stored entries of `campaigns`. The campaign column alone is read first:
        a new campaign (the nightly case) costs one column of the history, not six."""
        import pyarrow.compute as pc

        wanted = pa.array(sorted(campaigns))
        ids, _ = self._read_all(campaign, "history_entries", ["campaign"])
        if ids.num_rows == 0 or not pc.any(pc.is_in(ids.column("campaign"), wanted)).as_py():
            return {}
        columns = ["campaign", "node", "variant", "n", "ended_at", "added_at"]
        table, _ = self._read_all(campaign, "history_entries", columns)
        table = table.filter(pc.is_in(table.column("campaign"), wanted))
        frame = latest_entries(table.to_pandas())
        return {
            (str(c), str(n), str(v)): (int(k), e)
            for c, n, v, k, e in zip(
                frame.campaign, frame.node, frame.variant, frame.n, frame.ended_at, strict=True
            )
        }

    def _known_facts(self, campaign: Campaign) -> set[tuple[str, str]]:
        table, _ = self._read_all(campaign, "history_facts", ["node", "digest"])
        return set(zip(table.column("node").to_pylist(), table.column("digest").to_pylist(), strict=True))

    def _read_all(
        self, campaign: Campaign, table: str, columns: Sequence[str] | None = None
    ) -> tuple[pa.Table, list[str]]:
        """Every committed row of `table`; damaged shards are named and left out. A shard removed by a
        compaction between listing and reading makes the read start again (from a fresh listing)."""
        from tailscope.store.read import read_table

        for _attempt in range(5):
            fresh = Campaign.open(self.root)
            files = fresh.shard_files(table)
            try:
                return read_table(fresh, table, columns, files=files), []
            except StoreError:
                if any(not f.exists() for f in files) and self._records_changed(fresh):
                    continue  # a compaction removed what we listed
            parts, damaged = [], []
            for f in files:
                try:
                    parts.append(read_table(fresh, table, columns, files=[f]))
                except StoreError as exc:
                    reason = str(exc).split(": damaged shard: ", 1)[-1].split(";")[0]
                    damaged.append(f"{f}: damaged shard ({reason}); its rows are left out, the rest is read")
            spec = TABLES[table].schema
            schema = spec if columns is None else pa.schema([spec.field(c) for c in columns])
            return (pa.concat_tables(parts) if parts else schema.empty_table()), damaged
        raise StoreError(f"{self.root}: the history kept changing while it was read; try again")

    def _records_changed(self, campaign: Campaign) -> bool:
        names = {f"{r.txid}.json" for r in campaign.commit_records()}
        try:
            now = {n for n in os.listdir(self.root / COMMITS) if n.endswith(".json")}
        except FileNotFoundError:
            return True
        return names != now

    def read(self) -> HistoryData:
        campaign = self._open()
        entries, damaged = self._read_all(campaign, "history_entries")
        facts, d2 = self._read_all(campaign, "history_facts", ["node", "digest", "facts"])
        notes, d3 = self._read_all(campaign, "history_notes")
        exclusions, d4 = self._read_all(campaign, "history_exclusions")
        frame = as_categories(latest_entries(entries.to_pandas(strings_to_categorical=True)))
        frame = apply_exclusions(frame, exclusions.to_pandas())
        fact_map, d5 = parse_facts(
            zip(*(facts.column(c).to_pylist() for c in ("node", "digest", "facts")), strict=True)
        )
        return HistoryData(
            frame.reset_index(drop=True), fact_map, notes.to_pandas(), damaged + d2 + d3 + d4 + d5
        )

    def read_entries(
        self, variants: Collection[str], nodes: Collection[str] | None = None, columns: Sequence[str] = ()
    ) -> tuple[pd.DataFrame, list[str]]:
        """The entries of `variants` (of `nodes` where given) as `read()` gives them (the latest version of
        each, `excluded` set; only `columns` and the key where given), and the damaged shards left out,
        without the rest of the history in memory: rows are chosen in Arrow before anything is converted
        (a check's baseline: the entries of one node of a fleet's year, 1,460 of 1.46 million)."""
        import pyarrow.compute as pc

        campaign = self._open()
        wanted = entry_columns(columns)
        table, damaged = self._read_all(campaign, "history_entries", wanted)
        keep = pc.is_in(table.column("variant"), pa.array(sorted(variants), pa.string()))
        if nodes is not None:
            keep = pc.and_(keep, pc.is_in(table.column("node"), pa.array(sorted(nodes), pa.string())))
        frame = latest_entries(table.filter(keep).to_pandas())
        exclusions, d2 = self._read_all(campaign, "history_exclusions")
        return apply_exclusions(frame, exclusions.to_pandas()).reset_index(drop=True), damaged + d2

    # --- repair -----------------------------------------------------------------------------------
    def repair_advice(self) -> str:
        return (
            f"`tailscope campaign collect {self.root}` moves it aside, then `tailscope history add "
            f"{self.root} CAMPAIGN...` adds the campaigns it held again (what is stored is not added twice)"
        )

    def collect(self, *, quarantine_damaged: bool = True) -> tuple[int, list[Any], list[Path]]:
        """`campaign collect` of a history: every committed shard read in full; the appends with a damaged
        shard moved aside whole into quarantine/ (compaction can run again). Returns (shards, damaged,
        moved)."""
        from tailscope.store.read import quarantine, validate_shards

        campaign = self._open()
        count, damaged = validate_shards(campaign)
        moved = quarantine(campaign, damaged) if quarantine_damaged else []
        return count, damaged, moved

    # --- compaction -------------------------------------------------------------------------------
    def _compact_when_due(self) -> None:
        campaign = Campaign.open(self.root)
        records = campaign.commit_records()
        appends = sum(1 for r in records if r.operation != COMPACT)
        if appends >= AUTO_COMPACT_COMMITS:
            with contextlib.suppress(StoreError):  # a damaged shard: the appends stay as they are
                self.compact(full=False)

    def compact(self, *, full: bool = True) -> tuple[int, int]:
        """Merge committed shards (all of them, or the appends' only when `full` is false and fewer than
        FULL_COMPACT_COMMITS compactions exist). Returns (commit records before, after)."""
        campaign = self._open()
        records = campaign.commit_records()
        compacted = [r for r in records if r.operation == COMPACT]
        if not full and len(compacted) + 1 < FULL_COMPACT_COMMITS:
            merge = [r for r in records if r.operation != COMPACT]
        else:
            merge = list(records)
        if len(merge) <= 1:
            return len(records), len(records)
        tables: dict[str, pa.Table] = {}
        for table in (*HISTORY_TABLES, *JOBS_TABLES):
            files = [campaign.shard_dir(table) / name for r in merge for name in r.shards.get(table, [])]
            if not files:
                continue
            from tailscope.store.read import read_table

            try:
                data = read_table(campaign, table, files=files)  # damaged: raises, nothing is removed
            except StoreError as exc:  # the campaign's advice (`run --resume`) is not a history's
                from tailscope.store.read import repair_advice

                advice = "nothing was compacted; " + self.repair_advice()
                raise StoreError(str(exc).replace(repair_advice(campaign), advice)) from None
            tables[table] = _latest(data, table)
        with load_into(self.root, COMPACT) as tx:
            for table, data in tables.items():
                tx.write(table, data, node="compacted")
        self._remove(campaign, merge)
        return len(records), len(Campaign.open(self.root).commit_records())

    def _remove(self, campaign: Campaign, records: Sequence[CommitRecord]) -> None:
        with campaign.lock():
            for r in records:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.root / COMMITS / f"{r.txid}.json")
            for r in records:
                for table, names in r.shards.items():
                    for name in names:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(self.root / SHARDS / table / name)


def _latest(data: pa.Table, table: str) -> pa.Table:
    """The latest row per key (by added_at), sorted by key: what a compacted shard holds."""
    if data.num_rows == 0:
        return data
    frame = data.to_pandas()
    keys = list(KEYS[table])
    if "added_at" in frame.columns:
        frame = frame.sort_values("added_at", kind="stable")
    frame = frame.drop_duplicates(keys, keep="last").sort_values(keys, kind="stable")
    return pa.Table.from_pandas(frame, schema=TABLES[table].schema, preserve_index=False)
