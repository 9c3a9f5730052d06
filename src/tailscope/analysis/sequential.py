"""Anytime-valid judgement of a probe, trial by trial: when is its verdict settled?

A fixed-n test looked at after every trial and stopped when it "looks significant" has no error rate at all:
each look is one more chance of a false alarm. A *confidence sequence* (CS) is a sequence of intervals C_1,
C_2, ... with P(the true value is outside C_t for some t) <= alpha: it may be looked at after every trial
and the run stopped by any rule, data-dependent included, and the interval it stops on still covers at the
stated level (Darling & Robbins 1967; Howard, Ramdas, McAuliffe & Sekhon, "Time-uniform, nonparametric,
nonasymptotic confidence sequences", Ann. Statist. 49(2), 2021). Every claim made here comes from one:

- **Level** (the node against its baseline: its own history, else the fleet's): the mean of the log ratios
  x_t = log(value_t / baseline), oriented so that negative is slower, with Lai's t confidence sequence for
  a Gaussian mean of unknown variance (T. L. Lai, "On confidence sequences", Ann. Statist. 4(2):265-280,
  1976), in the closed form of H. Wang & A. Ramdas, "Anytime-valid t-tests and confidence sequences for
  Gaussian means with unknown variance", Sequential Analysis 2025 (arXiv:2310.03722), Theorem 4.9: the
  scale-invariant likelihood ratio mixed over the standardised effect theta = mu/sigma ~ N(0, 1/c^2),

      G_t(mu) = sqrt(c^2 / (t + c^2)) * ((t + c^2) V / ((t + c^2) V - S^2))^(t/2),
      S = sum(x_i - mu), V = sum((x_i - mu)^2),

  is a nonnegative martingale under the null with G_0 = 1, so by Ville's inequality (1939) P(exists t:
  G_t(mu) >= 1/alpha) <= alpha, whatever sigma is. The CS {mu: G_t(mu) < 1/alpha} is, with m the mean,
  Q = sum((x_i - m)^2) and K = (sqrt((t + c^2)/c^2) / alpha)^(2/t) (solved for mu, our arithmetic, checked
  against G_t itself in tests/analysis/test_sequential.py):

      m +- sqrt((K - 1) Q / (t (K t / (t + c^2) - (K - 1)))),   all of R while K t / (t + c^2) <= K - 1.

  c^2 = PRIOR_PRECISION = 0.1 (effects of about 3 sds are expected a priori): the interval exists from 3
  trials on, 3.3 noise sds wide each side at 4 trials (1 sd: 0.25 = 3.6, 0.04 = 3.4 at 4, but from 3
  trials on both), and is about 8% wider than c^2 = 1's from 20 trials on. Why a parametric CS and not the
  distribution-free one of the median (Howard & Ramdas, "Sequential estimation of quantiles", Bernoulli
  28(3), 2022): that one can say nothing before 5 trials at 95% (2^5 = 32 is the largest likelihood ratio
  5 signs can give against 1/0.05 = 20) and in practice 6-8, where this one says "within 5%" after 3-4
  trials of a quiet probe: a check between jobs is made of such trials. Log performance of a quiet probe is
  close to normal; its rare slow runs are not, and are judged separately (below). The mean of the logs is a
  robust-enough level: one slow run in a few widens the CS (V grows) rather than moving a claim, and the
  simulation (analysis/stopping_sim.py, bench/bench_stopping_simulation.py) shows the error rates with
  heavy-tailed noise and slow-run mixtures too. Claims: "within" (the CS's lower end above log(1 -
  max_level_drop)) and "below" (its upper end under it); each is false with probability <= 1 - confidence,
  at every trial.
- **Slow-run rate**: a run is slow when it is more than the primary threshold below the median of the runs
  before it (a predictable cut: the median of the trials so far, from the (SLOW_BURN_IN + 1)-th trial on),
  so the slow indicators come one at a time as Bernoulli(p). Evidence that p > p0 is a mixture of likelihood
  ratios prod((theta/p0)^y (1-theta)/(1-p0))^(1-y)) over alternatives theta > p0 (Robbins, "Statistical
  methods related to the law of the iterated logarithm", Ann. Math. Statist. 41(5), 1970; Howard et al.
  2021): for every p <= p0 each factor has mean <= 1, so the mixture is a nonnegative supermartingale under
  the whole composite null and Ville's inequality holds. The alternatives are a fixed grid on the log-odds
  scale (SLOW_RATE: 1.6 to 20 times the limit, so one slow run is never enough); a fixed prior changes
  power, never validity. No claim is made while the probe's noise floor is above the threshold (its "slow"
  runs are then its noise: analysis/health.py judges it too noisy). The
  same test the other way (alternatives below q, DECISIVE: weight on "no slow run at all") gives the upper
  bound "the rate is below q": the smallest q
  of a fine grid that the evidence rejects (each likelihood ratio grows with q, so the rejected q form an
  interval). 0 slow runs in 300 give about 1.4% at 95% here (a fixed-n Clopper-Pearson bound: 1.0%): the
  price of looking after every trial.
- **Busy**: others' share of the probe CPUs above max_busy_share in a trial is a Bernoulli indicator too;
  the node is "too busy to judge" when the evidence says more than half the trials are (the median trial is,
  as analysis/health.py judges the whole campaign), and settled quiet when it says fewer than half are.

A probe is **settled** when its judgement can no longer improve by waiting: its level is "below" or its
slow-run rate is shown above the limit (degraded), or its level is "within" and its slow-run evidence is
not pointing up (the likelihood ratio below 1/sqrt(alpha), SUSPICIOUS_ROOT: a probe that has shown a few
slow runs keeps going to tell a slow mode from noise). Without a baseline there is no level to settle: the
probe runs to its trial cap and is judged there by the campaign's own rules (analysis/verdict.py), or stops
early when degraded. A settled healthy probe says what its trials allow about its slow-run rate ("below 45%:
too few trials to claim 1%"): rare slow runs need hundreds of trials (notes/statistics.md), which the fixed
`check --fixed` and the node's history gather, and a quick check does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tailscope.analysis.model import Claim, Settings
from tailscope.analysis.robust import noise_floor
from tailscope.analysis.wording import pct

METHOD = (
    "stopping: anytime-valid confidence sequences, looked at after every trial: level vs the baseline by "
    "Lai's t-CS on log ratios (Wang & Ramdas 2025, Thm 4.9, c^2 = 0.1); slow-run rate and busy trials by "
    "mixtures of Bernoulli likelihood ratios (Robbins 1970), slow = below the median of the earlier trials"
)

PRIOR_PRECISION = 0.1  # c^2 of the t-CS's mixture: theta = mu / sigma ~ N(0, 1 / c^2)
RESOLUTION = 1e-4  # a floor on the per-trial sd of the log values: tied values (a coarse timer) are not exact
SLOW_BURN_IN = 5  # the first trial whose slowness counts is the 6th: its cut is the median of 5 before it
SUSPICIOUS_ROOT = 0.5  # evidence >= (1/alpha)^0.5 of a high slow-run rate keeps a probe running
# The alternatives of the Bernoulli mixtures: log-odds steps away from the null's rate, and their weights.
# DECISIVE (busy trials, the rate's upper bound): much weight far away, so that "every trial busy" or "no
# slow run at all" is answered in few trials (5 busy trials of 5 settle "busy"). SLOW_RATE (the slow-run
# rate above its limit): rates 1.6 to 20 times the limit alike, so that one slow run is never enough.
DECISIVE = ((0.5, 1.0, 2.0, 3.0, 4.5, 6.5), (0.1, 0.1, 0.15, 0.15, 0.2, 0.3))
SLOW_RATE = ((0.5, 1.0, 1.5, 2.0, 2.5, 3.0), (1 / 6,) * 6)
MIN_RUNS_FOR_FLOOR = 6  # analysis/health.py's: below it a probe's noise floor is not judged
_RATE_GRID = np.concatenate([np.geomspace(1e-4, 0.2, 320), np.linspace(0.2, 1.0, 161)[1:]])

LevelState = Literal["within", "below", "open", "none"]


# --- the confidence sequences (vectorised: the last axis is the trial; every prefix is judged) --------------
def level_bounds(x: ArrayLike, confidence: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Lai's t-CS for the mean of `x`, for every prefix along the last axis: (lower, upper); +-inf before
    the CS exists (t < 3). Not intersected over time (which a CS allows): a few slow runs late in a probe
    move its mean, and an intersection would keep the earlier, narrower interval away from it."""
    values = np.asarray(x, dtype=float)
    if values.shape[-1] == 0:
        empty = np.zeros(values.shape)
        return empty, empty
    alpha = 1.0 - confidence
    c2 = PRIOR_PRECISION
    t = np.arange(1, values.shape[-1] + 1, dtype=float)
    shifted = values - values[..., :1]  # sums of small differences: no cancellation in Q
    s1 = np.cumsum(shifted, axis=-1)
    s2 = np.cumsum(shifted * shifted, axis=-1)
    mean = s1 / t
    q = np.maximum(s2 - s1 * mean, (t - 1.0) * RESOLUTION**2)
    log_k = (2.0 / t) * (0.5 * np.log((t + c2) / c2) - math.log(alpha))
    k = np.exp(log_k)
    denominator = t * (k * t / (t + c2) - (k - 1.0))
    exists = denominator > 0
    half = np.sqrt((k - 1.0) * q / np.where(exists, denominator, 1.0))
    half = np.where(exists, half, np.inf)
    centre = mean + values[..., :1]
    return centre - half, centre + half


