"""`analyze`: the statistics of one campaign, from the store's `runs` and `iterations` tables.

Pipeline (each step is one module; this one only wires them and builds the result dataclasses):
1. ok runs: status "ok" with a value; every other row counts in its group's `n_failed` and nowhere else.
2. per variant: the global median; per (variant, node): the node median (scaling.py).
3. per run: performance ratio, node-scaled value, slow at each threshold (scaling.py), robust score of
   the log ratio against all runs of the variant (robust.py).
4. flagged runs (slow; robust outliers; past their node's quantile-rule line where that rule fails):
   systematic or transient from their iterations (classify.py); fwq runs: noise (fwq_noise.py); the
   ranked causes of every flagged run from its evidence (causes/).
5. per (variant, node): GroupSummary: median with its exact interval and the slow-side quantile with its
   interval (quantiles.py), tail counts and trials needed (binomial.py); the node against its peers, by
   the one fleet screen (cluster.py: drain), so every output names the same nodes.
6. checks (verdict.py), node verdicts healthy / degraded / inconclusive (health.py), notes (notes.py).
Output order is deterministic: variants, then nodes, then trials, each sorted (plain string order).
"""

from __future__ import annotations

import dataclasses
import gc
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tailscope.analysis import (
    binomial,
    causes,
    classify,
    cluster,
    fwq_noise,
    health,
    power,
    quantiles,
    robust,
    scaling,
)
from tailscope.analysis.binomial import prime_intervals, tail_count, trials_to_observe
from tailscope.analysis.causes.context import run_features
from tailscope.analysis.model import (
    CampaignAnalysis,
    CauseFinding,
    ClusterSettings,
    GroupSummary,
    KindEvidence,
    QuantileRule,
    RunKind,
    Settings,
    TrialsNeeded,
    VariantSummary,
)
from tailscope.analysis.notes import compose_notes
from tailscope.analysis.quantiles import quantile_ci
from tailscope.analysis.run_columns import RunVerdicts
from tailscope.analysis.settings import settings_from_dict, validate_settings
from tailscope.analysis.verdict import make_verdict, rule_limit, rule_limits, spread_rules_apply
from tailscope.heap import return_freed_memory

if TYPE_CHECKING:  # imported by `analyze` for a campaign stopped when settled only
    from tailscope.analysis import sequential

__all__ = [
    "ATTRIBUTION_RUN_COLUMNS",
    "ITERATION_COLUMNS",
    "RUN_COLUMNS",
    "STORE_RUN_COLUMNS",
    "analyze",
    "score_runs",
    "settings_from_dict",
]

RUN_COLUMNS = (
    "run_id",
    "node",
    "probe",
    "variant",
    "params",
    "trial",
    "started_at",
    "metric",
    "value",
    "unit",
    "higher_is_better",
    "status",
)
# The runs columns analyze and the counter attribution (attribution.py: threads, seconds, wall_s) read, and
# notes (error): `analyze` reads only these from the store.
STORE_RUN_COLUMNS = (*RUN_COLUMNS, "error", "threads", "wall_s", "seconds", "page_policy")
# Those only the counter attribution reads: not read where the campaign stored no counters (workflow.py).
ATTRIBUTION_RUN_COLUMNS = ("threads", "wall_s", "seconds")
ITERATION_COLUMNS = ("run_id", "iteration", "thread", "kernel", "warmup", "value")
FWQ_ITERATION_COLUMNS = ("seconds",)  # mono_start_ns is used when present

METHODS = {
    "quantiles": quantiles.METHOD,
    "scaling": scaling.METHOD,
    "robust_score": robust.METHOD,
    "tail_count": binomial.METHOD,
    "kind": classify.METHOD,
    "fwq_noise": fwq_noise.METHOD,
    "power": power.METHOD,
    "causes": causes.METHOD,
    "node_verdict": health.METHOD,
    "sd": "sample standard deviation (n - 1), two-pass; undefined for n = 1; cv = sd / mean",
    "mad": "median absolute deviation around the median, unscaled, in the metric's unit",
}


