"""Per-iteration results of other tools: CSV node, run, iteration, value[, unit, higher_is_better].

Optional columns: `unit` (one unit per file), `higher_is_better` (true/false/1/0/yes/no), `warmup` (same
booleans; warm-up iterations are kept but excluded from the run's value), `seconds`. Each distinct (node, run)
becomes one trial of the variant `imported:<name>`; its value is the mean of the iteration values for costs
(lower is better) and the harmonic mean for rates (higher is better), warm-ups excluded.

The file is read as a stream: its rows go in chunks of at most CHUNK_ROWS rows to a spill directory (Parquet),
and DuckDB, under a memory limit, then finds duplicate iterations, sums each run and writes the iterations
and runs chunk by chunk: memory holds a chunk, never a record per run (2 M runs took 4.35 GB when every run
had its Python accumulator and runs row; bench/bench_import_memory.py). A run's id is a hash of the
transaction, its node and its name, so no table of runs is kept while reading. The runs are written last, in
the same load: an error anywhere (file:line and what was expected) leaves nothing in the campaign.
"""

from __future__ import annotations

import bisect
import contextlib
import csv
import math
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tailscope.importers import ImportInputError, digest_in_background, open_text, stored_count
from tailscope.importers.fast_csv import FAST_BLOCK, FastReaderFallback, record_batches
from tailscope.importers.rows import check_node, has_refused_node
from tailscope.importers.spill import Problem, Spill
from tailscope.store.campaign import utcnow
from tailscope.store.load import load_into
from tailscope.store.manifest import Plan
from tailscope.store.runs_row import runs_columns

FORMAT = "iterations"
REQUIRED = ("node", "run", "iteration", "value")
OPTIONAL = ("unit", "higher_is_better", "warmup", "seconds")
CHUNK_ROWS = 65536
MAX_ITERATION = 2**31 - 1  # the store's iteration column is int32
MAX_LINE = 1 << 20
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}
# Units whose smaller values are better (times); rates and throughputs are higher-is-better.
_TIME_UNIT = re.compile(r"^(s|sec|secs|seconds?|ms|us|µs|ns|min|minutes?|h|hours?|cycles)$", re.IGNORECASE)
_RATE_UNIT = re.compile(r"(/s$|ps$|flops|gb/s|mb/s|bytes/s|ops|gflop|tflop|iter/s|rate)", re.IGNORECASE)


