"""Change points of a node's history, what changed with them, and fleet events.

Per (node, probe variant) the series is the log of the entries' medians, oriented so that lower is slower
(`-log` for lower-is-better metrics), excluded entries left out. Its change points are found by
`changepoint.judge_oriented` (the rule is described there): first every series' candidate changes and its
noise within them (`changepoint.candidates`), then the noise of each probe variant across the fleet
(`changepoint.fit_prior`, from PRIOR_MIN_SERIES series of the variant on), then every series judged with
it, so a node's first entries are judged against noise the fleet has already measured.

Size: ratio = exp(mean after - mean before) of the oriented log medians (outliers pulled in; < 1 is
slower, as `node_ratio`), its 95% interval exp(difference +- t_0.975 standard errors); `before` and
`after` are the medians of the entries' medians in the two segments, in the metric's unit.

Facts: every fact that differs between two consecutive entries from the second-last entry before the change
to the second entry after it (the change is found within one entry of where it happened), with the time of
the first entry that had the new value; notes of that node in the same window.

Fleet events: changes whose `at` lie within EVENT_DAYS of each other on at least EVENT_NODES nodes, named by
a fact change they share (a kernel rollout) or else by a fact value most of their nodes share and few
other nodes do (a rack); an event no fact names needs UNNAMED_SHARE of the fleet's nodes.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tailscope.history.changepoint import (
    MIN_SIZE,
    Candidates,
    NoisePrior,
    candidates,
    fit_prior,
    judge_oriented,
    oriented,
)

EVENT_NODES = 3
EVENT_DAYS = 2.0
UNNAMED_SHARE = 0.02  # of the fleet's nodes: an event no fact names
Z95 = 1.959963984540054


@dataclass(frozen=True)
class FactChange:
    fact: str
    before: Any
    after: Any
    changed_at: str

    def to_json(self) -> dict[str, Any]:
        return {"fact": self.fact, "before": self.before, "after": self.after, "changed_at": self.changed_at}


@dataclass(frozen=True)
class Change:
    node: str
    probe: str
    variant: str
    unit: str
    index: int  # position of the first entry after the change in the series
    at: str
    campaign_id: str
    before: float
    after: float
    ratio: float
    ratio_lower: float
    ratio_upper: float
    entries_before: int
    entries_after: int
    noise: float  # sigma of the oriented log medians
    facts_changed: tuple[FactChange, ...]
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "probe": self.probe,
            "variant": self.variant,
            "at": self.at,
            "campaign_id": self.campaign_id,
            "before": self.before,
            "after": self.after,
            "ratio": self.ratio,
            "ratio_ci": {"lower": self.ratio_lower, "upper": self.ratio_upper},
            "facts_changed": [f.to_json() for f in self.facts_changed],
            "notes": list(self.notes),
            "entries_before": self.entries_before,
            "entries_after": self.entries_after,
            "noise": self.noise,
        }

    def sentence(self) -> str:
        pct = (self.ratio - 1) * 100
        lo, hi = (self.ratio_lower - 1) * 100, (self.ratio_upper - 1) * 100
        text = f"{self.node} {self.probe} {pct:+.1f}% [{lo:+.1f}, {hi:+.1f}] since {self.at[:10]}"
        for f in self.facts_changed:
            text += f"; {f.fact} {_short(f.before)} -> {_short(f.after)} on {f.changed_at[:10]}"
        for n in self.notes:
            text += f"; note: {n}"
        return text


@dataclass(frozen=True)
class FleetEvent:
    start: str
    end: str
    nodes: tuple[str, ...]
    probes: tuple[str, ...]
    shared: dict[str, Any]  # {"fact", "before", "after"} of a shared fact change, or {"fact", "value"}
    median_ratio: float

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "nodes": list(self.nodes),
            "node_count": len(self.nodes),
            "probes": list(self.probes),
            "shared": self.shared,
            "median_ratio": self.median_ratio,
        }

    def sentence(self) -> str:
        pct = (self.median_ratio - 1) * 100
        if "after" in self.shared:
            what = f"{self.shared['fact']} {_short(self.shared['before'])} -> {_short(self.shared['after'])}"
        elif self.shared:
            what = f"{self.shared['fact']} = {_short(self.shared['value'])}"
        else:
            what = "no shared fact"
        return (
            f"fleet event {self.start[:10]}..{self.end[:10]}: {len(self.nodes)} nodes "
            f"({', '.join(self.probes)}) {pct:+.1f}% (median); {what}"
        )


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def iso(value: Any) -> str:
    ts = pd.Timestamp(value)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class SeriesLimit:
    """What one series can judge: `detectable`, the smallest slowdown (a fraction: 0.07 = 7%) its latest
    MIN_SIZE entries would show as a change; None when fewer than 2 MIN_SIZE entries follow its start or
    its last change."""

    node: str
    probe: str
    variant: str
    entries: int
    latest: int  # entries since the last change (all of them without one)
    noise: float  # sd of one entry's log median
    detectable: float | None

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "probe": self.probe, "variant": self.variant, "entries": self.entries,
                "entries_since_change": self.latest, "noise": self.noise,
                "detectable": self.detectable}  # fmt: skip

    def sentence(self) -> str:
        if self.detectable is not None:
            return (
                f"{self.node} {self.probe}: too few entries to judge a change below {self.detectable:.1%} "
                f"({self.entries} entries, noise {self.noise:.2%})"
            )
        if self.latest < self.entries:
            return (
                f"{self.node} {self.probe}: too few entries since its change to judge another "
                f"({self.latest}; at least {2 * MIN_SIZE})"
            )
        return (
            f"{self.node} {self.probe}: too few entries to judge any change "
            f"({self.entries}; at least {2 * MIN_SIZE})"
        )


@dataclass(frozen=True)
class Assessment:
    changes: list[Change]
    limits: list[SeriesLimit]  # every series, with what it can judge


def _series(use: pd.DataFrame) -> list[tuple[int, int]]:
    node_col = use["node"].astype(str).to_numpy()
    variant_col = use["variant"].astype(str).to_numpy()
    key = np.char.add(np.char.add(node_col.astype(str), "\x00"), variant_col.astype(str))
    if not len(key):  # every entry excluded: no series (np.r_ below would make one ending at 0)
        return []
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[starts[1:], len(key)]
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _usable(entries: pd.DataFrame) -> pd.DataFrame:
    use = entries[~entries["excluded"].astype(bool)] if "excluded" in entries.columns else entries
    return use.sort_values(["node", "variant", "started_at"], kind="stable")


def _candidates(use: pd.DataFrame) -> tuple[list[tuple[int, int]], list[Candidates]]:
    median = use["median"].to_numpy(float)
    hib = use["higher_is_better"].to_numpy(bool)
    spans = _series(use)
    return spans, [candidates(oriented(median[s:e], bool(hib[s]))) for s, e in spans]


def _priors(
    use: pd.DataFrame, spans: Sequence[tuple[int, int]], cands: Sequence[Candidates]
) -> dict[str, NoisePrior | None]:
    variant_col = use["variant"].astype(str).to_numpy()
    by_variant: dict[str, list[int]] = defaultdict(list)
    for i, (s, _e) in enumerate(spans):
        by_variant[str(variant_col[s])].append(i)
    return {v: fit_prior((cands[i].noise, cands[i].df) for i in idx) for v, idx in by_variant.items()}


def noise_priors(entries: pd.DataFrame) -> dict[str, NoisePrior | None]:
    """The fleet's noise of each probe variant in `entries` (None: too few series to tell)."""
    if entries.empty:
        return {}
    use = _usable(entries)
    return _priors(use, *_candidates(use))


