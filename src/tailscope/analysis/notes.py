"""Plain-words findings of an analysis, most important first, each with its numbers and a next step.

The node verdicts (health.py) carry the failed checks; the notes do not repeat them.
Order (ties keep the order of variants and nodes): nodes slower than their peers; nodes
with slow runs (strongest evidence first, at most `MAX_GROUP_NOTES`, the rest counted); SJTU's HPL-Light
rule for HPL runs (failed: before the slow runs' details, passed: after); the quantile rule passing where the
tail count does not; the many-tests caution; each variant's pooled slow-run rate
and what it means for a synchronous job; fwq noise; failed runs; too few runs for a median interval;
slow runs that could not be classified; noise too high to screen nodes; the slow-side quantile without
an interval.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pandas as pd

from tailscope.analysis.binomial import (
    clopper_pearson,
    prob_any_slow,
    trials_to_observe,
    zero_event_upper_bound,
)
from tailscope.analysis.causes.context import ranges_text
from tailscope.analysis.distributions import normal_cdf
from tailscope.analysis.model import GroupSummary, RunVerdict, Settings, TailCount, VariantSummary, Verdict
from tailscope.analysis.power import runs_to_detect_shift
from tailscope.analysis.quantiles import min_trials_for_ci
from tailscope.analysis.robust import VISIBLE_SDS, noise_floor, robust_cv
from tailscope.analysis.run_columns import RunVerdicts
from tailscope.analysis.verdict import HPL_PROBES, SJTU_HPL_LIGHT
from tailscope.analysis.wording import (
    p_value,
    pct,
    pct_range,
    period,
    quantity,
    runs_word,
    some,
    were,
    where,
    where_node,
)

MAX_GROUP_NOTES = 10  # slow-run notes written one per node; the rest are counted in one line
SCREEN_SHIFT = 0.01  # the node slowdown the screening advice is about (1%)
JOB_NODES = (32, 1000)  # synchronous job sizes to illustrate 1 - (1-p)^N (notes/statistics.md)
MANY_TESTS = 10  # from this many node tests on, say how many rejections chance alone explains

Note = tuple[int, str]  # (priority, text): lower priority number comes first


MIN_RUNS_FOR_FLOOR = 10  # fewer runs say little about the noise floor


def compose_notes(
    *,
    campaign: str,
    settings: Settings,
    variants: Sequence[VariantSummary],
    groups: Sequence[GroupSummary],
    runs: Sequence[RunVerdict],
    failed: pd.DataFrame,
    verdict: Verdict,
    iterations_given: bool,
) -> tuple[str, ...]:
    """All notes of one analysis, sorted by importance (stable within one importance)."""
    if not groups and failed.empty:
        return (f"campaign {campaign}: no runs to analyse; run `tailscope run` first",)
    runs = RunVerdicts.of(runs)  # read by column: objects of the few runs a note names
    slow_runs: dict[tuple[str, str], list[RunVerdict]] = defaultdict(list)
    for r in runs.rows(runs.column("slow")):
        slow_runs[(r.variant, r.node)].append(r)
    by_variant = {v.variant: v for v in variants}
    notes: list[Note] = [
        *_slow_nodes(groups, by_variant, settings),
        *_slow_runs(groups, slow_runs, settings),
        *_threshold_in_noise(groups, settings),
        *_hpl_light(groups, settings),
        *_quantile_rule_blind(groups, settings),
        *_many_tests(groups, settings),
        *_robust_only(variants, runs, settings),
        *_variant_rates(variants, groups, settings),
        *_fwq_noise(variants, groups),
        *_failed_runs(failed, groups),
        *_few_runs(groups, settings),
        *_unclassified(runs, iterations_given),
        *_noise_vs_screening(variants, groups),
        *_slow_quantile_interval(variants, groups, settings),
    ]
    notes.sort(key=lambda note: note[0])
    return tuple(text for _, text in notes)


def _slow_nodes(
    groups: Sequence[GroupSummary], variants: dict[str, VariantSummary], settings: Settings
) -> list[Note]:
    """Nodes flagged by their robust score across the variant's nodes (not by a fixed threshold: fleets
    have a natural node-to-node range, 13% of HPL medians in seed 000, that is not a finding)."""
    slow = sorted((g for g in groups if g.node_outlier), key=lambda g: g.node_score)
    notes = []
    for g in slow[:MAX_GROUP_NOTES]:
        v = variants[g.variant]
        notes.append(
            (
                20,
                f"node {g.node} is slower than its peers on {g.variant}: its median "
                f"{quantity(g.median, g.unit)} is {pct(1.0 - g.node_ratio)} slower than the median "
                f"{quantity(v.global_median, v.unit)} of all {v.n} runs on {v.nodes} nodes (robust score "
                f"{g.node_score:.1f}). Every run there is affected, so scaling by the node median hides it "
                "from the slow-run counts: compare the node's hardware and settings (memory DIMMs, CPU "
                "frequency and turbo, BIOS, microcode) with a normal node.",
            )
        )
    if len(slow) > MAX_GROUP_NOTES:
        names = [f"{g.node} ({g.variant}, {pct(1.0 - g.node_ratio)} slower)" for g in slow[MAX_GROUP_NOTES:]]
        notes.append((21, f"{len(names)} more nodes are slower than their peers: {some(names)}"))
    return notes


def _slow_runs(
    groups: Sequence[GroupSummary], slow_runs: dict[tuple[str, str], list[RunVerdict]], settings: Settings
) -> list[Note]:
    with_slow = [g for g in groups if g.n_slow > 0]
    with_slow.sort(key=lambda g: (g.tails[0].p_value, -g.tails[0].rate))
    notes = [
        (30, _slow_run_note(g, slow_runs[(g.variant, g.node)], settings)) for g in with_slow[:MAX_GROUP_NOTES]
    ]
    rest = with_slow[MAX_GROUP_NOTES:]
    if rest:
        names = [f"{g.node} ({g.variant}, {g.n_slow} of {g.n})" for g in rest]
        notes.append((31, f"{len(rest)} more nodes had slow runs, with weaker evidence: {some(names)}"))
    return notes


def _slow_run_note(g: GroupSummary, slow: Sequence[RunVerdict], settings: Settings) -> str:
    tail = g.tails[0]
    worst = min(slow, key=lambda r: r.perf_ratio)
    n_unclassified = tail.k - g.n_systematic - g.n_transient
    text = (
        f"{where(g)}: {tail.k} of {runs_word(g.n)} ({pct(tail.rate)}, {pct(settings.confidence)} CI "
        f"{pct_range(tail.rate_low, tail.rate_high)}) {were(tail.k)} more than {pct(tail.threshold)} "
        f"slower than the node median (slowest: trial {worst.trial}, {pct(worst.slowdown)} slower); "
        f"{_kinds(g.n_systematic, g.n_transient, n_unclassified)}. "
    )
    if tail.rejects:
        text += f"That is more than the allowed rate {pct(tail.p0)} explains ({_tail_test(tail)})."
    else:
        text += f"That is consistent with the allowed rate {pct(tail.p0)} ({_tail_test(tail)})."
    return text + _causes_text(slow)


def _tail_test(tail: TailCount) -> str:
    """The test that judged the slow runs: the binomial one's p-value, or the anytime-valid one of a check
    stopped when settled (its p-value would count one look of many)."""
    if tail.test == "anytime-valid":
        return "the check stopped when settled: judged by the anytime-valid test, not the binomial one"
    return f"binomial p = {p_value(tail.p_value)}"


def _causes_text(slow: Sequence[RunVerdict]) -> str:
    """' Causes: cpu-contention (trials 13-21), unknown (trial 4).' from the runs' top causes."""
    by_cause: dict[str, list[int]] = defaultdict(list)
    for r in slow:
        if r.causes:
            by_cause[r.causes[0].cause].append(r.trial)
    if not by_cause:
        return ""
    parts = [
        f"{cause} (trial{'s' if len(trials) > 1 else ''} {ranges_text(trials)})"
        for cause, trials in sorted(by_cause.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    return " Most likely causes: " + ", ".join(parts) + " (each run's evidence is in --json and the report)."


def _kinds(systematic: int, transient: int, unclassified: int) -> str:
    systematic_words = "systematic (slow in every iteration: a level shift)"
    transient_words = "transient (slow in part of the run: interference)"
    unclassified_words = "unclassified (iterations missing or too few to tell)"
    total = systematic + transient + unclassified
    for count, words in (
        (systematic, systematic_words),
        (transient, transient_words),
        (unclassified, unclassified_words),
    ):
        if count == total:
            if total == 1:
                return f"it was {words}"
            return f"both were {words}" if total == 2 else f"all {total} were {words}"
    parts = [
        f"{count} {words}"
        for count, words in (
            (systematic, systematic_words),
            (transient, transient_words),
            (unclassified, unclassified_words),
        )
        if count
    ]
    return ", ".join(parts)


def _hpl_light(groups: Sequence[GroupSummary], settings: Settings) -> list[Note]:
    """SJTU's acceptance rule (seed 003) for HPL runs, at its own limit: the verdict's quantile check may
    widen the limit to the node's noise, the rule itself does not."""
    limit = settings.max_q01_drop
    if limit is None:
        return []
    notes = []
    for g in groups:
        if g.probe not in HPL_PROBES:
            continue
        rule = g.quantile_rule
        passed = -rule.drop <= limit
        side = "below" if g.higher_is_better else "above"
        text = (
            f"SJTU's HPL-Light rule on {where(g)}: the {100 * rule.q:g}% quantile "
            f"({quantity(rule.quantile, g.unit)}) is {pct(abs(rule.drop))} {side} the median "
            f"({quantity(g.median, g.unit)}) over {runs_word(g.n)}: "
            + (f"PASSED (limit {pct(limit)})" if passed else f"FAILED (limit {pct(limit)})")
            + f"; seed 003: {SJTU_HPL_LIGHT}."
        )
        if g.n < 500:
            text += f" With {runs_word(g.n)} instead of 500 the quantile sits closer to the slowest run."
        notes.append((25 if not passed else 36, text))
    return notes


def _quantile_rule_blind(groups: Sequence[GroupSummary], settings: Settings) -> list[Note]:
    # Where the rule's limit was widened to the node's own noise, the noise is the finding, not the rule.
    seed_limit = -abs(settings.max_q01_drop) if settings.max_q01_drop is not None else None
    blind = [
        g
        for g in groups
        if g.quantile_rule.passed
        and g.tails[0].rejects
        and (seed_limit is None or g.quantile_rule.limit >= seed_limit)
    ]
    notes = []
    for g in blind[:MAX_GROUP_NOTES]:
        rule, tail = g.quantile_rule, g.tails[0]
        notes.append(
            (
                35,
                f"{where(g)}: the quantile rule passes (the {100 * rule.q:g}% quantile is "
                f"{pct(abs(rule.drop))} from the median, limit {pct(abs(rule.limit))}) although {tail.k} of "
                f"{runs_word(tail.n)} {were(tail.k)} more than {pct(tail.threshold)} slow, more than the "
                f"allowed rate {pct(tail.p0)} explains ({_tail_test(tail)}): the "
                "quantile rule is blind to rare slow modes; judge them by the tail count.",
            )
        )
    return notes


def _many_tests(groups: Sequence[GroupSummary], settings: Settings) -> list[Note]:
    n = len(groups)
    # Bonferroni over the binomial p-values; a stopped campaign's anytime-valid tests have none to correct
    rejected = [g for g in groups if g.tails[0].rejects and g.tails[0].test == "binomial"]
    if n < MANY_TESTS or not rejected:
        return []
    bonferroni = [g for g in rejected if g.tails[0].p_value < settings.alpha / n]
    if bonferroni:
        names = [f"{g.node} ({g.variant})" for g in bonferroni]
        advice = (
            f"{len(bonferroni)} {'stays' if len(bonferroni) == 1 else 'stay'} significant after "
            f"Bonferroni (p < {settings.alpha:g}/{n}): "
            f"{some(names)}; treat those as real, and re-test the others with a second batch of trials "
            "before draining them."
        )
    else:
        advice = (
            f"None stays significant after Bonferroni (p < {settings.alpha:g}/{n}): re-test these nodes "
            "with a second batch of trials before draining any."
        )
    return [
        (
            36,
            f"{len(rejected)} of {n} node tail-count tests rejected the allowed rate "
            f"{pct(settings.allowed_slow_rate)} at alpha {settings.alpha:g}; with {n} tests, chance alone "
            f"can give up to {settings.alpha * n:.3g}. {advice}",
        )
    ]


def _robust_only(variants: Sequence[VariantSummary], runs: RunVerdicts, settings: Settings) -> list[Note]:
    """Runs far below their peers by robust score but not slow at the primary threshold."""
    notes = []
    outliers = runs.rows(runs.column("robust_outlier") & ~runs.column("slow"))
    for v in variants:
        found = [r for r in outliers if r.variant == v.variant]
        if not found:
            continue
        found.sort(key=lambda r: r.robust_score)
        names = [f"{r.node} trial {r.trial} ({pct(r.slowdown)} slower)" for r in found]
        by_chance = v.n * float(normal_cdf(-settings.robust_cut))  # if the noise were normal
        notes.append(
            (
                38,
                f"{v.variant}: {runs_word(len(found))} {were(len(found))} less than "
                f"{pct(settings.primary_threshold)} slower than {'its' if len(found) == 1 else 'their'} node "
                "median but far outside the run-to-run noise (robust score below "
                f"-{settings.robust_cut:g}): {some(names)}. Normal noise would put about {by_chance:.2g} of "
                f"{runs_word(v.n)} there by chance; if there are clearly more, a lower slow threshold would "
                "count them.",
            )
        )
    return notes


def _variant_rates(
    variants: Sequence[VariantSummary], groups: Sequence[GroupSummary], settings: Settings
) -> list[Note]:
    d = settings.primary_threshold
    notes = []
    for v in variants:
        mine = [g for g in groups if g.variant == v.variant]
        k = sum(g.n_slow for g in mine)
        n = sum(g.n for g in mine)
        if k == 0:
            bound = zero_event_upper_bound(n, settings.confidence)
            given = settings.given_rate
            notes.append(
                (
                    40,
                    f"{v.variant}: none of {runs_word(n)} on {v.nodes} nodes was more than {pct(d)} slower "
                    f"than its node median: the slow-run rate is below {pct(bound)} "
                    f"({pct(settings.confidence)} confidence, one-sided). A rate of {pct(given)} would show "
                    f"at least once in {trials_to_observe(given, 0.95)} runs with 95% confidence.",
                )
            )
            continue
        if v.nodes == 1:
            continue  # the node's own slow-run note says the same numbers
        rate = k / n
        low, high = clopper_pearson(k, n, settings.confidence)
        sizes = sorted({*JOB_NODES, *([v.nodes] if v.nodes > 1 else [])})
        odds = ", ".join(f"{pct(prob_any_slow(rate, size))} on {size} nodes" for size in sizes)
        notes.append(
            (
                40,
                f"{v.variant}: {k} of {runs_word(n)} on {v.nodes} nodes ({pct(rate)}, "
                f"{pct(settings.confidence)} CI {pct_range(low, high)}) {were(k)} more than {pct(d)} "
                "slower than their node median. At this rate a synchronous job meets at least one slow "
                f"node with probability {odds}: screen nodes one by one, that is where the tail is found.",
            )
        )
    return notes


def _fwq_noise(variants: Sequence[VariantSummary], groups: Sequence[GroupSummary]) -> list[Note]:
    notes = []
    for v in variants:
        mine = [
            g for g in groups if g.variant == v.variant and g.extras.get("noise_fraction_median") is not None
        ]
        if not mine:
            continue
        worst = max(mine, key=lambda g: g.extras["noise_fraction_median"])
        fleet = float(np.median([g.extras["noise_fraction_median"] for g in mine]))
        extras = worst.extras
        text = (
            f"{v.variant}: OS noise takes {pct(extras['noise_fraction_median'])} of each quantum's time on "
            f"node {worst.node} (median over {runs_word(extras['noise_runs'])}; "
            f"median over {len(mine)} nodes {pct(fleet)}), "
            f"with {extras['noise_events_median']:g} noise events per run"
        )
        if extras.get("noise_period_s_median") is not None:
            text += (
                f" recurring every {period(extras['noise_period_s_median'])} (median interval): a periodic "
                "source such as a timer tick or a daemon; match the period against the node's timers and "
                "services"
            )
        notes.append((45, text + "."))
    return notes


def _failed_runs(failed: pd.DataFrame, groups: Sequence[GroupSummary]) -> list[Note]:
    if failed.empty:
        return []
    ok_n = {(g.variant, g.node): g.n for g in groups}
    notes = []
    pairs = failed.groupby(["variant", "node"], sort=True)
    for (variant, node), f in list(pairs)[:MAX_GROUP_NOTES]:
        statuses = f["status"].astype(str).value_counts().sort_index()
        counts = ", ".join(f"{status}: {count}" for status, count in statuses.items())
        errors = f["error"].dropna() if "error" in f.columns else pd.Series(dtype=object)
        first_error = f"; first error: {errors.iloc[0]}" if len(errors) else ""
        n_ok = ok_n.get((variant, node), 0)
        scope = where_node(str(node), str(variant))
        if n_ok == 0:
            text = (
                f"{scope}: all {runs_word(len(f))} gave no value ({counts}{first_error}); the node has no "
                "statistics: fix the cause and rerun."
            )
        else:
            text = (
                f"{scope}: {len(f)} of {runs_word(len(f) + n_ok)} gave no value ({counts}{first_error}); "
                "they are left out of every statistic: fix the cause and rerun them."
            )
        notes.append((50, text))
    if pairs.ngroups > MAX_GROUP_NOTES:
        notes.append((51, f"{pairs.ngroups - MAX_GROUP_NOTES} more nodes had failed runs."))
    return notes


def _few_runs(groups: Sequence[GroupSummary], settings: Settings) -> list[Note]:
    need = min_trials_for_ci(0.5, settings.confidence)
    few = [g for g in groups if g.n < need]
    if not few:
        return []
    conf = f"{pct(settings.confidence)}"
    if len(few) == 1:
        g = few[0]
        return [
            (
                60,
                f"{where(g)}: only {runs_word(g.n)}: the median has no {conf} confidence interval below "
                f"n={need}; run at least {need} trials.",
            )
        ]
    names = [f"{g.node} ({g.variant}, n={g.n})" for g in few]
    return [
        (
            60,
            f"{len(few)} nodes have fewer than {need} runs ({some(names)}): their medians have no {conf} "
            f"confidence interval below n={need}; run at least {need} trials per node.",
        )
    ]


def _unclassified(runs: RunVerdicts, iterations_given: bool) -> list[Note]:
    slow = runs.rows(runs.column("slow") & (runs.column("kind") == "unclassified"))
    no_data = [r for r in slow if r.evidence is None]
    unclear = [r for r in slow if r.evidence is not None]
    notes = []
    if no_data:
        why = (
            "no iteration records were given"
            if not iterations_given
            else "they have no non-warm-up iteration records, or their node has no normal run to compare with"
        )
        notes.append(
            (
                65,
                f"{len(no_data)} slow runs could not be classified as systematic or transient: {why}. "
                "Keep the probes' per-iteration output (written by default) to tell a level shift "
                "from interference.",
            )
        )
    if unclear:
        notes.append(
            (
                66,
                f"{len(unclear)} slow runs stay unclassified: fewer than 3 iterations, or none of their "
                "iterations was low although the run was slow (check how the probe's headline value "
                "is computed).",
            )
        )
    return notes


def _threshold_in_noise(groups: Sequence[GroupSummary], settings: Settings) -> list[Note]:
    """Where the primary slow threshold sits inside the run-to-run noise, 'slow' counts noise as well."""
    notes = []
    threshold = settings.primary_threshold
    for g in groups:
        if g.n < MIN_RUNS_FOR_FLOOR or g.median <= 0:
            continue
        floor = noise_floor(g.mad, g.median)
        if floor <= threshold:
            continue
        notes.append(
            (
                32,
                f"node {g.node}, {g.variant}: runs here vary by {pct(robust_cv(g.mad, g.median))} (robust CV "
                f"over {g.n} runs), so one run must be about {pct(floor)} slower than the median "
                f"({VISIBLE_SDS:g} robust sds) to stand out of the noise; at the {pct(threshold)} threshold "
                "the slow-run count includes ordinary noise. Quiet the node (idle, pinned, huge pages, fixed "
                f"frequency) or judge with --threshold {math.ceil(floor * 100) / 100:g} or more.",
            )
        )
    return notes


def _noise_vs_screening(variants: Sequence[VariantSummary], groups: Sequence[GroupSummary]) -> list[Note]:
    found = []  # (variant, sigma, nodes, needed, have)
    for v in variants:
        mine = [g for g in groups if g.variant == v.variant and g.n >= 2]
        if not mine:
            continue
        sigma = float(np.median([robust_cv(g.mad, g.median) for g in mine]))
        if sigma <= 0.0:
            continue
        needed = runs_to_detect_shift(sigma, SCREEN_SHIFT)
        have = int(np.median([g.n for g in mine]))
        if needed <= have:
            continue
        found.append((v.variant, sigma, len(mine), needed, have))
    if len(found) == 1:
        variant, sigma, nodes, needed, have = found[0]
        return [
            (
                70,
                f"{variant}: runs vary by {pct(sigma)} (robust sd, 1.4826 x MAD / median, median over "
                f"{nodes} nodes); telling a node that is {pct(SCREEN_SHIFT)} slow from this noise takes "
                f"{needed} runs per node (one-sided alpha 0.01, power 0.9) and nodes have {have}. Quiet the "
                "probe (pinned threads, huge pages, fixed frequency, idle node) or run more trials.",
            )
        ]
    if not found:
        return []
    each = "; ".join(f"{v}: {pct(s)}, {need} runs needed, {have} per node" for v, s, _, need, have in found)
    return [
        (
            70,
            f"Telling a node that is {pct(SCREEN_SHIFT)} slow from the run-to-run noise (robust sd, 1.4826 x "
            f"MAD / median; one-sided alpha 0.01, power 0.9) takes more runs than were made: {each}. Quiet "
            "the probes (pinned threads, huge pages, fixed frequency, idle node) or run more trials.",
        )
    ]


def _slow_quantile_interval(
    variants: Sequence[VariantSummary], groups: Sequence[GroupSummary], settings: Settings
) -> list[Note]:
    found = []  # (variant, q, need, nodes, have)
    for v in variants:
        short = [g for g in groups if g.variant == v.variant and g.low_quantile.lower_rank is None]
        if not short:
            continue
        q = short[0].low_quantile.q
        need = min_trials_for_ci(q, settings.confidence)
        ns = [g.n for g in short]
        have = f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)} to {max(ns)}"
        found.append((v.variant, q, need, len(short), have))
    if len(found) == 1:
        variant, q, need, nodes, have = found[0]
        return [
            (
                80,
                f"{variant}: the {100 * q:g}% quantile has no {pct(settings.confidence)} interval below "
                f"{need} runs per node and {nodes} nodes have {have}; there the quantile rule rests on "
                "the slowest one or two runs: judge rare slow runs by the tail count.",
            )
        ]
    if not found:
        return []
    each = ", ".join(f"{v} ({100 * q:g}%: {need} needed, {have} per node)" for v, q, need, _, have in found)
    return [
        (
            80,
            f"The slow-side quantiles have no {pct(settings.confidence)} interval with the runs made: "
            f"{each}; there the quantile rule rests on the slowest one or two runs: judge rare slow runs by "
            "the tail count.",
        )
    ]
