"""A synthetic fleet history with changes injected at known entries (tests and bench/bench_history.py).

Nodes c0000.. in racks of 40; per (node, probe) a level and a log-normal entry noise (0.4-1%; a few noisy
nodes 4%); one entry per node, probe and day, appended one day at a time through the history's real write
path (a day's campaign of the whole fleet). Injected:
- single-node steps on one probe (3-8 noise sds, either direction), on 3% of nodes;
- the whole rack r02 slower on stream by 5% from one day on;
- a kernel rollout on a tenth of the nodes that costs dgemm 4%, and microcode updates on single nodes that
  cost stream 6 sds: facts changed WITH a performance change (their fact must be named);
- a BIOS update on a third of the nodes without any performance change, and noisy nodes without change.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field

import numpy as np

from tailscope.history.summary import Entry, FactSet, facts_digest, facts_text

PROBES = {  # probe -> (metric, unit, higher_is_better, level)
    "stream": ("bandwidth", "GB/s", True, 180.0),
    "dgemm": ("gflops", "GFLOPS", True, 2900.0),
    "latency": ("latency", "ns", False, 95.0),
    "fwq": ("quantum_time", "us", False, 386.0),
}
START = dt.datetime(2025, 12, 1, 2, 0, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Injected:
    node: str
    probe: str
    index: int  # first entry after the change
    size_sds: float  # |log change| / the node's noise
    fact: str | None = None


@dataclass
class Fleet:
    nodes: list[str]
    probes: list[str]
    days: int
    sigma: dict[tuple[str, str], float]
    truth: list[Injected] = field(default_factory=list)
    fact_only: list[tuple[str, int, str]] = field(default_factory=list)  # (node, index, fact) no perf change
    noisy: set[str] = field(default_factory=set)


def make_fleet(nodes: int, days: int, probes: int = 4, seed: int = 7) -> tuple[Fleet, np.ndarray, list[dict]]:
    """The fleet, its log-level matrix [node, probe, day] (oriented: lower is slower) and the facts of every
    (node, day) (as a list per node of (from_day, facts) changes)."""
    rng = np.random.default_rng(seed)
    names = [f"c{i:04d}" for i in range(nodes)]
    probe_names = list(PROBES)[:probes]
    fleet = Fleet(names, probe_names, days, {})
    y = np.zeros((nodes, len(probe_names), days))
    noisy = set(rng.choice(nodes, size=max(1, nodes // 100), replace=False).tolist())
    fleet.noisy = {names[i] for i in noisy}
    for i in range(nodes):
        for j, p in enumerate(probe_names):
            s = 0.04 if i in noisy else float(rng.uniform(0.004, 0.01))
            fleet.sigma[(names[i], p)] = s
            y[i, j] = rng.normal(0.0, s, days)
    facts: list[list[tuple[int, dict]]] = []  # per node: (first day, facts from then on), by day
    for i in range(nodes):
        base = {
            "kernel": "6.1.0-18-amd64",
            "microcode": "0x2b000590",
            "rack": f"r{i // 40:02d}",
            "bios_version": "2.1.4",
            "thp_enabled": "madvise",
            "governor": "performance",
        }
        facts.append([(0, base)])

    def change_fact(i: int, day: int, fact: str, value: str) -> None:
        """`fact` of node i is `value` from `day` on (whatever other changes come before or after)."""
        current = dict([f for d, f in sorted(facts[i], key=lambda t: t[0]) if d <= day][-1])
        current[fact] = value
        later = [(d, {**f, fact: value}) for d, f in facts[i] if d > day]
        facts[i] = [(d, f) for d, f in facts[i] if d < day] + [(day, current)] + later

    lo, hi = 12, days - 4
    taken: set[int] = set(noisy)
    # single-node steps
    for i in rng.choice(
        [k for k in range(nodes) if k not in taken], size=max(1, nodes * 3 // 100), replace=False
    ):
        i = int(i)
        taken.add(i)
        j = int(rng.integers(len(probe_names)))
        day = int(rng.integers(lo, hi))
        k = float(rng.uniform(3.0, 8.0)) * (1 if rng.random() < 0.3 else -1)
        s = fleet.sigma[(names[i], probe_names[j])]
        y[i, j, day:] += k * s
        fleet.truth.append(Injected(names[i], probe_names[j], day, abs(k)))
    # a rack slower on stream
    if nodes >= 120 and days > 40:
        day = days * 5 // 9
        for i in range(80, 120):
            s = fleet.sigma[(names[i], "stream")]
            y[i, 0, day:] += np.log(0.95)
            if i not in noisy:
                fleet.truth.append(Injected(names[i], "stream", day, abs(np.log(0.95)) / s))
    # a kernel rollout on a tenth of the nodes: dgemm 4% slower
    if len(probe_names) > 1:
        day = days * 2 // 5
        chosen = [int(i) for i in rng.choice(nodes, size=max(3, nodes // 10), replace=False)]
        for i in chosen:
            change_fact(i, day, "kernel", "6.1.0-21-amd64")
            y[i, 1, day:] += np.log(0.96)
            if i not in noisy:
                fleet.truth.append(
                    Injected(
                        names[i], "dgemm", day, abs(np.log(0.96)) / fleet.sigma[(names[i], "dgemm")], "kernel"
                    )
                )
    # microcode updates on single nodes: stream 6 sds slower
    for i in rng.choice(
        [k for k in range(nodes) if k not in taken], size=max(1, nodes // 100), replace=False
    ):
        i = int(i)
        taken.add(i)
        day = int(rng.integers(lo, hi))
        change_fact(i, day, "microcode", "0x2b000603")
        y[i, 0, day:] -= 6 * fleet.sigma[(names[i], "stream")]
        fleet.truth.append(Injected(names[i], "stream", day, 6.0, "microcode"))
    # a BIOS update without any performance change
    day = days // 4
    for i in range(0, nodes, 3):
        change_fact(i, day, "bios_version", "2.2.0")
        fleet.fact_only.append((names[i], day, "bios_version"))
    return fleet, y, [sorted(f, key=lambda t: t[0]) for f in facts]


def day_rows(fleet: Fleet, y: np.ndarray, facts: list, day: int) -> tuple[list[Entry], list[FactSet]]:
    """One day's entries (one campaign for the whole fleet) and the fact sets that are new that day."""
    campaign = uuid.UUID(int=day + 1).hex
    at = START + dt.timedelta(days=day)
    entries, sets = [], []
    for i, node in enumerate(fleet.nodes):
        current = [f for d, f in facts[i] if d <= day][-1]
        text = facts_text(current)
        digest = facts_digest(text)
        if any(d == day for d, _ in facts[i]):
            sets.append(FactSet(node, digest, at, text))
        for j, probe in enumerate(fleet.probes):
            metric, unit, hib, level = PROBES[probe]
            value = level * float(np.exp(y[i, j, day] if hib else -y[i, j, day]))
            entries.append(
                Entry(
                    campaign,
                    f"night-{day}",
                    node,
                    probe,
                    f"{probe}-synthetic",
                    metric,
                    unit,
                    hib,
                    at,
                    at + dt.timedelta(minutes=3),
                    30,
                    0,
                    value,
                    value * 0.995,
                    value * 1.005,
                    0.0,
                    "healthy",
                    "{}",
                    digest,
                )
            )
    return entries, sets


