"""`analyze`: the statistics of one campaign, from the store's `runs` and `iterations` tables.

Pipeline (each step is one module; this one only wires them and builds the result dataclasses):
1. ok runs: status "ok" with a value; every other row counts in its group's `n_failed` and nowhere else.
2. per variant: the global median; per (variant, node): the node median (scaling.py).
3. per run: performance ratio, node-scaled value, slow at each threshold (scaling.py), robust score of
   the log ratio against all runs of the variant (robust.py).
4. flagged runs (slow, or robust outliers): systematic or transient from their iterations (classify.py);
   fwq runs: noise (fwq_noise.py); the ranked causes of every flagged run from its evidence (causes/).
5. per (variant, node): GroupSummary: median with its exact interval and the slow-side quantile with its
   interval (quantiles.py), tail counts and trials needed (binomial.py); the node against its peers, by
   the one fleet screen (cluster.py: drain), so every output names the same nodes.
6. checks (verdict.py), node verdicts healthy / degraded / inconclusive (health.py), notes (notes.py).
Output order is deterministic: variants, then nodes, then trials, each sorted (plain string order).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

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
from tailscope.analysis.binomial import tail_count, trials_to_observe
from tailscope.analysis.model import (
    CampaignAnalysis,
    CauseFinding,
    ClusterSettings,
    GroupSummary,
    KindEvidence,
    QuantileRule,
    RunKind,
    RunVerdict,
    Settings,
    TrialsNeeded,
    VariantSummary,
)
from tailscope.analysis.notes import compose_notes
from tailscope.analysis.quantiles import quantile_ci
from tailscope.analysis.settings import settings_from_dict, validate_settings
from tailscope.analysis.verdict import make_verdict

__all__ = ["ITERATION_COLUMNS", "RUN_COLUMNS", "analyze", "score_runs", "settings_from_dict"]

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


def analyze(
    runs: pd.DataFrame,
    iterations: pd.DataFrame,
    settings: Settings,
    campaign: str,
    cluster_settings: ClusterSettings | None = None,
    *,
    counters: pd.DataFrame | None = None,
    corunners: pd.DataFrame | None = None,
    nodes: pd.DataFrame | None = None,
    pages_tests: Mapping[str, Any] | None = None,
) -> CampaignAnalysis:
    """Analyse a campaign: `runs` has one row per trial (any status), `iterations` those runs' rows.

    `counters` (rows with source "os" are the per-trial evidence, EVIDENCE.md), `corunners` and `nodes`
    (facts) feed the cause catalogue and the node verdicts; without them causes say "no evidence recorded".
    `pages_tests` (causes.page_placement.pages_tests of an addr explain result) back page-placement.

    Raises ValueError with a one-line message for input that cannot be analysed (missing column, an ok
    run with a value <= 0, a variant whose runs disagree on metric, unit or direction).
    """
    validate_settings(settings)
    _require(runs, RUN_COLUMNS, "runs")
    runs = runs.sort_values(["variant", "node", "trial", "run_id"], kind="stable", ignore_index=True)
    is_ok = (runs["status"] == "ok").to_numpy(dtype=bool) & runs["value"].notna().to_numpy()
    ok = runs.loc[is_ok].reset_index(drop=True)
    failed = runs.loc[~is_ok].reset_index(drop=True)
    _check_ok_runs(ok)

    scored = score_runs(ok, settings)
    have_iterations = len(iterations) > 0
    if have_iterations:
        _require(iterations, ITERATION_COLUMNS, "iterations")
    kinds: dict[str, tuple[RunKind, KindEvidence | None]] = {}
    if have_iterations:
        to_classify = scored.assign(slow=scored["flagged"])
        slowdowns = dict(zip(scored["run_id"].astype(str), scored["slowdown"].astype(float), strict=True))
        kinds = classify.classify_slow_runs(iterations, to_classify, settings.primary_threshold, slowdowns)
    fwq_ids = scored.loc[scored["probe"] == "fwq", "run_id"]
    noise = pd.DataFrame()
    if have_iterations and len(fwq_ids):
        _require(iterations, FWQ_ITERATION_COLUMNS, "iterations")
        noise = fwq_noise.fwq_noise(iterations, fwq_ids)
    extras = {str(r): fwq_noise.run_extras(noise.loc[r]) for r in noise.index} if not noise.empty else {}
    found = causes.diagnose_runs(
        scored,
        kinds,
        counters=counters,
        corunners=corunners,
        nodes=nodes,
        run_extras=extras,
        pages_tests=pages_tests,
    )

    variants = _variant_summaries(scored)
    node_ensembles = cluster.analyze_cluster(scored, settings, cluster_settings)
    groups = _one_node_screen(_group_summaries(scored, failed, kinds, noise, settings), node_ensembles)
    run_verdicts = _run_verdicts(scored, kinds, noise, found)
    checks = make_verdict(groups, settings)
    node_verdicts = health.node_health(
        groups=groups,
        runs=run_verdicts,
        checks=checks.checks,
        cluster=node_ensembles,
        settings=settings,
        busy=health.busy_by_node(scored, counters, corunners, settings.max_busy_share, extras),
        facts=causes.node_facts(nodes),
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
        methods=dict(METHODS) | ({"cluster": cluster.METHOD} if node_ensembles else {}),
        cluster=node_ensembles,
        nodes=node_verdicts,
    )


def _one_node_screen(
    groups: tuple[GroupSummary, ...], ensembles: tuple[Any, ...]
) -> tuple[GroupSummary, ...]:
    """node_outlier = the fleet screen's drain (cluster.py), so notes, terminal, report, NHC and Prometheus
    name the same nodes; variants on fewer than 3 nodes have no fleet to compare with (no outlier)."""
    drained = {(c.variant, e.node) for c in ensembles for e in c.nodes if e.drain}
    screened = {c.variant for c in ensembles}
    return tuple(
        dataclasses.replace(g, node_outlier=(g.variant, g.node) in drained)
        if g.variant in screened or g.node_outlier
        else g
        for g in groups
    )


def score_runs(ok: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Add node_median, global_median, perf_ratio, scaled_value, robust_score, robust_outlier, slow.

    `ok` holds ok runs only (value > 0). Vectorised; row order is kept.
    """
    scored = ok.copy()
    value = scored["value"].astype(float)
    scored["node_median"] = value.groupby([scored["variant"], scored["node"]], sort=False).transform("median")
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
    scored["flagged"] = scored["slow"] | scored["robust_outlier"]
    return scored


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
            )
        )
    return tuple(out)


