"""The site database: the history's tables in PostgreSQL (`--history postgresql://USER@HOST/DB`), the
database Grafana and site dashboards already read.

Created and migrated by tailscope: `tailscope_history_meta` holds the schema version; opening a database
takes a transaction-level advisory lock, creates what is missing and applies the migrations after the
stored version (so a thousand nodes opening it at once migrate it once). The column names and meanings are
the embedded store's (store/schema.py, history_* tables).

Concurrent writers are safe by the keys: an entry is inserted with ON CONFLICT (campaign, node, variant) DO
UPDATE only when its campaign grew (more trials or a later one), so two nodes adding the same campaign at
once store each entry exactly once; facts are keyed by (node, digest), notes by (node, at, text).

An unreachable server or refused credentials is one line naming the (password-less) URL and what the
server said; nothing is written anywhere else.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Any

import pandas as pd

from tailscope.history.data import (
    ENTRY_COLUMNS,
    AddResult,
    HistoryData,
    apply_exclusions,
    as_categories,
    campaign_prefix,
    entry_columns,
    one_campaign,
    parse_facts,
)
from tailscope.history.pgconnect import Database, migrate
from tailscope.history.summary import CampaignSummary, Entry, FactSet
from tailscope.store.errors import StoreError
from tailscope.store.schema import TABLES

SCHEMA_VERSION = 1

_PG_TYPES = {"string": "text", "double": "double precision", "int32": "integer", "bool": "boolean"}

MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE history_entries ({entries}, PRIMARY KEY (campaign, node, variant))",
        "CREATE INDEX history_entries_node ON history_entries (node, variant, started_at)",
        "CREATE TABLE history_facts ({facts}, PRIMARY KEY (node, digest))",
        "CREATE TABLE history_notes ({notes}, PRIMARY KEY (node, at, text))",
        "CREATE TABLE history_exclusions ({exclusions}, PRIMARY KEY (campaign, node, variant))",
    ],
}


def _columns(table: str) -> str:
    parts = []
    for col in TABLES[table].columns:
        kind = str(col.type)
        sql = "timestamptz" if kind.startswith("timestamp") else _PG_TYPES[kind]
        parts.append(f"{col.name} {sql}{'' if col.nullable else ' NOT NULL'}")
    return ", ".join(parts)


def column_definitions(table: str) -> str:
    """The SQL column list of one of the store's tables (store/schema.py), as the history creates it."""
    return _columns(table)


