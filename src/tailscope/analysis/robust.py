"""Robust spread and the one-sided modified z-score (Iglewicz & Hoaglin).

MAD = median(|x - median(x)|), raw (not multiplied by 1.4826). The modified z-score is
M = 0.6745 (x - median(x)) / MAD (Iglewicz & Hoaglin, "How to Detect and Handle Outliers", ASQC 1993,
section 3.1); 0.6745 is the 75% point of the standard normal, so 0.6745/MAD estimates 1/sigma for normal
data. A value is flagged when |M| > 3.5; we only flag the slow side (M < -3.5 on oriented performance,
where lower is slower), since a run faster than its peers is not a problem to chase.

We score log performance ratios (log of value over node median, oriented so that negative is slower):
logs make a 10% slowdown and an 11% speedup symmetric and the scale unit-free (notes/statistics.md).

MAD = 0 guard: when more than half the values are identical (quantised timers: a coarse clock gives
many equal times, or a metric rounded by its importer) the MAD is 0 and M would be infinite for every
other value. We then fall back to the mean absolute deviation around the median, scaled to the same
normal sigma: sigma ~ 1.2533 * meanAD (for normal data E|X - mu| = sigma * sqrt(2/pi), and
sqrt(pi/2) = 1.2533), so M = (x - median) / (1.2533 * meanAD). When that is 0 too, every value equals
the median and every score is 0 (nothing can be an outlier).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

METHOD = (
    "robust score: modified z = 0.6745 (x - median) / MAD of log performance ratios (Iglewicz & Hoaglin "
    "1993), one-sided; when MAD = 0, (x - median) / (1.2533 * mean absolute deviation)"
)

_MAD_TO_Z = 0.6745  # Phi^-1(0.75): MAD / 0.6745 estimates sigma for normal data
MAD_TO_SD = 1.4826  # 1 / 0.6745: MAD x 1.4826 estimates sigma for normal data
_MEANAD_TO_SIGMA = math.sqrt(math.pi / 2.0)  # 1.2533: sigma / E|X - mu| for normal data
VISIBLE_SDS = 3.0  # a single run this many robust sds below the median stands out of the noise


def robust_cv(mad_value: float, median: float) -> float:
    """Robust coefficient of variation: 1.4826 x MAD / median (what a few outliers do not inflate)."""
    return MAD_TO_SD * mad_value / median


def noise_floor(mad_value: float, median: float) -> float:
    """The smallest relative slowdown one run can show above the run-to-run noise: 3 robust CVs.

    A run that much below the median has a robust z beyond -3; smaller systematic slowdowns need many runs
    (the tail-count test) to be seen.
    """
    return VISIBLE_SDS * robust_cv(mad_value, median)


def mad(values: ArrayLike) -> float:
    """Median absolute deviation around the median, unscaled. Raises on an empty sample."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("MAD of an empty sample is undefined")
    return float(np.median(np.abs(x - np.median(x))))


def group_medians(values: ArrayLike, group: ArrayLike, groups: int) -> NDArray[np.float64]:
    """The median of values[group == g] for g = 0 .. groups-1, NaN for a group without values; NaN values
    are skipped (as pandas' group-by median skips them). One sort of the whole column, no per-group call;
    the same numbers as np.median of each group (the middle order statistic, or the mean of the two)."""
    x = np.asarray(values, dtype=float)
    g = np.asarray(group, dtype=np.int64)
    present = ~np.isnan(x)
    if not present.all():
        x, g = x[present], g[present]
    return sorted_group_medians(x[np.lexsort((x, g))], np.bincount(g, minlength=groups))


def sorted_group_medians(sorted_values: NDArray[np.float64], sizes: NDArray[np.int64]) -> NDArray[np.float64]:
    """Medians of consecutive groups of `sizes` values in `sorted_values` (sorted within each group)."""
    out = np.full(len(sizes), np.nan)
    filled = sizes > 0
    if filled.any():
        n = sizes[filled]
        starts = (np.cumsum(sizes) - sizes)[filled]
        low = sorted_values[starts + (n - 1) // 2]
        high = sorted_values[starts + n // 2]
        out[filled] = np.where(n % 2 == 1, low, (low + high) / 2.0)
    return out


def group_mads(values: ArrayLike, group: ArrayLike, groups: int) -> NDArray[np.float64]:
    """`mad` of every group at once: values[group == g] for g = 0 .. groups-1 (each group non-empty).

    Two sorts of the whole column instead of two medians per group; the same numbers as `mad` (a median is
    the middle order statistic, or the mean of the two middle ones, either way).
    """
    x = np.asarray(values, dtype=float)
    g = np.asarray(group, dtype=np.int64)
    sizes = np.bincount(g, minlength=groups)
    if np.any(sizes == 0):
        raise ValueError("MAD of an empty sample is undefined")
    centre = sorted_group_medians(x[np.lexsort((x, g))], sizes)
    deviation = np.abs(x - centre[g])
    return sorted_group_medians(deviation[np.lexsort((deviation, g))], sizes)


def robust_sigma(values: ArrayLike) -> float:
    """Robust estimate of sigma: MAD / 0.6745, or 1.2533 x mean absolute deviation when MAD = 0 (0 when
    every value is the same). NaN for an empty sample."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return float("nan")
    deviation = np.abs(x - np.median(x))
    spread = float(np.median(deviation))
    if spread > 0.0:
        return spread / _MAD_TO_Z
    return _MEANAD_TO_SIGMA * float(np.mean(deviation))


def modified_z(values: ArrayLike) -> NDArray[np.float64]:
    """Modified z-score of every value, with the MAD = 0 fallback described in the module docstring."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return np.zeros(0)
    sigma = robust_sigma(x)
    if sigma > 0.0:
        return (x - np.median(x)) / sigma
    return np.zeros_like(x)


def slow_outliers(scores: ArrayLike, cut: float) -> NDArray[np.bool_]:
    """One-sided flag: True where the score is below -cut (slower than the peers by more than `cut`)."""
    if cut <= 0:
        raise ValueError(f"robust cut must be > 0, got {cut}")
    return np.asarray(scores, dtype=float) < -cut