# The iterations of the given runs, or (None) of every run analysed: the store's reader, so that only the
# iterations the analysis reads are loaded (those of (variant, node) groups with a flagged run, and fwq's).
IterationSource = Callable[[Sequence[str] | None], pd.DataFrame]


def analyze(
    runs: pd.DataFrame,
    iterations: pd.DataFrame | IterationSource,
    settings: Settings,
    campaign: str,
    cluster_settings: ClusterSettings | None = None,
    *,
    counters: pd.DataFrame | None = None,
    corunners: pd.DataFrame | None = None,
    nodes: pd.DataFrame | None = None,
    pages_tests: Mapping[str, Any] | None = None,
    stopping: sequential.Stopping | None = None,
) -> CampaignAnalysis:
    """Analyse a campaign: `runs` has one row per trial (any status), `iterations` those runs' rows (or an
    IterationSource that reads the rows of the runs asked for).

    `counters` (rows with source "os" are the per-trial evidence, EVIDENCE.md), `corunners` and `nodes`
    (facts) feed the cause catalogue and the node verdicts; without them causes say "no evidence recorded".
    `pages_tests` (causes.page_placement.pages_tests of an addr explain result) back page-placement.
    `stopping` (a campaign `check` stopped when settled: its DIR/stopping.json) judges each group by the
    anytime-valid rules of sequential.py: its level against its baseline, its claims, what is unsettled.

    An ok run whose value is not > 0 (ratios cannot be taken of it: a store written before `run` refused such
    headlines, or an importer's) counts as invalid, with that reason, among the runs that gave no value.

    Raises ValueError with a one-line message for input that cannot be analysed (missing column, a variant
    whose runs disagree on metric, unit or direction).
    """
    validate_settings(settings)
    _require(runs, RUN_COLUMNS, "runs")
    runs = _not_positive_as_invalid(
        runs.sort_values(["variant", "node", "trial", "run_id"], kind="stable", ignore_index=True)
    )
    is_ok = (runs["status"] == "ok").to_numpy(dtype=bool) & runs["value"].notna().to_numpy()
    ok = runs.loc[is_ok].reset_index(drop=True)
    failed = runs.loc[~is_ok].reset_index(drop=True)
    del runs  # this sorted copy: each copy of 50,000 runs is ~11 MB of the peak (the caller keeps its own)
    _check_ok_runs(ok)

    stopped: Mapping[tuple[str, str], sequential.Stopped] = {}
    if stopping is not None:  # a campaign stopped when settled: its rules, imported only for one (~20 ms)
        from tailscope.analysis import sequential

        stopped = sequential.stopped_groups(ok, failed, stopping, settings)
    few = [key for key, s in stopped.items() if not spread_rules_apply(s.judgement.n, s.at_cap)]
    scored = score_runs(ok, settings, spread_off=few)
    del ok  # scored is its copy with the scores
    iterations, have_iterations = _iterations_needed(iterations, scored)
    if have_iterations:
        _require(iterations, ITERATION_COLUMNS, "iterations")
    kinds: dict[str, tuple[RunKind, KindEvidence | None]] = {}
    if have_iterations:
        to_classify = scored.assign(slow=scored["flagged"])
        flagged = scored.loc[scored["flagged"].to_numpy(dtype=bool)]  # classify reads theirs only
        slowdowns = dict(zip(flagged["run_id"].astype(str), flagged["slowdown"].astype(float), strict=True))
        kinds = classify.classify_slow_runs(iterations, to_classify, settings.primary_threshold, slowdowns)
    fwq_ids = scored.loc[scored["probe"] == "fwq", "run_id"]
    noise = pd.DataFrame()
    if have_iterations and len(fwq_ids):
        _require(iterations, FWQ_ITERATION_COLUMNS, "iterations")
        noise = fwq_noise.fwq_noise(iterations, fwq_ids)
    del iterations  # read: the iteration rows are not held while the results are built (a source's are freed)
    extras = {str(r): fwq_noise.run_extras(noise.loc[r]) for r in noise.index} if not noise.empty else {}
    # the evidence rows' per-run features, once: the causes and the busy verdict both read them
    evidence = run_features(counters) if counters is not None else (pd.DataFrame(), {})
    found = causes.diagnose_runs(
        scored,
        kinds,
        counters=counters,
        corunners=corunners,
        nodes=nodes,
        run_extras=extras,
        pages_tests=pages_tests,
        features=evidence,
    )

    variants = _variant_summaries(scored)
    node_ensembles = cluster.analyze_cluster(scored, settings, cluster_settings)
    groups = _group_summaries(scored, failed, kinds, noise, settings, _drained(node_ensembles))
    if stopped:
        groups = _tails_judged_as_stopped(groups, stopped)
    return_freed_memory()  # the columns freed so far, before 50,000 run verdicts are built (heap.py)
    run_verdicts = _run_verdicts(scored, kinds, noise, found)
    checks = make_verdict(groups, settings, _references(variants), stopped)
    names = {v.variant: _probe_name(v) for v in variants}
    node_verdicts = health.node_health(
        groups=groups,
        runs=run_verdicts,
        checks=checks.checks,
        cluster=node_ensembles,
        settings=settings,
        busy=health.busy_by_node(scored, counters, corunners, settings.max_busy_share, extras, evidence),
        facts=causes.node_facts(nodes),
        unsettled=sequential.unsettled(stopped, names, stopping, settings) if stopping is not None else None,
    )
    state = health.campaign_state(node_verdicts)
    verdict = dataclasses.replace(checks, passed=state == "healthy", state=state)
    notes = compose_notes(
        campaign=campaign,
        settings=settings,
        variants=variants,
        groups=groups,
        runs=run_verdicts,
        failed=failed,
        verdict=verdict,
        iterations_given=have_iterations,
    )
    return CampaignAnalysis(
        campaign=campaign,
        settings=settings,
        variants=variants,
        groups=groups,
        runs=run_verdicts,
        verdict=verdict,
        notes=notes,
        methods=dict(METHODS)
        | ({"cluster": cluster.METHOD} if node_ensembles else {})
        | ({"stopping": sequential.METHOD} if stopping is not None else {}),
        cluster=node_ensembles,
        nodes=node_verdicts,
        claims=sequential.campaign_claims(stopped, names, settings) if stopping is not None else (),
    )


