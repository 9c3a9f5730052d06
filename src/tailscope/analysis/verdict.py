"""The checks of the verdict: one Check per (variant, node) and limit; on by default (Settings), changeable.

These checks are one input of the node verdict (analysis/health.py); a group whose own noise floor is above
the slow threshold is not checked there (it is judged inconclusive instead).

- max_slow_rate: the tail-count test of the primary threshold against p0 = the limit. The check fails when
  P(X >= k | n, limit) < alpha, i.e. the node had more slow runs than a rate at the limit plausibly gives
  (not merely when k/n > limit: 1 slow run in 20 is no evidence against a 1% rate).
- max_q01_drop: the SJTU quantile rule (seed 003, 0.5%): fails when the slow-side quantile is more than
  the limit below the median ((median - q01) / median > limit, oriented by the metric's direction). The
  limit is widened to floor_sds robust sds of the group's own run-to-run noise where that is larger, so a
  probe's ordinary noise does not fail it (the noise itself is judged by the noise floor).
- max_cv: fails when the run-to-run coefficient of variation (sd / mean) exceeds the limit (absolute).
- max_cv_ratio: fails when the CV is more than this many times the robust CV (1.4826 MAD / median: the
  noise floor, which a few slow runs do not inflate) and above 1%: the sd is made by outlying runs. Needs
  MIN_RUNS runs. A node with one run has no CV and is not checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tailscope.analysis.binomial import tail_p_value
from tailscope.analysis.model import Check, GroupSummary, Settings, Verdict
from tailscope.analysis.robust import VISIBLE_SDS, robust_cv
from tailscope.analysis.wording import p_value, pct, pct_range, quantity, runs_word, were, where

if TYPE_CHECKING:  # the sequential rules are imported where a stopped campaign is judged, not by all
    from tailscope.analysis.sequential import Stopped

MIN_RUNS = 10  # the CV-ratio check needs this many runs for a robust CV worth comparing with
# The HPL-Light runs the quantile check is SJTU's acceptance rule for (the hpl probe, `tailscope import hpl`).
HPL_PROBES = ("hpl", "imported:hpl")
SJTU_HPL_LIGHT = "500 runs of N = 32768, NB = 128 on one node; -0.25 % on 32 nodes"
CV_FLOOR = 0.01  # a CV below 1% never fails the CV-ratio check


def group_checks(group: GroupSummary, settings: Settings, stopped: Stopped | None = None) -> list[Check]:
    """The checks of one (variant, node) for the limits set in `settings`, in a fixed order. A group of a
    campaign stopped when settled (`stopped`) is judged by its anytime-valid rules (analysis/sequential.py):
    the level against its baseline, the slow-run rate's sequential test instead of the fixed-n binomial one,
    and the spread rules (quantile rule, CV) only where they can be read: from MIN_RUNS runs on, or at the
    trial cap (a fixed design)."""
    checks: list[Check] = []
    scope = f"{group.variant}/{group.node}"
    if stopped is not None and stopped.judgement.level.state in ("within", "below", "open"):
        checks.append(_level_check(group, stopped, settings, scope))
    if settings.max_slow_rate is not None:
        if stopped is not None:
            checks.append(_sequential_slow_rate_check(group, stopped, settings, scope))
        else:
            checks.append(_slow_rate_check(group, settings, scope))
    if stopped is not None and not spread_rules_apply(group.n, stopped.at_cap):
        return checks
    if settings.max_q01_drop is not None:
        checks.append(_quantile_check(group, quantile_limit(group, settings), scope, settings.max_q01_drop))
    if settings.max_cv is not None and group.cv is not None:
        checks.append(_cv_check(group, settings.max_cv, scope))
    if settings.max_cv_ratio is not None and group.cv is not None and group.n >= MIN_RUNS:
        checks.append(_cv_ratio_check(group, settings.max_cv_ratio, scope))
    return checks


def spread_rules_apply(n: int, at_cap: bool) -> bool:
    """Whether a stopped group is judged by the spread rules (quantile rule, CV, CV ratio): these fixed-n
    rules read the slowest of a few runs against a noise floor a few runs cannot estimate (3 runs: the MAD
    is the smaller of two distances), so a group stopped early is judged by them from MIN_RUNS runs on."""
    return at_cap or n >= MIN_RUNS


def group_floor(group: GroupSummary) -> float:
    """The group's robust CV (1.4826 MAD / median): its own run-to-run noise."""
    return robust_cv(group.mad, group.median) if group.median > 0 else 0.0


