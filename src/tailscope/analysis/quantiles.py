"""Quantiles and their exact, distribution-free confidence intervals (order statistics).

Point estimate: Hyndman & Fan definition 2, the inverse of the empirical distribution function with
averaging at its jumps: with sorted values X(1) <= ... <= X(n), the estimate is X(ceil(nq)) when nq is
not an integer and (X(nq) + X(nq+1)) / 2 when it is. numpy computes the same with
`numpy.quantile(x, q, method="averaged_inverted_cdf")` (except where n*q misses an integer by a rounding
error); pandas' `Series.quantile` has no such method. It is the usual median for q = 1/2 (the mean of the
two middle values for even n) and always an order statistic or the midpoint of two. For the 1% quantile
of 500 runs it is (X(5) + X(6)) / 2, so five slow runs are enough to move it: this is why the SJTU rule
over 500 runs fails with probability P(K >= 5) = 5.2% when the slow-run rate is 0.4%
(notes/statistics.md).

Interval: for B ~ Binomial(n, q) (the number of values below the true quantile x_q),
P(X(l) <= x_q <= X(u)) >= P(l <= B <= u - 1) for any continuous distribution; we report that
probability as the coverage (Hoefler & Belli, SC15, "Scientific benchmarking of parallel computing
systems", rule 5 and its order-statistic interval; also Conover, "Practical Nonparametric Statistics",
section 3.2). Among all 1 <= l < u <= n whose coverage reaches the requested confidence we take the
shortest (smallest u - l); ties go to the interval whose binomial range [l, u - 1] is centred closest to
the mean n*q of B ("towards symmetry"), then to the larger coverage, then to the lower ranks. No interval
exists when even X(1)..X(n) covers too little: for the median below n = 6 at 95%, for the 1% quantile
below n = 299 (n = 200 gives at most 86.6%).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from tailscope.analysis.distributions import binom_cdf, binom_sf
from tailscope.analysis.model import QuantileCI

METHOD = (
    "quantile: Hyndman-Fan definition 2 (numpy method='averaged_inverted_cdf'); interval: shortest exact "
    "order-statistic interval X(l)..X(u) with coverage P(l <= B <= u-1) >= confidence, B ~ Binomial(n, q) "
    "(Hoefler & Belli SC15)"
)

# Floating-point slack when comparing a coverage with the requested confidence, and when comparing two
# coverages for a tie: binomial tail sums of exactly 0.95 can come out as 0.9499999999999999.
_TOLERANCE = 1e-12


def quantile_estimate(values: ArrayLike, q: float) -> float:
    """The q-quantile of `values` by Hyndman-Fan definition 2 (see the module docstring)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("quantile of an empty sample is undefined")
    _check_q(q)
    return _estimate_sorted(np.sort(x), q)


def _estimate_sorted(x: np.ndarray, q: float) -> float:
    """Definition 2 on sorted values: X(ceil(nq)), or the mean of X(nq) and X(nq+1) when nq is whole.

    nq is taken as whole within 1e-9 (0.07 x 100 is 7.000000000000001 in binary floating point).
    """
    n = x.size
    nq = n * q
    whole = round(nq)
    if abs(nq - whole) <= 1e-9 * max(1.0, nq):
        if whole == 0:
            return float(x[0])
        if whole >= n:
            return float(x[-1])
        return float((x[whole - 1] + x[whole]) / 2.0)
    return float(x[math.ceil(nq) - 1])


def interval_coverage(n: int, q: float, lower_rank: int, upper_rank: int) -> float:
    """P(l <= B <= u - 1) for B ~ Binomial(n, q): the coverage of X(l) <= x_q <= X(u)."""
    if not 1 <= lower_rank < upper_rank <= n:
        raise ValueError(f"ranks must satisfy 1 <= l < u <= n, got l={lower_rank}, u={upper_rank}, n={n}")
    below = binom_cdf(lower_rank - 1, n, q)  # P(B <= l - 1)
    above = binom_sf(upper_rank - 1, n, q)  # P(B >= u)
    return float(1.0 - below - above)


@lru_cache(maxsize=4096)
def quantile_ci_ranks(n: int, q: float, confidence: float) -> tuple[int, int, float] | None:
    """(l, u, coverage) of the shortest exact interval X(l) <= x_q <= X(u), or None when none exists.

    Ranks are 1-based and ascending. Cached: most groups of a campaign have the same n.
    """
    _check_q(q)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n < 2:
        return None
    j = np.arange(n + 1)
    cdf = binom_cdf(j, n, q)  # cdf[i] = P(B <= i)
    sf = binom_sf(j, n, q)  # sf[i] = P(B > i), so P(B >= u) = sf[u - 1]
    lower = np.arange(1, n)  # candidate l = 1 .. n-1
    # For each l the smallest u with 1 - cdf[l-1] - sf[u-1] >= confidence: sf is non-increasing, so the
    # admissible u-1 form a suffix of 0..n; find its start with a binary search on -sf (non-decreasing).
    budget = 1.0 - confidence - cdf[lower - 1] + _TOLERANCE  # how much upper tail l leaves room for
    first = np.searchsorted(-sf, -budget, side="left")
    upper = np.maximum(first, lower) + 1  # u - 1 >= l, i.e. u > l
    ok = (budget >= 0.0) & (upper <= n)
    if not ok.any():
        return None
    lower, upper = lower[ok], upper[ok]
    coverage = 1.0 - cdf[lower - 1] - sf[upper - 1]
    width = upper - lower
    shortest = width == width.min()
    lower, upper, coverage = lower[shortest], upper[shortest], coverage[shortest]
    off_centre = np.abs((lower + upper - 1) / 2.0 - n * q)  # centre of [l, u-1] vs E[B] = n q
    # lexsort: last key is primary. Round the float keys so that mirror-image intervals tie exactly.
    order = np.lexsort((lower, -np.round(coverage, 12), np.round(off_centre, 9)))
    best = order[0]
    return int(lower[best]), int(upper[best]), float(coverage[best])


@lru_cache(maxsize=256)
def min_trials_for_ci(q: float, confidence: float) -> int:
    """Smallest n for which an interval for the q-quantile with `confidence` exists.

    The widest candidate X(1)..X(n) covers 1 - (1-q)^n - q^n, which increases with n, so the first n
    where it reaches the confidence is the answer (median at 95%: 6; 1% quantile at 95%: 299).
    """
    _check_q(q)
    n = 2
    while 1.0 - (1.0 - q) ** n - q**n < confidence - _TOLERANCE:
        n += 1
    return n


def quantile_ci(values: ArrayLike, q: float, confidence: float) -> QuantileCI:
    """Point estimate and exact order-statistic interval of the q-quantile of `values`."""
    x = np.sort(np.asarray(values, dtype=float))
    if x.size == 0:
        raise ValueError("quantile of an empty sample is undefined")
    _check_q(q)
    estimate = _estimate_sorted(x, q)
    ranks = quantile_ci_ranks(int(x.size), float(q), float(confidence))
    if ranks is None:
        return QuantileCI(q, estimate, None, None, None, None, None)
    lower_rank, upper_rank, coverage = ranks
    return QuantileCI(
        q=q,
        estimate=estimate,
        lower=float(x[lower_rank - 1]),
        upper=float(x[upper_rank - 1]),
        lower_rank=lower_rank,
        upper_rank=upper_rank,
        coverage=coverage,
    )


def _check_q(q: float) -> None:
    if not (0.0 < q < 1.0) or math.isnan(q):
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
