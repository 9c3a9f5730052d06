"""The one read path: every module reads a campaign through `connect` (SQL over DuckDB views) or
`read_table` (Arrow), never by globbing shard directories or by opening Parquet files itself.

- Exactly the committed shard files are read (`Campaign.shard_files`: the files commit records name), as an
  explicit list: a campaign path with `[`, `*`, `?` or `\\` reads that campaign and no other.
- Every page is checked against its CRC (written by the load path), and every shard's footer against the
  hash its commit record keeps (store/footer.py); a damaged or truncated shard is named, with the command
  that repairs it, and no number computed from it reaches the user. A shard whose columns are not its
  table's (a renamed or unknown column) is damaged too: never read as a column of NULLs.
- Tables are read lazily, once per connection, when a query first names them.

Views (one per table, plus `<table>_all` with every stored row):
- `runs`: one row per (node, variant, trial): an ok attempt is preferred over failed ones, then the earliest.
- child tables (every table with a `run_id` column: iterations, pages, counters, ...): the rows of the runs in
  `runs` only.
- `iterations(run_ids)` and `iterations_of_runs(run_ids=...)` read only the iterations shards of the commits
  that stored those runs (every writer commits a run's iterations with it, store/load.py), so `analyze`
  reads the iterations its flagged runs need, not every shard.
- `nodes`: the latest facts per node. Other tables (samples, ...): every row.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tailscope.heap import return_freed_memory
from tailscope.store.campaign import COMMITS, QUARANTINE, Campaign, CommitRecord, conform
from tailscope.store.errors import StoreError
from tailscope.store.footer import checked_source, footer_damage
from tailscope.store.schema import TABLES

# DuckDB, pandas and pyarrow.compute are imported where they are used:
# a writer that only asks `samples_of` (an import) loads pyarrow alone (0.1 s against 0.5 s with them).
if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class DamagedShard:
    path: Path
    reason: str


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def repair_advice(campaign: Campaign) -> str:
    return (
        f"run `tailscope campaign collect {campaign.root}` to move the damaged chunk aside, then "
        f"`tailscope run --resume --campaign {campaign.root}` to redo its trials"
    )


def _damaged_error(campaign: Campaign, damaged: Sequence[DamagedShard]) -> StoreError:
    first = damaged[0]
    more = f" (and {len(damaged) - 1} more damaged shard(s))" if len(damaged) > 1 else ""
    return StoreError(f"{first.path}: damaged shard: {first.reason}{more}; {repair_advice(campaign)}")


def read_shard(
    path: Path, table: str, columns: Sequence[str] | None = None, *, footer: str | None = None
) -> pa.Table:
    """One shard, its footer hash (`footer`: from its commit record, None when it has none) and every page
    checksum verified, conformed to the table's current schema."""
    damage = footer_damage(path, footer)
    if damage is not None:
        raise _ShardUnreadable(path, damage)
    try:
        data = pq.read_table(path, page_checksum_verification=True)
    except FileNotFoundError as exc:
        raise _ShardUnreadable(path, "missing (named by a commit record but not on disk)") from exc
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise _ShardUnreadable(path, f"not a readable Parquet shard ({_first_line(exc)})") from exc
    try:
        data = conform(data, table)
    except StoreError as exc:
        raise _ShardUnreadable(path, str(exc)) from exc
    except UnicodeDecodeError as exc:  # a column name that is not UTF-8 (a footer without a hash to check)
        raise _ShardUnreadable(path, "not a readable Parquet shard (a column name is not UTF-8)") from exc
    if columns is not None:
        data = data.select(list(columns))
    return data


class _ShardUnreadable(Exception):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def _read_files(
    table: str, files: Sequence[Path], columns: Sequence[str] | None, footers: dict[str, str]
) -> tuple[list[pa.Table], list[DamagedShard]]:
    def one(path: Path) -> pa.Table | DamagedShard:
        try:
            return read_shard(path, table, columns, footer=footers.get(path.name))
        except _ShardUnreadable as exc:
            return DamagedShard(exc.path, exc.reason)

    results = [one(p) for p in files]
    tables = [r for r in results if isinstance(r, pa.Table)]
    damaged = [r for r in results if isinstance(r, DamagedShard)]
    return tables, damaged


