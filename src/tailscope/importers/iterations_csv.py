"""Per-iteration results of other tools: CSV node, run, iteration, value[, unit, higher_is_better].

Optional columns: `unit` (one unit per file), `higher_is_better` (true/false/1/0/yes/no), `warmup` (same
booleans; warm-up iterations are kept but excluded from the run's value), `seconds`. Each distinct (node, run)
becomes one trial of the variant `imported:<name>`; its value is the mean of the iteration values for costs
(lower is better) and the harmonic mean for rates (higher is better), warm-ups excluded.

The whole file is parsed and checked before anything is written; errors name file:line and what was expected.
"""

from __future__ import annotations

import csv
import json
import math
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tailscope.importers import ImportInputError
from tailscope.store.campaign import utcnow
from tailscope.store.load import Transaction
from tailscope.store.manifest import Plan
from tailscope.store.schema import TABLES

REQUIRED = ("node", "run", "iteration", "value")
OPTIONAL = ("unit", "higher_is_better", "warmup", "seconds")
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


def direction_from_unit(unit: str) -> bool | None:
    """True for rates, False for times, None when the unit does not say."""
    if _TIME_UNIT.match(unit.strip()):
        return False
    if _RATE_UNIT.search(unit.strip()):
        return True
    return None


@dataclass
class ParsedIterations:
    rows: list[dict[str, Any]]  # one per CSV data line, in file order
    unit: str
    higher_is_better: bool


def parse(path: Path, *, unit: str | None = None, higher_is_better: bool | None = None) -> ParsedIterations:
    try:
        handle = open(path, newline="", encoding="utf-8")  # noqa: SIM115 (closed by the `with` below)
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot open ({exc.strerror})") from None
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise ImportInputError(
                f"{path}:1: empty file (expected a header: {', '.join(REQUIRED)})"
            ) from None
        except (csv.Error, UnicodeDecodeError) as exc:
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
            raise ImportInputError(f"{path}:1: unknown column(s) {', '.join(unknown)}")
        col = {name: names.index(name) for name in names}
        rows: list[dict[str, Any]] = []
        units: set[str] = set()
        directions: set[bool] = set()
        seen: set[tuple[str, str, int]] = set()
        try:
            for record in reader:
                where = f"{path}:{reader.line_num}"
                if not record or all(not f.strip() for f in record):
                    continue
                if len(record) != len(names):
                    raise ImportInputError(
                        f"{where}: {len(record)} fields, expected {len(names)} (as the header)"
                    )
                node = record[col["node"]].strip()
                run = record[col["run"]].strip()
                if not node or not run:
                    raise ImportInputError(f"{where}: empty node or run")
                try:
                    iteration = int(record[col["iteration"]])
                except ValueError:
                    raise ImportInputError(
                        f"{where}: iteration {record[col['iteration']]!r} is not an integer"
                    ) from None
                if not 0 <= iteration < 2**31:
                    raise ImportInputError(
                        f"{where}: iteration {iteration} is out of range (expected 0 to {2**31 - 1})"
                    )
                if (node, run, iteration) in seen:
                    raise ImportInputError(
                        f"{where}: duplicate iteration {iteration} of node {node} run {run}"
                    )
                seen.add((node, run, iteration))
                row: dict[str, Any] = {
                    "node": node,
                    "run": run,
                    "iteration": iteration,
                    "value": _parse_float(record[col["value"]], where, "value"),
                    "warmup": _parse_bool(record[col["warmup"]], where, "warmup")
                    if "warmup" in col
                    else False,
                    "seconds": _parse_float(record[col["seconds"]], where, "seconds")
                    if "seconds" in col
                    else None,
                }
                if "unit" in col:
                    units.add(record[col["unit"]].strip())
                if "higher_is_better" in col:
                    directions.add(_parse_bool(record[col["higher_is_better"]], where, "higher_is_better"))
                rows.append(row)
        except csv.Error as exc:
            raise ImportInputError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
        except UnicodeDecodeError as exc:
            raise ImportInputError(f"{path}:{reader.line_num + 1}: not UTF-8 text ({exc.reason})") from None
    if not rows:
        raise ImportInputError(f"{path}: no data lines after the header")
    if len(units) > 1:
        raise ImportInputError(
            f"{path}: several units in one file ({', '.join(sorted(units))}); import them separately"
        )
    if len(directions) > 1:
        raise ImportInputError(f"{path}: higher_is_better differs between lines")
    file_unit = unit or (units.pop() if units else "")
    direction = higher_is_better
    if direction is None and directions:
        direction = directions.pop()
    if direction is None:
        direction = direction_from_unit(file_unit)
    if direction is None:
        raise ImportInputError(
            f"{path}: cannot tell whether higher values are better (unit {file_unit!r}); add a "
            "higher_is_better "
            "column or pass --higher-is-better / --lower-is-better"
        )
    if direction and any(r["value"] <= 0 for r in rows if not r["warmup"]):
        raise ImportInputError(f"{path}: rates must be positive (a value <= 0 cannot enter a harmonic mean)")
    return ParsedIterations(rows, file_unit, direction)


