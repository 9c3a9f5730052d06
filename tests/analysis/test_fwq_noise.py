"""fwq noise fraction, events and period on synthetic samples computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tailscope.analysis.fwq_noise import fwq_noise, group_extras


def _thread0_periodic():
    """1000 quanta of 100 us; every 100th (from sample 50) takes 150 us: 10 events, 10.05 ms apart."""
    values = np.full(1000, 100.0)
    values[50::100] = 150.0
    return values


def test_noise_fraction_events_and_period(build):
    frame = build.iterations_frame(
        [
            build.thread_iterations("r1", 0, _thread0_periodic()),
            build.thread_iterations("r1", 1, [100.0] * 1000),
        ]
    )
    row = fwq_noise(frame, ["r1"]).loc["r1"]
    # thread 0: sum 100500, n x min 100000; thread 1: no excess. Pooled: 500 / 200500.
    assert row["noise_fraction"] == pytest.approx(500 / 200500)
    assert row["noise_events"] == 10
    # start-to-start: 99 quanta of 100 us + one of 150 us (times from the running sum of seconds)
    assert row["noise_period_s"] == pytest.approx(0.01005)
    assert row["period_regularity"] == 1.0
    # 10 events over 0.1005 + 0.1 s of samples
    assert row["noise_rate_per_s"] == pytest.approx(10 / 0.2005)
    assert (row["samples"], row["threads"]) == (2000, 2)


def test_consecutive_noisy_samples_are_one_event_and_mono_times_are_used(build):
    values = np.full(200, 100.0)
    values[[10, 11, 12]] = 300.0  # one interruption spilling over three quanta
    values[110] = 200.0
    mono = (np.arange(200) * 1_000_000).tolist()  # clock says samples start 1 ms apart
    frame = build.iterations_frame([build.thread_iterations("r1", 0, values, mono_start_ns=mono)])
    row = fwq_noise(frame, ["r1"]).loc["r1"]
    assert row["noise_events"] == 2
    assert np.isnan(row["noise_period_s"])  # one interval is not a period
    frame = build.iterations_frame(
        [
            build.thread_iterations(
                "r1", 0, np.r_[values, values], mono_start_ns=mono + [m + 200_000_000 for m in mono]
            )
        ]
    )
    row = fwq_noise(frame, ["r1"]).loc["r1"]
    assert row["noise_events"] == 4
    assert row["noise_period_s"] == pytest.approx(0.1)  # 10 -> 110 -> 210 -> 310 ms
    assert row["period_regularity"] == 1.0


def test_small_jitter_is_not_an_event(build):
    values = 100.0 + np.tile([0.0, 5.0, 9.0], 100)  # at most 9% above the median (105)
    frame = build.iterations_frame([build.thread_iterations("r1", 0, values)])
    row = fwq_noise(frame, ["r1"]).loc["r1"]
    assert row["noise_events"] == 0
    assert row["noise_fraction"] == pytest.approx((values.sum() - 300 * 100.0) / values.sum())


def test_group_extras_are_medians_over_runs(build):
    parts = [
        build.thread_iterations("a", 0, _thread0_periodic()),
        build.thread_iterations("b", 0, [100.0] * 1000),
    ]
    per_run = fwq_noise(build.iterations_frame(parts), ["a", "b"])
    extras = group_extras(per_run)
    assert extras["noise_runs"] == 2
    assert extras["noise_fraction_median"] == pytest.approx((500 / 100500) / 2)
    assert extras["noise_fraction_max"] == pytest.approx(500 / 100500)
    assert extras["noise_events_median"] == 5.0
    assert extras["noise_period_s_median"] == pytest.approx(0.01005)  # only run a has a period
    assert extras["noise_period_runs"] == 1