def _parse_bool(text: str, where: str, column: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ImportInputError(f"{where}: {column} {text!r} is not a boolean (expected true/false, 1/0, yes/no)")


def _parse_float(text: str, where: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ImportInputError(f"{where}: {column} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ImportInputError(f"{where}: {column} {text!r} is not a finite number")
    return value


def _parse_iteration(text: str, where: str) -> int:
    try:
        iteration = int(text)
    except ValueError:
        raise ImportInputError(f"{where}: iteration {text!r} is not an integer") from None
    if not 0 <= iteration <= MAX_ITERATION:
        raise ImportInputError(f"{where}: iteration {text.strip()} is outside 0..{MAX_ITERATION}")
    return iteration


def direction_from_unit(unit: str) -> bool | None:
    """True for rates, False for times, None when the unit does not say."""
    if _TIME_UNIT.match(unit.strip()):
        return False
    if _RATE_UNIT.search(unit.strip()):
        return True
    return None


def run_value(values: list[float], higher_is_better: bool) -> float:
    """Mean for costs, harmonic mean for rates (notes/statistics.md)."""
    if higher_is_better:
        return len(values) / sum(1.0 / v for v in values)
    return sum(values) / len(values)


class IterationSet:
    """Iteration numbers seen, as sorted disjoint ranges [lo, hi] (memory grows with gaps, not rows)."""

    __slots__ = ("his", "los")

    def __init__(self) -> None:
        self.los: list[int] = []
        self.his: list[int] = []

    def add(self, i: int) -> bool:
        """Add i; False when it was already there."""
        los, his = self.los, self.his
        if his and i == his[-1] + 1:  # the common case: the next iteration
            his[-1] = i
            return True
        k = bisect.bisect_right(los, i) - 1
        if k >= 0 and los[k] <= i <= his[k]:
            return False
        join_left = k >= 0 and his[k] == i - 1
        join_right = k + 1 < len(los) and los[k + 1] == i + 1
        if join_left and join_right:
            his[k] = his[k + 1]
            del los[k + 1], his[k + 1]
        elif join_left:
            his[k] = i
        elif join_right:
            los[k + 1] = i
        else:
            los.insert(k + 1, i)
            his.insert(k + 1, i)
        return True

    def add_sorted(self, its: Any) -> bool:
        """Add ascending, distinct iteration numbers (a numpy array); False when one was already there."""
        if len(its) == 0:
            return True
        first, last = int(its[0]), int(its[-1])
        if last - first + 1 == len(its) and (not self.his or first > self.his[-1]):
            if self.his and first == self.his[-1] + 1:
                self.his[-1] = last
            else:
                self.los.append(first)
                self.his.append(last)
            return True
        return all(self.add(int(i)) for i in its)


@dataclass
class IterationsSummary:
    unit: str = ""
    higher_is_better: bool | None = None
    rows: int = 0


# The rows as read, before runs exist: what the spill holds (line: the file's line; null from the fast
# reader).
RAW_SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("run", pa.string()),
        ("iteration", pa.int32()),
        ("warmup", pa.bool_()),
        ("seconds", pa.float64()),
        ("value", pa.float64()),
        ("row", pa.int64()),
        ("line", pa.int64()),
    ]
)


class _Chunks:
    """Raw rows, flushed as one table every CHUNK_ROWS rows."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {name: [] for name in RAW_SCHEMA.names}

    def add(self, node: str, run: str, iteration: int, warmup: bool, seconds: float | None, value: float,
            row: int, line: int) -> None:  # fmt: skip
        for name, item in zip(RAW_SCHEMA.names, (node, run, iteration, warmup, seconds, value, row, line),
                              strict=True):  # fmt: skip
            self.cols[name].append(item)

    @property
    def pending(self) -> int:
        return len(self.cols["row"])

    def take(self) -> pa.Table:
        table = pa.table(self.cols, schema=RAW_SCHEMA)
        self.cols = {name: [] for name in RAW_SCHEMA.names}
        return table


def iteration_chunks(
    path: Path, summary: IterationsSummary, *, unit: str | None = None, higher_is_better: bool | None = None
) -> Iterator[pa.Table]:
    """Tables of raw rows (RAW_SCHEMA) as the file is read line by line; duplicates and per-run sums are
    checked afterwards (`settle`)."""
    path = Path(path)
    chunks = _Chunks()
    units: str | None = None
    direction = higher_is_better
    with open_text(path) as lines:
        numbered = _long_line_guard(lines, path)
        reader = csv.reader(line for _, line in numbered)
        try:
            header = next(reader)
        except StopIteration:
            raise ImportInputError(
                f"{path}:1: empty file (expected a header: {', '.join(REQUIRED)})"
            ) from None
        except csv.Error as exc:
            raise ImportInputError(f"{path}:1: unreadable header ({exc})") from None
        names = [h.strip().lower() for h in header]
        missing = [c for c in REQUIRED if c not in names]
        if missing:
            raise ImportInputError(
                f"{path}:1: header lacks column(s) {', '.join(missing)} "
                f"(expected {', '.join(REQUIRED)}[, {', '.join(OPTIONAL)}])"
            )
        unknown = [n for n in names if n not in REQUIRED + OPTIONAL]
        if unknown:
            listed = ", ".join(repr(n[:40]) for n in unknown[:5])
            raise ImportInputError(
                f"{path}:1: unknown column(s) {listed} (expected {', '.join(REQUIRED + OPTIONAL)})"
            )
        if len(set(names)) != len(names):
            raise ImportInputError(f"{path}:1: a column appears twice in the header")
        col = {name: names.index(name) for name in names}
        c_node, c_run, c_it, c_val = col["node"], col["run"], col["iteration"], col["value"]
        c_unit, c_hib = col.get("unit"), col.get("higher_is_better")
        c_warm, c_sec = col.get("warmup"), col.get("seconds")
        width = len(names)
        seen_nodes: set[str] = set()
        try:
            for record in reader:
                number = reader.line_num
                if not record or all(not f.strip() for f in record):
                    continue
                where = f"{path}:{number}"
                if len(record) != width:
                    raise ImportInputError(f"{where}: {len(record)} fields, expected {width} (as the header)")
                node = record[c_node].strip()
                run = record[c_run].strip()
                if not node or not run:
                    raise ImportInputError(f"{where}: empty node or run")
                iteration = _parse_iteration(record[c_it], where)
                value = _parse_float(record[c_val], where, "value")
                warmup = _parse_bool(record[c_warm], where, "warmup") if c_warm is not None else False
                seconds = _parse_float(record[c_sec], where, "seconds") if c_sec is not None else None
                if c_unit is not None:
                    row_unit = record[c_unit].strip()
                    if units is None:
                        units = row_unit
                    elif row_unit != units:
                        raise ImportInputError(
                            f"{where}: unit {row_unit!r} differs from the file's {units!r} "
                            "(one unit per file; import them separately)"
                        )
                if c_hib is not None:
                    row_dir = _parse_bool(record[c_hib], where, "higher_is_better")
                    if summary.higher_is_better is None and higher_is_better is None:
                        summary.higher_is_better = row_dir
                    elif higher_is_better is None and row_dir != summary.higher_is_better:
                        raise ImportInputError(f"{where}: higher_is_better differs from the lines before")
                if direction is None:
                    direction = summary.higher_is_better
                    if direction is None:
                        direction = direction_from_unit(unit or units or "")
                    if direction is None:
                        raise ImportInputError(
                            f"{path}: cannot tell whether higher values are better (unit "
                            f"{unit or units or ''!r}); add a higher_is_better column or pass "
                            "--higher-is-better / --lower-is-better"
                        )
                if direction and not warmup and value <= 0:
                    raise ImportInputError(
                        f"{where}: value {record[c_val].strip()} <= 0: rates must be positive (a value <= 0 "
                        "cannot enter a harmonic mean)"
                    )
                if node not in seen_nodes:
                    check_node(node, where)
                    if len(seen_nodes) < 65536:  # a cache of checked names, bounded
                        seen_nodes.add(node)
                chunks.add(node, run, iteration, warmup, seconds, value, summary.rows, number)
                summary.rows += 1
                if chunks.pending >= CHUNK_ROWS:
                    yield chunks.take()
        except csv.Error as exc:
            raise ImportInputError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
    if not summary.rows:
        raise ImportInputError(f"{path}: no data lines after the header")
    summary.unit = unit or units or ""
    summary.higher_is_better = direction
    if chunks.pending:
        yield chunks.take()


def _long_line_guard(lines: Iterator[tuple[int, str]], path: Path) -> Iterator[tuple[int, str]]:
    for number, line in lines:
        if len(line) > MAX_LINE:
            raise ImportInputError(f"{path}:{number}: line longer than {MAX_LINE} characters (not this CSV)")
        yield number, line




def _lone_carriage_return(path: Path) -> bool:
    """Whether the file holds a CR that does not end a line (CRLF), read in 1 MiB blocks (bytes.count in C: a
    fraction of pyarrow's parse)."""
    try:
        with open(path, "rb") as fh:
            tail = b""
            while block := fh.read(1 << 20):
                data = tail + block
                cut = len(data) - 1 if data.endswith(b"\r") else len(data)  # its LF may be in the next block
                if data.count(b"\r", 0, cut) != data.count(b"\r\n", 0, cut + 1):
                    return True
                tail = data[cut:]
            return tail == b"\r"
    except OSError:
        return True


def fast_iteration_chunks(
    path: Path, summary: IterationsSummary, *, unit: str | None = None, higher_is_better: bool | None = None
) -> Iterator[pa.Table]:
    """The same stream as iteration_chunks, read by pyarrow's CSV reader in FAST_BLOCK batches with vectorised
    checks. Anything the checks do not accept raises FastReaderFallback (the caller then discards what was
    written and runs iteration_chunks, which produces the error message)."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    try:
        with open(path, "rb") as fh:
            first = fh.readline(MAX_LINE).decode("utf-8").removeprefix("\ufeff").rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        raise FastReaderFallback from None
    if '"' in first or "\r" in first or not first or _lone_carriage_return(path):
        raise FastReaderFallback  # a CR other than a CRLF line end: the line reader's call
    try:
        reader = pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(block_size=FAST_BLOCK, use_threads=False),  # no read-ahead
            parse_options=pcsv.ParseOptions(newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(
                column_types={name: pa.string() for name in first.split(",")},
                strings_can_be_null=False, quoted_strings_can_be_null=False, null_values=[],
                auto_dict_encode=False,
            ),
        )  # fmt: skip
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, UnicodeDecodeError):
        raise FastReaderFallback from None
    names = [n.strip().lower() for n in reader.schema.names]
    if (
        sorted(set(names)) != sorted(names)
        or not set(REQUIRED) <= set(names)
        or set(names) - set(REQUIRED + OPTIONAL)
    ):
        raise FastReaderFallback
    if any(not pa.types.is_string(t) for t in reader.schema.types):
        reader = None
        raise FastReaderFallback
    index = {n: i for i, n in enumerate(names)}
    units: str | None = None
    direction = higher_is_better
    for batch in record_batches(reader):
        col = {n: batch.column(i) for n, i in index.items()}
        node = pc.utf8_trim_whitespace(col["node"])
        run = pc.utf8_trim_whitespace(col["run"])
        if (
            pc.any(pc.equal(pc.utf8_length(node), 0)).as_py()
            or pc.any(pc.equal(pc.utf8_length(run), 0)).as_py()
        ):
            raise FastReaderFallback
        try:
            iteration = pc.cast(pc.utf8_trim_whitespace(col["iteration"]), pa.int64()).to_numpy()
            value = pc.cast(pc.utf8_trim_whitespace(col["value"]), pa.float64()).to_numpy()
            seconds = (
                pc.cast(pc.utf8_trim_whitespace(col["seconds"]), pa.float64()) if "seconds" in col else None
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise FastReaderFallback from None
        if (iteration < 0).any() or (iteration > MAX_ITERATION).any() or not np.isfinite(value).all():
            raise FastReaderFallback
        if seconds is not None and not np.isfinite(seconds.to_numpy(zero_copy_only=False)).all():
            raise FastReaderFallback
        warmup = _bools(col.get("warmup"), batch.num_rows)
        if "unit" in col:
            found = pc.unique(pc.utf8_trim_whitespace(col["unit"])).to_pylist()
            if units is None:
                units = found[0]
            if found != [units]:
                raise FastReaderFallback
        if "higher_is_better" in col:
            found_dir = set(_bools(col["higher_is_better"], batch.num_rows).tolist())
            if len(found_dir) != 1:
                raise FastReaderFallback
            if summary.higher_is_better is None and higher_is_better is None:
                summary.higher_is_better = found_dir.pop()
            elif higher_is_better is None and found_dir != {summary.higher_is_better}:
                raise FastReaderFallback
        if direction is None:
            direction = summary.higher_is_better
            if direction is None:
                direction = direction_from_unit(unit or units or "")
            if direction is None:
                raise FastReaderFallback
        measured = ~warmup
        if direction and (value[measured] <= 0).any():
            raise FastReaderFallback
        if has_refused_node(pc.unique(node).to_pylist()):
            raise FastReaderFallback  # the line reader names the line
        n = batch.num_rows
        yield pa.table(
            {
                "node": node,
                "run": run,
                "iteration": pa.array(iteration, pa.int32()),
                "warmup": pa.array(warmup, pa.bool_()),
                "seconds": seconds if seconds is not None else pa.nulls(n, pa.float64()),
                "value": pa.array(value, pa.float64()),
                "row": pa.array(np.arange(summary.rows, summary.rows + n, dtype=np.int64)),
                "line": pa.nulls(n, pa.int64()),
            },
            schema=RAW_SCHEMA,
        )
        summary.rows += n
    if not summary.rows:
        raise FastReaderFallback
    summary.unit = unit or units or ""
    summary.higher_is_better = direction


def _bools(column: pa.ChunkedArray | pa.Array | None, n: int) -> Any:
    import numpy as np
    import pyarrow.compute as pc

    if column is None:
        return np.zeros(n, dtype=bool)
    low = pc.utf8_lower(pc.utf8_trim_whitespace(column))
    true = pc.is_in(low, value_set=pa.array(sorted(_TRUE)))
    false = pc.is_in(low, value_set=pa.array(sorted(_FALSE)))
    if not pc.all(pc.or_(true, false)).as_py():
        raise FastReaderFallback
    return true.to_numpy(zero_copy_only=False)


def import_iterations(
    path: Path,
    campaign_dir: Path,
    *,
    name: str | None = None,
    unit: str | None = None,
    higher_is_better: bool | None = None,
) -> dict[str, int]:
    """Stream `path` into the campaign; refuse a variant that already holds runs."""
    path = Path(path)
    probe = f"imported:{name or path.stem}"
    params = {"source_file": path.name}
    try:
        return _import(path, campaign_dir, True, probe, params, unit, higher_is_better)
    except FastReaderFallback:
        return _import(path, campaign_dir, False, probe, params, unit, higher_is_better)


def _import(
    path: Path,
    campaign_dir: Path,
    fast: bool,
    probe: str,
    params: dict[str, Any],
    unit: str | None,
    higher_is_better: bool | None,
) -> dict[str, int]:
    variant = probe
    summary = IterationsSummary()
    reader = fast_iteration_chunks if fast else iteration_chunks
    digest = digest_in_background(path)  # the file's sha256, computed while it is read
    with (
        tempfile.TemporaryDirectory(prefix="tailscope-import-") as directory,
        contextlib.closing(Spill(Path(directory))) as spill,
        load_into(campaign_dir, f"import {FORMAT} {path.name}", create=True) as load,
    ):
        held = stored_count(load, "runs_of_variant", variant)
        if held:
            raise ImportInputError(
                f"{path}: campaign {campaign_dir} already holds {held} runs of {variant}; "
                "import under another name with --name"
            )
        for table in reader(path, summary, unit=unit, higher_is_better=higher_is_better):
            spill.add(table)
        assert summary.higher_is_better is not None
        problem = spill.problem(summary.higher_is_better)
        if problem is not None:
            if fast:
                raise FastReaderFallback  # the line reader names the line
            _refuse(path, problem)
        load.record_source(digest(), str(path))
        per_node = spill.runs_per_node()
        starts = {node: load.claim_next_trials(node, variant, count)[0] for node, count in per_node}
        for node, chunk in spill.iterations(load.txid):
            load.write("iterations", chunk, node=node)
        now = utcnow()
        for node, chunk in spill.runs(load.txid, summary.higher_is_better, starts):
            table = runs_columns(
                chunk, campaign=load.campaign_id, task=load.txid, node=check_node(node, str(path)),
                probe=probe, variant=variant, params=params, metric="value", unit=summary.unit,
                higher_is_better=summary.higher_is_better, source="import:iterations-csv", started_at=now,
            )  # fmt: skip
            load.write("runs", table, node=node)
        most = max((starts[node] + count for node, count in per_node), default=0)
        load.add_plan(Plan(variant, probe, dict(params), most, imported=True))
    runs = sum(count for _, count in per_node)
    return {"runs": runs, "iterations": summary.rows, "nodes": len(per_node)}


def _refuse(path: Path, problem: Problem) -> None:
    where = f"{path}:{problem.line}"
    node, run = problem.node, problem.run
    if problem.kind == "duplicate":
        raise ImportInputError(f"{where}: duplicate iteration {problem.iteration} of node {node} run {run}")
    if problem.kind == "warmup-only":
        raise ImportInputError(f"{where}: node {node} run {run} has only warm-up iterations")
    raise ImportInputError(f"{where}: the values of node {node} run {run} overflow their sum")
