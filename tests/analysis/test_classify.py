"""Systematic vs transient slow runs, on synthetic iteration records with hand-computed evidence."""

from __future__ import annotations

import pandas as pd
import pytest

from tailscope.analysis.classify import classify_slow_runs, iteration_ratios

D = 0.05  # primary threshold: an iteration is low below 1 - D/2 = 0.975


def _runs(rows):
    return pd.DataFrame(rows, columns=["run_id", "variant", "node", "higher_is_better", "slow"])


def _normal_team_runs(build, node="n1", count=4, level=100.0, iterations=20, kernel=None):
    rows, parts = [], []
    for i in range(count):
        run_id = f"{node}-normal-{i}-{kernel}"
        rows.append((run_id, "v", node, True, False))
        parts.append(build.team_iterations(run_id, [level] * iterations, warmup=level / 2, kernel=kernel))
    return rows, parts


def test_level_shift_is_systematic_and_spikes_are_transient(build):
    rows, parts = _normal_team_runs(build)
    rows += [("shift", "v", "n1", True, True), ("spike", "v", "n1", True, True)]
    # Level shift: every iteration 12% low (88.0 / 88.2 alternating); the warm-up (1.0) must be ignored.
    parts.append(build.team_iterations("shift", [88.0, 88.2] * 10, warmup=1.0))
    # Interference: 2 of 100 iterations take 5x as long (bandwidth / 5).
    parts.append(build.team_iterations("spike", [100.0] * 49 + [20.0] + [100.0] * 49 + [20.0], warmup=50.0))
    kinds = classify_slow_runs(build.iterations_frame(parts), _runs(rows), D)

    kind, ev = kinds["shift"]
    assert kind == "systematic"
    assert (ev.iterations, ev.low, ev.fraction_low) == (20, 20, 1.0)
    assert ev.median_ratio == pytest.approx(0.881)
    assert ev.min_ratio == pytest.approx(0.88)
    assert ev.spread == pytest.approx(0.002)  # IQR of ten 0.880 and ten 0.882

    kind, ev = kinds["spike"]
    assert kind == "transient"
    assert (ev.iterations, ev.low) == (100, 2)
    assert ev.fraction_low == pytest.approx(0.02)
    assert ev.median_ratio == pytest.approx(1.0)
    assert ev.min_ratio == pytest.approx(0.2)
    assert set(kinds) == {"shift", "spike"}  # normal runs are not classified


def test_all_low_but_wide_is_not_a_level_shift(build):
    rows, parts = _normal_team_runs(build)
    rows.append(("wide", "v", "n1", True, True))
    parts.append(build.team_iterations("wide", [50.0 + 2.5 * i for i in range(19)]))  # 50 .. 95, all low
    kind, ev = classify_slow_runs(build.iterations_frame(parts), _runs(rows), D)["wide"]
    assert ev.fraction_low == 1.0
    assert ev.spread == pytest.approx(0.225)  # > (1 - 0.725) / 2
    assert kind == "transient"


def test_unclassified_when_too_few_or_no_iterations(build):
    rows, parts = _normal_team_runs(build)
    rows += [("short", "v", "n1", True, True), ("bare", "v", "n1", True, True)]
    parts.append(build.team_iterations("short", [80.0, 80.0], warmup=40.0))
    kinds = classify_slow_runs(build.iterations_frame(parts), _runs(rows), D)
    kind, ev = kinds["short"]
    assert kind == "unclassified"
    assert ev.iterations == 2 and ev.low == 2
    assert kinds["bare"] == ("unclassified", None)


def test_typical_values_come_from_the_same_node(build):
    # n2 is 20% faster: if its iterations leaked into n1's typical value, n1's normal-looking slow run
    # would look low in every iteration.
    rows, parts = _normal_team_runs(build, node="n1", level=100.0)
    more_rows, more_parts = _normal_team_runs(build, node="n2", level=120.0)
    rows += [*more_rows, ("odd", "v", "n1", True, True)]
    parts += [*more_parts, build.team_iterations("odd", [100.0] * 19 + [10.0])]
    kind, ev = classify_slow_runs(build.iterations_frame(parts), _runs(rows), D)["odd"]
    assert (kind, ev.low, ev.median_ratio) == ("transient", 1, 1.0)


def test_lower_is_better_per_thread_records(build):
    # fwq-like: microseconds, no team record. Thread 1 of the slow run is 15% slower in every sample.
    rows, parts = [], []
    for i in range(3):
        rows.append((f"ok{i}", "f", "n1", False, False))
        parts += [build.thread_iterations(f"ok{i}", t, [100.0] * 30) for t in (0, 1)]
    rows.append(("slow", "f", "n1", False, True))
    parts += [
        build.thread_iterations("slow", 0, [100.0] * 30),
        build.thread_iterations("slow", 1, [115.0] * 30),
    ]
    frame = build.iterations_frame(parts)
    ratios = iteration_ratios(frame, _runs(rows))
    assert ratios["ratio"].tolist() == pytest.approx([100 / 115] * 30)  # slowest thread per sample
    kind, ev = classify_slow_runs(frame, _runs(rows), D)["slow"]
    assert kind == "systematic"
    assert ev.median_ratio == pytest.approx(100 / 115)


def test_team_records_win_over_thread_records(build):
    rows, parts = _normal_team_runs(build)
    rows.append(("both", "v", "n1", True, True))
    parts.append(build.team_iterations("both", [85.0] * 20))
    # Its per-thread records look normal against nothing (normal runs have no thread records): ignored.
    parts += [build.thread_iterations("both", t, [50.0] * 20) for t in (0, 1)]
    kind, ev = classify_slow_runs(build.iterations_frame(parts), _runs(rows), D)["both"]
    assert (kind, ev.iterations, ev.median_ratio) == ("systematic", 20, pytest.approx(0.85))


def test_kernels_have_their_own_typical_value(build):
    # stream: copy ~ 50 GB/s, triad ~ 100 GB/s; the slow run's triad is 10% low in every repetition.
    rows = [(f"ok{i}", "s", "n1", True, False) for i in range(4)] + [("slow", "s", "n1", True, True)]
    parts = []
    for i in range(4):
        parts.append(build.team_iterations(f"ok{i}", [50.0] * 10, kernel="copy"))
        parts.append(build.team_iterations(f"ok{i}", [100.0] * 10, kernel="triad"))
    parts.append(build.team_iterations("slow", [50.0] * 10, kernel="copy"))
    parts.append(build.team_iterations("slow", [90.0] * 10, kernel="triad"))
    kind, ev = classify_slow_runs(build.iterations_frame(parts), _runs(rows), D)["slow"]
    assert (kind, ev.iterations, ev.low) == ("systematic", 10, 10)
    assert ev.median_ratio == pytest.approx(0.9)