def t_martingale(x: ArrayLike, mu: float) -> float:
    """G_t(mu) of the whole of `x` (Wang & Ramdas, Theorem 4.9): what level_bounds inverts; for tests."""
    values = np.asarray(x, dtype=float) - mu
    t, c2 = len(values), PRIOR_PRECISION
    s, v = float(values.sum()), float((values * values).sum())
    return math.sqrt(c2 / (t + c2)) * ((t + c2) * v / ((t + c2) * v - s * s)) ** (t / 2.0)


def rate_evidence(
    k: ArrayLike,
    n: ArrayLike,
    p0: ArrayLike,
    *,
    above: bool = True,
    alternatives: tuple[tuple[float, ...], tuple[float, ...]] = DECISIVE,
) -> NDArray[np.float64]:
    """The mixture likelihood ratio of k events in n Bernoulli trials against "the rate is at most p0"
    (above=True) or "at least p0" (above=False); >= 1/alpha rejects it. Arrays broadcast. p0 = 0 (above):
    any event is infinite evidence; p0 = 1 (below): likewise any non-event."""
    k_, n_, p_ = np.broadcast_arrays(
        np.asarray(k, dtype=float), np.asarray(n, dtype=float), np.asarray(p0, dtype=float)
    )
    inner = np.clip(p_, 1e-300, 1.0 - 1e-16)
    sign = 1.0 if above else -1.0
    shifts, weights = np.asarray(alternatives[0]), np.asarray(alternatives[1])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        base = np.log(inner) - np.log1p(-inner)
        theta = 1.0 / (1.0 + np.exp(-(base[..., None] + sign * shifts)))
        log_hit = np.log(theta) - np.log(inner)[..., None]
        log_miss = np.log1p(-theta) - np.log1p(-inner)[..., None]
        terms = k_[..., None] * log_hit + (n_ - k_)[..., None] * log_miss + np.log(weights)
        top = terms.max(axis=-1)
        out = np.exp(top + np.log(np.exp(terms - top[..., None]).sum(axis=-1)))
    if above:
        out = np.where(p_ <= 0.0, np.where(k_ > 0, np.inf, 1.0), np.where(p_ >= 1.0, 1.0, out))
    else:
        out = np.where(p_ >= 1.0, np.where(n_ - k_ > 0, np.inf, 1.0), np.where(p_ <= 0.0, 1.0, out))
    return np.asarray(out)


