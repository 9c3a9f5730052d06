"""Counting rare slow runs: the rate's interval, the tail-count test, and how many trials it takes.

A slow run is an event of per-run probability p; k slow runs in n trials is Binomial(n, p).
- `clopper_pearson`: the exact interval of p (Clopper & Pearson 1934, Biometrika 26:404) from beta
  quantiles: lower = Beta(a/2; k, n-k+1), upper = Beta(1-a/2; k+1, n-k). 2/500 -> [0.05%, 1.44%].
- `tail_p_value`: one-sided P(X >= k | n, p0); small means more slow runs than a rate p0 explains. It pairs
  with the SJTU quantile rule, which is blind to rare slow modes (notes/statistics.md).
- `trials_to_observe`: smallest n with 1 - (1-p)^n >= confidence (p = 1/200: 598 for 95%, 919 for 99%).
- `zero_event_upper_bound`: with no event in n trials, p < 1 - (1-c)^(1/n), about 3/n at 95% (the
  "rule of three", Hanley & Lippman-Hand, JAMA 1983).
- `prob_any_slow`: a synchronous job on N nodes waits for its slowest node: P(some node slow) =
  1 - (1-p)^N (12% at N = 32 and 98% at N = 1000 for p = 0.4%; seed 000 section III).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from tailscope.analysis.distributions import beta_ppf, binom_sf
from tailscope.analysis.model import TailCount

METHOD = (
    "slow-run rate: Clopper-Pearson exact interval; tail-count test: one-sided binomial P(X >= k | n, p0); "
    "trials needed: smallest n with 1-(1-p)^n >= confidence"
)


# (k, n, confidence) -> interval: a beta quantile is ~2 ms for one value but ~20 us each for many at once,
# and a fleet whose nodes ran different numbers of trials asks for a different (k, n) per node
_INTERVALS: dict[tuple[int, int, float], tuple[float, float]] = {}


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Exact two-sided interval of a binomial rate from k events in n trials.

    Edge cases as usual: k = 0 gives lower 0, k = n gives upper 1.
    """
    key = (int(k), int(n), float(confidence))
    if key not in _INTERVALS:
        prime_intervals([(k, n)], confidence)
    return _INTERVALS[key]


def prime_intervals(counts: Iterable[tuple[int, int]], confidence: float) -> None:
    """Compute the Clopper-Pearson intervals of many (k, n) at once (one vectorised beta quantile per
    bound); `clopper_pearson` then answers them from its table. Checks every pair as it would."""
    _check_probability("confidence", confidence)
    c = float(confidence)
    todo = sorted(pair for pair in {(int(k), int(n)) for k, n in counts} if (*pair, c) not in _INTERVALS)
    if not todo:
        return
    for k, n in todo:
        _check_counts(k, n)
    ks = np.array([k for k, _ in todo], dtype=float)
    ns = np.array([n for _, n in todo], dtype=float)
    a = 1.0 - confidence
    lower, upper = np.zeros(len(todo)), np.ones(len(todo))
    low, high = ks > 0, ks < ns  # the bounds that are not 0 and 1: both sets in one beta quantile call
    lows = int(low.sum())
    if lows or high.any():
        quantiles = beta_ppf(
            np.concatenate([np.full(lows, a / 2.0), np.full(int(high.sum()), 1.0 - a / 2.0)]),
            np.concatenate([ks[low], ks[high] + 1]),
            np.concatenate([ns[low] - ks[low] + 1, ns[high] - ks[high]]),
        )
        lower[low] = quantiles[:lows]
        upper[high] = quantiles[lows:]
    if len(_INTERVALS) > 65536:
        _INTERVALS.clear()
    for (k, n), lo, hi in zip(todo, lower.tolist(), upper.tolist(), strict=True):
        _INTERVALS[(k, n, c)] = (lo, hi)


@lru_cache(maxsize=65536)  # every node's slow-rate check asks it; 1,000 nodes of 50 trials ask a few (k, n)
def tail_p_value(k: int, n: int, p0: float) -> float:
    """One-sided binomial test: P(X >= k) for X ~ Binomial(n, p0). Equals 1 for k = 0.

    p0 = 0 is allowed (no slow run allowed): the p-value is then 0 for any k >= 1.
    """
    _check_counts(k, n)
    if not 0.0 <= p0 < 1.0:
        raise ValueError(f"p0 must be in [0, 1), got {p0}")
    return float(binom_sf(k - 1, n, p0))  # sf(k-1) = P(X > k-1) = P(X >= k)


@lru_cache(maxsize=65536)  # campaigns repeat the same (k, n): cache the beta/binomial calls
def tail_count(k: int, n: int, threshold: float, p0: float, alpha: float, confidence: float) -> TailCount:
    """k of n runs were more than `threshold` slower than the node median: rate, interval and test."""
    low, high = clopper_pearson(k, n, confidence)
    p_value = tail_p_value(k, n, p0)
    return TailCount(
        threshold=threshold,
        k=k,
        n=n,
        rate=k / n,
        rate_low=low,
        rate_high=high,
        p0=p0,
        p_value=p_value,
        rejects=p_value < alpha,
    )


@lru_cache(maxsize=65536)  # campaigns repeat the same (k, n): cache the beta/binomial calls
def trials_to_observe(p: float, confidence: float) -> int | None:
    """Smallest n with P(at least one event in n trials) = 1 - (1-p)^n >= confidence; None for p = 0."""
    _check_probability("confidence", confidence)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {p}")
    if p == 0.0:
        return None
    if p == 1.0:
        return 1
    n = max(1, math.ceil(math.log1p(-confidence) / math.log1p(-p)))
    # The logarithms can land a hair on the wrong side of an integer; settle it with the definition.
    while n > 1 and 1.0 - (1.0 - p) ** (n - 1) >= confidence:
        n -= 1
    while 1.0 - (1.0 - p) ** n < confidence:
        n += 1
    return n


def zero_event_upper_bound(n: int, confidence: float) -> float:
    """One-sided upper bound of p after 0 events in n trials: 1 - (1-c)^(1/n) (about 3/n at 95%)."""
    _check_counts(0, n)
    _check_probability("confidence", confidence)
    return 1.0 - (1.0 - confidence) ** (1.0 / n)


def prob_any_slow(p: float, nodes: int) -> float:
    """Probability that at least one of `nodes` independent nodes is slow in a synchronous job."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {p}")
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    return 1.0 - (1.0 - p) ** nodes


def _check_counts(k: int, n: int) -> None:
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")


def _check_probability(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value}")
