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

import numpy as np
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
    usual_features_by_group,
)
from tailscope.analysis.model import CauseFinding, KindEvidence

METHOD = (
    "causes: each flagged run's evidence (os counters, co-runners, fwq noise) against the median of its "
    "node's normal runs of the same probe variant; a cause's score is the share of the slowdown its "
    "evidence accounts for; page-placement, memory-bandwidth- and cache-contention by elimination"
)

# Run-level causes in ranking order for ties; page-placement runs after them (it needs their findings).
# memory-pressure and thp-fallback come before os-noise: reclaim and compaction make kernel work of their own
# (swap I/O interrupts, kworkers, kswapd's wake-ups) that os-noise also counts, while os-noise makes no major
# fault and no fallback. Under swap thrash (a process touching more than RAM, seen here) both explained the
# whole slowdown (score 1.0) and the tie named os-noise first, a consequence, in 11 of 14 runs.
RUN_CAUSES: tuple[ModuleType, ...] = (
    cpu_contention,
    memory_pressure,
    thp_fallback,
    os_noise,
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
    features: tuple[pd.DataFrame, dict[str, tuple[int, ...]]] | None = None,
) -> dict[str, tuple[CauseFinding, ...]]:
    """Ranked findings of every flagged run of `scored` (summary.score_runs' frame, `flagged` column).

    Only the (variant, node) groups with a flagged run are visited, and their normal runs' usual features
    come from one group-by, not a frame per group (50,000 runs in 1,000 groups: seconds of pandas per group).
    `features`: run_features(counters) where the caller has it already (the analysis reads it for the busy
    verdict too).
    """
    is_flagged = scored["flagged"].to_numpy(dtype=bool)
    if not is_flagged.any():
        return {}
    if features is None:
        features = run_features(counters if counters is not None else pd.DataFrame())
    features, cpus = features
    co = corunner_lists(corunners if corunners is not None else pd.DataFrame())
    flagged_ids = scored["run_id"].astype(str).to_numpy()[is_flagged]
    features = _with_fwq(add_corunner_share(features, co, flagged_ids), run_extras or {})
    facts = node_facts(nodes)
    # (variant, node) groups numbered in order of first appearance (the order findings are listed in)
    group, _ = pd.MultiIndex.from_arrays([scored["variant"], scored["node"]]).factorize()
    wanted = np.unique(group[is_flagged])
    usual_of: dict[int, dict[str, float]] = {}
    if not features.empty:
        normal = ~is_flagged & np.isin(group, wanted)
        normal_ids = scored["run_id"].astype(str).to_numpy()[normal]
        usual_of = usual_features_by_group(features, normal_ids, group[normal])
    with_os = _runs_with_os_rows(features)
    rows = np.flatnonzero(is_flagged)
    rows = rows[np.argsort(group[rows], kind="stable")]
    out: dict[str, tuple[CauseFinding, ...]] = {}
    flagged = scored.iloc[rows]
    for i, row in zip(group[rows], flagged.itertuples(index=False), strict=True):
        run_id = str(row.run_id)
        kind, evidence = kinds.get(run_id, ("unclassified", None))
        ctx = RunContext(
            run_id=run_id,
            node=str(row.node),
            probe=str(row.probe),
            variant=str(row.variant),
            trial=int(row.trial),
            slowdown=float(row.slowdown),
            kind=str(kind),
            kind_evidence=evidence,
            has_evidence=run_id in cpus or run_id in with_os,
            now=features_of(features, run_id),
            usual=usual_of.get(int(i), {}),
            cpus=cpus.get(run_id, ()),
            corunners=co.get(run_id, ()),
            facts=facts.get(str(row.node), {}),
            params=_params(getattr(row, "params", None)),
            page_policy=_text(getattr(row, "page_policy", None)),
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


def _runs_with_os_rows(features: pd.DataFrame) -> set[str]:
    """The runs with any os evidence feature (fwq noise alone is not evidence)."""
    if features.empty:
        return set()
    os_columns = [c for c in features.columns if c not in FWQ_FEATURES]
    if not os_columns:
        return set()
    present = features[os_columns].notna().any(axis=1)
    return {str(r) for r in features.index[present.to_numpy(dtype=bool)]}


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
    from tailscope.store.params import current_params

    return current_params(value) if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    """A stored text column's value, None for a missing one (null, NaN)."""
    return value if isinstance(value, str) and value else None


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and v != v