def _probe_name(variant: VariantSummary) -> str:
    """The name a claim shows: the probe's ('stream'), an application's ('app:widgets')."""
    return variant.probe


def _iterations_needed(
    source: pd.DataFrame | IterationSource, scored: pd.DataFrame
) -> tuple[pd.DataFrame, bool]:
    """The iteration rows the analysis reads, and whether the analysed runs have any at all (notes say why
    slow runs are unclassified): from a source, those of every run in a (variant, node) group with a
    flagged run (classify.py compares them with their node's normal runs) and of every fwq run."""
    if not callable(source):
        return source, len(source) > 0
    group = scored["variant"].astype(str) + "\0" + scored["node"].astype(str)
    wanted = group.isin(set(group[scored["flagged"].to_numpy(dtype=bool)])) | (scored["probe"] == "fwq")
    run_ids = scored.loc[wanted, "run_id"].astype(str).tolist()
    if not run_ids:  # nothing flagged, no fwq: no iteration row is needed, and no note needs them
        source([])  # the store still names a truncated or missing shard (store/read.py, _check_ends)
        return pd.DataFrame(), False
    frame = source(run_ids)
    return frame, len(frame) > 0 or len(source(None)) > 0


def _tails_judged_as_stopped(
    groups: tuple[GroupSummary, ...], stopped: Mapping[tuple[str, str], sequential.Stopped]
) -> tuple[GroupSummary, ...]:
    """A stopped campaign's slow-run judgement is the anytime-valid test's (sequential.SlowRate), which the
    verdict and the claims use: each group's primary tail rejects where that test showed the rate above the
    limit, its other thresholds reject nothing (no claim is made there), so the `!` of the terminal and the
    report, `--json`'s `rejects` and the notes say what the verdict says. The counts stay as they are."""
    out = []
    for g in groups:
        s = stopped.get((g.variant, g.node))
        if s is None:
            out.append(g)
            continue
        degraded = s.judgement.slow_rate.degraded
        tails = tuple(
            dataclasses.replace(t, rejects=degraded and i == 0, test="anytime-valid")
            for i, t in enumerate(g.tails)
        )
        out.append(dataclasses.replace(g, tails=tails))
    return tuple(out)


