"""store/runs_row.py: its columnar form is the rows run_row builds, with its checks."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from tailscope.store.runs_row import run_row, runs_columns
from tailscope.store.schema import RUNS

NOW = dt.datetime(2026, 11, 28, 3, 30, 15, 123456, tzinfo=dt.UTC)
FIELDS = {
    "campaign": "c1",
    "task": "t1",
    "node": "n1",
    "probe": "imported:app",
    "variant": "imported:app",
    "params": {"b": [1, 2], "a": "x"},
    "metric": "value",
    "unit": "s",
    "higher_is_better": False,
    "source": "import:iterations-csv",
    "started_at": NOW,
    "tsc_hz": 2.9e9,
}


def chunk(values: list[float | None]) -> pa.Table:
    n = len(values)
    return pa.table(
        {
            "run_id": [f"r{i}" for i in range(n)],
            "trial": pa.array(range(n), pa.int32()),
            "value": pa.array(values, pa.float64()),
            "summary": [f'{{"source_run": "{i}"}}' for i in range(n)],
        }
    )


def test_columnar_runs_are_the_rows_run_row_builds() -> None:
    per_run = chunk([1.5, 2.5, 4.0])
    table = runs_columns(per_run, **FIELDS)
    assert table.schema == RUNS.schema
    assert table.to_pylist() == [run_row(**FIELDS, **row) for row in per_run.to_pylist()]
    first = table.to_pylist()[0]
    assert first["params"] == '{"a": "x", "b": [1, 2]}' and first["config"] is None
    assert runs_columns(chunk([]), **FIELDS).schema == RUNS.schema


def test_columnar_runs_are_checked_as_run_row_checks() -> None:
    with pytest.raises(ValueError, match="an ok run needs a value"):
        runs_columns(chunk([1.0, None]), **FIELDS)
    with pytest.raises(TypeError, match=r"no runs column \['wall_sec'\]"):
        runs_columns(chunk([1.0]), **FIELDS, wall_sec=1.0)
    with pytest.raises(TypeError, match="metric"):  # a column every run needs is missing
        runs_columns(chunk([1.0]), **{k: v for k, v in FIELDS.items() if k != "metric"})
    failed = runs_columns(chunk([None]), **{**FIELDS, "status": "failed", "error": "exit 3"})
    assert failed.column("value").null_count == 1 and failed.column("error").to_pylist() == ["exit 3"]
