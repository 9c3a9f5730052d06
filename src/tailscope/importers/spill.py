"""The runs of an iterations stream too large to hold run by run: its raw rows (iterations_csv.RAW_SCHEMA) are
spilled to Parquet files as they are read, then DuckDB, under a memory limit and with its own spill directory,
checks duplicates, sums each run and gives back the iterations and runs a chunk at a time. Memory follows the
chunk (and DuckDB's limit), not the number of runs: bench/bench_import_memory.py."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MEMORY_LIMIT = "64MB"  # DuckDB's; it spills to its temp directory beyond it
BATCH_ROWS = 65536


@dataclass(frozen=True)
class Problem:
    """What settle found wrong with the runs (the line is null when the fast reader spilled)."""

    kind: str  # 'duplicate' | 'warmup-only' | 'overflow'
    node: str
    run: str
    line: int | None
    iteration: int | None = None


class Spill:
    """A directory of raw chunks, and the DuckDB connection that reads them."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.files = 0
        self._con: Any = None

    def add(self, table: pa.Table) -> None:
        if table.num_rows:
            self.files += 1
            pq.write_table(table, self.directory / f"raw-{self.files:06d}.parquet", compression="lz4")

    @property
    def con(self) -> Any:
        if self._con is None:
            import duckdb

            temp = self.directory / "duckdb"
            temp.mkdir(exist_ok=True)
            self._con = duckdb.connect(
                config={"memory_limit": MEMORY_LIMIT, "temp_directory": str(temp), "threads": 1}
            )
            self._con.execute(
                f"CREATE VIEW raw AS SELECT * FROM read_parquet('{self.directory}/raw-*.parquet')"
            )
        return self._con

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(Exception):
                self._con.close()
            self._con = None

    def problem(self, higher_is_better: bool) -> Problem | None:
        """The first problem in file order: a duplicate iteration (its second row), a run with only warm-up
        iterations, a run whose values overflow their sum."""
        con = self.con
        dup = con.execute(
            "SELECT node, run, iteration FROM raw GROUP BY node, run, iteration HAVING count(*) > 1 LIMIT 1"
        ).fetchone()
        if dup is not None:
            node, run, iteration, line = con.execute(
                "SELECT node, run, iteration, line FROM (SELECT *, row_number() OVER "
                "(PARTITION BY node, run, iteration ORDER BY row) AS k FROM raw) WHERE k = 2 "
                "ORDER BY row LIMIT 1"
            ).fetchone()
            return Problem("duplicate", node, run, line, iteration)
        self._sums(higher_is_better)
        bad = con.execute(
            "SELECT node, run, line, n FROM runs WHERE n = 0 OR NOT isfinite(total) "
            "ORDER BY first_row LIMIT 1"
        ).fetchone()
        if bad is not None:
            node, run, line, n = bad
            return Problem("warmup-only" if n == 0 else "overflow", node, run, line)
        return None

    def _sums(self, higher_is_better: bool) -> None:
        term = "1.0 / value" if higher_is_better else "value"
        self.con.execute(
            "CREATE OR REPLACE TEMP TABLE runs AS SELECT node, run, min(row) AS first_row, "
            "arg_min(line, row) AS line, count(*) FILTER (WHERE NOT warmup) AS n, "
            f"coalesce(sum({term}) FILTER (WHERE NOT warmup), 0.0) AS total FROM raw GROUP BY node, run"
        )

    def runs_per_node(self) -> list[tuple[str, int]]:
        return [(n, int(c)) for n, c in self.con.execute(
            "SELECT node, count(*) FROM runs GROUP BY node ORDER BY node").fetchall()]  # fmt: skip

    def iterations(self, txid: str) -> Iterator[tuple[str, pa.Table]]:
        """(node, iterations chunk): the raw rows with their run's id, one spilled chunk at a time."""
        for k in range(1, self.files + 1):
            path = self.directory / f"raw-{k:06d}.parquet"
            table = self.con.sql(
                "SELECT node, md5($txid || node || chr(0) || run) AS run_id, iteration, warmup, seconds, "
                f"value FROM read_parquet('{path}') ORDER BY node, row",
                params={"txid": txid},
            ).to_arrow_table()
            yield from _by_node(table)

    def runs(
        self, txid: str, higher_is_better: bool, starts: dict[str, int]
    ) -> Iterator[tuple[str, pa.Table]]:
        """(node, chunk of run_id, trial, value, summary): trials from each node's start, in file order."""
        con = self.con
        con.register("starts", pa.table({"node": list(starts), "start": list(starts.values())}))
        value = "n / total" if higher_is_better else "total / n"
        reader = con.sql(
            "SELECT node, md5($txid || node || chr(0) || run) AS run_id, "
            "CAST(start + row_number() OVER (PARTITION BY node ORDER BY first_row) - 1 AS INTEGER) AS trial, "
            f"CAST({value} AS DOUBLE) AS value, '{{\"source_run\": ' || to_json(run) || '}}' AS summary "
            "FROM runs JOIN starts USING (node) ORDER BY node, trial",
            params={"txid": txid},
        ).to_arrow_reader(BATCH_ROWS)
        for batch in reader:
            yield from _by_node(pa.Table.from_batches([batch]))


def _by_node(table: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """Split a table sorted by node into one table per node."""
    import numpy as np

    n = table.num_rows
    if n == 0:
        return
    nodes = table.column("node").to_numpy(zero_copy_only=False)
    starts = [0, *(np.flatnonzero(nodes[1:] != nodes[:-1]) + 1).tolist(), n]
    rest = table.drop_columns(["node"])
    for a, b in itertools.pairwise(starts):
        yield str(nodes[a]), rest.slice(a, b - a)