def _drained(ensembles: tuple[Any, ...]) -> frozenset[tuple[str, str]]:
    """The (variant, node) groups the fleet screen drains (cluster.py): a group's node_outlier, so notes,
    terminal, report, NHC and Prometheus name the same nodes; variants on fewer than 3 nodes have no fleet
    to compare with (no outlier)."""
    return frozenset((c.variant, e.node) for c in ensembles for e in c.nodes if e.drain)


def score_runs(
    ok: pd.DataFrame, settings: Settings, *, spread_off: Sequence[tuple[str, str]] = ()
) -> pd.DataFrame:
    """Add node_median, node_mad, global_median, perf_ratio, scaled_value, robust_score, robust_outlier, slow,
    past_node_line and flagged.

    `ok` holds ok runs only (value > 0). Vectorised; row order is kept. `spread_off`: the (variant, node)
    groups the quantile rule does not judge (a stopped campaign's groups with few runs), whose runs are not
    past its line.
    """
    scored = ok.copy()
    value = scored["value"].astype(float)
    by_node = value.groupby([scored["variant"], scored["node"]], sort=False)
    scored["node_median"] = by_node.transform("median")
    group = by_node.ngroup().to_numpy()
    groups = int(group.max()) + 1 if len(group) else 0
    scored["node_mad"] = robust.group_mads(value.to_numpy(), group, groups)[group]  # two sorts in all
    scored["global_median"] = value.groupby(scored["variant"], sort=False).transform("median")
    scored["perf_ratio"] = scaling.perf_ratio(value, scored["node_median"], scored["higher_is_better"])
    scored["scaled_value"] = scaling.node_scaled(value, scored["node_median"], scored["global_median"])
    scored["slowdown"] = 1.0 - scored["perf_ratio"]
    log_ratio = np.log(scored["perf_ratio"].to_numpy(dtype=float))
    score = np.zeros(len(scored))
    for rows in scored.groupby("variant", sort=False).indices.values():
        score[rows] = robust.modified_z(log_ratio[rows])
    scored["robust_score"] = score
    scored["robust_outlier"] = robust.slow_outliers(score, settings.robust_cut)
    scored["slow"] = scored["perf_ratio"] < 1.0 - settings.primary_threshold
    scored["past_node_line"] = _past_node_line(scored, group, settings)
    if len(spread_off):
        keys = pd.MultiIndex.from_frame(scored[["variant", "node"]].astype(str))
        scored.loc[keys.isin(list(spread_off)), "past_node_line"] = False
    scored["flagged"] = scored["slow"] | scored["robust_outlier"] | scored["past_node_line"]
    return scored