NO_INTERVAL_SDS = 1.5  # x floor_sds: the slowest run, not a quantile, is judged (see rule_limit)


def rule_limit(floor: float, settings: Settings, *, has_interval: bool) -> float:
    """The quantile rule's limit: max_q01_drop, widened to floor_sds robust sds of the group's own noise.
    With too few runs for the quantile to have an interval (about 300 for the 1% quantile at 95%), the
    "quantile" is the slowest run itself, a more extreme order statistic than the 1% quantile, so the noise
    widening is NO_INTERVAL_SDS x larger (6 sds by default). Seen on this project's quiet VM: fwq's slowest
    of 30 runs 4.1% off with a robust CV of ~1% failed a 3.9% limit; a run 3% low where the noise is 0.2%
    (15 sds) still fails."""
    return float(rule_limits(floor, settings, has_interval))


def rule_limits(floor: ArrayLike, settings: Settings, has_interval: ArrayLike) -> NDArray[np.float64]:
    """rule_limit of one group or of many at once (arrays): the one formula."""
    assert settings.max_q01_drop is not None
    sds = settings.floor_sds * np.where(has_interval, 1.0, NO_INTERVAL_SDS)
    return np.maximum(settings.max_q01_drop, sds * np.asarray(floor, dtype=float))


def quantile_limit(group: GroupSummary, settings: Settings) -> float:
    return rule_limit(group_floor(group), settings, has_interval=group.low_quantile.lower_rank is not None)


def limits_text(settings: Settings, *, stopped: bool = False) -> tuple[str, ...]:
    """The limits in force, in words, printed with every verdict (`stopped`: a campaign stopped when
    settled, judged by the anytime-valid rules of analysis/sequential.py)."""
    out = []
    if stopped and settings.max_level_drop is not None:
        out.append(
            f"level at most {pct(settings.max_level_drop)} below the node's history (else the fleet's), by "
            f"an anytime-valid {pct(settings.confidence)} confidence sequence; each probe stops when settled"
        )
    if settings.max_slow_rate is not None:
        out.append(
            f"slow-run rate (> {pct(settings.primary_threshold)} below the node median) at most "
            f"{pct(settings.max_slow_rate)} ("
            + ("anytime-valid sequential test" if stopped else "binomial test")
            + f", alpha {settings.alpha:g})"
        )
    if settings.max_q01_drop is not None:
        out.append(
            f"{100 * settings.quantile_rule_q:g}% quantile at most {pct(settings.max_q01_drop)} below the "
            f"median, or {settings.floor_sds:g} robust sds of the node's own noise where larger"
        )
    if settings.max_cv is not None:
        out.append(f"CV at most {pct(settings.max_cv)}")
    if settings.max_cv_ratio is not None:
        out.append(f"CV at most {settings.max_cv_ratio:g} x the robust CV (or {pct(CV_FLOOR)})")
    out.append(
        f"inconclusive when others took more than {pct(settings.max_busy_share)} of the probe CPUs in the "
        f"median trial, or a probe's noise floor ({VISIBLE_SDS:g} robust sds, without the runs that "
        f"evidenced interference explains) exceeds {pct(settings.primary_threshold)}"
    )
    return tuple(out)


def make_verdict(
    groups: Iterable[GroupSummary],
    settings: Settings,
    references: Mapping[str, tuple[float, float, float]] | None = None,
    stopped: Mapping[tuple[str, str], Stopped] | None = None,
) -> Verdict:
    """The checks alone (before the node verdicts of analysis/health.py set `state` and `passed`).
    `references`: variant -> (expected value, lowest, highest) of an application's `--reference`;
    `stopped`: (variant, node) -> its anytime-valid judgement, for a campaign stopped when settled."""
    checks: list[Check] = []
    for g in groups:
        checks += group_checks(g, settings, (stopped or {}).get((g.variant, g.node)))
        if references and g.variant in references:
            checks.append(reference_check(g, *references[g.variant]))
    return Verdict(passed=all(c.passed for c in checks), checks=tuple(checks))