class PostgresHistory(Database):
    def _migrate(self, con: Any) -> None:
        columns = {name: _columns(f"history_{name}") for name in ("entries", "facts", "notes", "exclusions")}
        migrate(con, self.location, what="history", key="schema_version", version=SCHEMA_VERSION,
                migrations=MIGRATIONS, columns=columns)  # fmt: skip

    # --- writing ----------------------------------------------------------------------------------
    def add(self, summary: CampaignSummary) -> AddResult:
        return self._write(list(summary.entries), list(summary.facts))

    def write(self, entries: Sequence[Entry], facts: Sequence[FactSet]) -> None:
        self._write(list(entries), list(facts))

    def _write(self, entries: list[Entry], facts: list[FactSet]) -> AddResult:
        names = ENTRY_COLUMNS
        now = dt.datetime.now(dt.UTC)
        with self._connect() as con, con.transaction(), con.cursor() as cur:
            cur.execute("CREATE TEMP TABLE incoming (LIKE history_entries) ON COMMIT DROP")
            with cur.copy(f"COPY incoming ({', '.join(names)}) FROM STDIN") as copy:
                for e in entries:
                    copy.write_row([*(getattr(e, n) for n in names[:-1]), now])
            keys = ("campaign", "node", "variant")
            updates = ", ".join(f"{n} = EXCLUDED.{n}" for n in names if n not in keys)
            cur.execute(
                f"INSERT INTO history_entries ({', '.join(names)}) SELECT {', '.join(names)} FROM incoming "
                f"ON CONFLICT (campaign, node, variant) DO UPDATE SET {updates} "
                "WHERE history_entries.n <> EXCLUDED.n OR history_entries.ended_at <> EXCLUDED.ended_at "
                "RETURNING (xmax = 0)"
            )
            written = [bool(r[0]) for r in cur.fetchall()]
            for f in facts:
                cur.execute(
                    "INSERT INTO history_facts (node, digest, collected_at, facts) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (f.node, f.digest, f.collected_at, f.facts),
                )
        added = sum(written)
        updated = len(written) - added
        return AddResult(added, updated, len(entries) - added - updated)

    def note(self, node: str, at: dt.datetime, text: str) -> None:
        with self._connect() as con, con.transaction(), con.cursor() as cur:
            cur.execute(
                "INSERT INTO history_notes (node, at, text, added_at) VALUES (%s, %s, %s, now()) "
                "ON CONFLICT DO NOTHING",
                (node, at, text),
            )

    def exclude(self, campaign: str, node: str, variant: str, reason: str, excluded: bool = True) -> int:
        campaign = campaign_prefix(campaign)
        with self._connect() as con, con.transaction(), con.cursor() as cur:
            cur.execute(  # a prefix compared as text: no LIKE, whose % and _ would match any id
                "SELECT campaign, variant FROM history_entries WHERE node = %s "
                "AND left(campaign, length(%s)) = %s AND (%s = '*' OR variant = %s OR probe = %s)",
                (node, campaign, campaign, variant, variant, variant),
            )
            hits = cur.fetchall()
            if hits:
                chosen = one_campaign((c for c, _ in hits), campaign, node, self.location)
                hits = [(c, v) for c, v in hits if c == chosen]
            if not hits:
                raise StoreError(
                    f"{self.location}: no entry of node {node} in campaign {campaign} ({variant})"
                )
            for c, v in hits:
                cur.execute(
                    "INSERT INTO history_exclusions VALUES (%s, %s, %s, %s, %s, now()) "
                    "ON CONFLICT (campaign, node, variant) DO UPDATE SET excluded = EXCLUDED.excluded, "
                    "reason = EXCLUDED.reason, added_at = EXCLUDED.added_at",
                    (c, node, v, excluded, reason),
                )
        return len(hits)

    def compact(self, *, full: bool = True) -> tuple[int, int]:
        """Nothing to merge: the database keeps one row per entry (its own VACUUM reclaims space)."""
        with self._connect():
            pass
        return (0, 0)

    # --- reading ----------------------------------------------------------------------------------
    def _frame(self, cur: Any, table: str) -> pd.DataFrame:
        names = TABLES[table].names
        cur.execute(f"SELECT {', '.join(names)} FROM {table}")
        return self._typed(pd.DataFrame(cur.fetchall(), columns=names), table)

    @staticmethod
    def _typed(frame: pd.DataFrame, table: str) -> pd.DataFrame:
        """Timestamps as the directory store reads them (UTC, microseconds)."""
        for col in TABLES[table].columns:
            if col.name in frame.columns and str(col.type).startswith("timestamp"):
                frame[col.name] = pd.to_datetime(frame[col.name], utc=True).astype("datetime64[us, UTC]")
        return frame

    def read_entries(
        self, variants: Collection[str], nodes: Collection[str] | None = None, columns: Sequence[str] = ()
    ) -> tuple[pd.DataFrame, list[str]]:
        """The entries of `variants` (of `nodes` where given), chosen by the server, as `read()` gives them
        (`excluded` set; only `columns` and the key where given); nothing is damaged in a database."""
        names = entry_columns(columns)
        where, params = "variant = ANY(%s)", [sorted(variants)]
        if nodes is not None:
            where, params = f"{where} AND node = ANY(%s)", [*params, sorted(nodes)]
        with self._connect() as con, con.cursor() as cur:
            cur.execute(f"SELECT {', '.join(names)} FROM history_entries WHERE {where}", params)
            frame = self._typed(pd.DataFrame(cur.fetchall(), columns=names), "history_entries")
            exclusions = self._frame(cur, "history_exclusions")
        return apply_exclusions(frame, exclusions).reset_index(drop=True), []

    def read(self) -> HistoryData:
        with self._connect() as con, con.cursor() as cur:
            entries = self._frame(cur, "history_entries")
            cur.execute("SELECT node, digest, facts FROM history_facts")
            fact_rows = cur.fetchall()
            notes = self._frame(cur, "history_notes")
            exclusions = self._frame(cur, "history_exclusions")
        entries = apply_exclusions(as_categories(entries), exclusions)
        facts, damaged = parse_facts(fact_rows)
        return HistoryData(entries.reset_index(drop=True), facts, notes, damaged)