def assess(
    entries: pd.DataFrame,
    facts: dict[tuple[str, str], dict[str, Any]],
    notes: pd.DataFrame,
    priors: dict[str, NoisePrior | None] | None = None,
) -> Assessment:
    """Every change point of every (node, variant) series of `entries` (excluded entries left out), and what
    each series can judge; `priors`: the fleet's noise by variant (`noise_priors` of the whole fleet, when
    `entries` are some nodes of it), else fitted from `entries`."""
    if entries.empty:
        return Assessment([], [])
    use = _usable(entries)
    notes_by_node: dict[str, list[tuple[pd.Timestamp, str]]] = defaultdict(list)
    for row in notes.itertuples(index=False) if not notes.empty else ():
        notes_by_node[str(row.node)].append((pd.Timestamp(row.at), str(row.text)))
    node_col = use["node"].astype(str).to_numpy()
    variant_col = use["variant"].astype(str).to_numpy()
    median = use["median"].to_numpy(float)
    started = use["started_at"].to_numpy()
    spans, cands = _candidates(use)
    if priors is None:
        priors = _priors(use, spans, cands)
    out: list[Change] = []
    limits: list[SeriesLimit] = []
    for i, (s, e) in enumerate(spans):
        prior = priors.get(str(variant_col[s]))
        judged = judge_oriented(cands[i], prior)
        block = use.iloc[s:e]
        probe = str(block["probe"].iloc[0])
        slowdown = None if judged.detectable is None else -math.expm1(-judged.detectable)
        latest = e - s - (judged.steps[-1].index if judged.steps else 0)
        limits.append(
            SeriesLimit(str(node_col[s]), probe, str(variant_col[s]), e - s, latest, judged.noise, slowdown)
        )
        bounds = [0, *(st.index for st in judged.steps), e - s]
        m = median[s:e]
        for j, st in enumerate(judged.steps):
            k = st.index
            out.append(
                Change(
                    node=str(node_col[s]),
                    probe=probe,
                    variant=str(variant_col[s]),
                    unit=str(block["unit"].iloc[0]),
                    index=k,
                    at=iso(started[s + k]),
                    campaign_id=str(block["campaign"].iloc[k]),
                    before=float(np.median(m[bounds[j] : k])),
                    after=float(np.median(m[k : bounds[j + 2]])),
                    ratio=math.exp(st.shift),
                    ratio_lower=math.exp(st.lower),
                    ratio_upper=math.exp(st.upper),
                    entries_before=st.entries_before,
                    entries_after=st.entries_after,
                    noise=judged.noise,
                    facts_changed=_facts_changed(block, k, facts),
                    notes=_notes_in(notes_by_node.get(str(node_col[s]), []), block, k),
                )
            )
    return Assessment(out, limits)


