"""timelines.py: the one series drawn per run (team record, slowest thread, stream's triad)."""

from __future__ import annotations

import pandas as pd
from report_builders import iterations_frame, team_iterations, thread_iterations

from tailscope.report.timelines import iteration_series


def test_team_record_is_preferred_and_warmup_left_out():
    rows = team_iterations("r", [10.0, 11.0, 12.0], warmup=1.0)
    rows += thread_iterations("r", [[5.0, 5.0, 5.0, 5.0]])  # per-thread rows exist too: ignored
    s = iteration_series(iterations_frame(rows), "r", higher_is_better=True)
    assert s.what == "team record"
    assert s.iterations.tolist() == [1.0, 2.0, 3.0]  # iteration 0 was the warm-up
    assert s.values.tolist() == [10.0, 11.0, 12.0]
    assert s.median == 11.0


def test_slowest_thread_per_iteration_by_direction():
    rows = thread_iterations("r", [[100.0, 130.0, 100.0], [110.0, 100.0, 90.0]])
    frame = iterations_frame(rows)
    # Times (lower is better): the slowest thread has the highest value.
    times = iteration_series(frame, "r", higher_is_better=False)
    assert times.values.tolist() == [110.0, 130.0, 100.0]
    assert times.what == "slowest of 2 threads"
    # Rates (higher is better): the lowest value.
    rates = iteration_series(frame, "r", higher_is_better=True)
    assert rates.values.tolist() == [100.0, 100.0, 90.0]


def test_stream_draws_triad():
    rows = team_iterations("s", [50.0, 51.0], warmup=1.0, kernel="copy")
    rows += team_iterations("s", [40.0, 41.0], warmup=1.0, kernel="triad")
    s = iteration_series(iterations_frame(rows), "s", higher_is_better=True)
    assert s.values.tolist() == [40.0, 41.0]
    assert s.what == "team record, triad"


def test_missing_run_or_columns_give_an_empty_series():
    frame = iterations_frame(team_iterations("r", [1.0]))
    assert iteration_series(frame, "other", True).empty
    assert iteration_series(pd.DataFrame(), "r", True).empty
    assert iteration_series(frame.drop(columns=["thread"]), "r", True).what == "no iterations stored"
