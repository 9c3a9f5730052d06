"""The cause catalogue: one module per cause, this registry, and the diagnosis of every flagged run.

Each cause module has NAME, READS, a mitigation and `assess(ctx)` (base.py). `diagnose_runs` builds every
flagged run's context (context.py: its evidence features against its node's normal runs) and returns its
findings ranked by score (ties: catalogue order). A run without evidence gets `unknown` with that reason;
a run whose evidence no cause explains gets `unknown` after whatever weak findings there were.
Node-level causes (hardware-config) are used by the node verdict (analysis/health.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import pandas as pd

from tailscope.analysis.causes import (
    cache_contention,
    cpu_contention,
    frequency,
    hardware_config,
    memory_bandwidth,
    memory_pressure,
    numa_placement,
    os_noise,
    page_placement,
    thp_fallback,
    unknown,
)
from tailscope.analysis.causes.context import (
    RunContext,
    add_corunner_share,
    corunner_lists,
    features_of,
    run_features,
    usual_features,
)
from tailscope.analysis.model import CauseFinding, KindEvidence

METHOD = (
    "causes: each flagged run's evidence (os counters, co-runners, fwq noise) against the median of its "
    "node's normal runs of the same probe variant; a cause's score is the share of the slowdown its "
    "evidence accounts for; page-placement, memory-bandwidth- and cache-contention by elimination"
)

# Run-level causes in ranking order for ties; page-placement runs after them (it needs their findings).
RUN_CAUSES: tuple[ModuleType, ...] = (
    cpu_contention,
    os_noise,
    memory_pressure,
    thp_fallback,
    frequency,
    numa_placement,
    memory_bandwidth,
    cache_contention,
)
CATALOGUE: dict[str, ModuleType] = {
    m.NAME: m for m in (*RUN_CAUSES, page_placement, hardware_config, unknown)
}
UNKNOWN_BELOW = 0.2  # when no finding reaches this score, `unknown` is listed after them
FWQ_FEATURES = ("noise_fraction", "noise_period_s")

__all__ = ["CATALOGUE", "METHOD", "RunContext", "diagnose", "diagnose_runs"]


def diagnose(
    ctx: RunContext, pages_tests: Mapping[str, page_placement.PagesTest] | None = None
) -> tuple[CauseFinding, ...]:
    """The ranked findings of one run (never empty)."""
    if not ctx.has_evidence and ctx.value("noise_fraction") is None:
        return (unknown.assess(ctx),)
    found = [f for m in RUN_CAUSES if (f := m.assess(ctx)) is not None]
    placement = page_placement.assess(ctx, found, pages_tests)
    if placement is not None:
        found.append(placement)
    order = list(CATALOGUE)
    found.sort(key=lambda f: (-f.score, order.index(f.cause)))
    if not found or found[0].score < UNKNOWN_BELOW:
        found.append(unknown.assess(ctx))
    return tuple(found)


def diagnose_runs(
    scored: pd.DataFrame,
    kinds: Mapping[str, tuple[str, KindEvidence | None]],
    *,
    counters: pd.DataFrame | None = None,
    corunners: pd.DataFrame | None = None,
    nodes: pd.DataFrame | None = None,
    run_extras: Mapping[str, Mapping[str, Any]] | None = None,
    pages_tests: Mapping[str, page_placement.PagesTest] | None = None,
) -> dict[str, tuple[CauseFinding, ...]]:
    """Ranked findings of every flagged run of `scored` (summary.score_runs' frame, `flagged` column)."""
    flagged = scored.loc[scored["flagged"]]
    if flagged.empty:
        return {}
    features, cpus = run_features(counters if counters is not None else pd.DataFrame())
    co = corunner_lists(corunners if corunners is not None else pd.DataFrame())
    features = _with_fwq(add_corunner_share(features, co), run_extras or {})
    facts = node_facts(nodes)
    out: dict[str, tuple[CauseFinding, ...]] = {}
    for (variant, node), g in scored.groupby(["variant", "node"], sort=False):
        mine = g.loc[g["flagged"]]
        if mine.empty:
            continue
        normal_ids = g.loc[~g["flagged"], "run_id"].astype(str).tolist()
        usual = usual_features(features, normal_ids) if not features.empty else {}
        for row in mine.itertuples(index=False):
            run_id = str(row.run_id)
            kind, evidence = kinds.get(run_id, ("unclassified", None))
            ctx = RunContext(
                run_id=run_id,
                node=str(node),
                probe=str(row.probe),
                variant=str(variant),
                trial=int(row.trial),
                slowdown=float(row.slowdown),
                kind=str(kind),
                kind_evidence=evidence,
                has_evidence=run_id in cpus or (not features.empty and _has_os_rows(features, run_id)),
                now=features_of(features, run_id),
                usual=usual,
                cpus=cpus.get(run_id, ()),
                corunners=co.get(run_id, ()),
                facts=facts.get(str(node), {}),
                params=_params(getattr(row, "params", None)),
            )
            out[run_id] = diagnose(ctx, pages_tests)
    return out


def node_facts(nodes: pd.DataFrame | None) -> dict[str, dict[str, Any]]:
    """node -> its facts (nodes table row without nulls)."""
    if nodes is None or nodes.empty or "node" not in nodes.columns:
        return {}
    out = {}
    for record in nodes.to_dict("records"):
        out[str(record["node"])] = {k: v for k, v in record.items() if v is not None and not _is_nan(v)}
    return out


def _has_os_rows(features: pd.DataFrame, run_id: str) -> bool:
    if run_id not in features.index:
        return False
    row = features.loc[run_id].drop(labels=[c for c in FWQ_FEATURES if c in features.columns])
    return bool(row.notna().any())


def _with_fwq(features: pd.DataFrame, extras: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    rows = {
        run_id: {k: e[k] for k in FWQ_FEATURES if e.get(k) is not None}
        for run_id, e in extras.items()
        if e.get("noise_fraction") is not None
    }
    if not rows:
        return features
    fwq = pd.DataFrame.from_dict(rows, orient="index")
    if features.empty:
        return fwq.rename_axis("run_id")
    return features.join(fwq, how="outer")


def _params(text: Any) -> dict[str, Any]:
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and v != v