def find_changes(
    entries: pd.DataFrame,
    facts: dict[tuple[str, str], dict[str, Any]],
    notes: pd.DataFrame,
) -> list[Change]:
    """Every change point of every (node, variant) series of `entries` (excluded entries left out)."""
    return assess(entries, facts, notes).changes


def _window(block: pd.DataFrame, k: int) -> tuple[int, int]:
    return max(0, k - 2), min(len(block) - 1, k + 1)


def _facts_changed(
    block: pd.DataFrame, k: int, facts: dict[tuple[str, str], dict[str, Any]]
) -> tuple[FactChange, ...]:
    lo, hi = _window(block, k)
    node = str(block["node"].iloc[0])
    digests = block["facts_digest"].astype(str).to_numpy()
    times = block["started_at"].to_numpy()
    out: list[FactChange] = []
    for i in range(lo, hi):
        if digests[i] == digests[i + 1]:
            continue
        a, b = facts.get((node, digests[i])), facts.get((node, digests[i + 1]))
        if a is None or b is None:
            continue
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                out.append(FactChange(name, a.get(name), b.get(name), iso(times[i + 1])))
    return tuple(out)


def _notes_in(notes: Sequence[tuple[pd.Timestamp, str]], block: pd.DataFrame, k: int) -> tuple[str, ...]:
    if not notes:
        return ()
    lo, hi = _window(block, k)
    start, end = pd.Timestamp(block["started_at"].iloc[lo]), pd.Timestamp(block["started_at"].iloc[hi])
    return tuple(f"{at.strftime('%Y-%m-%d')} {text}" for at, text in sorted(notes) if start <= at <= end)