def _scan_threads() -> int:
    """Shard files read at once: one per CPU this process may run on, at most 4 (a shard of one node's trials
    is ~0.4 ms of footer and column set-up, nearly all of it outside the GIL)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _scan_one(path: str, schema: pa.Schema, known: frozenset[str], footer: str | None) -> pa.Table | None:
    """One shard's `schema` columns, footer hash and page checksums verified, or None when it needs the
    careful path: a damaged footer, a read error, a column its table does not have (`known`), a type to
    convert, a required column missing or null."""
    source, damage = checked_source(path, footer)
    if damage is not None:
        return None
    try:
        opened = pa.BufferReader(source) if isinstance(source, bytes) else source
        with pq.ParquetFile(opened, page_checksum_verification=True) as shard:
            present = set(shard.schema_arrow.names)
            if not present <= known:
                return None
            data = shard.read(columns=[n for n in schema.names if n in present], use_threads=False)
    except (OSError, pa.ArrowException, ValueError, KeyError):
        return None
    if data.schema.equals(schema):
        return data
    arrays = []
    for field in schema:
        if field.name in present:
            column = data.column(field.name)
            if not column.type.equals(field.type) or (not field.nullable and column.null_count):
                return None
            arrays.append(column)
        elif field.nullable:  # a column added to the table after this shard was written
            arrays.append(pa.nulls(data.num_rows, field.type))
        else:
            return None
    return pa.Table.from_arrays(arrays, schema=schema)


def _scan(
    table: str, files: Sequence[Path], columns: Sequence[str] | None, footers: dict[str, str]
) -> tuple[pa.Table, np.ndarray] | None:
    """Every file's rows (page checksums verified) as one table, and the file (index into `files`) of each
    row; None when any file needs the careful path (`_scan_one`).

    A campaign is mostly small shards (one node's chunk of trials), so the cost is per file, not per row:
    each file is opened and read on its own, up to `_scan_threads` at once. 1,000 runs shards, 13 columns:
    0.39 s with 2 threads against 0.56 s for one Arrow dataset scan over them (which reads its fragments one
    after the other) and 0.64 s for the same reads in one thread, on a 2-vCPU guest."""
    from concurrent.futures import ThreadPoolExecutor

    spec = TABLES[table]
    schema = spec.schema if columns is None else pa.schema([spec.schema.field(c) for c in columns])
    names = [str(f) for f in files]
    expected = [footers.get(f.name) for f in files]
    known = frozenset(spec.names)
    threads = min(_scan_threads(), len(names))

    def read(lo: int, hi: int) -> list[pa.Table | None]:
        return [_scan_one(names[i], schema, known, expected[i]) for i in range(lo, hi)]

    if threads > 1:
        # each thread reads runs of consecutive files (8 per thread in all, for balance), not one task per
        # file: 1,000 futures' hand-offs cost more than the reads gained on a loaded 2-vCPU guest (1,000 runs
        # shards: median 0.76 s one future per file, 0.60 s in runs, 0.92 s in one thread)
        step = -(-len(names) // (threads * 8))
        with ThreadPoolExecutor(threads, thread_name_prefix="tailscope-read") as pool:
            batches = pool.map(lambda lo: read(lo, min(lo + step, len(names))), range(0, len(names), step))
            parts = [part for batch in batches for part in batch]
    else:
        parts = read(0, len(names))
    tables = [p for p in parts if p is not None]
    if len(tables) < len(parts):
        return None
    file_of = [np.full(t.num_rows, i, np.int32) for i, t in enumerate(tables)]
    data = pa.concat_tables(tables) if tables else schema.empty_table()
    if len(tables) > 1 and data.nbytes <= COMBINE_MAX_BYTES and data.nbytes < SMALL_SHARD_BYTES * len(tables):
        data = data.combine_chunks()  # many small shards: their rows in one buffer per column
        del parts, tables
        # Each shard's footer and column readers are many small allocations, freed once it is read, between
        # the small buffers of the rows that stay: 1,000 runs shards left 27 MiB free but held, which no later
        # allocation of the analysis reused, so it added to the peak. The rows were copied into one buffer
        # per column (above), so whole pages come free; large shards (background samples) are neither copied
        # nor many, and are left as they are.
        return_freed_memory()
    return data, np.concatenate(file_of) if file_of else np.zeros(0, np.int32)


SMALL_SHARD_BYTES = 1 << 20  # shards this small on average (one node's chunk of trials) are combined
COMBINE_MAX_BYTES = 256 << 20  # never a copy of more than this (nor a text column past 2 GiB of offsets)


def read_table(
    campaign: Campaign,
    table: str,
    columns: Sequence[str] | None = None,
    *,
    files: Sequence[Path] | None = None,
) -> pa.Table:
    """Every committed row of `table` (all shards, checksums verified) as one Arrow table; with `files`,
    the rows of those committed shards only.

    The fast path reads every file in one dataset scan; when it fails, each file is read on its own so the
    damaged ones are named (and the rest would read)."""
    return _read_with_files(campaign, table, columns, files)[0]


def _read_with_files(
    campaign: Campaign,
    table: str,
    columns: Sequence[str] | None = None,
    files: Sequence[Path] | None = None,
) -> tuple[pa.Table, list[Path], np.ndarray]:
    """`read_table`, with the shard files read and the file (index into them) of every row."""
    spec = TABLES[table]
    files = campaign.shard_files(table) if files is None else list(files)
    footers = campaign.footer_digests(table) if files else {}
    if files:
        scanned = _scan(table, files, columns, footers)
        if scanned is not None:
            return scanned[0], files, scanned[1]
    tables, damaged = _read_files(table, files, columns, footers)
    if damaged:
        raise _damaged_error(campaign, damaged)
    schema = spec.schema if columns is None else pa.schema([spec.schema.field(c) for c in columns])
    if not tables:
        return schema.empty_table(), files, np.zeros(0, np.int32)
    file_of = np.concatenate([np.full(t.num_rows, i, np.int32) for i, t in enumerate(tables)])
    return pa.concat_tables(tables), files, file_of


def _check_ends(campaign: Campaign, table: str, files: Sequence[Path]) -> None:
    """The shards a read leaves out (`iterations(run_ids)`) still end as the Parquet footers their commits
    recorded: a truncated, missing or changed one is named as if it had been read (their pages are checked
    when a read needs them)."""
    footers = campaign.footer_digests(table)
    damaged = [
        DamagedShard(f, reason)
        for f in files
        if (reason := footer_damage(f, footers.get(f.name))) is not None
    ]
    if damaged:
        raise _damaged_error(campaign, damaged)


def validate_shards(campaign: Campaign) -> tuple[int, list[DamagedShard]]:
    """Read every committed shard in full (page checksums, schema): the damaged ones are named, the others
    are unaffected. Used by `campaign collect`."""
    count, damaged = 0, []
    for table in TABLES:
        files = campaign.shard_files(table)
        count += len(files)
        damaged += _read_files(table, files, None, campaign.footer_digests(table))[1]
    return count, damaged


def stored_trials(campaign: Campaign, node: str) -> dict[str, dict[int, str]]:
    """variant -> trial -> best stored status ('ok' wins) of one node's runs (every source)."""
    runs = read_table(campaign, "runs", ["node", "variant", "trial", "status"])
    out: dict[str, dict[int, str]] = {}
    if runs.num_rows == 0:
        return out
    for n, variant, trial, status in zip(
        *(runs.column(c).to_pylist() for c in runs.column_names), strict=True
    ):
        if n != node:
            continue
        per = out.setdefault(variant, {})
        if per.get(trial) != "ok":
            per[trial] = status
    return out


def samples_of(campaign: Campaign, node: str, source: str) -> int:
    """How many sample values of (node, source) are stored (every samples row is visible: no attempt
    ranking)."""
    return samples_by_node(campaign, source).get(node, 0)


def samples_by_node(campaign: Campaign, source: str) -> dict[str, int]:
    """node -> how many sample values of `source` are stored. Reads only the node and source columns of each
    committed samples shard, once, dictionary-encoded, page checksums verified, with pyarrow alone: an
    importer asks this before it writes (once for all the files it imports), and must not load DuckDB,
    pandas or pyarrow.dataset for it. A damaged shard is named as `read_table` names it."""
    counts: dict[str, int] = {}
    damaged = []
    footers = campaign.footer_digests("samples")
    for path in campaign.shard_files("samples"):
        reason = footer_damage(path, footers.get(path.name))
        if reason is not None:
            damaged.append(DamagedShard(path, reason))
            continue
        try:
            data = pq.ParquetFile(
                path, read_dictionary=["node", "source"], page_checksum_verification=True
            ).read(columns=["node", "source"])
        except FileNotFoundError:
            damaged.append(DamagedShard(path, "missing (named by a commit record but not on disk)"))
            continue
        except (OSError, pa.ArrowException, ValueError, KeyError) as exc:
            damaged.append(DamagedShard(path, f"not a readable Parquet shard ({_first_line(exc)})"))
            continue
        for batch in data.to_batches():  # node and source cut alike
            of_source = _equals(batch.column("source"), source)
            for word, n in _word_counts(batch.column("node"), of_source).items():
                counts[word] = counts.get(word, 0) + n
    if damaged:
        raise _damaged_error(campaign, damaged)
    return counts


def _word_counts(chunk: pa.Array, wanted: np.ndarray) -> dict[str, int]:
    """How many of the `wanted` rows of a (dictionary-encoded) string chunk hold each word."""
    if not pa.types.is_dictionary(chunk.type):
        words = np.asarray(chunk.to_pylist(), dtype=object)[wanted]
        return {str(w): int(n) for w, n in zip(*np.unique(words, return_counts=True), strict=True)}
    counts = np.bincount(_indices(chunk)[wanted], minlength=len(chunk.dictionary))
    return {w: int(n) for w, n in zip(chunk.dictionary.to_pylist(), counts.tolist(), strict=True) if n}


def _indices(chunk: pa.DictionaryArray) -> np.ndarray:
    """A dictionary chunk's indices from their buffer (Arrow's to_numpy imports pandas)."""
    indices = chunk.indices
    sign = "u" if pa.types.is_unsigned_integer(indices.type) else ""
    kind = np.dtype(f"{sign}int{indices.type.bit_width}")
    return np.frombuffer(indices.buffers()[1], kind)[indices.offset : indices.offset + len(indices)]


def _equals(chunk: pa.Array, value: str) -> np.ndarray:
    """Which rows of a (dictionary-encoded) string chunk equal `value`, without pyarrow.compute."""
    if not pa.types.is_dictionary(chunk.type):
        return np.asarray(chunk.to_pylist(), dtype=object) == value
    codes = [i for i, word in enumerate(chunk.dictionary.to_pylist()) if word == value]
    return np.isin(_indices(chunk), codes)


# --- SQL over the campaign --------------------------------------------------------------------------------
_RUNS_VIEW_COLUMNS = ("run_id", "node", "variant", "trial", "status", "started_at")  # what the view ranks by


def _child_tables() -> list[str]:
    return [t for t, spec in TABLES.items() if t != "runs" and "run_id" in spec.names]


class CampaignConnection:
    """A DuckDB connection whose views read the campaign's committed shards lazily (see the module doc).
    Use it like a DuckDB connection: `execute(sql, params)` returns DuckDB's result, `close()`."""

    def __init__(self, campaign: Campaign, *, runs_also: Sequence[str] = ()) -> None:
        self.campaign = campaign
        # runs columns the narrow read (`runs(columns=)`) reads too, for a later question (`run_summaries`):
        # one scan of the runs shards instead of two
        self._runs_also = tuple(runs_also)
        self._duckdb: Any = None  # opened by the first SQL question (`_con`), not before
        self._arrow: dict[str, pa.Table] = {}  # the base tables read, registered with DuckDB once it is open
        self._views: list[str] = []  # the views made before DuckDB was open: made when it opens
        self._loaded: set[str] = set()
        # runs_all as read, its shard files and the file of each row: which commit stored a run
        self._runs_read: tuple[pa.Table, list[Path], np.ndarray] | None = None
        # the columns runs_all holds when `runs(columns=)` read first (None: all); a query that needs
        # another reads every column then (`execute`)
        self._runs_columns: tuple[str, ...] | None = None
        self._runs_table = False  # the runs view is a ranked copy (several attempts of a trial)
        self._runs_sorted: tuple[pa.Table, pa.Array] | None = None  # runs_all as read, its rows' order
        names = "|".join(sorted(TABLES, key=len, reverse=True))
        self._mentions = re.compile(rf"\b({names})(_all)?\b")

    # The base table `<t>_all`, then the view `<t>` built on it.
    def _load_base(self, table: str, columns: Sequence[str] | None = None) -> None:
        key = f"{table}_all"
        if key in self._loaded:
            return
        if table == "runs":
            if columns is not None:  # the runs view's own columns too, and those asked for at connect
                wanted = {*columns, *_RUNS_VIEW_COLUMNS, *self._runs_also}
                columns = [c for c in TABLES["runs"].names if c in wanted]
            self._runs_sorted = None  # the order of an earlier read's rows (no reference to them kept)
            self._runs_read = _read_with_files(self.campaign, table, columns)
            self._runs_columns = tuple(columns) if columns is not None else None
            data = self._runs_read[0]
        else:
            data = read_table(self.campaign, table)
        self._arrow[key] = data
        if self._duckdb is not None:
            self._duckdb.abort()
            self._duckdb.register(key, data)
        self._loaded.add(key)

    @property
    def _con(self) -> Any:
        """The DuckDB connection, opened when a question first needs SQL. Questions the store answers with
        Arrow alone (the runs as read, iterations of runs, counters and co-runners of runs, node facts, an
        empty table) never open it: `analyze` of 1,000 nodes then spends neither DuckDB's import nor its
        connection (0.06 s, 41 MiB)."""
        if self._duckdb is None:
            import duckdb

            con = duckdb.connect(":memory:")
            # no progress bar: DuckDB draws it on fd 1 for queries over 2 s, before `analyze --json > file`
            con.execute("SET enable_progress_bar = false")
            with contextlib.suppress(duckdb.Error):  # one zone for both paths (_as_duckdb_frame)
                con.execute(f"SET TimeZone = '{local_zone()}'")
            for key, data in self._arrow.items():
                con.register(key, data)
            for view in self._views:
                con.execute(view)
            self._duckdb = con
        return self._duckdb

    def _view(self, sql: str) -> None:
        """Make a view now if DuckDB is open, else when it opens."""
        if self._duckdb is None:
            self._views.append(sql)
        else:
            self._duckdb.execute(sql)

    def _abort(self) -> None:
        """Drop a result left unfetched (fetchone), which would block loading; nothing to do before SQL."""
        if self._duckdb is not None:
            self._duckdb.abort()

    def _load_view(self, table: str) -> None:
        if table in self._loaded:
            return
        self._load_base(table)
        if table == "runs" and self._one_attempt_per_trial():  # the common case: every row is visible
            self._view("CREATE VIEW runs AS SELECT * FROM runs_all")
        elif table == "runs":
            self._runs_table = True
            self._con.execute(
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
        elif table == "nodes":
            self._con.execute(
                """
                CREATE VIEW nodes AS
                SELECT * EXCLUDE (fact_rank) FROM (
                    SELECT *, row_number() OVER (PARTITION BY node ORDER BY collected_at DESC) AS fact_rank
                    FROM nodes_all)
                WHERE fact_rank = 1
                """
            )
        elif table in _child_tables():
            self._load_view("runs")
            self._con.execute(
                f"CREATE VIEW {table} AS SELECT * FROM {table}_all WHERE run_id IN (SELECT run_id FROM runs)"
            )
        else:
            self._con.execute(f"CREATE VIEW {table} AS SELECT * FROM {table}_all")
        self._loaded.add(table)

    def _one_attempt_per_trial(self) -> bool:
        """Whether runs_all holds one row per (node, variant, trial): then the runs view is runs_all itself,
        not a copy ranked by attempt (50,000 runs: 0.1-0.2 s and 50 MiB). Told by the rows in the view's
        order (`_runs_order`, which `runs` then takes), no two neighbours the same trial: a group-by would
        import Acero and the Arrow datasets for it (~18 ms of a small campaign's `analyze`)."""
        if self._runs_read is None:
            return False
        data = self._runs_read[0]
        keys = ["variant", "node", "trial"]
        if any(data.column(k).null_count for k in keys) or data.num_rows < 2:
            return len({tuple(r.values()) for r in data.select(keys).to_pylist()}) == data.num_rows
        import pyarrow.compute as pc

        ordered = data.select(keys).take(self._runs_order(data))
        last = data.num_rows - 1
        same: Any = None
        for k in keys:
            column = ordered.column(k)
            equal = pc.equal(column.slice(1), column.slice(0, last))
            same = equal if same is None else pc.and_(same, equal)
        return not pc.any(same).as_py()

    def _runs_order(self, data: pa.Table) -> pa.Array:
        """The rows of runs_all (`data`, as read) by variant, node, trial (a stable sort): computed once."""
        import pyarrow.compute as pc

        if self._runs_sorted is None or self._runs_sorted[0] is not data:
            keys = [("variant", "ascending"), ("node", "ascending"), ("trial", "ascending")]
            self._runs_sorted = (data, pc.sort_indices(data, keys))
        return self._runs_sorted[1]

    def ensure(self, tables: Iterable[str]) -> None:
        wanted = [n for n in tables if n not in self._loaded]
        if wanted:
            self._abort()
        for name in wanted:
            if name.endswith("_all") and name.removesuffix("_all") in TABLES:
                self._load_base(name.removesuffix("_all"))
            elif name in TABLES:
                self._load_view(name)

    def _all_run_columns(self) -> None:
        """Read runs_all again with every column (a query needs one the first, narrower read left out)."""
        had_view = "runs" in self._loaded
        con = self._con  # only SQL needs a column the narrow read left out
        con.abort()
        if had_view:
            con.execute("DROP TABLE runs" if self._runs_table else "DROP VIEW runs")
            self._runs_table = False
        con.unregister("runs_all")
        self._arrow.pop("runs_all", None)
        self._loaded -= {"runs", "runs_all"}
        self._load_base("runs")
        if had_view:
            self._load_view("runs")

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        mentioned = [m.group(0) for m in self._mentions.finditer(sql)]
        narrow = self._runs_columns is not None and {"runs", "runs_all"} & set(mentioned)
        if narrow and "*" in sql.replace("count(*)", ""):  # every column asked for
            self._all_run_columns()
            narrow = False
        self.ensure(mentioned)
        import duckdb  # imported by `_con` already: the name of its exception

        try:
            return self._con.execute(sql) if parameters is None else self._con.execute(sql, parameters)
        except duckdb.BinderException:  # a column the narrow read left out
            if not narrow:
                raise
        self._all_run_columns()
        return self._con.execute(sql) if parameters is None else self._con.execute(sql, parameters)

    def close(self) -> None:
        if self._duckdb is not None:
            self._duckdb.close()
        self._arrow.clear()
        self._runs_read = None
        self._runs_sorted = None

    # --- the questions the rest of tailscope asks (all the SQL outside the store's own views is here) -------
    def df(self, sql: str, parameters: Sequence[Any] | None = None) -> pd.DataFrame:
        return self.execute(sql, parameters).df()

    def table(self, name: str) -> pd.DataFrame:
        """Every visible row of one table (empty when the campaign has none)."""
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}")
        if not self.campaign.shard_files(name):
            return self._empty_frame(name)
        return self.df(f"SELECT * FROM {name}")

    def runs(
        self, *, probe: str | None = None, node: str | None = None, columns: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """Every stored trial (each counted once, any status), ordered by variant, node, trial; with
        `columns`, only those (read first, the shards' other columns are not read until a query needs them:
        13 of the 29 columns of 1,000 shards are a third of the read)."""
        where, params = _where(probe=probe, node=node)
        if columns is None:
            return self.df(f"SELECT * FROM runs {where} ORDER BY variant, node, trial", params)
        if "runs_all" not in self._loaded:
            self._abort()
            self._load_base("runs", columns)
        self.ensure(["runs"])
        if not where and not self._runs_table and self._runs_read is not None:
            return self._runs_frame(columns)
        names = ", ".join(f'"{c}"' for c in columns)
        return self.df(f"SELECT {names} FROM runs {where} ORDER BY variant, node, trial", params)

    def _runs_frame(self, columns: Sequence[str]) -> pd.DataFrame:
        """`SELECT columns FROM runs ORDER BY variant, node, trial`, sorted and converted by Arrow when the
        view is runs_all itself, with the dtypes DuckDB's .df() gives (nullable integers where a value is
        missing, object None for a column without any value, timestamps in DuckDB's time zone): half the
        time and memory of DuckDB's sorted copy."""
        data = self._runs_read[0] if self._runs_read is not None else None
        assert data is not None
        return self._as_duckdb_frame(data.select(list(columns)).take(self._runs_order(data)))

    def _as_duckdb_frame(self, data: pa.Table) -> pd.DataFrame:
        """`data` as pandas with the dtypes DuckDB's .df() gives it: nullable integers where a value is
        missing, object None for a text column without any value, timestamps in DuckDB's time zone."""
        import pandas as pd

        nullable = {pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()}
        frame = data.to_pandas(types_mapper=nullable.get)
        zone = local_zone() if self._duckdb is None else self._duckdb.execute(
            "SELECT current_setting('TimeZone')").fetchone()[0]  # fmt: skip
        if not data.num_rows:  # a table nothing was stored in: its columns at once, not one by one (~0.3 ms
            # each, and the facts have dozens)
            empty = pd.Series([], dtype=object)
            return pd.DataFrame({
                field.name: np.empty(0, dtype=field.type.to_pandas_dtype()) if field.type in nullable
                else empty if pa.types.is_string(field.type)
                else frame[field.name].dt.tz_convert(zone)
                if pa.types.is_timestamp(field.type) and field.type.tz is not None
                else frame[field.name]
                for field in data.schema
            }, index=frame.index)  # fmt: skip
        for field in data.schema:
            column = data.column(field.name)
            if field.type in nullable and column.null_count == 0:
                frame[field.name] = frame[field.name].to_numpy(dtype=field.type.to_pandas_dtype())
            elif column.null_count == len(column) and pa.types.is_string(field.type):  # none, or no rows
                frame[field.name] = pd.Series([None] * len(column), dtype=object)
            elif pa.types.is_timestamp(field.type) and field.type.tz is not None:
                frame[field.name] = frame[field.name].dt.tz_convert(zone)
        return frame

    def run_summaries(self) -> list[tuple[str, str, str]]:
        """(run_id, probe, summary JSON) of every visible run that stored a summary. From the runs as read
        when they hold them (`connect(..., runs_also=("probe", "summary"))`, then `runs(columns=)`): no
        second scan of the runs shards, and no pandas column of 50,000 texts."""
        import pyarrow.compute as pc

        self.ensure(["runs"])
        read = self._runs_read
        names = ["run_id", "probe", "summary"]
        if self._runs_table or read is None or not set(names) <= set(read[0].column_names):
            return [
                (str(r), str(p), str(s))
                for r, p, s in self.execute(
                    "SELECT run_id, probe, summary FROM runs WHERE summary IS NOT NULL"
                ).fetchall()
            ]
        data = read[0].select(names)
        data = data.filter(pc.is_valid(data.column("summary")))
        return list(zip(*(data.column(c).to_pylist() for c in data.column_names), strict=True))

    def iterations_of_runs(
        self, *, probe: str | None = None, node: str | None = None, run_ids: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """The timed iterations of the runs `runs(probe=, node=)` selects; with `run_ids`, of those runs
        only (reading only the shards of the commits that stored them)."""
        where, params = _where(probe=probe, node=node)
        columns = "run_id, iteration, thread, kernel, cpu, warmup, seconds, value"
        if run_ids is not None:
            return self._iterations_of(run_ids, columns)
        if not where:  # the view already holds only the stored runs' rows
            return self.df(f"SELECT {columns} FROM iterations")
        return self.df(
            f"SELECT {columns} FROM iterations WHERE run_id IN (SELECT run_id FROM runs {where})", params
        )

    def iterations(self, run_ids: Sequence[str]) -> pd.DataFrame:
        """Every column of the given runs' iterations (reading only the shards that can hold them)."""
        return self._iterations_of(run_ids, "*")

    def _iterations_of(self, run_ids: Sequence[str], columns: str) -> pd.DataFrame:
        ids = [str(r) for r in run_ids]
        query = f"SELECT {columns} FROM {{}} WHERE run_id IN (SELECT unnest(?::VARCHAR[]))"
        files = None if "iterations_all" in self._loaded else self._child_shards("iterations", ids)
        if files is None:  # read already, or no commit records to tell: the view of every shard
            return self.df(query.format("iterations"), [ids])
        read = set(files)
        _check_ends(
            self.campaign, "iterations", [f for f in self.campaign.shard_files("iterations") if f not in read]
        )
        names = None if columns == "*" else [c.strip() for c in columns.split(",")]
        part = read_table(self.campaign, "iterations", names, files=files)  # only the columns asked for
        if not self._runs_table and self._runs_read is not None:
            # every stored run is visible (runs view = runs_all): the rows of the runs asked for, by Arrow
            import pyarrow.compute as pc

            wanted = self._of_stored_runs(part, ids)
            if not pc.all(wanted).as_py():  # a copy only when some rows are not asked for
                part = part.filter(wanted)
            return self._as_duckdb_frame(part)
        self._abort()
        self._con.register("iterations_part", part)  # a name `execute` does not take for a table's
        try:
            return self._con.execute(
                query.format("iterations_part") + " AND run_id IN (SELECT run_id FROM runs)", [ids]
            ).df()
        finally:
            self._con.unregister("iterations_part")

    def _child_shards(self, table: str, run_ids: Sequence[str]) -> list[Path] | None:
        """The shards of `table` that the commits which stored `run_ids` wrote (a run's iterations are
        committed with it: store/load.py), or None when the campaign has no commit records."""
        import pyarrow.compute as pc

        if not self.campaign.uses_commit_records:
            return None
        self.ensure(["runs"])
        if self._runs_read is None:
            return None
        data, files, file_of = self._runs_read
        mine = pc.is_in(data.column("run_id"), value_set=pa.array(run_ids, pa.string()))
        names = {files[i].name for i in np.unique(file_of[mine.to_numpy(zero_copy_only=False)])}
        directory = self.campaign.shard_dir(table)
        wanted = {
            directory / name
            for record in self.campaign.commit_records()
            if names.intersection(record.shards.get("runs", ()))
            for name in record.shards.get(table, ())
        }
        return sorted(wanted)

    def counters(self, run_ids: Sequence[str], *, source: str | None = None) -> pd.DataFrame:
        """Counter rows of the given runs (of one source: perf, proc, os = per-trial evidence, monitor)."""
        columns = ["run_id", "source", "pmu", "unit", "event", "value"]
        keep = None if source is None else ("source", source)
        arrow = self._rows_of_runs("counters", run_ids, columns, keep)
        if arrow is not None:
            return arrow
        extra, params = ("AND source = ?", [source]) if source else ("", [])
        return self.df(
            "SELECT run_id, source, pmu, unit, event, value FROM counters "
            f"WHERE run_id IN (SELECT unnest(?::VARCHAR[])) {extra}",
            [list(run_ids), *params],
        )

    def corunners(self, run_ids: Sequence[str]) -> pd.DataFrame:
        """Other processes that ran on the probe CPUs during the given runs (per-trial evidence)."""
        arrow = self._rows_of_runs("corunners", run_ids, list(TABLES["corunners"].names), None)
        if arrow is not None:
            return arrow
        return self.df(
            "SELECT * FROM corunners WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [list(run_ids)]
        )

    def _rows_of_runs(
        self, table: str, run_ids: Sequence[str], columns: list[str], keep: tuple[str, str] | None
    ) -> pd.DataFrame | None:
        """The rows of a child table for `run_ids`, by Arrow, as the SQL below would give them (the view's
        rows of stored runs, then `keep` = (column, value)); None when only SQL can say (several attempts
        of a trial: the runs view is a ranked copy)."""
        import pyarrow.compute as pc

        if not self.campaign.shard_files(table):  # nothing stored: the typed empty answer, nothing read
            return self._empty_frame(table, columns)
        self.ensure(["runs"])
        if self._runs_table or self._runs_read is None:
            return None
        self._load_base(table)
        data = self._arrow[f"{table}_all"]
        wanted = self._of_stored_runs(data, run_ids)
        if keep is not None:
            wanted = pc.and_(wanted, pc.equal(data.column(keep[0]), keep[1]))
        return self._as_duckdb_frame(data.filter(wanted).select(columns))

    def _of_stored_runs(self, data: pa.Table, run_ids: Sequence[str]) -> pa.ChunkedArray:
        """Which rows of a child table belong to `run_ids`, less any run never stored (an orphan's rows stay
        out, as the view leaves them out). Only while every stored run is visible (`_runs_read`)."""
        import pyarrow.compute as pc

        assert self._runs_read is not None
        asked = pa.array([str(r) for r in run_ids], pa.string())
        asked = asked.filter(pc.is_in(asked, value_set=self._runs_read[0].column("run_id")))
        return pc.is_in(data.column("run_id"), value_set=asked)

    def _empty_frame(self, table: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The typed empty answer of a table nothing was stored in (DuckDB's dtypes, DuckDB left closed)."""
        schema = TABLES[table].schema
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        return self._as_duckdb_frame(schema.empty_table())

    def has_rows(self, table: str) -> bool:
        if table not in TABLES:
            raise KeyError(table)
        if not self.campaign.shard_files(table):
            return False
        self._load_base(table)
        return self._arrow[f"{table}_all"].num_rows > 0

    def runs_of_variant(self, variant: str) -> int:
        """How many trials of `variant` are stored (each counted once: the rows of the runs view), by Arrow
        alone: an import asks this before it writes, and opening DuckDB for it was most of a small
        import's time (85 of 275 ms)."""
        import pyarrow.compute as pc

        keys = ["node", "variant", "trial"]
        data = read_table(self.campaign, "runs", keys)
        mine = data.filter(pc.equal(data.column("variant"), variant))
        return mine.group_by(["node", "trial"]).aggregate([]).num_rows

    def samples_of(self, node: str, source: str) -> int:
        """How many background sample values of (node, source) are stored (module `samples_of`)."""
        return samples_of(self.campaign, node, source)

    def run_keys(self) -> list[tuple[str, str, int, str]]:
        """(node, variant, trial, status) of every stored trial."""
        return [(str(n), str(v), int(t), str(s)) for n, v, t, s in
                self.execute("SELECT node, variant, trial, status FROM runs").fetchall()]  # fmt: skip

    def probe_names(self) -> list[str]:
        return [str(r[0]) for r in self.execute("SELECT DISTINCT probe FROM runs ORDER BY probe").fetchall()]

    def injections(self) -> pd.DataFrame:
        """The injection schedule `tailscope validate` stored, in the order it ran."""
        return self.df(
            "SELECT node, variant, trial_first, trial_last, kind, intensity, expected_cause, seed, block "
            "FROM injections_all ORDER BY started_at"
        )

    def node_names(self) -> list[str]:
        return [str(r[0]) for r in self.execute("SELECT DISTINCT node FROM runs ORDER BY node").fetchall()]

    def nodes(self) -> pd.DataFrame:
        """The latest facts of every node (the `nodes` view, by Arrow: a node's latest `collected_at`)."""
        import pyarrow.compute as pc

        if "nodes" in self._loaded:
            return self.df("SELECT * FROM nodes ORDER BY node")
        self._load_base("nodes")
        data = self._arrow["nodes_all"]
        if data.num_rows:
            data = data.take(pc.sort_indices(data, [("node", "ascending"), ("collected_at", "descending")]))
            node = data.column("node").combine_chunks()
            first = np.ones(len(node), dtype=bool)
            first[1:] = pc.not_equal(node[1:], node[:-1]).to_numpy(zero_copy_only=False)
            data = data.filter(pa.array(first))
        return self._as_duckdb_frame(data)

    def virtual_nodes(self) -> dict[str, str]:
        """node -> hypervisor, for the nodes whose facts say they are virtual machines."""
        rows = self.execute(
            "SELECT DISTINCT node, virtualization FROM nodes "
            "WHERE virtualization IS NOT NULL AND lower(virtualization) NOT IN ('none', '')"
        ).fetchall()
        return {str(node): str(virt) for node, virt in rows}

    def pages(self, *, with_trials: bool = False) -> pd.DataFrame:
        """Physical pages of the stored runs; `with_trials`: recorded ones only, with node, variant, trial."""
        if not with_trials:
            return self.df(
                'SELECT run_id, "array", thread, virtual_address, physical_address, page_size FROM pages'
            )
        return self.df(
            """
            SELECT p.run_id, r.node, r.variant, r.trial, p."array", p.thread, p.virtual_address,
                   p.physical_address, p.page_size
            FROM pages p JOIN runs r USING (run_id)
            WHERE p.physical_address IS NOT NULL
            ORDER BY r.variant, r.node, r.trial, p."array", p.virtual_address
            """
        )

    def trial_windows(self, node: str | None = None) -> list[tuple[str, int, int]]:
        """(run_id, t0_ns, t1_ns) of every ok run: its timed region in CLOCK_REALTIME."""
        where = "status = 'ok' AND realtime_start_ns IS NOT NULL AND seconds IS NOT NULL"
        params: list[Any] = []
        if node:
            where += " AND node = ?"
            params.append(node)
        rows = self.execute(
            f"SELECT run_id, realtime_start_ns, seconds FROM runs WHERE {where}", params
        ).fetchall()
        return [(str(r), int(t0), int(t0 + round(float(s) * 1e9))) for r, t0, s in rows]

    def sample_series(
        self,
        node: str | None,
        source: str | None,
        *,
        columns: str = "sample, t_ns, tsc, source, pmu, unit, event, value",
    ) -> tuple[str, str, pd.DataFrame]:
        """The one (node, source) of background samples the user picked (or the only one), with its rows."""
        pairs = self.execute("SELECT DISTINCT node, source FROM samples ORDER BY node, source").fetchall()
        chosen = [p for p in pairs if (node is None or p[0] == node) and (source is None or p[1] == source)]
        root = self.campaign.root
        if not chosen:
            stored = ", ".join(f"{n} ({s})" for n, s in pairs) or "none"
            raise StoreError(f"{root}: no samples for node {node or '(any)'}; stored: {stored}")
        if len(chosen) > 1:
            listed = ", ".join(f"{n} ({s})" for n, s in chosen)
            raise StoreError(
                f"{root}: samples of several nodes/sources ({listed}); pick with --node/--source"
            )
        picked_node, picked_source = chosen[0]
        frame = self.df(
            f"SELECT {columns} FROM samples WHERE node = ? AND source = ? "
            "ORDER BY sample, pmu, unit NULLS FIRST, event",
            [picked_node, picked_source],
        )
        return str(picked_node), str(picked_source), frame

    def run_counters(
        self, trial: int, node: str | None, probe: str | None
    ) -> tuple[tuple[str, str, str, Any, float | None, float | None], pd.DataFrame]:
        """The one run with counters at `trial` (of `node`, `probe` when given): (run_id, node, probe,
        started_at, seconds, tsc_hz) and its counter rows (source, pmu, unit, event, value)."""
        runs = self.execute(
            "SELECT r.run_id, r.node, r.probe, r.started_at, r.seconds, r.tsc_hz FROM runs r "
            "WHERE r.trial = ? AND (? IS NULL OR r.node = ?) AND (? IS NULL OR r.probe = ?) "
            "AND EXISTS (SELECT 1 FROM counters c WHERE c.run_id = r.run_id) ORDER BY r.node, r.probe",
            [trial, node, node, probe, probe],
        ).fetchall()
        if len(runs) != 1:
            listed = ", ".join(f"{r[1]} {r[2]}" for r in runs) or "none"
            raise StoreError(
                f"{self.campaign.root}: {len(runs)} runs with counters at trial {trial} ({listed}); "
                "expected one (pick with --node/--probe)"
            )
        frame = self.df("SELECT source, pmu, unit, event, value FROM counters WHERE run_id = ?", [runs[0][0]])
        return runs[0], frame

    def value_spread_by_threads(
        self, probe: str
    ) -> list[tuple[str, str, int, int, float, float, float, str]]:
        """(node, probe, threads, trials, min, median, max, unit) of a probe's ok trials per thread count."""
        rows = self.execute(
            """
            SELECT node, probe, threads, count(*), min(value), quantile_cont(value, 0.5), max(value),
                   any_value(unit)
            FROM runs WHERE probe = ? AND status = 'ok' AND value IS NOT NULL
            GROUP BY node, probe, threads ORDER BY node, threads
            """,
            [probe],
        ).fetchall()
        return [(str(r[0]), str(r[1]), int(r[2]), int(r[3]), r[4], r[5], r[6], str(r[7])) for r in rows]

    def ok_summaries(self, variant: str) -> list[tuple[str | None, float | None]]:
        """(summary JSON, value) of a variant's ok trials, in trial order."""
        return self.execute(
            "SELECT summary, value FROM runs WHERE variant = ? AND status = 'ok' ORDER BY trial", [variant]
        ).fetchall()

    def hardware_counter_values(self) -> int:
        """How many perf counter values of hardware (not software) PMUs are stored."""
        if not self.campaign.shard_files("counters"):
            return 0
        row = self.execute(
            "SELECT count(*) FROM counters WHERE source = 'perf' AND pmu NOT LIKE 'software%'"
        ).fetchone()
        return int(row[0]) if row else 0

    def timeline_samples(self, max_rows: int) -> pd.DataFrame | None:
        """Monitor samples summed over units, for the report's timelines (None when more than max_rows, or
        none stored)."""
        if not self.campaign.shard_files("samples"):
            return None
        query = (
            "SELECT node, source, pmu, event, sample, min(t_ns) AS t_ns, sum(value) AS value FROM samples "
            "GROUP BY node, source, pmu, event, sample"
        )
        rows = self.execute(f"SELECT count(*) FROM ({query})").fetchone()
        if not rows or rows[0] == 0 or rows[0] > max_rows:
            return None
        return self.df(query)

    def __enter__(self) -> CampaignConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def local_zone() -> str:
    """The time zone timestamps are shown in, as DuckDB picks it on this host: $TZ when it names a zone
    (a leading ':' dropped), else the zone /etc/localtime links to, else UTC. Both read paths (SQL and
    Arrow) use it, so a frame's timestamps do not depend on which one answered."""
    from zoneinfo import ZoneInfo

    def valid(name: str) -> bool:
        try:
            ZoneInfo(name)
        except (ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError: below
            return False
        except KeyError:
            return False
        return bool(name)

    named = os.environ.get("TZ", "").removeprefix(":")
    if named and valid(named):
        return named
    with contextlib.suppress(OSError):
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target and valid(zone := target.split("zoneinfo/", 1)[1]):
            return zone
    return "UTC"


def _where(**equal: str | None) -> tuple[str, list[Any]]:
    terms = [(column, value) for column, value in equal.items() if value]
    if not terms:
        return "", []
    return "WHERE " + " AND ".join(f"{c} = ?" for c, _ in terms), [v for _, v in terms]


def connect(
    campaign: Campaign | Path, *, check: bool = True, runs_also: Sequence[str] = ()
) -> CampaignConnection:
    """A connection with the campaign's views (see the module doc). `check` is kept for callers: every read
    is verified. `runs_also`: runs columns a narrow runs read reads too (CampaignConnection)."""
    del check
    if not isinstance(campaign, Campaign):
        campaign = Campaign.open(Path(campaign))
    return CampaignConnection(campaign, runs_also=runs_also)


# --- repair -----------------------------------------------------------------------------------------------
def quarantine(campaign: Campaign, damaged: Sequence[DamagedShard]) -> list[Path]:
    """Move every chunk with a damaged shard aside, whole (its runs and their child rows), into
    DIR/quarantine/; its trials become missing and `run --resume` redoes them. Nothing is deleted."""
    if not damaged:
        return []
    bad = {d.path.resolve() for d in damaged}
    moved: list[Path] = []
    with campaign.lock():
        if campaign.uses_commit_records:
            for record in campaign.commit_records():
                files = [(t, campaign.shard_dir(t) / n) for t, names in record.shards.items() for n in names]
                if not any(p.resolve() in bad for _, p in files):
                    continue
                record_path = campaign.root / COMMITS / f"{record.txid}.json"
                target = campaign.root / QUARANTINE / COMMITS / record_path.name
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(record_path, target)  # the chunk is invisible from here on
                moved.append(target)
                for table, path in files:
                    moved += _move_aside(campaign, table, path)
        else:
            stems = {_chunk_stem(d.path.name) for d in damaged}
            for table in TABLES:
                for path in campaign.shard_files(table):
                    if _chunk_stem(path.name) in stems:
                        moved += _move_aside(campaign, table, path)
    return moved


def _chunk_stem(name: str) -> str:
    return name.removesuffix(".parquet")


def _move_aside(campaign: Campaign, table: str, path: Path) -> list[Path]:
    target = campaign.root / QUARANTINE / table / path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, target)
        return [target]
    return []


__all__ = [
    "CampaignConnection",
    "CommitRecord",
    "DamagedShard",
    "connect",
    "quarantine",
    "read_shard",
    "read_table",
    "samples_of",
    "stored_trials",
    "validate_shards",
]