def _grid_search(
    k: ArrayLike, n: ArrayLike, confidence: float, *, above: bool, alternatives: Any = DECISIVE
) -> NDArray[np.float64]:
    """Bisection over _RATE_GRID for the bound of the rejected rates (monotone in q, see the module text)."""
    k_, n_ = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    threshold = 1.0 / (1.0 - confidence)
    grid = _RATE_GRID
    # above=False: rejected rates are [U, 1]: find the first rejected index; above=True: [0, L]: the last.
    lo = np.zeros(k_.shape, dtype=int)
    hi = np.full(k_.shape, len(grid) - 1, dtype=int)
    for _ in range(math.ceil(math.log2(len(grid))) + 1):
        mid = (lo + hi) // 2
        rejected = rate_evidence(k_, n_, grid[mid], above=above, alternatives=alternatives) >= threshold
        if above:
            lo = np.where(rejected, mid + 1, lo)
            hi = np.where(rejected, hi, mid)
        else:
            hi = np.where(rejected, mid, hi)
            lo = np.where(rejected, lo, mid + 1)
        lo = np.minimum(lo, hi)
    if above:  # lo: the first index not rejected (or the last index)
        found = rate_evidence(k_, n_, grid[lo], above=True, alternatives=alternatives) >= threshold
        last = np.where(found, lo, lo - 1)
        return np.where(last >= 0, grid[np.maximum(last, 0)], 0.0)
    first = hi
    return np.where(rate_evidence(k_, n_, grid[first], above=False) >= threshold, grid[first], 1.0)