def _past_node_line(scored: pd.DataFrame, group: np.ndarray, settings: Settings) -> np.ndarray:
    """The runs that fail their node's quantile rule (verdict.py, max_q01_drop): beyond the rule's line
    (max_q01_drop, or floor_sds robust sds of the node's own noise where larger) in a (variant, node) group
    whose slow-side quantile is beyond it too, so the check fails.

    The robust score pools the variant's nodes: on a node far quieter than its peers, the runs that fail
    its own rule are no outliers there, and the node was degraded with no run to take causes from (seen in
    the Slurm test: n1's slowest l2sum runs 1-2% low where its own noise was 0.1%, the pooled noise ~1%).
    """
    past = np.zeros(len(scored), dtype=bool)
    if settings.max_q01_drop is None or scored.empty:
        return past
    value = scored["value"].to_numpy(dtype=float)
    median = scored["node_median"].to_numpy(dtype=float)
    hib = scored["higher_is_better"].to_numpy(dtype=bool)
    drop = np.where(hib, median - value, value - median) / median  # oriented: > 0 = slower than the node
    if not (drop > settings.max_q01_drop).any():  # the line is never below max_q01_drop
        return past
    count = int(group.max()) + 1  # group: each run's (variant, node) group, numbered from 0
    sizes = np.bincount(group, minlength=count)
    first = np.unique(group, return_index=True)[1]  # each group's first run
    low_q = np.where(hib[first], settings.quantile_rule_q, 1.0 - settings.quantile_rule_q)
    intervals = {
        (n, q): quantiles.quantile_ci_ranks(n, q, settings.confidence) is not None
        for n, q in set(zip(sizes.tolist(), low_q.tolist(), strict=True))
    }
    has_interval = np.array([intervals[k] for k in zip(sizes.tolist(), low_q.tolist(), strict=True)])
    floor = robust.robust_cv(scored["node_mad"].to_numpy(dtype=float)[first], median[first])
    limit = rule_limits(floor, settings, has_interval)
    beyond = drop > limit[group]
    order = np.argsort(group, kind="stable")
    ends = np.cumsum(sizes)
    for g in np.unique(group[beyond]).tolist():  # few groups: those with a run past their line
        rows = order[ends[g] - sizes[g] : ends[g]]
        m = median[first[g]]
        estimate = quantiles.quantile_estimate(value[rows], float(low_q[g]))
        if (m - estimate if hib[first[g]] else estimate - m) / m > limit[g]:  # verdict: observed > limit
            past[rows] = beyond[rows]
    return past


def _variant_summaries(scored: pd.DataFrame) -> tuple[VariantSummary, ...]:
    out = []
    for variant, g in scored.groupby("variant", sort=True):
        first = g.iloc[0]
        out.append(
            VariantSummary(
                probe=str(first["probe"]),
                variant=str(variant),
                params=_params(first),
                metric=str(first["metric"]),
                unit=str(first["unit"]),
                higher_is_better=bool(first["higher_is_better"]),
                nodes=int(g["node"].nunique()),
                n=len(g),
                global_median=float(first["global_median"]),
                page_policy=_page_policy(g),
            )
        )
    return tuple(out)


