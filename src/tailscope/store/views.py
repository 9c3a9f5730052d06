"""DuckDB views over a campaign's shards; nothing needs a server.

Views (one per table, plus `*_all` with every stored row):
- `runs`: one row per (node, variant, trial): an ok attempt is preferred over failed ones, then the earliest.
  A trial re-run after a failure, or written twice by two writers, is therefore counted once.
- `iterations`, `pages`, `counters`: the rows of the runs in `runs` only (orphans of an interrupted chunk,
  whose
  `runs` shard was never written, are invisible).
- `nodes`: the latest facts per node. `samples`: every background-monitor sample.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from tailscope.store.campaign import Campaign, StoreError
from tailscope.store.schema import TABLES

_CHILD_TABLES = ("iterations", "pages", "counters")


def check_shards(campaign: Campaign) -> None:
    """Read every shard's footer; a truncated or corrupt shard is reported by path, with what to do."""
    for table in TABLES:
        expected = set(TABLES[table].names)
        for path in campaign.shard_files(table):
            try:
                schema = pq.read_schema(path)
            except Exception as exc:  # pyarrow raises ArrowInvalid/OSError variants for damaged files
                raise StoreError(
                    f"{path}: not a readable Parquet shard ({_first_line(exc)}); it was probably truncated "
                    f"by a crash or a full file system. Move it out of {path.parent} and run "
                    f"`tailscope run --resume --campaign {campaign.root}` to redo its trials"
                ) from exc
            missing = expected - set(schema.names)
            required = {c.name for c in TABLES[table].columns if not c.nullable}
            if missing & required:
                raise StoreError(f"{path}: shard of table {table} lacks columns {sorted(missing & required)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _source(con: duckdb.DuckDBPyConnection, campaign: Campaign, table: str) -> str:
    files = campaign.shard_files(table)
    if not files:
        empty = f"_empty_{table}"
        con.register(empty, TABLES[table].schema.empty_table())
        return f"SELECT * FROM {empty}"
    pattern = str(campaign.shard_dir(table) / "*.parquet").replace("'", "''")
    return f"SELECT * FROM read_parquet('{pattern}', union_by_name = true)"


def connect(campaign: Campaign | Path, *, check: bool = True) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the campaign's views defined."""
    if not isinstance(campaign, Campaign):
        campaign = Campaign.open(Path(campaign))
    if check:
        check_shards(campaign)
    con = duckdb.connect(":memory:")
    try:
        for table in TABLES:
            con.execute(f"CREATE VIEW {table}_all AS {_source(con, campaign, table)}")
        # Materialised once per connection: every child view and query filters on it.
        con.execute(
            """
            CREATE TEMP TABLE runs AS
            SELECT * EXCLUDE (attempt_rank) FROM (
                SELECT *, row_number() OVER (
                    PARTITION BY node, variant, trial
                    ORDER BY (status = 'ok') DESC, started_at, run_id) AS attempt_rank
                FROM runs_all)
            WHERE attempt_rank = 1
            """
        )
        for table in _CHILD_TABLES:
            con.execute(
                f"CREATE VIEW {table} AS SELECT * FROM {table}_all WHERE run_id IN (SELECT run_id FROM runs)"
            )
        con.execute(
            """
            CREATE VIEW nodes AS
            SELECT * EXCLUDE (fact_rank) FROM (
                SELECT *, row_number() OVER (PARTITION BY node ORDER BY collected_at DESC) AS fact_rank
                FROM nodes_all)
            WHERE fact_rank = 1
            """
        )
        con.execute("CREATE VIEW samples AS SELECT * FROM samples_all")
    except duckdb.Error as exc:
        con.close()
        raise StoreError(f"{campaign.root}: cannot read shards: {_first_line(exc)}") from exc
    return con