def run_value(values: list[float], higher_is_better: bool) -> float:
    """Mean for costs, harmonic mean for rates (notes/statistics.md)."""
    if higher_is_better:
        return len(values) / sum(1.0 / v for v in values)
    return sum(values) / len(values)


def import_iterations(
    path: Path,
    load: Transaction,
    *,
    name: str | None = None,
    unit: str | None = None,
    higher_is_better: bool | None = None,
    task: str,
) -> dict[str, int]:
    """Parse `path` fully, refuse overlaps with what is stored, then stage one chunk per node in `load`."""
    from tailscope.store.read import connect

    parsed = parse(path, unit=unit, higher_is_better=higher_is_better)
    probe = f"imported:{name or path.stem}"
    params = {"source_file": path.name}
    variant = f"{probe}"
    stored = None
    if load.exists:
        con = connect(load.campaign())
        try:
            stored = con.execute("SELECT count(*) FROM runs WHERE variant = ?", [variant]).fetchone()
        finally:
            con.close()
    if stored and stored[0]:
        raise ImportInputError(
            f"{path}: campaign {load.root} already holds {stored[0]} runs of {variant}; "
            "import under another name with --name"
        )
    by_run: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in parsed.rows:
        by_run.setdefault((row["node"], row["run"]), []).append(row)
    trial_of_node: dict[str, int] = {}
    per_node: dict[str, dict[str, list[dict[str, Any]]]] = {}
    now = utcnow()
    for (node, run), its in by_run.items():
        trial = trial_of_node.get(node, 0)
        trial_of_node[node] = trial + 1
        run_id = uuid.uuid4().hex
        measured = [r["value"] for r in its if not r["warmup"]]
        if not measured:
            raise ImportInputError(f"{path}: node {node} run {run} has only warm-up iterations")
        tables = per_node.setdefault(node, {"runs": [], "iterations": []})
        tables["runs"].append(
            {
                "run_id": run_id,
                "campaign": load.campaign_id,
                "node": node,
                "probe": probe,
                "variant": variant,
                "params": json.dumps(params, sort_keys=True),
                "trial": trial,
                "started_at": now,
                "metric": "value",
                "value": run_value(measured, parsed.higher_is_better),
                "unit": parsed.unit,
                "higher_is_better": parsed.higher_is_better,
                "status": "ok",
                "source": "import:iterations-csv",
                "task": task,
                "summary": json.dumps({"source_run": run}),
            }
        )
        for r in sorted(its, key=lambda r: r["iteration"]):
            tables["iterations"].append(
                {
                    "run_id": run_id,
                    "iteration": r["iteration"],
                    "warmup": r["warmup"],
                    "seconds": r["seconds"],
                    "value": r["value"],
                }
            )
    load.add_plan(Plan(variant, probe, dict(params), max(trial_of_node.values()), imported=True))
    for node, tables in sorted(per_node.items()):
        for t, rows in tables.items():
            load.write(t, pa.Table.from_pylist(rows, schema=TABLES[t].schema), node=node)
    return {"runs": len(by_run), "iterations": len(parsed.rows), "nodes": len(per_node)}