def rate_upper(k: ArrayLike, n: ArrayLike, confidence: float) -> NDArray[np.float64]:
    """The smallest rate q of a fine grid that k events in n trials show the rate to be below (1 when none):
    for each prefix, not yet intersected over time (callers take the running minimum)."""
    return _grid_search(k, n, confidence, above=False)


def rate_lower(k: ArrayLike, n: ArrayLike, confidence: float) -> NDArray[np.float64]:
    """The largest rate q of the grid that k events in n trials show the rate to be above (0 when none), by
    the slow-run test's own alternatives (a "rate above" claim agrees with the test)."""
    return _grid_search(k, n, confidence, above=True, alternatives=SLOW_RATE)


def slow_rate_evidence(k: ArrayLike, n: ArrayLike, limit: float) -> NDArray[np.float64]:
    """The evidence that the slow-run rate is above `limit` (SLOW_RATE's alternatives)."""
    return rate_evidence(k, n, limit, alternatives=SLOW_RATE)


def slow_flags(
    values: ArrayLike, higher_is_better: bool, threshold: float
) -> tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_]]:
    """(slow, counted, quiet) per trial along the last axis: trial t (from SLOW_BURN_IN on, counted from 0)
    is slow when it is more than `threshold` below the median of the trials before it; quiet while the noise
    floor of the trials so far (3 robust sds, analysis/robust.py, from MIN_RUNS_FOR_FLOOR trials on) is
    within `threshold`: where it is not, a "slow" run is the probe's noise, and analysis/health.py calls the
    probe too noisy to judge, so no slow-run claim is made."""
    x = np.asarray(values, dtype=float)
    slow = np.zeros(x.shape, dtype=bool)
    quiet = np.ones(x.shape, dtype=bool)
    counted = np.zeros(x.shape[-1], dtype=bool)
    for t in range(SLOW_BURN_IN, x.shape[-1]):
        cut = np.median(x[..., :t], axis=-1)
        ratio = x[..., t] / cut if higher_is_better else cut / x[..., t]
        slow[..., t] = ratio < 1.0 - threshold
        counted[t] = True
        if t + 1 >= MIN_RUNS_FOR_FLOOR:
            prefix = x[..., : t + 1]
            median = np.median(prefix, axis=-1)
            spread = np.median(np.abs(prefix - median[..., None]), axis=-1)
            quiet[..., t] = noise_floor(spread, median) <= threshold
    return slow, counted, quiet


