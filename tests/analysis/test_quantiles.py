"""Exact order-statistic intervals: every reference value of notes/statistics.md, and brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from tailscope.analysis.quantiles import (
    interval_coverage,
    min_trials_for_ci,
    quantile_ci,
    quantile_ci_ranks,
    quantile_estimate,
)

# notes/statistics.md, "Confidence intervals of quantiles": (n, q) -> (lower rank, upper rank, coverage)
REFERENCE = [
    (6, 0.5, 1, 6, 0.969),
    (7, 0.5, 1, 7, 0.984),
    (32, 0.5, 10, 22, 0.965),
    (100, 0.5, 40, 60, 0.954),
    (500, 0.5, 228, 272, 0.951),
    (300, 0.01, 1, 11, 0.951),
    (500, 0.01, 1, 10, 0.962),
    (1000, 0.01, 4, 17, 0.964),
]


@pytest.mark.parametrize(("n", "q", "lower", "upper", "coverage"), REFERENCE)
def test_reference_intervals(n, q, lower, upper, coverage):
    ranks = quantile_ci_ranks(n, q, 0.95)
    assert ranks is not None
    assert ranks[:2] == (lower, upper)
    assert round(ranks[2], 3) == coverage


def test_no_interval_for_the_1_percent_quantile_of_200_runs():
    assert quantile_ci_ranks(200, 0.01, 0.95) is None
    # The widest candidate X(1)..X(200) covers only 1 - 0.99^200 - 0.01^200 = 86.6%.
    assert interval_coverage(200, 0.01, 1, 200) == pytest.approx(1 - 0.99**200, abs=1e-12)
    assert round(interval_coverage(200, 0.01, 1, 200), 3) == 0.866


def test_a_median_interval_needs_six_runs():
    assert quantile_ci_ranks(5, 0.5, 0.95) is None  # X(1)..X(5) covers 1 - 2/32 = 93.75%
    assert min_trials_for_ci(0.5, 0.95) == 6
    assert min_trials_for_ci(0.01, 0.95) == 299  # 1 - 0.99^299 = 0.9505, 0.99^298 leaves 0.9500-
    assert min_trials_for_ci(0.99, 0.95) == 299
    assert quantile_ci_ranks(299, 0.01, 0.95) is not None
    assert quantile_ci_ranks(298, 0.01, 0.95) is None


def test_coverage_by_hand():
    # n = 6, median: P(1 <= B <= 5) = 1 - 2/64.
    assert interval_coverage(6, 0.5, 1, 6) == pytest.approx(62 / 64)
    # n = 10, median, X(2)..X(9): P(2 <= B <= 8) = 1 - 2 (1 + 10) / 1024.
    assert interval_coverage(10, 0.5, 2, 9) == pytest.approx(1 - 22 / 1024)


def _brute_force(n: int, q: float, confidence: float):
    """Every (l, u), the definition applied literally: coverage = sum of P(B = j) for l <= j <= u-1."""
    pmf = binom.pmf(np.arange(n + 1), n, q)
    best = None
    for lower, upper in itertools.combinations(range(1, n + 1), 2):
        cov = float(pmf[lower:upper].sum())
        if cov >= confidence - 1e-12:
            key = (upper - lower, round(abs((lower + upper - 1) / 2 - n * q), 9), -round(cov, 12), lower)
            if best is None or key < best[0]:
                best = (key, lower, upper)
    return None if best is None else best[1:]


@pytest.mark.parametrize("q", [0.5, 0.25, 0.1, 0.01, 0.9, 0.99])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_shortest_interval_agrees_with_brute_force(q, confidence):
    for n in range(2, 70):
        fast = quantile_ci_ranks(n, q, confidence)
        slow = _brute_force(n, q, confidence)
        assert (None if fast is None else fast[:2]) == slow, (n, q, confidence)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([3, 1, 2], 0.5, 2.0),  # nq = 1.5 -> X(2)
        ([4, 1, 3, 2], 0.5, 2.5),  # nq = 2 -> (X(2) + X(3)) / 2
        (list(range(1, 9)), 0.25, 2.5),  # nq = 2 -> (2 + 3) / 2
        (list(range(1, 11)), 0.07, 1.0),  # nq = 0.7 -> X(1)
        (list(range(1, 101)), 0.07, 7.5),  # nq = 7 (7.000000000000001 in floating point) -> (7 + 8) / 2
        (list(range(1, 11)), 0.95, 10.0),  # nq = 9.5 -> X(10)
        (list(range(1, 501)), 0.01, 5.5),  # nq = 5 -> (X(5) + X(6)) / 2
    ],
)
def test_quantile_estimate_definition_2(values, q, expected):
    assert quantile_estimate(values, q) == expected


@given(
    st.lists(st.floats(0.1, 1e6), min_size=1, max_size=200), st.sampled_from([0.01, 0.25, 0.5, 0.75, 0.99])
)
def test_estimate_matches_numpy_averaged_inverted_cdf(values, q):
    assert quantile_estimate(values, q) == pytest.approx(
        float(np.quantile(values, q, method="averaged_inverted_cdf")), rel=1e-12
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1.0, 1000.0), min_size=6, max_size=400))
def test_median_interval_contains_the_sample_median_and_covers_enough(values):
    ci = quantile_ci(values, 0.5, 0.95)
    assert ci.lower is not None and ci.upper is not None and ci.coverage is not None
    assert ci.lower <= ci.estimate <= ci.upper
    assert ci.estimate == float(np.median(values))
    assert ci.coverage >= 0.95
    x = np.sort(values)
    assert (ci.lower, ci.upper) == (x[ci.lower_rank - 1], x[ci.upper_rank - 1])


def test_quantile_ci_without_interval_keeps_the_estimate():
    ci = quantile_ci([5.0, 1.0, 3.0, 2.0, 4.0], 0.5, 0.95)
    assert ci.estimate == 3.0
    assert (ci.lower, ci.upper, ci.lower_rank, ci.upper_rank, ci.coverage) == (None,) * 5


def test_large_n_is_fast_and_sane():
    lower, upper, coverage = quantile_ci_ranks(100_000, 0.01, 0.99)
    assert lower < 1000 < upper  # n q = 1000
    assert coverage >= 0.99
    assert math.isclose(coverage, interval_coverage(100_000, 0.01, lower, upper), rel_tol=1e-9)


def test_bad_arguments():
    with pytest.raises(ValueError, match="quantile level"):
        quantile_ci_ranks(10, 1.0, 0.95)
    with pytest.raises(ValueError, match="confidence"):
        quantile_ci_ranks(10, 0.5, 1.5)
    with pytest.raises(ValueError, match="empty"):
        quantile_estimate([], 0.5)
