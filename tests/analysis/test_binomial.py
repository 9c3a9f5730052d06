"""Counting rare slow runs: reference values of notes/statistics.md and hand-computed cases."""

from __future__ import annotations

import pytest

from tailscope.analysis.binomial import (
    clopper_pearson,
    prob_any_slow,
    tail_count,
    tail_p_value,
    trials_to_observe,
    zero_event_upper_bound,
)
from tailscope.analysis.power import runs_to_detect_shift


@pytest.mark.parametrize(
    ("k", "n", "low_pct", "high_pct"),
    [(2, 500, 0.05, 1.44), (10, 2000, 0.24, 0.92)],
)
def test_clopper_pearson_reference(k, n, low_pct, high_pct):
    low, high = clopper_pearson(k, n, 0.95)
    assert round(100 * low, 2) == low_pct
    assert round(100 * high, 2) == high_pct


def test_clopper_pearson_edges_by_hand():
    # k = 0: upper solves (1-p)^n = 0.025; k = n: lower solves p^n = 0.025.
    assert clopper_pearson(0, 10, 0.95) == (0.0, pytest.approx(1 - 0.025 ** (1 / 10)))
    assert clopper_pearson(10, 10, 0.95) == (pytest.approx(0.025 ** (1 / 10)), 1.0)


def test_tail_p_value_by_hand():
    assert tail_p_value(0, 20, 0.01) == 1.0
    assert tail_p_value(1, 5, 0.01) == pytest.approx(1 - 0.99**5)  # 0.04901
    # P(X >= 2 | 3, 0.5) = 3/8 + 1/8
    assert tail_p_value(2, 3, 0.5) == pytest.approx(0.5)
    assert (tail_p_value(0, 20, 0.0), tail_p_value(1, 20, 0.0)) == (1.0, 0.0)  # no slow run allowed


def test_quantile_rule_is_blind_to_a_rare_slow_mode():
    # notes/statistics.md: the SJTU rule over 500 runs fails only 5.2% of the time when p = 0.4%
    # (it fails when at least 5 runs are slow; see test_summary for the rule itself).
    assert round(tail_p_value(5, 500, 0.004), 3) == 0.052


def test_tail_count_fields():
    t = tail_count(3, 200, 0.05, 0.01, 0.05, 0.95)
    assert (t.k, t.n, t.threshold, t.p0) == (3, 200, 0.05, 0.01)
    assert t.rate == pytest.approx(0.015)
    assert t.p_value == pytest.approx(tail_p_value(3, 200, 0.01))
    assert t.rejects is (t.p_value < 0.05)
    assert t.rate_low < 0.015 < t.rate_high
    assert not tail_count(0, 200, 0.05, 0.01, 0.05, 0.95).rejects
    assert tail_count(8, 200, 0.05, 0.01, 0.05, 0.95).rejects  # P(X >= 8 | 200, 1%) = 0.0045


@pytest.mark.parametrize(
    ("p", "confidence", "trials"),
    [(1 / 200, 0.95, 598), (1 / 200, 0.99, 919), (0.004, 0.95, 748)],
)
def test_trials_to_observe_reference(p, confidence, trials):
    assert trials_to_observe(p, confidence) == trials
    assert 1 - (1 - p) ** trials >= confidence > 1 - (1 - p) ** (trials - 1)


def test_trials_to_observe_edges():
    assert trials_to_observe(0.0, 0.95) is None
    assert trials_to_observe(1.0, 0.95) == 1
    assert trials_to_observe(0.5, 0.75) == 2  # 1 - 0.5^2 = 0.75 exactly


def test_synchronous_job_amplification_reference():
    assert round(prob_any_slow(0.004, 32), 2) == 0.12
    assert round(prob_any_slow(0.004, 1000), 2) == 0.98
    assert prob_any_slow(0.004, 1) == pytest.approx(0.004)


def test_zero_events_bound_p_below_about_three_over_n():
    for n in (100, 300, 1000, 10_000):
        bound = zero_event_upper_bound(n, 0.95)
        assert 2.9 / n < bound < 3.0 / n
        assert (1 - bound) ** n == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("sigma", "delta", "runs"),
    [(0.0013, 0.01, 1), (0.01, 0.01, 14), (0.02, 0.01, 53), (0.02, 0.005, 209)],
)
def test_power_reference(sigma, delta, runs):
    # notes/statistics.md "Power": one-sided alpha 0.01, power 0.9.
    assert runs_to_detect_shift(sigma, delta, alpha=0.01, power=0.9) == runs


def test_bad_counts():
    with pytest.raises(ValueError, match="0 <= k <= n"):
        clopper_pearson(3, 2, 0.95)
    with pytest.raises(ValueError, match="p0"):
        tail_p_value(1, 10, 1.0)


def test_intervals_primed_together_are_the_ones_computed_alone() -> None:
    """`prime_intervals` (one vectorised pass for a fleet's (k, n), 17 ms for 1,000 of them against ~2 ms each
    alone) gives each pair the interval scipy's beta quantiles give, and refuses a bad pair as
    clopper_pearson does."""
    from scipy.stats import beta

    from tailscope.analysis import binomial

    pairs = [(k, n) for n in (7, 50, 51, 997) for k in (0, 1, 3, n - 1, n)]
    binomial._INTERVALS.clear()
    binomial.prime_intervals(pairs, 0.9)
    assert all((k, n, 0.9) in binomial._INTERVALS for k, n in pairs)
    for k, n in pairs:
        low, high = binomial.clopper_pearson(k, n, 0.9)
        assert low == (0.0 if k == 0 else pytest.approx(beta.ppf(0.05, k, n - k + 1), rel=1e-10))
        assert high == (1.0 if k == n else pytest.approx(beta.ppf(0.95, k + 1, n - k), rel=1e-10))
    with pytest.raises(ValueError):
        binomial.prime_intervals([(5, 4)], 0.95)
    with pytest.raises(ValueError):
        binomial.clopper_pearson(-1, 4, 0.95)