# --- one probe's judgement ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Baseline:
    """What a probe's level is judged against: the node's own history, else the fleet's."""

    value: float  # in the probe's unit
    source: Literal["history", "fleet"]
    entries: int  # history entries (campaigns) or nodes it is the median of
    trials: int  # trials behind those entries

    def words(self) -> str:
        if self.source == "history":
            return "its history"
        return "the fleet"

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "entries": self.entries, "trials": self.trials}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Baseline:
        value = float(data["value"])
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"baseline value {value}: expected a number > 0")
        source = str(data["source"])
        if source not in ("history", "fleet"):
            raise ValueError(f"baseline source {source!r}: expected history or fleet")
        return cls(value, source, int(data["entries"]), int(data["trials"]))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Level:
    state: LevelState
    ratio: float | None = None  # exp(mean log ratio): the level against the baseline, < 1 slower
    low: float | None = None  # the CS of the ratio (None: none yet)
    high: float | None = None
    limit: float | None = None  # 1 - max_level_drop


@dataclass(frozen=True)
class SlowRate:
    slow: int  # slow trials counted
    counted: int
    upper: float  # the rate is below this (1: nothing claimed)
    lower: float  # ... and above this (0: nothing claimed)
    evidence: float  # the running maximum of the evidence that the rate is above the limit
    degraded: bool
    suspicious: bool


@dataclass(frozen=True)
class Judgement:
    """One probe's (variant's) judgement on one node after its trials so far."""

    n: int
    level: Level
    slow_rate: SlowRate
    settled: bool
    degraded: bool
    distance: float  # how far from settled, (0, 1]; 0 when settled (the budget scheduler's weight)


def judge(
    values: Sequence[float] | NDArray[np.float64],
    higher_is_better: bool,
    baseline: Baseline | None,
    settings: Settings,
) -> Judgement:
    """The judgement after the trials `values` (ok values in trial order, each > 0)."""
    x = np.asarray([v for v in values if math.isfinite(v) and v > 0], dtype=float)
    n = len(x)
    level = _level(x, higher_is_better, baseline, settings)
    rate = _slow_rate(x, higher_is_better, settings)
    settled, degraded = (bool(v) for v in decide(level.state == "within", level.state == "below", rate))
    return Judgement(n, level, rate, settled, degraded, 0.0 if settled else _distance(x, level, rate))


def decide(within: Any, below: Any, rate: Any) -> tuple[Any, Any]:
    """(settled, degraded) from the level's state and the slow-run rate's (arrays or scalars alike: the
    simulation judges 10,000 sequences with this very rule)."""
    degraded = np.logical_or(below, rate.degraded)
    return np.logical_or(degraded, np.logical_and(within, np.logical_not(rate.suspicious))), degraded


def _level(x: NDArray[np.float64], hib: bool, baseline: Baseline | None, settings: Settings) -> Level:
    if baseline is None or settings.max_level_drop is None:
        return Level("none")
    limit = 1.0 - settings.max_level_drop
    if len(x) == 0:
        return Level("open", limit=limit)
    logs = np.log(x / baseline.value) * (1.0 if hib else -1.0)
    lower, upper = level_bounds(logs, settings.confidence)
    ratio = math.exp(float(logs.mean()))
    low, high = float(lower[-1]), float(upper[-1])
    cut = math.log(limit)
    state: LevelState = "within" if low > cut else "below" if high < cut else "open"
    return Level(
        state,
        ratio,
        math.exp(low) if math.isfinite(low) else None,
        math.exp(high) if math.isfinite(high) else None,
        limit,
    )


