"""Change points of a node's history, what changed with them, and fleet events.

Per (node, probe variant) the series is the log of the entries' medians, oriented so that lower is slower
(`-log` for lower-is-better metrics), excluded entries left out. Change points: PELT with the L2 cost
(a change in level), as `ruptures.KernelCPD(kernel="linear")` computes it (the same segmentation as
`ruptures.Pelt(model="l2")`, in C: 0.3 ms against 390 ms for 365 entries). The penalty comes from the
node's own entry-to-entry noise: sigma = the larger of 1.4826 MAD(first differences) and their standard
deviation winsorized at 4 of those, over sqrt(2) (a level change is one large difference, an outlier two),
raised to its one-sided 95% upper bound (a short series' noise is uncertain);
penalty = BETA sigma^2 log(n), at least MIN_SIZE entries on each side. Entries further than CLIP_SIGMAS
sigma from the running median of ROLLING entries are pulled to that distance first (an outlier, or a
burst of up to three, is not a change: with Student-t(3) noise 81 false changes per 100 series of 365
entries without this, 0.25 with it). A change also has to stand out of that noise: |level difference|
>= MIN_Z standard errors (sigma sqrt(1/n_before + 1/n_after)) and >= MIN_SIGMAS sigma.

Size: ratio = exp(mean after - mean before) of the oriented log medians (< 1 is slower, as `node_ratio`),
its 95% interval exp(difference +- 1.96 standard errors); `before` and `after` are the medians of the
entries' medians in the two segments, in the metric's unit.

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

BETA = 4.0
MIN_SIZE = 3
ROLLING = 7
CLIP_SIGMAS = 3.0
MIN_Z = 5.0
MIN_SIGMAS = 1.5
SIGMA_FLOOR = 1e-4  # 0.01%: quantised medians that repeat exactly
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


def noise(y: np.ndarray) -> float:
    if len(y) < 3:
        return SIGMA_FLOOR
    d = np.diff(y)
    center = float(np.median(d))
    robust = 1.4826 * float(np.median(np.abs(d - center)))
    # the MAD alone is noisy (37% efficiency: 60 entries underestimated one node's noise by 26%, and a run
    # of 5 unlucky entries became a 'change'); the standard deviation of the differences winsorized at 4
    # robust sds is nearly as efficient as the plain one and still ignores steps and outliers
    wins = float(np.std(np.clip(d, center - 4 * robust, center + 4 * robust)))
    return max(max(robust, wins) / math.sqrt(2.0) * _upper_factor(len(d)), SIGMA_FLOOR)


def _upper_factor(differences: int) -> float:
    """sigma's one-sided 95% upper bound over its estimate, sqrt(df / chi2_0.05(df)), with df two thirds
    of the differences (consecutive differences share an entry). A short series' noise is uncertain: 1,000
    nodes x 4 probes x 40 entries gave 7 false changes, each on a series whose noise was estimated 28-37%
    low; the bound is x1.31 at 40 entries and x1.08 at 365."""
    from scipy.stats import chi2

    df = max(2.0, (differences - 1) * 2.0 / 3.0)
    return math.sqrt(df / float(chi2.ppf(0.05, df)))


def breakpoints(y: np.ndarray, sigma: float) -> list[int]:
    """Indices of the first entry after each change (PELT, L2 cost, penalty from `sigma`)."""
    n = len(y)
    if n < 2 * MIN_SIZE:
        return []
    import ruptures

    y = clipped(y, sigma)
    pen = BETA * sigma * sigma * math.log(n)
    algo = ruptures.KernelCPD(kernel="linear", min_size=MIN_SIZE, jump=1).fit(y.reshape(-1, 1))
    found = [int(b) for b in algo.predict(pen=pen) if 0 < int(b) < n]
    # keep the changes that stand out of the noise, against their neighbouring segments
    while True:
        bounds = [0, *found, n]
        weakest, weakest_z = None, math.inf
        for i in range(1, len(bounds) - 1):
            a, b = y[bounds[i - 1] : bounds[i]], y[bounds[i] : bounds[i + 1]]
            diff = abs(float(b.mean() - a.mean()))
            z = diff / (sigma * math.sqrt(1 / len(a) + 1 / len(b)))
            if (z < MIN_Z or diff < MIN_SIGMAS * sigma) and z < weakest_z:
                weakest, weakest_z = i - 1, z
        if weakest is None:
            return found
        del found[weakest]


def clipped(y: np.ndarray, sigma: float) -> np.ndarray:
    """`y` with single entries (and runs of up to three) pulled to within CLIP_SIGMAS sigma of the running
    median of ROLLING entries: an outlier or a short burst of them is not a change, while a step keeps
    its edge (the running median of an odd window follows a step exactly)."""
    level = pd.Series(y).rolling(ROLLING, center=True, min_periods=1).median().to_numpy()
    return np.clip(y, level - CLIP_SIGMAS * sigma, level + CLIP_SIGMAS * sigma)


def oriented(median: np.ndarray, higher_is_better: bool) -> np.ndarray:
    y = np.log(np.maximum(median.astype(float), 1e-300))
    return y if higher_is_better else -y


def find_changes(
    entries: pd.DataFrame,
    facts: dict[tuple[str, str], dict[str, Any]],
    notes: pd.DataFrame,
) -> list[Change]:
    """Every change point of every (node, variant) series of `entries` (excluded entries left out)."""
    if entries.empty:
        return []
    use = entries[~entries["excluded"].astype(bool)] if "excluded" in entries.columns else entries
    use = use.sort_values(["node", "variant", "started_at"], kind="stable")
    notes_by_node: dict[str, list[tuple[pd.Timestamp, str]]] = defaultdict(list)
    for row in notes.itertuples(index=False) if not notes.empty else ():
        notes_by_node[str(row.node)].append((pd.Timestamp(row.at), str(row.text)))
    out: list[Change] = []
    node_col = use["node"].astype(str).to_numpy()
    variant_col = use["variant"].astype(str).to_numpy()
    key = np.char.add(np.char.add(node_col.astype(str), "\x00"), variant_col.astype(str))
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, int)
    ends = np.r_[starts[1:], len(key)]
    median = use["median"].to_numpy(float)
    hib = use["higher_is_better"].to_numpy(bool)
    started = use["started_at"].to_numpy()
    for s, e in zip(starts, ends, strict=True):
        if e - s < 2 * MIN_SIZE:
            continue
        y = oriented(median[s:e], bool(hib[s]))
        sigma = noise(y)
        found = breakpoints(y, sigma)
        if not found:
            continue
        block = use.iloc[s:e]
        bounds = [0, *found, e - s]
        for i, k in enumerate(found):
            a, b = y[bounds[i] : k], y[k : bounds[i + 2]]
            diff = float(b.mean() - a.mean())
            se = sigma * math.sqrt(1 / len(a) + 1 / len(b))
            m = median[s:e]
            out.append(
                Change(
                    node=str(node_col[s]),
                    probe=str(block["probe"].iloc[0]),
                    variant=str(variant_col[s]),
                    unit=str(block["unit"].iloc[0]),
                    index=k,
                    at=iso(started[s + k]),
                    campaign_id=str(block["campaign"].iloc[k]),
                    before=float(np.median(m[bounds[i] : k])),
                    after=float(np.median(m[k : bounds[i + 2]])),
                    ratio=math.exp(diff),
                    ratio_lower=math.exp(diff - Z95 * se),
                    ratio_upper=math.exp(diff + Z95 * se),
                    entries_before=len(a),
                    entries_after=len(b),
                    noise=sigma,
                    facts_changed=_facts_changed(block, k, facts),
                    notes=_notes_in(notes_by_node.get(str(node_col[s]), []), block, k),
                )
            )
    return out


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
