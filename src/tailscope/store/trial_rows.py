"""The store rows of one trial, table by table: what a probe trial (campaign/runner.py) and an application
trial (app/trial.py) hand the runner, which buffers them and writes them through the one load path."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tailscope.store.schema import TABLES


@dataclass
class TrialRows:
    runs: list[dict[str, Any]] = field(default_factory=list)
    iterations: list[dict[str, Any]] = field(default_factory=list)
    pages: list[dict[str, Any]] = field(default_factory=list)
    counters: list[dict[str, Any]] = field(default_factory=list)
    corunners: list[dict[str, Any]] = field(default_factory=list)

    def clear(self) -> None:
        for rows in (self.runs, self.iterations, self.pages, self.counters, self.corunners):
            rows.clear()

    def extend(self, other: TrialRows) -> None:
        self.runs += other.runs
        self.iterations += other.iterations
        self.pages += other.pages
        self.counters += other.counters
        self.corunners += other.corunners

    def tables(self) -> dict[str, pa.Table]:
        return {
            name: pa.Table.from_pylist(rows, schema=TABLES[name].schema)
            for name, rows in (
                ("runs", self.runs),
                ("iterations", self.iterations),
                ("pages", self.pages),
                ("counters", self.counters),
                ("corunners", self.corunners),
            )
        }
