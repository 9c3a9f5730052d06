"""Builders of synthetic `runs` and `iterations` tables with the store's columns (store/schema.py)."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tailscope.store.schema import ITERATIONS, RUNS

START = pd.Timestamp("2026-11-02T10:00:00", tz="UTC")


def run_row(
    node: str,
    trial: int,
    value: float | None,
    *,
    variant: str = "l2sum-1a2b",
    probe: str = "l2sum",
    metric: str = "bandwidth",
    unit: str = "GB/s",
    higher_is_better: bool = True,
    status: str = "ok",
    error: str | None = None,
    params: str = '{"sums": 1000}',
) -> dict[str, Any]:
    """One row of the runs table; every other column of the schema is filled with a plausible value."""
    row: dict[str, Any] = dict.fromkeys(RUNS.names)
    row.update(
        run_id=f"{variant}:{node}:{trial}",
        campaign="c1",
        node=node,
        probe=probe,
        variant=variant,
        params=params,
        trial=trial,
        started_at=START + pd.Timedelta(minutes=trial),
        metric=metric,
        value=value,
        unit=unit,
        higher_is_better=higher_is_better,
        status=status,
        error=error,
        source="probe",
        task="t1",
    )
    return row


def runs_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows), columns=RUNS.names)
    frame["trial"] = frame["trial"].astype("int32")
    frame["value"] = frame["value"].astype("float64")
    frame["higher_is_better"] = frame["higher_is_better"].astype(bool)
    return frame


def team_iterations(
    run_id: str, values: Sequence[float], *, warmup: float | None = None, kernel: str | None = None
):
    """Team records (thread null) of one run: an optional warm-up iteration 0, then `values`."""
    vals = ([] if warmup is None else [warmup]) + list(values)
    n = len(vals)
    return pd.DataFrame(
        {
            "run_id": run_id,
            "iteration": np.arange(n, dtype="int32"),
            "thread": pd.array([None] * n, dtype="Int32"),
            "kernel": kernel,
            "cpu": pd.array([None] * n, dtype="Int32"),
            "warmup": [warmup is not None and i == 0 for i in range(n)],
            "seconds": 1.0 / np.asarray(vals, dtype=float),
            "value": np.asarray(vals, dtype=float),
        }
    )


def thread_iterations(run_id: str, thread: int, values: Sequence[float], *, mono_start_ns=None):
    """Per-thread records of one run (fwq samples: value in microseconds, seconds = value x 1e-6)."""
    vals = np.asarray(values, dtype=float)
    n = len(vals)
    return pd.DataFrame(
        {
            "run_id": run_id,
            "iteration": np.arange(n, dtype="int32"),
            "thread": pd.array([thread] * n, dtype="Int32"),
            "kernel": None,
            "cpu": pd.array([thread] * n, dtype="Int32"),
            "warmup": False,
            "seconds": vals * 1e-6,
            "value": vals,
            "mono_start_ns": pd.array(
                mono_start_ns if mono_start_ns is not None else [None] * n, dtype="Int64"
            ),
        }
    )


def iterations_frame(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    frame = pd.concat(list(parts), ignore_index=True) if parts else pd.DataFrame()
    for name in ITERATIONS.names:
        if name not in frame.columns:
            frame[name] = None
    return frame[ITERATIONS.names]


@pytest.fixture
def build() -> SimpleNamespace:
    """The builders above, as one fixture: build.run_row(...), build.runs_frame(...), ..."""
    return SimpleNamespace(
        run_row=run_row,
        runs_frame=runs_frame,
        team_iterations=team_iterations,
        thread_iterations=thread_iterations,
        iterations_frame=iterations_frame,
    )
