"""The one builder of `runs` rows (store/schema.py RUNS) for every importer, and the one check of a node name.

Every importer (iterations, hpl/hpcc and the program formats, likwid-csv) builds its trials' rows with
`run_row` and stages them with `runs_table`, so a runs row has one shape whatever wrote it; the runner may use
the same builder (it takes the campaign id and task, not a load). A node name is data, never syntax: one with
a control character (a newline, an ESC that would reach a terminal, a NUL) is refused at import with the
file:line it came from.
"""

from __future__ import annotations

import json
import unicodedata
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from tailscope.importers import ImportInputError
from tailscope.store.campaign import utcnow
from tailscope.store.schema import TABLES

# Unicode categories refused in a node name: controls (C0, DEL, C1), format characters (bidi overrides that
# reorder a terminal line) and the line/paragraph separators.
_REFUSED = {"Cc", "Cf", "Zl", "Zp"}
MAX_NODE = 255  # a host name's limit (HOST_NAME_MAX 64, a FQDN 255)


def node_problem(name: str) -> str | None:
    """Why `name` cannot be a node name, or None."""
    if not name.strip():
        return "is empty"
    if len(name) > MAX_NODE:
        return f"is {len(name)} characters long (at most {MAX_NODE})"
    for ch in name:
        if unicodedata.category(ch) in _REFUSED:
            return f"holds the control character U+{ord(ch):04X}"
    return None


def check_node(name: str, where: str) -> str:
    """`name` when it is a valid node name, else ImportInputError "{where}: node name ... (expected ...)"."""
    problem = node_problem(name)
    if problem is not None:
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise ImportInputError(
            f"{where}: node name {shown!r} {problem} (expected a host name: letters, digits, '.', '-', '_')"
        )
    return name


def has_refused_node(names: Sequence[str]) -> bool:
    """True when one of `names` is not a valid node name (a vectorised reader then falls back to the line
    reader, which names the line)."""
    return any(node_problem(n) is not None for n in names)


def run_row(
    *,
    campaign: str,
    task: str,
    node: str,
    where: str,
    probe: str,
    variant: str,
    params: Mapping[str, Any],
    trial: int,
    metric: str,
    value: float | None,
    unit: str,
    higher_is_better: bool,
    source: str,
    status: str = "ok",
    error: str | None = None,
    seconds: float | None = None,
    threads: int | None = None,
    tsc_hz: float | None = None,
    started_at: datetime | None = None,
    summary: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    **columns: Any,
) -> dict[str, Any]:
    """One `runs` row; `where` (file:line) names the input a refused node name came from. Any other column of
    the runs table may be given by name (the runner's wall_s, tsc_start, cpus ...)."""
    check_node(node, where)
    unknown = set(columns) - set(TABLES["runs"].names)
    if unknown:
        raise TypeError(f"run_row: no runs column {sorted(unknown)}")
    if status == "ok" and value is None:
        raise ValueError("run_row: an ok run needs a value")
    return {
        "run_id": run_id or uuid.uuid4().hex,
        "campaign": campaign,
        "node": node,
        "probe": probe,
        "variant": variant,
        "params": json.dumps(dict(params), sort_keys=True),
        "trial": trial,
        "threads": threads,
        "started_at": started_at or utcnow(),
        "seconds": seconds,
        "metric": metric,
        "value": value,
        "unit": unit,
        "higher_is_better": higher_is_better,
        "status": status,
        "error": error,
        "source": source,
        "task": task,
        "tsc_hz": tsc_hz,
        "summary": None if summary is None else json.dumps(dict(summary)),
        **columns,
    }


def runs_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The rows as an Arrow table of the runs schema (missing columns null)."""
    return pa.Table.from_pylist(list(rows), schema=TABLES["runs"].schema)


def runs_columns(
    *,
    campaign: str,
    task: str,
    node: str,
    where: str,
    probe: str,
    variant: str,
    params: Mapping[str, Any],
    metric: str,
    unit: str,
    higher_is_better: bool,
    source: str,
    run_ids: pa.Array,
    trials: pa.Array,
    values: pa.Array,
    summaries: pa.Array | None = None,
    started_at: datetime | None = None,
) -> pa.Table:
    """`run_row`'s columnar form, for an importer that builds a chunk of one node's ok runs at once (a table
    of millions of runs is never a list of dicts): the same columns and checks, constants broadcast."""
    check_node(node, where)
    n = len(run_ids)
    if values.null_count:
        raise ValueError("runs_columns: an ok run needs a value")
    schema = TABLES["runs"].schema
    given: dict[str, Any] = {
        "run_id": run_ids,
        "campaign": campaign,
        "node": node,
        "probe": probe,
        "variant": variant,
        "params": json.dumps(dict(params), sort_keys=True),
        "trial": trials,
        "started_at": started_at or utcnow(),
        "metric": metric,
        "value": values,
        "unit": unit,
        "higher_is_better": higher_is_better,
        "status": "ok",
        "source": source,
        "task": task,
        "summary": summaries,
    }
    columns = []
    for field in schema:
        item = given.get(field.name)
        if item is None:
            columns.append(pa.nulls(n, field.type))
        elif isinstance(item, pa.Array | pa.ChunkedArray):
            columns.append(item.cast(field.type))
        else:
            columns.append(pa.repeat(pa.scalar(item, field.type), n))
    return pa.Table.from_arrays(columns, schema=schema)
