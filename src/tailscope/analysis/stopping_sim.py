"""The error rates of the anytime-valid stopping (analysis/sequential.py), by simulation.

One probe's trials against its baseline, many synthetic sequences per case, judged after every trial by the
same functions `check` uses (level_bounds, slow_flags, rate_evidence and the rule `decide`), stopped when
settled or at the trial cap. Cases (issue 33): healthy, level shifts of 3, 5 and 10%, slow-run rates of 1%
(the default limit: the rate test's null at its edge), 2% and 5%. Noise: log-normal with sd `sigma` (the
run-to-run noise of a quiet probe), or Student t with 4 degrees of freedom of the same sd (heavy tails); a
slow run is 10-20% slower (uniform), as the seed's slow runs were (seed 000: >10% in 0.4% of runs).

Per case: how often each verdict was reached at the stop (degraded, healthy, open at the cap), the mean and
median trials to the stop, and the false claims: a claim the case's truth contradicts ("below" when the
level is within the limit, "within" when it is at or past it, "rate above the limit" when it is not):
- `false_at_stop`: made at the stop (what a user is told);
- `false_any_look`: holding at any look up to the cap, the run never stopped (what the confidence sequences
  bound: <= 1 - confidence for the level, alpha for the rate, at every look at once);
- `degraded_by_cap`: judged degraded at some trial up to the cap had the run not stopped when settled:
  the slow-run rate's power that stopping gives up (a settled probe stops before rare slow runs show);
- `naive_any_look`: a fixed-n t-test (two-sided, at 1 - confidence) of the mean log ratio against the limit
  looked at after every trial from 3 on: how much repeated looks inflate a test that is not anytime-valid.
bench/bench_stopping_simulation.py runs it at full size (10,000 sequences per case) and prints the table;
tests/analysis/test_stopping_sim.py at a small size in CI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from tailscope.analysis.model import Settings
from tailscope.analysis.sequential import decide, level_bounds, slow_flags, slow_rate_evidence

Noise = Literal["normal", "t4"]


@dataclass(frozen=True)
class Case:
    name: str
    shift: float = 0.0  # the level's true drop against the baseline (0.10 = 10% slower)
    slow_rate: float = 0.0  # the share of slow runs
    noise: Noise = "normal"
    sigma: float = 0.01  # sd of the log values


CASES = (
    Case("healthy"),
    Case("level -3%", shift=0.03),
    Case("level -5%", shift=0.05),
    Case("level -10%", shift=0.10),
    Case("slow 1%", slow_rate=0.01),
    Case("slow 2%", slow_rate=0.02),
    Case("slow 5%", slow_rate=0.05),
)


@dataclass(frozen=True)
class Result:
    case: Case
    sequences: int
    cap: int
    degraded: float  # share of sequences judged degraded at the stop
    healthy: float
    open: float  # at the cap, not settled
    mean_trials: float
    median_trials: float
    false_at_stop: float
    false_any_look: float
    naive_any_look: float  # the fixed-n test looked at every trial (level cases only; nan for rate ones)
    degraded_by_cap: float  # judged degraded at some trial up to the cap had it not stopped when settled
    truth: str  # what the case is: degraded or not, by the settings' limits


def synthetic(case: Case, sequences: int, cap: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """`sequences` x `cap` values (higher is better) of a probe whose baseline is 1."""
    if case.noise == "t4":
        noise = rng.standard_t(4, size=(sequences, cap)) * (case.sigma / math.sqrt(2.0))  # sd: sigma
    else:
        noise = rng.normal(0.0, case.sigma, size=(sequences, cap))
    values = np.exp(noise) * (1.0 - case.shift)
    slow = rng.random((sequences, cap)) < case.slow_rate
    return np.where(slow, values * rng.uniform(0.80, 0.90, size=(sequences, cap)), values)


@dataclass(frozen=True)
class _Rate:  # the slow-run rate's state per (sequence, look), as `decide` reads it
    degraded: NDArray[np.bool_]
    suspicious: NDArray[np.bool_]


def simulate(case: Case, settings: Settings, *, sequences: int, cap: int, seed: int) -> Result:
    """The case judged after every trial, `sequences` times (see the module text)."""
    assert settings.max_level_drop is not None and settings.max_slow_rate is not None
    rng = np.random.default_rng(seed)
    values = synthetic(case, sequences, cap, rng)
    logs = np.log(values)
    cut = math.log(1.0 - settings.max_level_drop)
    lower, upper = level_bounds(logs, settings.confidence)
    within, below = lower > cut, upper < cut
    slow, counted, quiet = slow_flags(values, True, settings.primary_threshold)
    k = np.cumsum(slow & counted, axis=1)
    n = np.cumsum(counted)[None, :] * np.ones((sequences, 1))
    evidence = np.where(quiet, slow_rate_evidence(k, n, settings.max_slow_rate), 1.0)
    rate = _Rate(
        degraded=np.maximum.accumulate(evidence, axis=1) >= 1.0 / settings.alpha,
        suspicious=evidence >= (1.0 / settings.alpha) ** 0.5,
    )
    settled, degraded = decide(within, below, rate)
    stop = np.where(settled.any(axis=1), settled.argmax(axis=1), cap - 1)
    rows = np.arange(sequences)
    at_stop_settled = settled[rows, stop]
    at_stop_degraded = degraded[rows, stop]

    ratio = 1.0 - case.shift
    limit = 1.0 - settings.max_level_drop
    level_below_true, level_within_true = ratio < limit, ratio > limit
    rate_above_true = case.slow_rate > settings.max_slow_rate
    false_level = (below if not level_below_true else np.zeros_like(below)) | (
        within if not level_within_true else np.zeros_like(within)
    )
    false_rate = rate.degraded if not rate_above_true else np.zeros_like(rate.degraded)
    false_claims = false_level | false_rate
    naive = np.full(sequences, np.nan)
    if case.slow_rate == 0.0:
        naive = _naive_any_look(logs, cut, settings.confidence, level_below_true, level_within_true)
    return Result(
        case=case,
        sequences=sequences,
        cap=cap,
        degraded=float(np.mean(at_stop_settled & at_stop_degraded)),
        healthy=float(np.mean(at_stop_settled & ~at_stop_degraded)),
        open=float(np.mean(~at_stop_settled)),
        mean_trials=float(np.mean(stop + 1)),
        median_trials=float(np.median(stop + 1)),
        false_at_stop=float(np.mean(false_claims[rows, stop])),
        false_any_look=float(np.mean(false_claims.any(axis=1))),
        naive_any_look=float(np.nanmean(naive)) if case.slow_rate == 0.0 else float("nan"),
        degraded_by_cap=float(np.mean(degraded.any(axis=1))),
        truth="degraded" if (level_below_true or rate_above_true) else "not degraded",
    )


def _naive_any_look(
    logs: NDArray[np.float64], cut: float, confidence: float, below_true: bool, within_true: bool
) -> NDArray[np.float64]:
    """Whether a fixed-n t-interval, recomputed after every trial from 3 on, ever made a false claim."""
    from tailscope.analysis.distributions import f_ppf  # t(1 - a/2, v)^2 = F(1 - a; 1, v)

    cap = logs.shape[1]
    t = np.arange(1, cap + 1, dtype=float)
    mean = np.cumsum(logs, axis=1) / t
    sq = np.cumsum(logs * logs, axis=1)
    var = np.maximum(sq - t * mean * mean, 0.0) / np.maximum(t - 1.0, 1.0)
    quantiles = np.sqrt(f_ppf(confidence, 1.0, np.maximum(t - 1.0, 1.0)))
    half = quantiles * np.sqrt(var / t)
    looks = t >= 3
    false = np.zeros(logs.shape, dtype=bool)
    if not below_true:
        false |= (mean + half < cut) & looks
    if not within_true:
        false |= (mean - half > cut) & looks
    return false.any(axis=1).astype(float)


def run_cases(
    settings: Settings | None = None,
    *,
    sequences: int = 10_000,
    cap: int = 200,
    seed: int = 33,
    noises: tuple[Noise, ...] = ("normal", "t4"),
    sigma: float = 0.01,
) -> list[Result]:
    """Every case of CASES under each noise model."""
    settings = settings or Settings()
    out = []
    for i, noise in enumerate(noises):
        for j, case in enumerate(CASES):
            real = Case(case.name, case.shift, case.slow_rate, noise, sigma)
            out.append(simulate(real, settings, sequences=sequences, cap=cap, seed=seed + 100 * i + j))
    return out


def table(results: list[Result]) -> list[str]:
    """The results as aligned text lines."""
    head = (
        f"{'case':12s} {'noise':6s} {'truth':13s} {'degraded':>8s} {'healthy':>8s} {'open':>6s} "
        f"{'mean n':>7s} {'med n':>6s} {'false@stop':>10s} {'false@any':>9s} {'naive@any':>9s} "
        f"{'deg@cap':>7s}"
    )
    lines = [head]
    for r in results:
        naive = "-" if math.isnan(r.naive_any_look) else f"{r.naive_any_look:.4f}"
        lines.append(
            f"{r.case.name:12s} {r.case.noise:6s} {r.truth:13s} {r.degraded:8.4f} {r.healthy:8.4f} "
            f"{r.open:6.4f} {r.mean_trials:7.1f} {r.median_trials:6.0f} {r.false_at_stop:10.4f} "
            f"{r.false_any_look:9.4f} {naive:>9s} {r.degraded_by_cap:7.4f}"
        )
    return lines
