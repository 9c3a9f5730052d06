"""Change points of one series: the rule `history show` applies to every (node, probe variant), usable on any
series ordered in time (a node's job effects, a baseline).

`judge_series(values)` (or `judge_oriented(y)` on values already on an additive scale where lower is worse)
returns the steps it finds, the series' noise and the smallest step it could find in its latest entries.

The rule, on y (the log of the values, oriented so that lower is worse):
1. Outliers: entries further than CLIP_SIGMAS sigma_d from the running median of ROLLING entries are pulled
   to that distance (a bad entry, or a burst of up to three, is not a change); sigma_d is the entry-to-entry
   noise from the first differences (the larger of their MAD and their 4-MAD-winsorized sd, over sqrt 2)
   raised to its one-sided 95% upper bound, so that a short series clips only what is far out.
2. Candidates: PELT with the L2 cost (a change in level; `ruptures.KernelCPD(kernel="linear")`, the same
   segmentation as `ruptures.Pelt(model="l2")`, in C), penalty CANDIDATE_BETA sigma_d^2 log n (the point
   estimate: generous, the test below decides), at least MIN_SIZE entries on each side.
3. Noise from within the segments: s^2 = the residual sum of squares about each segment's mean over
   n - segments degrees of freedom, so a step does not inflate the noise it is judged against (from the
   first differences it did: a 6% step on 1% noise over 10 entries read as 2.1% noise, and was not found).
   With a fleet, s^2 is moderated towards the noise of the same probe variant on the other nodes
   (empirical Bayes, Smyth 2004: `NoisePrior`, prior degrees of freedom estimated from how much the
   nodes' noise differs, at most MAX_PRIOR_DF), except on a node whose own noise lies beyond the prior's
   99.9% quantile (a noisy node keeps its own).
4. Test: every change against its neighbouring segments, t = |difference of means| / (s sqrt(1/a + 1/b)),
   must exceed the critical value of Student's t with the noise's degrees of freedom at a false-change
   probability of FALSE_RATE / n per series, Bonferroni over its n - 2 MIN_SIZE + 1 possible positions,
   and be at least MIN_SIGMAS s; the weakest failing change is removed and the rest tested again (with
   the noise of the new segmentation) until all pass. A short series thus speaks after few entries when its
   noise is well known (its own entries or the fleet's), and a year of entries is held to the strictness
   of before or more (critical value 5.8 at 365 entries; before: 5 times a noise raised by 8%).

Measured (bench/bench_history_early.py): false changes and detection delay by series length; the 1,000-node
x 365-day fleet of bench_history.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

MIN_SIZE = 3
ROLLING = 7
CLIP_SIGMAS = 3.0
CANDIDATE_BETA = 2.0
FALSE_RATE = 0.002  # per series of n entries: FALSE_RATE / n (0.02% at 10 entries, 0.0005% at 365)
MIN_SIGMAS = 1.5
SIGMA_FLOOR = 1e-4  # 0.01%: quantised medians that repeat exactly
PRIOR_MIN_SERIES = 8  # series of one probe variant needed to estimate the fleet's noise
MAX_PRIOR_DF = 30.0  # the fleet's noise counts as at most 30 entries of a node's own
PRIOR_OUTLIER = 0.999  # a node's own noise beyond this quantile of the prior keeps its own
Z95 = 1.959963984540054


@dataclass(frozen=True)
class NoisePrior:
    """The noise of one probe variant across a fleet: a node's sigma^2 ~ s2 df / chi2(df) (df may be inf)."""

    s2: float
    df: float


@dataclass(frozen=True)
class Step:
    """A change of level: `index` is the first entry after it; `shift` = mean after - mean before of the
    oriented values (negative: worse), with its 95% interval."""

    index: int
    shift: float
    lower: float
    upper: float
    entries_before: int
    entries_after: int
    t: float


@dataclass(frozen=True)
class SeriesJudgement:
    steps: tuple[Step, ...]
    entries: int
    noise: float  # sd of one entry (oriented scale), moderated by the prior where one was used
    df: float  # its degrees of freedom (inf: the fleet's noise taken as known)
    own_noise: float  # the series' own within-segment sd and its degrees of freedom (for a NoisePrior)
    own_df: int
    detectable: float | None  # the smallest shift of the latest MIN_SIZE entries the rule would report;
    # None: too few entries since the start (or the last change) to judge any