def reference_check(group: GroupSummary, expected: float, low: float, high: float) -> Check:
    """The site's reference (ReFrame's reference tuples; `run --reference VALUE:-TOL,+TOL`): the node's
    median headline must lie within [low, high], whatever the other nodes do."""
    passed = low <= group.median <= high
    where_ = "within" if passed else "outside"
    unit = f" {group.unit}" if group.unit else ""
    message = (
        f"median {group.median:.6g}{unit} is {where_} the reference {expected:.6g}{unit} "
        f"({low:.6g} to {high:.6g})"
    )
    return Check("reference", f"{group.variant}/{group.node}", group.median, expected, passed, message)


def _level_check(group: GroupSummary, stopped: Stopped, settings: Settings, scope: str) -> Check:
    """The level against the node's baseline (its history, else the fleet's): failed when the whole
    confidence sequence of the ratio lies below 1 - max_level_drop."""
    level, baseline = stopped.judgement.level, stopped.baseline
    assert baseline is not None and level.limit is not None and settings.max_level_drop is not None
    ratio = level.ratio if level.ratio is not None else 1.0
    drop = 1.0 - ratio
    against = f"{baseline.words()} ({quantity(baseline.value, group.unit)}, median of {baseline.entries} "
    against += f"{'entries' if baseline.source == 'history' else 'nodes'})"
    side = f"{pct(abs(drop))} {'below' if drop > 0 else 'above'}"
    cs = (
        f"{pct(settings.confidence)} confidence sequence {_ratio_range(level.low, level.high)} of it"
        if level.low is not None and level.high is not None
        else "no confidence sequence yet (3 trials needed)"
    )
    message = f"{where(group)}: level {side} {against} after {runs_word(stopped.judgement.n)}; {cs}; "
    if level.state == "below":
        message += f"failed: all of it more than the {pct(settings.max_level_drop)} allowed below"
    elif level.state == "within":
        message += f"passed: all of it within {pct(settings.max_level_drop)}"
    else:
        message += f"not settled: it spans the {pct(settings.max_level_drop)} limit"
    return Check("max_level_drop", scope, drop, settings.max_level_drop, level.state != "below", message)


def _ratio_range(low: float | None, high: float | None) -> str:
    return f"{low:.3f}-{high:.3f}" if low is not None and high is not None else "-"


def _sequential_slow_rate_check(
    group: GroupSummary, stopped: Stopped, settings: Settings, scope: str
) -> Check:
    """The slow-run rate's anytime-valid test (analysis/sequential.py): failed when the evidence that the
    rate is above the limit reached 1/alpha at some trial."""
    from tailscope.analysis.sequential import SLOW_BURN_IN

    rate = stopped.judgement.slow_rate
    limit = settings.max_slow_rate
    assert limit is not None
    observed = rate.slow / rate.counted if rate.counted else 0.0
    seen = (
        f"{where(group)}: {rate.slow} of {rate.counted} trials (from the {SLOW_BURN_IN + 1}th on) more than "
        f"{pct(settings.primary_threshold)} below the median of the trials before them"
    )
    if rate.degraded:
        judged = (
            f"evidence {rate.evidence:.3g} >= 1/alpha = {1 / settings.alpha:g} (anytime-valid): the rate is "
            f"above {pct(max(rate.lower, limit))}, more than the limit {pct(limit)} allows"
        )
    elif rate.upper <= limit:
        judged = f"the rate is below {pct(rate.upper)} at {pct(settings.confidence)} (anytime-valid)"
    else:
        judged = (
            f"the rate is below {pct(rate.upper)} at {pct(settings.confidence)}: too few trials to claim "
            f"{pct(limit)}; no evidence it is above (anytime-valid, evidence {rate.evidence:.2g})"
        )
    return Check("max_slow_rate", scope, observed, limit, not rate.degraded, f"{seen}; {judged}")