def _slow_rate(x: NDArray[np.float64], hib: bool, settings: Settings) -> SlowRate:
    slow, counted, quiet = slow_flags(x, hib, settings.primary_threshold)
    k = np.cumsum(slow & counted)
    m = np.cumsum(counted)
    limit = settings.max_slow_rate
    evidence = np.where(quiet, slow_rate_evidence(k, m, limit), 1.0) if limit is not None else np.ones(len(x))
    upper = rate_upper(k, m, settings.confidence) if len(x) else np.ones(1)
    lower = rate_lower(k, m, settings.confidence) if len(x) else np.zeros(1)
    best = float(evidence.max()) if len(x) else 1.0
    now = float(evidence[-1]) if len(x) else 1.0
    return SlowRate(
        slow=int(k[-1]) if len(x) else 0,
        counted=int(m[-1]) if len(x) else 0,
        upper=float(upper.min()),
        lower=float(lower.max()),
        evidence=best,
        degraded=limit is not None and best >= 1.0 / settings.alpha,
        suspicious=limit is not None and now >= (1.0 / settings.alpha) ** SUSPICIOUS_ROOT,
    )


def _distance(x: NDArray[np.float64], level: Level, rate: SlowRate) -> float:
    """How far an unsettled probe is from settled: the share of its level CS's half-width that still has to
    go before it clears the limit (1 before the CS exists); 1 while its slow-run evidence points up."""
    if rate.suspicious or level.state != "open" or level.low is None or level.high is None:
        return 1.0
    assert level.low is not None and level.high is not None and level.limit is not None
    centre = 0.5 * (math.log(level.low) + math.log(level.high))
    half = 0.5 * (math.log(level.high) - math.log(level.low))
    gap = abs(centre - math.log(level.limit))
    return float(min(1.0, max(0.05, 1.0 - gap / half))) if half > 0 else 0.05


def busy_verdict(
    shares: Sequence[float], limit: float, confidence: float
) -> Literal["busy", "quiet", "open"]:
    """Whether the probe CPUs were busy in most trials (the median trial: analysis/health.py), from the
    trials' shares of others' CPU time so far (NaN: no evidence for that trial)."""
    s = np.asarray([v for v in shares if math.isfinite(v)], dtype=float)
    if not len(s):
        return "open"
    k, n = int((s > limit).sum()), len(s)
    threshold = 1.0 / (1.0 - confidence)
    if float(rate_evidence(k, n, 0.5)) >= threshold:
        return "busy"
    if float(rate_evidence(k, n, 0.5, above=False)) >= threshold:
        return "quiet"
    return "open"


@dataclass(frozen=True)
class Stopped:
    """A (variant, node) group of a stopped campaign: its judgement, its baseline, whether it reached its
    trial cap."""

    judgement: Judgement
    baseline: Baseline | None
    at_cap: bool


# --- claims: what a judgement allows to say, in words and as data ----------------------------------------
def claims_of(
    judgement: Judgement,
    *,
    probe: str,
    variant: str,
    node: str,
    baseline: Baseline | None,
    settings: Settings,
) -> list[Claim]:
    """The level claim (when there is a baseline) and the slow-run-rate claim of one probe."""
    out = []
    confidence = settings.confidence
    level = judgement.level
    n = judgement.n
    if baseline is not None and level.state in ("within", "below") and level.low and level.high:
        against = baseline.words()
        if level.state == "within":
            drop = max(0.0, 1.0 - level.low)
            text = (
                f"{probe} within {pct(drop)} of {against} at {pct(confidence)}"
                if level.low < 1.0
                else f"{probe} at least {pct(level.low - 1.0)} faster than {against} at {pct(confidence)}"
            )
            out.append(Claim(probe, variant, node, "level", "within", drop, confidence, n, text))
        else:
            drop = 1.0 - level.high
            text = f"{probe} at least {pct(drop)} below {against} at {pct(confidence)}"
            out.append(Claim(probe, variant, node, "level", "below", drop, confidence, n, text))
    rate = judgement.slow_rate
    limit = settings.max_slow_rate
    if rate.degraded and limit is not None:
        text = (
            f"{probe} slow-run rate above {pct(max(rate.lower, limit))} at {pct(1.0 - settings.alpha)} "
            f"({rate.slow} of {rate.counted} trials more than {pct(settings.primary_threshold)} slow)"
        )
        out.append(Claim(probe, variant, node, "slow_rate", "above", max(rate.lower, limit),
                         1.0 - settings.alpha, n, text))  # fmt: skip
    elif rate.counted and rate.upper < 1.0:
        text = f"{probe} slow-run rate below {pct(rate.upper)}"
        if limit is not None and rate.upper > limit:
            text += f": too few trials to claim {pct(limit)}"
        out.append(Claim(probe, variant, node, "slow_rate", "below", rate.upper, confidence, n, text))
    return out