def fleet_events(
    changes: Sequence[Change],
    entries: pd.DataFrame,
    facts: dict[tuple[str, str], dict[str, Any]],
) -> list[FleetEvent]:
    """Changes on at least EVENT_NODES nodes within EVENT_DAYS, grouped by what those nodes share."""
    if not changes:
        return []
    ordered = sorted(changes, key=lambda c: c.at)
    groups: list[list[Change]] = [[ordered[0]]]
    for c in ordered[1:]:  # windows anchored at their first change (no chaining through a busy month)
        gap = dt.datetime.fromisoformat(c.at[:19]) - dt.datetime.fromisoformat(groups[-1][0].at[:19])
        if gap.total_seconds() <= EVENT_DAYS * 86400:
            groups[-1].append(c)
        else:
            groups.append([c])
    latest = _latest_facts(entries, facts)
    # without a shared fact, changes that met by chance are not an event: single-node changes of a large
    # fleet fall 3 to a window often (1,000 nodes: 8 such windows in 40 days); at least UNNAMED_SHARE of it
    unnamed_min = max(EVENT_NODES, math.ceil(UNNAMED_SHARE * len(latest)))
    events = []
    for group in groups:
        remaining = list(group)
        while len({c.node for c in remaining}) >= EVENT_NODES:
            nodes = sorted({c.node for c in remaining})
            shared = _shared(remaining, nodes, latest)
            if "after" in shared:
                part = [c for c in remaining if any(
                    (f.fact, f.before, f.after) == (shared["fact"], shared["before"], shared["after"])
                    for f in c.facts_changed)]  # fmt: skip
            elif shared:
                part = [c for c in remaining if latest.get(c.node, {}).get(shared["fact"]) == shared["value"]]
            else:
                part = remaining
            if len({c.node for c in part}) < EVENT_NODES:
                part = remaining
            if shared or len({c.node for c in part}) >= unnamed_min:
                events.append(_event(part, shared))
            remaining = [c for c in remaining if c not in part]
    return events


def _event(part: Sequence[Change], shared: dict[str, Any]) -> FleetEvent:
    return FleetEvent(
        start=min(c.at for c in part),
        end=max(c.at for c in part),
        nodes=tuple(sorted({c.node for c in part})),
        probes=tuple(sorted({c.probe for c in part})),
        shared=shared,
        median_ratio=float(np.median([c.ratio for c in part])),
    )


def _latest_facts(
    entries: pd.DataFrame, facts: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    if entries.empty:
        return {}
    last = entries.sort_values("started_at", kind="stable").drop_duplicates("node", keep="last")
    return {
        str(n): facts.get((str(n), str(d)), {})
        for n, d in zip(last["node"], last["facts_digest"], strict=True)
    }


def _shared(
    group: Sequence[Change], nodes: Sequence[str], latest: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    counts: Counter[tuple[str, str, str]] = Counter()
    values: dict[tuple[str, str, str], tuple[Any, Any]] = {}
    for node in nodes:
        seen = set()
        for c in group:
            if c.node != node:
                continue
            for f in c.facts_changed:
                k = (f.fact, repr(f.before), repr(f.after))
                if k not in seen:
                    seen.add(k)
                    counts[k] += 1
                    values[k] = (f.before, f.after)
    if counts:
        ((k, count),) = counts.most_common(1)
        if count >= max(EVENT_NODES, 0.5 * len(nodes)):
            return {"fact": k[0], "before": values[k][0], "after": values[k][1], "nodes": count}
    # else the fact value held by most of the changed nodes (at least EVENT_NODES and half of them) and by
    # few others: a rack, a DIMM vendor (a window may also hold a few unrelated single-node changes)
    members, others = set(nodes), [n for n in latest if n not in set(nodes)]
    best: tuple[int, float, str, Any] | None = None
    for fact in sorted({f for n in nodes for f in latest.get(n, {})}):
        held = Counter(repr(latest.get(n, {}).get(fact)) for n in members)
        value_repr, count = held.most_common(1)[0]
        if count < max(EVENT_NODES, 0.5 * len(members)):
            continue
        value = next(latest[n].get(fact) for n in members if repr(latest.get(n, {}).get(fact)) == value_repr)
        outside = sum(1 for n in others if repr(latest.get(n, {}).get(fact)) == value_repr) / max(
            1, len(others)
        )
        if outside < 0.5 * count / len(members) and (best is None or (count, -outside) > (best[0], -best[1])):
            best = (count, outside, fact, value)
    return {"fact": best[2], "value": best[3], "nodes": best[0]} if best else {}
