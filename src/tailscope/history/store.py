"""Open a history by its location: a directory (the embedded store) or a `postgresql://` URL."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tailscope.history.location import is_url, redact

if TYPE_CHECKING:  # pandas and pyarrow: not for --help
    from collections.abc import Collection, Sequence

    import pandas as pd

    from tailscope.history.data import AddResult, HistoryData
    from tailscope.history.summary import CampaignSummary, Entry, FactSet

ENV = "TAILSCOPE_HISTORY"
__all__ = ["ENV", "HistoryStore", "is_url", "open_history", "redact"]


class HistoryStore(Protocol):
    location: str

    def add(self, summary: CampaignSummary) -> AddResult: ...

    def write(self, entries: list[Entry], facts: list[FactSet]) -> None: ...

    def note(self, node: str, at: dt.datetime, text: str) -> None: ...

    def exclude(self, campaign: str, node: str, variant: str, reason: str, excluded: bool = True) -> int: ...

    def read(self) -> HistoryData: ...

    def read_entries(
        self, variants: Collection[str], nodes: Collection[str] | None = None, columns: Sequence[str] = ()
    ) -> tuple[pd.DataFrame, list[str]]: ...

    def compact(self, *, full: bool = True) -> tuple[int, int]: ...


def open_history(location: str | Path) -> HistoryStore:
    text = str(location)
    if is_url(text):
        from tailscope.history.postgres import PostgresHistory

        return PostgresHistory(text)
    from tailscope.history.directory import DirectoryHistory

    return DirectoryHistory(Path(text))