# --- what `check` recorded about its stopping (DIR/stopping.json), read back by every analysis -------------
@dataclass(frozen=True)
class Stopping:
    """How a campaign's trials were stopped: the mode, each variant's trial cap, the baselines by (node,
    variant), the budget. A campaign with this record is judged with the anytime-valid rules above."""

    mode: Literal["settled", "budget"]
    caps: dict[str, int]
    baselines: dict[tuple[str, str], Baseline] = field(default_factory=dict)
    budget_s: float | None = None
    reason: str = ""  # why the trials stopped, in words

    def at_cap(self, variant: str, n: int) -> bool:
        """Whether the variant ran its trial cap (a variant without one ran a fixed count: `check --deep`'s
        follow-up probes)."""
        cap = self.caps.get(variant)
        return cap is None or n >= cap

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "tailscope-stopping",
            "version": 1,
            "mode": self.mode,
            "caps": dict(sorted(self.caps.items())),
            "baselines": [
                {"node": node, "variant": variant, **b.to_json()}
                for (node, variant), b in sorted(self.baselines.items())
            ],
            "budget_s": self.budget_s,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: Any) -> Stopping:
        """Raises ValueError (one line) for a record that is not the one `check` writes."""
        if not isinstance(data, dict) or data.get("format") != "tailscope-stopping":
            raise ValueError('expected the object `check` writes (format "tailscope-stopping")')
        mode = data.get("mode")
        if mode not in ("settled", "budget"):
            raise ValueError(f"mode {mode!r}: expected settled or budget")
        caps = data.get("caps")
        if not isinstance(caps, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in caps.values()
        ):
            raise ValueError("caps: expected an object of whole numbers > 0")
        baselines = {}
        for i, row in enumerate(data.get("baselines") or []):
            try:
                baselines[(str(row["node"]), str(row["variant"]))] = Baseline.from_json(row)
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"baselines[{i}]: {exc}") from None
        budget = data.get("budget_s")
        if budget is not None and not (isinstance(budget, int | float) and budget > 0):
            raise ValueError(f"budget_s {budget!r}: expected a number > 0 or null")
        return cls(mode, {str(k): int(v) for k, v in caps.items()}, baselines,
                   float(budget) if budget is not None else None, str(data.get("reason") or ""))  # fmt: skip


# --- a stopped campaign's groups, claims and unsettled probes (analysis/summary.py) -------------------------
def stopped_groups(
    ok: Any, failed: Any, stopping: Stopping, settings: Settings
) -> dict[tuple[str, str], Stopped]:
    """Each (variant, node) group of ok runs (a frame sorted by trial within its group) judged as `check`
    judged it after its last trial; `failed` (the other runs) count towards the trial cap."""
    tried: dict[tuple[str, str], int] = {}
    for key, size in failed.groupby(["variant", "node"], sort=False).size().items():
        tried[(str(key[0]), str(key[1]))] = int(size)
    out = {}
    for (variant, node), g in ok.groupby(["variant", "node"], sort=True):
        key = (str(variant), str(node))
        baseline = stopping.baselines.get((key[1], key[0]))
        values = g["value"].to_numpy(dtype=float)
        hib = bool(g["higher_is_better"].iloc[0])
        judgement = judge(values, hib, baseline, settings)
        out[key] = Stopped(judgement, baseline, stopping.at_cap(key[0], len(g) + tried.get(key, 0)))
    return out


def campaign_claims(
    stopped: Mapping[tuple[str, str], Stopped], probes: Mapping[str, str], settings: Settings
) -> tuple[Claim, ...]:
    """Every group's claims (`probes`: variant -> the name shown), in variant then node order."""
    out: list[Claim] = []
    for (variant, node), s in sorted(stopped.items()):
        probe = probes.get(variant, variant)
        out += claims_of(s.judgement, probe=probe, variant=variant, node=node, baseline=s.baseline,
                         settings=settings)  # fmt: skip
    return tuple(out)


