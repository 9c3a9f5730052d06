"""`history show`: the answer for a history (change points, fleet events, node verdicts) and its forms:
terminal lines, the `--json` object, and the Prometheus textfile.

A series whose noise and entry count cannot yet show a change of the threshold's size (the smallest
slowdown its latest entries would reveal is larger) is listed: "too few entries to judge a change below X%".

A node is `degraded` when the latest change of one of its series is a slowdown beyond the primary slow
threshold of the judging settings (`Settings.primary_threshold`, 5% by default: what a run is judged by)
whose interval lies entirely below 1: its latest entries sit below its own history by more than the
settings allow. Exit codes as `verdict`: 0 healthy, 1 degraded.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tailscope.history.changes import Change, FleetEvent, SeriesLimit, assess, fleet_events, iso, noise_priors
from tailscope.history.data import HistoryData, select
from tailscope.printable import printable
from tailscope.printable import prometheus_label as _label

if TYPE_CHECKING:
    from tailscope.analysis.model import Settings


MAX_TOO_FEW_LINES = 10


@dataclass(frozen=True)
class NodeState:
    node: str
    verdict: str  # healthy | degraded
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class HistoryAnswer:
    entries: pd.DataFrame  # the selected entries (excluded ones marked)
    changes: tuple[Change, ...]
    events: tuple[FleetEvent, ...]
    nodes: tuple[NodeState, ...]
    damaged: tuple[str, ...]
    threshold: float
    # series that cannot yet judge a change of the threshold's size: too few entries for their noise
    too_few: tuple[SeriesLimit, ...] = ()

    @property
    def state(self) -> str:
        return "degraded" if any(n.verdict == "degraded" for n in self.nodes) else "healthy"


def answer(
    data: HistoryData,
    settings: Settings,
    *,
    node: str | None = None,
    probe: str | None = None,
    since: dt.datetime | None = None,
) -> HistoryAnswer:
    entries = select(data.entries, node, probe, since)
    # the fleet's noise from every node's series of the same entries, whatever --node shows: one node's
    # changes are the same in its own view as in the fleet's
    priors = noise_priors(select(data.entries, None, probe, since)) if node is not None else None
    assessed = assess(entries, data.facts, data.notes, priors)
    changes = assessed.changes
    changes.sort(key=lambda c: (c.node, c.variant, c.at))
    events = fleet_events(changes, entries, data.facts)
    threshold = settings.primary_threshold
    latest: dict[tuple[str, str], Change] = {}
    for c in changes:
        latest[(c.node, c.variant)] = c  # sorted by time: the last one stays
    reasons: dict[str, list[str]] = {}
    for (n, _v), c in sorted(latest.items()):
        if c.ratio < 1 - threshold and c.ratio_upper < 1:
            reasons.setdefault(n, []).append(
                f"{c.sentence()} (more than the {threshold:.0%} the settings allow)"
            )
    nodes = (
        tuple(
            NodeState(str(n), "degraded" if n in reasons else "healthy", tuple(reasons.get(n, ())))
            for n in sorted({str(x) for x in entries["node"].unique()})
            if not entries.empty
        )
        if not entries.empty
        else ()
    )
    too_few = tuple(
        lim
        for lim in sorted(assessed.limits, key=lambda x: (x.node, x.variant))
        if lim.detectable is None or lim.detectable > threshold
    )
    damaged = tuple(data.damaged)
    return HistoryAnswer(entries, tuple(changes), tuple(events), nodes, damaged, threshold, too_few)


def series_json(entries: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    if entries.empty:
        return out
    ordered = entries.sort_values(["node", "variant", "started_at"], kind="stable")
    for (node, variant), block in ordered.groupby(["node", "variant"], sort=False, observed=True):
        out.append(
            {
                "node": str(node),
                "probe": str(block["probe"].iloc[0]),
                "variant": str(variant),
                "metric": str(block["metric"].iloc[0]),
                "unit": str(block["unit"].iloc[0]),
                "higher_is_better": bool(block["higher_is_better"].iloc[0]),
                "entries": [
                    {
                        "at": iso(r.started_at),
                        "campaign_id": str(r.campaign),
                        "median": float(r.median),
                        "median_ci": {"lower": _num(r.median_lower), "upper": _num(r.median_upper)},
                        "n": int(r.n),
                        "excluded": bool(r.excluded),
                        **({"exclusion_reason": str(r.exclusion_reason)} if r.excluded else {}),
                    }
                    for r in block.itertuples(index=False)
                ],
            }
        )
    return out


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else float(value)


def to_json(result: HistoryAnswer, *, with_series: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "changes": [c.to_json() for c in result.changes],
        "fleet_events": [e.to_json() for e in result.events],
        "nodes": [{"node": n.node, "verdict": n.verdict, "reasons": list(n.reasons)} for n in result.nodes],
        "verdict": result.state,
        "threshold": result.threshold,
        "too_few_entries": [lim.to_json() for lim in result.too_few],
        "damaged": list(result.damaged),
    }
    if with_series:
        data["series"] = series_json(result.entries)
    return data


def render(result: HistoryAnswer, *, with_series: bool) -> list[str]:
    lines = [f"warning: {d}" for d in result.damaged]
    entries = result.entries
    series = entries.groupby(["node", "variant"], observed=True).ngroups if not entries.empty else 0
    nodes = len(result.nodes)
    lines.append(
        f"history: {len(entries)} entries, {nodes} nodes, {series} series; "
        f"{len(result.changes)} change(s), {len(result.events)} fleet event(s)"
    )
    excluded = int(entries["excluded"].sum()) if not entries.empty else 0
    if excluded:
        lines.append(f"excluded from the judgement: {excluded} entries (history show --json lists them)")
    if with_series and not entries.empty:
        for s in series_json(entries):
            lines.append(f"{s['node']} {s['variant']} ({s['unit']}):")
            for e in s["entries"]:
                ci = e["median_ci"]
                interval = f"[{ci['lower']:.4g}, {ci['upper']:.4g}]" if ci["lower"] is not None else "[no CI]"
                mark = f"  excluded: {e.get('exclusion_reason', '')}" if e["excluded"] else ""
                lines.append(f"  {e['at'][:16]}  {e['median']:.4g} {interval}  n={e['n']}{mark}")
    for c in result.changes:
        lines.append(f"change: {c.sentence()}")
    for ev in result.events:
        lines.append(ev.sentence())
    for lim in result.too_few[:MAX_TOO_FEW_LINES]:
        lines.append(lim.sentence())
    if len(result.too_few) > MAX_TOO_FEW_LINES:
        rest = result.too_few[MAX_TOO_FEW_LINES:]
        known = [lim.detectable for lim in rest if lim.detectable is not None]
        span = f" (they could judge {min(known):.1%} to {max(known):.1%})" if known else ""
        lines.append(
            f"... and {len(rest)} more series with too few entries to judge a change of "
            f"{result.threshold:.0%}{span}; history show --json lists them"
        )
    for n in result.nodes:
        if n.verdict != "healthy":
            lines.append(f"{n.node}: {n.verdict}: " + " | ".join(n.reasons))
    lines.append(f"verdict: {result.state}")
    # node names, units, fact values, notes and exclusion reasons come from campaigns and users: every
    # control character (ESC, U+202E) shown as an escape, never interpreted
    return [printable(line) for line in lines]


def prometheus_text(result: HistoryAnswer) -> str:
    """The latest change per (node, variant): its ratio and the time of the first entry after it."""
    latest: dict[tuple[str, str], Change] = {}
    for c in result.changes:
        latest[(c.node, c.variant)] = c
    ratio = [
        "# HELP tailscope_node_change_ratio latest change of the node's series (below 1 is slower)",
        "# TYPE tailscope_node_change_ratio gauge",
    ]
    since = [
        "# HELP tailscope_node_change_since_timestamp_seconds first entry after the node's latest change",
        "# TYPE tailscope_node_change_since_timestamp_seconds gauge",
    ]
    for (node, variant), c in sorted(latest.items()):
        labels = f'node="{_label(node)}",probe="{_label(c.probe)}",variant="{_label(variant)}"'
        ratio.append(f"tailscope_node_change_ratio{{{labels}}} {c.ratio:.6g}")
        at = pd.Timestamp(c.at).timestamp()
        since.append(f"tailscope_node_change_since_timestamp_seconds{{{labels}}} {at:.0f}")
    state = [
        "# HELP tailscope_node_history_degraded 1 when the latest change is a slowdown beyond the limit",
        "# TYPE tailscope_node_history_degraded gauge",
        *(f'tailscope_node_history_degraded{{node="{_label(n.node)}"}} {int(n.verdict == "degraded")}'
          for n in result.nodes),
    ]  # fmt: skip
    return "\n".join([*ratio, *since, *state]) + "\n"
