"""timelines.py: the one series drawn per run (team record, slowest thread, stream's triad)."""

from __future__ import annotations

import pandas as pd
from report_builders import iterations_frame, team_iterations, thread_iterations

from tailscope.report.timelines import RunIterations, iteration_series


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


def _former_series(iterations: pd.DataFrame, run_id: str, higher_is_better: bool) -> tuple:
    """The series the plain pandas way (before issue 31: every filter over every row, for each run)."""
    rows = iterations.loc[iterations["run_id"] == run_id]
    rows = rows.loc[~rows["warmup"].fillna(False).astype(bool)]
    what = ""
    if (rows["kernel"] == "triad").any():
        rows, what = rows.loc[rows["kernel"] == "triad"], ", triad"
    rows = rows.loc[pd.to_numeric(rows["value"], errors="coerce").notna()]
    if rows.empty:
        return (), (), "no iterations stored"
    team = rows.loc[rows["thread"].isna()]
    if len(team):
        picked, what = team, "team record" + what
    else:
        picked, threads = rows, rows["thread"].nunique()
        what = (f"slowest of {threads} threads" if threads > 1 else "thread") + what
    grouped = picked["value"].astype(float).groupby(picked["iteration"].astype("int64"), sort=True)
    series = grouped.min() if higher_is_better else grouped.max()
    return tuple(series.index.astype(float)), tuple(series), what


def test_the_runs_split_once_give_each_run_the_series_of_the_plain_filters():
    """RunIterations (the frame split by run once, numpy per run) gives what pandas' filters over every
    row gave, for runs of each kind mixed in one frame, their rows interleaved and out of order."""
    rows = team_iterations("team", [3.0, 1.0, 2.0], warmup=9.0)
    rows += thread_iterations("threads", [[5.0, 7.0, 6.0], [8.0, 4.0, 6.5], [5.5, 5.5, 9.0]])
    rows += team_iterations("stream", [40.0, 41.0], warmup=1.0, kernel="copy")
    rows += team_iterations("stream", [30.0, 31.0], warmup=1.0, kernel="triad")
    rows += [("one", 2, 0, None, 0, False, 0.1, 4.0), ("one", 1, 0, None, 0, False, 0.1, 3.0)]
    rows += [("gap", 0, None, None, None, False, 0.1, None), ("gap", 1, None, None, None, None, 0.1, 2.0)]
    rows += [("warm", 0, None, None, None, True, 0.1, 1.0)]
    frame = iterations_frame(rows[::-1]).sample(frac=1.0, random_state=7)  # no run's rows together
    stored = RunIterations(frame)
    runs = ["team", "threads", "stream", "one", "gap", "warm", "absent"]
    for run_id in runs:
        for higher_is_better in (True, False):
            got = stored.series(run_id, higher_is_better)
            assert (tuple(got.iterations), tuple(got.values), got.what) == _former_series(
                frame, run_id, higher_is_better
            )
    # the control: each kind was met
    whats = {stored.series(r, True).what for r in runs}
    assert whats == {"team record", "slowest of 3 threads", "team record, triad", "thread",
                     "no iterations stored"}  # fmt: skip
    assert stored.series("threads", False).values.tolist() == [8.0, 7.0, 9.0]