def _cv_ratio_check(group: GroupSummary, ratio: float, scope: str) -> Check:
    assert group.cv is not None
    floor = group_floor(group)
    limit = max(ratio * floor, CV_FLOOR)
    passed = group.cv <= limit
    message = (
        f"{where(group)}: run-to-run CV {pct(group.cv)} against a robust CV (noise floor) of {pct(floor)} "
        f"over {runs_word(group.n)}; limit {ratio:g} x floor or {pct(CV_FLOOR)}, i.e. {pct(limit)}: "
    )
    message += "passed" if passed else "failed: a few runs far from the rest make the spread"
    return Check("max_cv_ratio", scope, group.cv, limit, passed, message)


def _slow_rate_check(group: GroupSummary, settings: Settings, scope: str) -> Check:
    limit = settings.max_slow_rate
    assert limit is not None
    tail = group.tails[0]
    p = tail_p_value(tail.k, tail.n, limit)
    passed = p >= settings.alpha
    seen = (
        f"{where(group)}: {tail.k} of {runs_word(tail.n)} ({pct(tail.rate)}, "
        f"{pct(settings.confidence)} CI {pct_range(tail.rate_low, tail.rate_high)}) {were(tail.k)} more than "
        f"{pct(tail.threshold)} slower than the node median"
    )
    if passed:
        judged = f"consistent with a slow-run rate of at most {pct(limit)} (binomial p = {p_value(p)})"
    else:
        judged = (
            f"a rate of {pct(limit)} would give {tail.k} or more with probability {p_value(p)} "
            f"(below alpha {settings.alpha:g}): more slow runs than the limit {pct(limit)} allows"
        )
    return Check("max_slow_rate", scope, tail.rate, limit, passed, f"{seen}; {judged}")


def _quantile_check(group: GroupSummary, limit: float, scope: str, rule_limit: float | None = None) -> Check:
    rule = group.quantile_rule
    observed = -rule.drop  # how far the slow-side quantile is from the median, > 0 = slower
    passed = observed <= limit
    side = "above" if not group.higher_is_better else "below"
    message = (
        f"{where(group)}: the {_level(rule.q)} quantile "
        f"({quantity(rule.quantile, group.unit)}) is {pct(abs(rule.drop))} {side} the median "
        f"({quantity(group.median, group.unit)}) over {runs_word(group.n)}; limit {pct(limit)}: "
        + ("passed" if passed else "failed")
    )
    if group.low_quantile.lower_rank is None:
        message += (
            f" (with {runs_word(group.n)} this quantile is near the slowest run and has no interval; the "
            f"noise allowance for the slowest run is {NO_INTERVAL_SDS:g}x as wide)"
        )
    if group.probe in HPL_PROBES and rule_limit is not None:
        # SJTU's rule itself, at the configured limit without the noise-floor widening
        message += (
            f"; SJTU's HPL-Light rule ((q01 - median) / median > -{pct(rule_limit)}; seed 003: "
            f"{SJTU_HPL_LIGHT}): q01 {pct(rule.drop)} from the median, "
            + ("PASSED" if observed <= rule_limit else "FAILED")
        )
    return Check("max_q01_drop", scope, observed, limit, passed, message)


def _cv_check(group: GroupSummary, limit: float, scope: str) -> Check:
    assert group.cv is not None and group.sd is not None
    passed = group.cv <= limit
    message = (
        f"{where(group)}: run-to-run CV {pct(group.cv)} (sd {quantity(group.sd, group.unit)}, mean "
        f"{quantity(group.mean, group.unit)}, {runs_word(group.n)}); limit {pct(limit)}: "
    )
    if passed:
        message += "passed"
    else:
        message += (
            "failed; quiet the probe (pinned threads, huge pages, fixed frequency, idle node) or find what "
            "varies between runs"
        )
    return Check("max_cv", scope, group.cv, limit, passed, message)


def _level(q: float) -> str:
    """'1%' for the slow-side quantile of a higher-is-better metric, '99%' for a lower-is-better one."""
    return f"{100 * q:g}%"