def _group_summaries(
    scored: pd.DataFrame,
    failed: pd.DataFrame,
    kinds: Mapping[str, tuple[RunKind, KindEvidence | None]],
    noise: pd.DataFrame,
    settings: Settings,
    drained: frozenset[tuple[str, str]],
) -> tuple[GroupSummary, ...]:
    """Each (variant, node) group's summary; `drained`: the groups the fleet screen drains (_drained)."""
    if scored.empty:
        return ()
    # Plain dicts and lists, looked up per group: a pandas lookup per group costs more than the statistics.
    n_failed = {key: int(count) for key, count in failed.groupby(["variant", "node"]).size().items()}
    node_level = _node_level(scored)
    # Plain arrays once, then one slice per group: pandas indexing per group costs more than the statistics.
    value_all = scored["value"].to_numpy(dtype=float)
    ratio_all = scored["perf_ratio"].to_numpy(dtype=float)
    slow_all = scored["slow"].to_numpy(dtype=bool)
    run_id_all = scored["run_id"].to_numpy()
    groups = sorted(scored.groupby(["variant", "node"]).indices.items())
    # each group's probe, metric, unit, direction and node median: its first run's (not 50,000 texts each)
    first_rows = [rows[0] for _, rows in groups]
    first_of = [
        scored[c].iloc[first_rows].tolist()
        for c in ("probe", "metric", "unit", "higher_is_better", "node_median")
    ]
    group_of = np.empty(len(scored), dtype=np.int64)
    for i, (_, rows) in enumerate(groups):
        group_of[rows] = i
    mad_all = scored["node_mad"].to_numpy(dtype=float)  # score_runs: robust.group_mads, two sorts in all
    # each group's slow runs at each threshold, and their intervals in one vectorised pass (tail_count reads)
    n_of = np.bincount(group_of, minlength=len(groups)).tolist()
    slow_of = [
        np.bincount(group_of, weights=ratio_all < 1.0 - d, minlength=len(groups)).astype(int).tolist()
        for d in settings.thresholds
    ]
    prime_intervals([pair for k in slow_of for pair in zip(k, n_of, strict=True)], settings.confidence)
    out = []
    with _gc_paused():
        for i, ((variant, node), rows) in enumerate(groups):
            probe, metric, unit, hib, median = (column[i] for column in first_of)
            hib = bool(hib)
            values = value_all[rows]
            n = len(values)
            mean = float(np.mean(values))
            sd = _sample_sd(values) if n > 1 else None  # undefined for n = 1
            low_q = settings.quantile_rule_q if hib else 1.0 - settings.quantile_rule_q
            low_ci = quantile_ci(values, low_q, settings.confidence)
            drop = (low_ci.estimate - median) / median if hib else (median - low_ci.estimate) / median
            has_interval = low_ci.lower_rank is not None
            mad = float(mad_all[rows[0]])
            rule_limit = _rule_limit(mad, median, settings, has_interval=has_interval)
            tails = tuple(
                tail_count(k[i], n, d, settings.allowed_slow_rate, settings.alpha, settings.confidence)
                for k, d in zip(slow_of, settings.thresholds, strict=True)
            )
            group_kinds = [kinds[r][0] for r in run_id_all[rows][slow_all[rows]] if r in kinds]
            observed = tails[0].rate
            needed = tuple(
                TrialsNeeded(rate, source, c, trials_to_observe(rate, c))  # type: ignore[arg-type]
                for rate, source in ((observed, "observed"), (settings.given_rate, "given"))
                for c in (0.95, 0.99)
            )
            extras: dict[str, Any] = {}
            if not noise.empty:
                group_noise = noise.reindex(run_id_all[rows]).dropna(subset=["noise_fraction"])
                if len(group_noise):
                    extras.update(fwq_noise.group_extras(group_noise))
            node_ratio, node_score = node_level[(variant, node)]
            out.append(
                GroupSummary(
                    probe=str(probe),
                    variant=str(variant),
                    node=str(node),
                    metric=str(metric),
                    unit=str(unit),
                    higher_is_better=hib,
                    n=n,
                    n_failed=n_failed.get((variant, node), 0),
                    median=float(median),
                    median_ci=quantile_ci(values, 0.5, settings.confidence),
                    minimum=float(values.min()),
                    maximum=float(values.max()),
                    mean=mean,
                    sd=sd,
                    cv=None if sd is None or mean == 0.0 else sd / mean,
                    mad=mad,
                    low_quantile=low_ci,
                    quantile_rule=QuantileRule(
                        q=low_q,
                        quantile=low_ci.estimate,
                        drop=float(drop),
                        limit=rule_limit,
                        passed=bool(drop >= rule_limit),
                    ),
                    tails=tails,
                    n_slow=tails[0].k,
                    n_systematic=group_kinds.count("systematic"),
                    n_transient=group_kinds.count("transient"),
                    trials_needed=needed,
                    extras=extras,
                    node_ratio=node_ratio,
                    node_score=node_score,
                    node_outlier=(variant, node) in drained,
                )
            )
    return tuple(out)