def unsettled(
    stopped: Mapping[tuple[str, str], Stopped],
    probes: Mapping[str, str],
    stopping: Stopping,
    settings: Settings,
) -> dict[str, tuple[list[str], list[str]]]:
    """Per node: (reasons that make it inconclusive, notes for its verdict) from its unsettled probes.

    - A level still open at its trial cap: inconclusive (the CS spans the limit: the node sits near it).
    - Within a budget, a probe not settled in time whose level estimate is past the limit: inconclusive; one
      whose estimate is within it: a note ("no claim in the budget"). A budget that gave no level claim at
      all, with probes short of their caps: inconclusive ("too short for any claim", or "no probe has a
      baseline" where none had one), never healthy.
    - A probe the check stopped early because the node was already judged (degraded, busy): a note.
    """
    out: dict[str, tuple[list[str], list[str]]] = {}
    claimed: dict[str, bool] = {}
    based: dict[str, bool] = {}
    short: dict[str, list[str]] = {}
    for (variant, node), s in sorted(stopped.items()):
        blocking, notes = out.setdefault(node, ([], []))
        probe = probes.get(variant, variant)
        j, level = s.judgement, s.judgement.level
        claimed[node] = claimed.get(node, False) or level.state in ("within", "below")
        based[node] = based.get(node, False) or s.baseline is not None
        if not s.at_cap:
            short.setdefault(node, []).append(probe)
        if j.settled:
            continue
        span = _span(level)
        if s.at_cap:
            if level.state == "open":
                blocking.append(
                    f"{probe}: level not settled in {trials_word(j.n)} (trial cap): {span} of "
                    f"{s.baseline.words() if s.baseline else 'its baseline'} spans the "
                    f"{pct(settings.max_level_drop or 0.0)} limit; run `check --fixed` or more trials"
                )
            continue
        if stopping.mode == "budget" and level.ratio is not None and level.limit is not None:
            if level.ratio < level.limit and level.low is not None:  # its CS exists: not one stray trial
                blocking.append(
                    f"{probe}: looks {pct(1.0 - level.ratio)} below {_against(s)} ({span} after "
                    f"{trials_word(j.n)}), not settled within the {stopping.budget_s:g} s budget"
                )
            else:
                notes.append(f"{probe}: no claim within the budget ({trials_word(j.n)}, {span})")
        elif stopping.mode == "budget":
            notes.append(f"{probe}: no claim within the budget ({trials_word(j.n)})")
        else:
            notes.append(
                f"{probe}: not settled ({trials_word(j.n)}): the check stopped"
                + (f" ({stopping.reason})" if stopping.reason else "")
            )
    if stopping.mode == "budget":
        for node, (blocking, _) in out.items():
            if not claimed.get(node) and short.get(node) and not based.get(node):
                blocking.append(
                    f"no claim within the {stopping.budget_s:g} s budget: no probe has a baseline (the "
                    "history holds no healthy entry of this node, nor of 3 nodes of its fleet); give it one "
                    "with `tailscope check --history H` when the node is quiet"
                )
            elif not claimed.get(node) and short.get(node):
                blocking.append(
                    f"no claim within the {stopping.budget_s:g} s budget: too short to judge "
                    f"{', '.join(short[node])} (a level claim needs 3 or more trials of a quiet probe and "
                    "its history); give a longer --budget"
                )
    return out


def _span(level: Level) -> str:
    """The level's confidence sequence as a range of ratios to the baseline: 'ratio 0.931-0.987'."""
    if level.low is None or level.high is None:
        return "no confidence sequence yet"
    return f"ratio {level.low:.3f}-{level.high:.3f}"


def _against(s: Stopped) -> str:
    return s.baseline.words() if s.baseline else "its baseline"


def trials_word(n: int) -> str:
    return "1 trial" if n == 1 else f"{n} trials"
