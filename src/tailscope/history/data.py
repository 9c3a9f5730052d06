"""What every history store gives the analysis: entries, facts, notes and exclusions as plain frames.

Both stores (`directory`, `postgres`) return a `HistoryData`; `changes` and `show` read nothing else, so
the two stores answer `history show` identically.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from tailscope.history.summary import CampaignSummary, Entry, FactSet
from tailscope.history.written import Written
from tailscope.store.errors import StoreError
from tailscope.store.schema import TABLES

ENTRY_COLUMNS = TABLES["history_entries"].names


class AddResult(Written):
    """What `history add` stored (history/written.py)."""


@dataclass
class HistoryData:
    """The latest version of every entry (with `excluded`, `exclusion_reason`), facts by (node, digest),
    notes, and the damaged parts of the store that were left out (one line each)."""

    entries: pd.DataFrame
    facts: dict[tuple[str, str], dict[str, Any]]
    notes: pd.DataFrame
    damaged: list[str] = field(default_factory=list)


def utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def entries_table(entries: Sequence[Entry], added_at: dt.datetime) -> pa.Table:
    rows = [{**vars(e), "added_at": added_at} for e in entries]
    return pa.Table.from_pylist(rows, schema=TABLES["history_entries"].schema)


def facts_table(facts: Iterable[FactSet]) -> pa.Table:
    return pa.Table.from_pylist([vars(f) for f in facts], schema=TABLES["history_facts"].schema)


def classify(
    summary: CampaignSummary, stored: dict[tuple[str, str, str], tuple[int, Any]]
) -> tuple[list[Entry], AddResult]:
    """The entries to write: new keys, and keys whose campaign has grown (more trials or later ones);
    `stored`: key -> (n, ended_at) of what the store holds."""
    out: list[Entry] = []
    added = updated = unchanged = 0
    for e in summary.entries:
        have = stored.get(e.key)
        if have is None:
            added += 1
            out.append(e)
        elif have[0] != e.n or pd.Timestamp(have[1]) != pd.Timestamp(e.ended_at):
            updated += 1
            out.append(e)
        else:
            unchanged += 1
    return out, AddResult(added, updated, unchanged)


def entry_columns(columns: Sequence[str] = ()) -> list[str]:
    """The history_entries columns a partial read takes: `columns` with the key and `added_at` (what
    latest_entries and apply_exclusions need), in the table's order; all of them when none is named."""
    if not columns:
        return list(ENTRY_COLUMNS)
    wanted = {*columns, "campaign", "node", "variant", "added_at"}
    unknown = wanted - set(ENTRY_COLUMNS)
    if unknown:
        raise ValueError(f"history_entries has no column {', '.join(sorted(unknown))}")
    return [c for c in ENTRY_COLUMNS if c in wanted]


def latest_entries(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (campaign, node, variant): the latest written version."""
    if frame.empty:
        return frame
    frame = frame.sort_values("added_at", kind="stable")
    return frame.drop_duplicates(["campaign", "node", "variant"], keep="last")


TEXT_COLUMNS = ("campaign", "campaign_name", "node", "probe", "variant", "metric", "unit", "verdict")


def as_categories(entries: pd.DataFrame) -> pd.DataFrame:
    """Text columns as categoricals with sorted categories: every store's frame sorts and groups alike
    (a categorical sorts by its categories' order: the order of appearance when read from Parquet)."""
    for name in TEXT_COLUMNS:
        column = entries[name]
        if not isinstance(column.dtype, pd.CategoricalDtype):
            column = column.astype("category")
        entries[name] = column.cat.reorder_categories(sorted(column.cat.categories))
    return entries


def apply_exclusions(entries: pd.DataFrame, exclusions: pd.DataFrame) -> pd.DataFrame:
    entries = entries.copy()
    entries["excluded"] = False
    entries["exclusion_reason"] = ""
    if exclusions.empty or entries.empty:
        return entries
    latest = exclusions.sort_values("added_at", kind="stable").drop_duplicates(
        ["campaign", "node", "variant"], keep="last"
    )
    for row in latest.itertuples(index=False):
        mask = (entries["campaign"].astype(str) == row.campaign) & (entries["node"].astype(str) == row.node)
        if row.variant != "*":
            mask &= entries["variant"].astype(str) == row.variant
        entries.loc[mask, "excluded"] = bool(row.excluded)
        entries.loc[mask, "exclusion_reason"] = str(row.reason) if row.excluded else ""
    return entries


def parse_facts(
    rows: Iterable[tuple[str, str, str]],
) -> tuple[dict[tuple[str, str], dict[str, Any]], list[str]]:
    """(node, digest, JSON) rows -> facts by (node, digest); unreadable rows are named."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    damaged: list[str] = []
    for node, digest, text in rows:
        try:
            value = json.loads(text)
            if not isinstance(value, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            damaged.append(f"facts of {node} ({digest}): not readable JSON ({exc}); left out")
            continue
        out[(str(node), str(digest))] = value
    return out, damaged


def campaign_prefix(prefix: str) -> str:
    """The campaign id (or prefix) an exclusion names; an empty one (every id starts with it) is refused."""
    text = str(prefix).strip()
    if not text:
        raise StoreError(
            "history exclude: CAMPAIGN_ID is empty (every campaign's id starts with it): give the id, or a "
            "unique prefix of it, of the campaign whose entries to exclude (history show --json --node N "
            "lists them)"
        )
    return text


def one_campaign(campaigns: Iterable[str], prefix: str, node: str, where: str) -> str:
    """The one campaign of `node` whose id starts with `prefix`; several are refused (a short prefix would
    exclude them all), naming a few."""
    found = sorted({str(c) for c in campaigns})
    if len(found) > 1:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise StoreError(
            f"{where}: campaign id prefix {prefix!r} matches {len(found)} campaigns of node {node} "
            f"({shown}); give more of the id"
        )
    return found[0]


def select(
    entries: pd.DataFrame, node: str | None, probe: str | None, since: dt.datetime | None
) -> pd.DataFrame:
    if node is not None:
        entries = entries[entries["node"].astype(str) == node]
    if probe is not None:
        entries = entries[(entries["probe"].astype(str) == probe) | (entries["variant"].astype(str) == probe)]
    if since is not None:
        entries = entries[entries["started_at"] >= pd.Timestamp(since)]
    return entries