def _group_summaries(
    scored: pd.DataFrame,
    failed: pd.DataFrame,
    kinds: Mapping[str, tuple[RunKind, KindEvidence | None]],
    noise: pd.DataFrame,
    settings: Settings,
) -> tuple[GroupSummary, ...]:
    if scored.empty:
        return ()
    n_failed = failed.groupby(["variant", "node"]).size()
    node_level = _node_level(scored, settings)
    # Plain arrays once, then one slice per group: pandas indexing per group costs more than the statistics.
    value_all = scored["value"].to_numpy(dtype=float)
    ratio_all = scored["perf_ratio"].to_numpy(dtype=float)
    slow_all = scored["slow"].to_numpy(dtype=bool)
    run_id_all = scored["run_id"].to_numpy()
    first_of = scored[["probe", "metric", "unit", "higher_is_better", "node_median"]]
    out = []
    for (variant, node), rows in sorted(scored.groupby(["variant", "node"]).indices.items()):
        probe, metric, unit, hib, median = first_of.iloc[rows[0]].tolist()
        hib = bool(hib)
        values = value_all[rows]
        ratio = ratio_all[rows]
        n = len(values)
        mean = float(np.mean(values))
        sd = float(np.std(values, ddof=1)) if n > 1 else None  # undefined for n = 1
        low_q = settings.quantile_rule_q if hib else 1.0 - settings.quantile_rule_q
        low_ci = quantile_ci(values, low_q, settings.confidence)
        drop = (low_ci.estimate - median) / median if hib else (median - low_ci.estimate) / median
        rule_limit = _rule_limit(values, median, settings)
        tails = tuple(
            tail_count(
                int(np.count_nonzero(ratio < 1.0 - d)),
                n,
                d,
                settings.allowed_slow_rate,
                settings.alpha,
                settings.confidence,
            )
            for d in settings.thresholds
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
        node_ratio, node_score, node_outlier = node_level[(variant, node)]
        out.append(
            GroupSummary(
                probe=str(probe),
                variant=str(variant),
                node=str(node),
                metric=str(metric),
                unit=str(unit),
                higher_is_better=hib,
                n=n,
                n_failed=int(n_failed.get((variant, node), 0)),
                median=float(median),
                median_ci=quantile_ci(values, 0.5, settings.confidence),
                minimum=float(values.min()),
                maximum=float(values.max()),
                mean=mean,
                sd=sd,
                cv=None if sd is None or mean == 0.0 else sd / mean,
                mad=robust.mad(values),
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
                node_outlier=node_outlier,
            )
        )
    return tuple(out)


def _rule_limit(values: np.ndarray, median: float, settings: Settings) -> float:
    """The quantile rule's limit (negative: a drop): the verdict's max_q01_drop widened to floor_sds robust
    sds of the group's own noise (verdict.quantile_limit), so the table and the verdict agree; the plain
    quantile_rule_limit when that check is off."""
    if settings.max_q01_drop is None or median <= 0:
        return settings.quantile_rule_limit
    floor = robust.robust_cv(robust.mad(values), median)
    return -max(settings.max_q01_drop, settings.floor_sds * floor)


def _node_level(scored: pd.DataFrame, settings: Settings) -> dict[tuple[str, str], tuple[float, float, bool]]:
    """Per (variant, node): node median vs global median (oriented), its robust score across nodes, flag."""
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
    flags = robust.slow_outliers(table["score"], settings.robust_cut)
    return {
        (str(v), str(nd)): (float(r), float(s), bool(f))
        for (v, nd), r, s, f in zip(table.index, table["ratio"], table["score"], flags, strict=True)
    }


def _run_verdicts(
    scored: pd.DataFrame,
    kinds: Mapping[str, tuple[RunKind, KindEvidence | None]],
    noise: pd.DataFrame,
    found: Mapping[str, tuple[CauseFinding, ...]],
) -> tuple[RunVerdict, ...]:
    columns = [
        "run_id", "node", "probe", "variant", "trial", "value", "unit", "perf_ratio",
        "scaled_value", "robust_score", "robust_outlier", "slow", "slowdown", "flagged",
    ]  # fmt: skip
    # Column lists hold plain Python values (str, int, float, bool): JSON-ready without conversion.
    lists = [scored[c].tolist() for c in columns]
    noise_ids = set(noise.index) if not noise.empty else set()
    out = []
    for fields in zip(*lists, _iso_utc(scored["started_at"]), strict=True):
        run_id, node, probe, variant, trial, value, unit, ratio, scaled, score, outlier, slow = fields[:12]
        slowdown, flagged, started_at = fields[12:]
        kind: RunKind = "none"
        evidence = None
        if flagged:
            kind, evidence = kinds.get(run_id, ("unclassified", None))
        extras = fwq_noise.run_extras(noise.loc[run_id]) if run_id in noise_ids else {}
        out.append(
            RunVerdict(
                run_id=str(run_id),
                node=str(node),
                probe=str(probe),
                variant=str(variant),
                trial=int(trial),
                started_at=started_at,
                value=float(value),
                unit=str(unit),
                perf_ratio=float(ratio),
                scaled_value=float(scaled),
                robust_score=float(score),
                robust_outlier=bool(outlier),
                slow=bool(slow),
                slowdown=float(slowdown),
                kind=kind,
                evidence=evidence,
                extras=extras,
                flagged=bool(flagged),
                causes=found.get(str(run_id), ()),
            )
        )
    return tuple(out)


def _require(frame: pd.DataFrame, columns: tuple[str, ...], table: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{table} table: missing column {missing[0]!r} (expected the store's {table} columns)"
        )


def _check_ok_runs(ok: pd.DataFrame) -> None:
    bad = ok.loc[~(ok["value"].astype(float) > 0)]
    if len(bad):
        row = bad.iloc[0]
        raise ValueError(
            f"run {row['run_id']} (node {row['node']}, {row['variant']}, trial {row['trial']}): status ok "
            f"but value {row['value']} is not > 0; mark it failed or fix the importer"
        )
    for name in ("probe", "metric", "unit", "higher_is_better"):
        distinct = ok.groupby("variant", sort=True)[name].nunique()
        mixed = distinct[distinct > 1]
        if len(mixed):
            variant = mixed.index[0]
            seen = sorted(map(str, ok.loc[ok["variant"] == variant, name].unique()))
            raise ValueError(f"variant {variant}: runs disagree on {name} ({', '.join(seen)}); expected one")


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
    return params


def _iso_utc(column: pd.Series) -> list[str]:
    """ISO 8601 in UTC with microseconds and a Z: '2026-11-02T10:00:00.000000Z'. Naive times are UTC."""
    if column.empty:
        return []
    stamps = pd.to_datetime(column, utc=True).dt.tz_localize(None).to_numpy(dtype="datetime64[us]")
    text = np.datetime_as_string(stamps, unit="us")
    return [t + "Z" if t != "NaT" else "" for t in text.tolist()]