def oriented(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    y = np.log(np.maximum(np.asarray(values, dtype=float), 1e-300))
    return y if higher_is_better else -y


def diff_noise(y: np.ndarray) -> float:
    """sigma from the first differences: the larger of 1.4826 MAD and the sd winsorized at 4 MADs, over
    sqrt 2 (a level change is one large difference, an outlier two). The MAD alone is noisy (60 entries
    underestimated one node's noise by 26%); the winsorized sd is nearly as efficient as the plain one."""
    if len(y) < 3:
        return SIGMA_FLOOR
    d = np.diff(y)
    center = float(np.median(d))
    robust = 1.4826 * float(np.median(np.abs(d - center)))
    wins = float(np.std(np.clip(d, center - 4 * robust, center + 4 * robust)))
    return max(max(robust, wins) / math.sqrt(2.0), SIGMA_FLOOR)


def upper_factor(differences: int) -> float:
    """sigma's one-sided 95% upper bound over its estimate, sqrt(df / chi2_0.05(df)), with df two thirds
    of the differences (consecutive differences share an entry): x2.02 at 9, x1.08 at 364."""
    from scipy.special import chdtri

    df = max(2.0, (differences - 1) * 2.0 / 3.0)
    return math.sqrt(df / float(chdtri(df, 0.95)))


def clipped(y: np.ndarray, sigma: float) -> np.ndarray:
    """`y` with single entries (and runs of up to three) pulled to within CLIP_SIGMAS sigma of the running
    median of ROLLING entries; a step keeps its edge (the running median of an odd window follows it)."""
    half = ROLLING // 2
    padded = np.concatenate([np.full(half, np.nan), y, np.full(half, np.nan)])
    level = np.nanmedian(np.lib.stride_tricks.sliding_window_view(padded, ROLLING), axis=1)
    return np.clip(y, level - CLIP_SIGMAS * sigma, level + CLIP_SIGMAS * sigma)


def critical(n: int, df: float) -> float:
    """The t a change must exceed in a series of n entries (see the module's rule, step 4)."""
    positions = max(1, n - 2 * MIN_SIZE + 1)
    return _quantile(df, 1.0 - FALSE_RATE / n / (2 * positions))


def _quantile(df: float, p: float = 0.975) -> float:
    """Student's t quantile (the normal's for infinite df); scipy.special's, not scipy.stats' (whose
    argument checks cost 100 times the computation, in a loop over thousands of series)."""
    from scipy.special import ndtri, stdtrit

    return float(ndtri(p)) if math.isinf(df) else float(stdtrit(df, p))


def _candidates(y: np.ndarray) -> tuple[np.ndarray, list[int]]:
    import ruptures

    n = len(y)
    sigma = diff_noise(y)
    yc = clipped(y, sigma * upper_factor(n - 1))
    pen = CANDIDATE_BETA * sigma * sigma * math.log(n)
    algo = ruptures.KernelCPD(kernel="linear", min_size=MIN_SIZE, jump=1).fit(yc.reshape(-1, 1))
    return yc, [int(b) for b in algo.predict(pen=pen) if 0 < int(b) < n]


def _noise(
    yc: np.ndarray, bounds: Sequence[int], prior: NoisePrior | None
) -> tuple[float, float, float, int]:
    """(s^2 used, its df, own s^2, own df) for the segmentation `bounds`."""
    rss = sum(float(((yc[a:b] - yc[a:b].mean()) ** 2).sum()) for a, b in itertools.pairwise(bounds))
    own_df = len(yc) - (len(bounds) - 1)
    own = max(rss / own_df, SIGMA_FLOOR**2)
    if prior is None or own_df < 1:
        return own, float(own_df), own, own_df
    from scipy.special import chdtri, fdtri

    if math.isinf(prior.df):
        limit = chdtri(own_df, 1 - PRIOR_OUTLIER) / own_df
    else:
        limit = fdtri(own_df, prior.df, PRIOR_OUTLIER)
    if own / prior.s2 > float(limit):
        return own, float(own_df), own, own_df  # a noisy node: its own noise
    d0 = min(prior.df, MAX_PRIOR_DF)
    return (d0 * prior.s2 + own_df * own) / (d0 + own_df), d0 + own_df, own, own_df


@dataclass(frozen=True)
class Candidates:
    """A series with its outliers pulled in and PELT's candidate changes (steps 1 and 2 of the rule), and
    the noise within those candidate segments (what the fleet's noise is fitted from: a step the series
    alone cannot yet confirm still does not count as noise)."""

    y: np.ndarray
    clipped: np.ndarray
    found: tuple[int, ...]
    noise: float
    df: int


def candidates(y: np.ndarray) -> Candidates:
    y = np.asarray(y, dtype=float)
    if len(y) < 2 * MIN_SIZE:
        return Candidates(y, y, (), diff_noise(y), max(0, len(y) - 1))
    yc, found = _candidates(y)
    _s2, _df, own, own_df = _noise(yc, [0, *found, len(y)], None)
    return Candidates(y, yc, tuple(found), math.sqrt(own), own_df)


def judge_oriented(y: np.ndarray | Candidates, prior: NoisePrior | None = None) -> SeriesJudgement:
    """The rule on `y` (additive scale, lower is worse, in time order; or its `candidates`)."""
    cand = y if isinstance(y, Candidates) else candidates(y)
    n = len(cand.y)
    if n < 2 * MIN_SIZE:
        sd = diff_noise(cand.y)
        return SeriesJudgement((), n, sd, float(max(0, n - 1)), sd, max(0, n - 1), None)
    yc, found = cand.clipped, list(cand.found)
    while True:
        bounds = [0, *found, n]
        s2, df, own, own_df = _noise(yc, bounds, prior)
        s, c = math.sqrt(s2), critical(n, df)
        weakest, weakest_t = None, math.inf
        for i in range(1, len(bounds) - 1):
            a, b = yc[bounds[i - 1] : bounds[i]], yc[bounds[i] : bounds[i + 1]]
            diff = abs(float(b.mean() - a.mean()))
            t = diff / (s * math.sqrt(1 / len(a) + 1 / len(b)))
            if (t < c or diff < MIN_SIGMAS * s) and t < weakest_t:
                weakest, weakest_t = i - 1, t
        if weakest is None:
            break
        del found[weakest]
    q = _quantile(df)
    steps = []
    for i, k in enumerate(found):
        a, b = yc[bounds[i] : k], yc[k : bounds[i + 2]]
        se = s * math.sqrt(1 / len(a) + 1 / len(b))
        shift = float(b.mean() - a.mean())
        steps.append(Step(k, shift, shift - q * se, shift + q * se, len(a), len(b), abs(shift) / se))
    before = n - bounds[-2] - MIN_SIZE  # entries of the latest segment before its last MIN_SIZE
    detectable = None
    if before >= MIN_SIZE:
        detectable = max(c * s * math.sqrt(1 / before + 1 / MIN_SIZE), MIN_SIGMAS * s)
    return SeriesJudgement(tuple(steps), n, s, df, math.sqrt(own), own_df, detectable)


def judge_series(
    values: Sequence[float] | np.ndarray,
    *,
    higher_is_better: bool = True,
    log: bool = True,
    prior: NoisePrior | None = None,
) -> SeriesJudgement:
    """The rule on a series in time order: `log` (positive values: shifts are log ratios, exp(shift) the
    ratio after/before, oriented so that below 1 is worse) or not (any sign: shifts are differences of
    the values, negated when lower is better so that a negative shift is always worse)."""
    v = np.asarray(values, dtype=float)
    if log:
        return judge_oriented(oriented(v, higher_is_better), prior)
    return judge_oriented(v if higher_is_better else -v, prior)


def fit_prior(noises: Iterable[tuple[float, int]]) -> NoisePrior | None:
    """The fleet's noise from the series' own (sd, df) (Smyth 2004's moments of log s^2), the series whose
    noise lies beyond the fitted prior's PRIOR_OUTLIER quantile left out and the fit repeated (a few noisy
    nodes would otherwise make every node's noise look uncertain). None below PRIOR_MIN_SERIES series."""
    from scipy.special import digamma, polygamma
    from scipy.stats import f

    pairs = [(s * s, d) for s, d in noises if d >= 1 and s > 0]
    s2 = np.array([p[0] for p in pairs], dtype=float)
    d = np.array([p[1] for p in pairs], dtype=float)
    prior = None
    for _ in range(3):
        if len(s2) < PRIOR_MIN_SERIES:
            return prior
        e = np.log(s2) - digamma(d / 2) + np.log(d / 2)
        mean = float(e.mean())
        var = float(e.var(ddof=1)) - float(np.mean(polygamma(1, d / 2)))
        if var > 0:
            d0 = 2.0 * _trigamma_inverse(var)
            prior = NoisePrior(math.exp(mean + float(digamma(d0 / 2)) - math.log(d0 / 2)), d0)
        else:
            prior = NoisePrior(math.exp(mean), math.inf)
        d0 = prior.df if math.isfinite(prior.df) else 1e6
        keep = s2 / prior.s2 <= f.ppf(PRIOR_OUTLIER, d, d0)
        if keep.all():
            return prior
        s2, d = s2[keep], d[keep]
    return prior


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton's method as limma's trigammaInverse)."""
    from scipy.special import polygamma

    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y
