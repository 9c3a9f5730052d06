"""The verdict: one Check per (variant, node) for each limit the user set; nothing else can fail it.

- max_slow_rate: the tail-count test of the primary threshold against p0 = the limit. The check fails when
  P(X >= k | n, limit) < alpha, i.e. the node had more slow runs than a rate at the limit plausibly gives
  (not merely when k/n > limit: 1 slow run in 20 is no evidence against a 1% rate).
- max_q01_drop: the SJTU quantile rule with the user's limit: fails when the slow-side quantile is more
  than the limit below the median ((median - q01) / median > limit, oriented by the metric's direction).
- max_cv: fails when the run-to-run coefficient of variation (sd / mean) exceeds the limit. A node with
  one run has no CV and is not checked (a note says so).
The verdict passes when every check passes; with no limits set there are no checks and it passes.
"""

from __future__ import annotations

from collections.abc import Iterable

from tailscope.analysis.binomial import tail_p_value
from tailscope.analysis.model import Check, GroupSummary, Settings, Verdict
from tailscope.analysis.wording import p_value, pct, pct_range, quantity, runs_word, were, where


def group_checks(group: GroupSummary, settings: Settings) -> list[Check]:
    """The checks of one (variant, node) for the limits set in `settings`, in a fixed order."""
    checks: list[Check] = []
    scope = f"{group.variant}/{group.node}"
    if settings.max_slow_rate is not None:
        checks.append(_slow_rate_check(group, settings, scope))
    if settings.max_q01_drop is not None:
        checks.append(_quantile_check(group, settings.max_q01_drop, scope))
    if settings.max_cv is not None and group.cv is not None:
        checks.append(_cv_check(group, settings.max_cv, scope))
    return checks


def make_verdict(groups: Iterable[GroupSummary], settings: Settings) -> Verdict:
    checks = tuple(c for g in groups for c in group_checks(g, settings))
    return Verdict(passed=all(c.passed for c in checks), checks=checks)


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


def _quantile_check(group: GroupSummary, limit: float, scope: str) -> Check:
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
        message += f" (with {runs_word(group.n)} this quantile is near the slowest run and has no interval)"
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