def _rule_limit(mad_value: float, median: float, settings: Settings, *, has_interval: bool = True) -> float:
    """The quantile rule's limit (negative: a drop): the verdict's max_q01_drop widened to floor_sds robust
    sds of the group's own noise, and to the slow threshold when the quantile has no interval
    (verdict.rule_limit, the one formula), so the table and the verdict agree; the plain
    quantile_rule_limit when that check is off."""
    if settings.max_q01_drop is None or median <= 0:
        return settings.quantile_rule_limit
    floor = robust.robust_cv(mad_value, median)  # the group's MAD (robust.group_mads: the same as mad())
    return -rule_limit(floor, settings, has_interval=has_interval)


def _node_level(scored: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    """Per (variant, node): node median vs global median (oriented) and its robust score across nodes (whether
    the node is an outlier is the fleet screen's: _drained)."""
    nodes = scored.groupby(["variant", "node"], sort=True)[
        ["node_median", "global_median", "higher_is_better"]
    ]
    table = nodes.first()
    ratio = scaling.perf_ratio(table["node_median"], table["global_median"], table["higher_is_better"])
    table["ratio"] = ratio
    table["score"] = 0.0
    for variant in table.index.unique(level="variant"):
        rows = table.index.get_level_values("variant") == variant
        table.loc[rows, "score"] = robust.modified_z(np.log(table.loc[rows, "ratio"].to_numpy(dtype=float)))
    return {
        (str(v), str(nd)): (float(r), float(s))
        for (v, nd), r, s in zip(table.index, table["ratio"], table["score"], strict=True)
    }


def _run_verdicts(
    scored: pd.DataFrame,
    kinds: Mapping[str, tuple[RunKind, KindEvidence | None]],
    noise: pd.DataFrame,
    found: Mapping[str, tuple[CauseFinding, ...]],
) -> RunVerdicts:
    """The runs' verdicts by column (run_columns.py): texts that repeat (node, probe, variant, unit, kind)
    one str per distinct value; kind, evidence, extras and causes set for the runs that have them (the
    flagged runs, fwq's runs), not as 50,000 objects."""
    types: dict[str, Any] = {
        "run_id": str, "node": "shared", "probe": "shared", "variant": "shared", "trial": "int64",
        "started_at": None, "value": float, "unit": "shared", "perf_ratio": float, "scaled_value": float,
        "robust_score": float, "robust_outlier": bool, "slow": bool, "slowdown": float,
    }  # fmt: skip
    columns = {c: _plain_column(scored[c], t) for c, t in types.items()}
    flagged = scored["flagged"].to_numpy(dtype=bool)
    kind = np.full(len(scored), "none", dtype=object)
    kind[flagged] = "unclassified"
    run_ids = columns["run_id"]
    extra: dict[int, dict[str, Any]] = {}
    for row in np.flatnonzero(flagged).tolist():
        if run_ids[row] in kinds:
            kind[row], evidence = kinds[run_ids[row]]
            if evidence is not None:
                extra.setdefault(row, {})["evidence"] = evidence
    if found or not noise.empty:
        position = {run_id: row for row, run_id in enumerate(run_ids.tolist())}
        for run_id, causes in found.items():
            if causes and run_id in position:
                extra.setdefault(position[run_id], {})["causes"] = causes
        for run_id in noise.index if not noise.empty else ():
            extras = fwq_noise.run_extras(noise.loc[run_id])
            if extras and run_id in position:
                extra.setdefault(position[run_id], {})["extras"] = extras
    return RunVerdicts({**columns, "kind": kind, "flagged": flagged}, extra)


def _plain_column(column: pd.Series, kind: Any) -> np.ndarray:
    """A column as a numpy array whose .tolist() gives plain Python values: ISO UTC texts (kind None), texts
    shared by equal values ("shared"), else column.astype(kind)."""
    if kind is None:
        return np.asarray(_iso_utc(column), dtype=object)
    if kind == "shared":
        codes, distinct = pd.factorize(column.astype(str), use_na_sentinel=False)
        return np.asarray(distinct.tolist(), dtype=object)[codes]
    if kind is str:
        return np.asarray(column.astype(str).tolist(), dtype=object)
    return column.astype(kind).to_numpy()


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while tens of thousands of acyclic results are built: each collection
    walks every object alive (pandas, pyarrow), which doubled the time of building 50,000 RunVerdicts."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _require(frame: pd.DataFrame, columns: tuple[str, ...], table: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{table} table: missing column {missing[0]!r} (expected the store's {table} columns)"
        )


