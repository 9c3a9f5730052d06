"""What an idempotent append stored, said in one sentence: the history's entries (`history add`) and the
site's jobs (`jobs collect`) alike. Without pandas: the jobs' PostgreSQL module, on the epilog's path,
imports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Written:
    """New rows, rows replaced by a newer version of themselves, rows already stored as they are."""

    added: int
    updated: int
    unchanged: int

    PART: ClassVar[str] = "history"
    NOUN: ClassVar[str] = "entries"
    UPDATED: ClassVar[str] = "the campaign grew"  # why a row is stored again

    def sentence(self, where: str) -> str:
        if self.added == 0 and self.updated == 0:
            return f"{self.PART} {where}: nothing added: its {self.unchanged} {self.NOUN} are already stored"
        parts = [f"{self.added} {self.NOUN} added"]
        if self.updated:
            parts.append(f"{self.updated} updated ({self.UPDATED})")
        if self.unchanged:
            parts.append(f"{self.unchanged} already stored")
        return f"{self.PART} {where}: " + ", ".join(parts)