def score(fleet: Fleet, changes: list) -> dict[str, float]:
    """Recall (changes >= 3 sds with >= 3 entries after, found within one entry), false changes per 100
    node-probe-years, and the share of fact-carrying changes whose fact was named."""
    found = {(c.node, c.probe): [] for c in changes}
    for c in changes:
        found[(c.node, c.probe)].append(c)
    eligible = [t for t in fleet.truth if t.size_sds >= 3.0 and fleet.days - t.index >= 3]
    hits, named, with_fact = 0, 0, 0
    matched: set[int] = set()
    for t in eligible:
        cands = [c for c in found.get((t.node, t.probe), []) if abs(c.index - t.index) <= 1]
        if cands:
            hits += 1
            matched.add(id(cands[0]))
        if t.fact:
            with_fact += 1
            if cands and any(f.fact == t.fact for f in cands[0].facts_changed):
                named += 1
    truths = {(t.node, t.probe, t.index) for t in fleet.truth}
    false = [c for c in changes if not any((c.node, c.probe, c.index + d) in truths for d in (-1, 0, 1))]
    years = len(fleet.nodes) * len(fleet.probes) * fleet.days / 365.0
    return {
        "eligible": len(eligible),
        "recall": hits / len(eligible) if eligible else 1.0,
        "false_changes": len(false),
        "false_per_100_years": 100.0 * len(false) / years,
        "facts_named": named / with_fact if with_fact else 1.0,
        "fact_changes": with_fact,
    }