def _not_positive_as_invalid(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with every ok run whose value is not > 0 (a ratio, a log, a slowdown of it has no meaning)
    marked invalid, its error saying why."""
    value = pd.to_numeric(runs["value"], errors="coerce")
    bad = ((runs["status"] == "ok") & value.notna() & ~(value > 0)).to_numpy(dtype=bool)
    if not bad.any():
        return runs
    runs = runs.copy()
    why = [
        f"value {v:g} is not > 0: the headline {m} is compared as ratios"
        for v, m in zip(value[bad].tolist(), runs.loc[bad, "metric"].astype(str).tolist(), strict=True)
    ]
    if "error" not in runs.columns:
        runs["error"] = None
    runs["error"] = runs["error"].astype(object)
    runs.loc[bad, "error"] = why
    runs.loc[bad, "status"] = "invalid"
    return runs


def _check_ok_runs(ok: pd.DataFrame) -> None:
    for name in ("probe", "metric", "unit", "higher_is_better"):
        distinct = ok.groupby("variant", sort=True)[name].nunique()
        mixed = distinct[distinct > 1]
        if len(mixed):
            variant = mixed.index[0]
            seen = sorted(map(str, ok.loc[ok["variant"] == variant, name].unique()))
            raise ValueError(f"variant {variant}: runs disagree on {name} ({', '.join(seen)}); expected one")


def _page_policy(g: pd.DataFrame) -> str | None:
    """The page policy the variant's runs ran with (runs.page_policy, stored for every run; None where the
    store has no such column or the runs no value)."""
    if "page_policy" not in g.columns:
        return None
    seen = g["page_policy"].dropna()
    return str(seen.iloc[0]) if len(seen) else None


def _references(variants: Sequence[VariantSummary]) -> dict[str, tuple[float, float, float]]:
    """variant -> (expected, lowest, highest) of the applications run with --reference (app/figures.py)."""
    out = {}
    for v in variants:
        text = v.params.get("reference") if v.probe.startswith("app:") else None
        if text:
            from tailscope.analysis.reference import Reference

            ref = Reference.parse(str(text))
            out[v.variant] = (ref.value, *ref.bounds)
    return out


def _params(row: pd.Series) -> dict[str, Any]:
    text = row["params"]
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return {}
    try:
        params = json.loads(text)
    except (TypeError, json.JSONDecodeError) as err:
        raise ValueError(f"run {row['run_id']}: params is not a JSON object: {err}") from None
    if not isinstance(params, dict):
        raise ValueError(f"run {row['run_id']}: params is not a JSON object: {text!r}")
    from tailscope.store.params import current_params

    return current_params(params)  # a campaign stored before a parameter was renamed reads as today's


def _iso_utc(column: pd.Series) -> list[str]:
    """ISO 8601 in UTC with microseconds and a Z: '2026-11-02T10:00:00.000000Z'. Naive times are UTC."""
    if column.empty:
        return []
    stamps = pd.to_datetime(column, utc=True).dt.tz_localize(None).to_numpy(dtype="datetime64[us]")
    text = np.datetime_as_string(stamps, unit="us")
    return [t + "Z" if t != "NaT" else "" for t in text.tolist()]


def _sample_sd(values: np.ndarray) -> float:
    """Sample standard deviation, computed on the values scaled by the largest magnitude: the squares of
    values near 1e300 (an imported unit's numbers) have no float, the scaled ones do."""
    scale = float(np.max(np.abs(values)))
    if not 0.0 < scale < np.inf:
        return float(np.std(values, ddof=1))
    return scale * float(np.std(values / scale, ddof=1))
