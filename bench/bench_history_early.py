"""bench_history_early: how early the history speaks, and what it costs in false changes.

The change-point rule (`history/changepoint.py`, through `changes.find_changes`, the function `history show`
calls) on synthetic histories, in memory (the store's round trip is exact and bench_history.py times it):
1. the fleet of bench_history.py (1,000 nodes x 365 days x 4 probes, seed 2026: single-node steps of 3-8
   noise sds, a rack, a kernel rollout, microcode updates, a BIOS update without a change, noisy nodes):
   recall of the injected changes >= 3 sds, false changes per 100 node-probe-years (the target: 0, as
   before);
2. the same fleet's first L days (L = 8 .. 60; no change is injected before day 12): false changes per 100
   series, what a site sees in its first weeks;
3. detection delay of a 5-sd step: 20 nodes with 1% noise, node 0 stepping 5% down after p entries; the
   rule run on the first p + k entries, k = 1..5 (p + k >= 8): the share found at its entry (+-1) within
   5 entries, and the median k; for the fleet of 20 and for the node's series alone;
4. the issue's example: 10 entries, 1% noise, a 6% step at entry 6 on one of 20 nodes.

    python bench/bench_history_early.py                      # all, full size
    python bench/bench_history_early.py --nodes 200 --repeats 20
    PYTHONPATH=/path/to/other/src python bench/bench_history_early.py   # the same figures for other code
Exit status 1 when a target is missed: a false change on the 365-day fleet, a 5-sd step not found within 5
entries in 95% of the repeats at any length from 10 entries on, or the example missed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "history"))

from synthetic import PROBES, START, make_fleet, score  # noqa: E402

from tailscope.history.changes import find_changes  # noqa: E402
from tailscope.history.summary import facts_digest, facts_text  # noqa: E402


def fleet_frame(fleet, y: np.ndarray, facts: list, days: int) -> pd.DataFrame:
    """The fleet's first `days` entries as `HistoryData.entries` holds them."""
    nodes, probes = len(fleet.nodes), len(fleet.probes)
    digests = np.empty((nodes, days), dtype=object)
    for i in range(nodes):
        for d, f in facts[i]:
            if d < days:
                digests[i, d:] = facts_digest(facts_text(f))
    node = np.repeat(np.array(fleet.nodes, dtype=object), probes * days)
    probe = np.tile(np.repeat(np.array(fleet.probes, dtype=object), days), nodes)
    day = np.tile(np.arange(days), nodes * probes)
    hib = np.array([PROBES[p][2] for p in probe])
    level = np.array([PROBES[p][3] for p in probe])
    v = y[:, :, :days].reshape(-1)
    return pd.DataFrame({
        "node": node, "probe": probe, "variant": np.char.add(probe.astype(str), "-synthetic"),
        "unit": np.array([PROBES[p][1] for p in probe], dtype=object),
        "campaign": [f"{d + 1:032x}" for d in day], "median": level * np.exp(np.where(hib, v, -v)),
        "higher_is_better": hib, "started_at": pd.Timestamp(START) + pd.to_timedelta(day, unit="D"),
        "facts_digest": np.repeat(digests[:, None, :], probes, axis=1).reshape(-1), "excluded": False,
    })  # fmt: skip


def fleet_facts(fleet, facts: list) -> dict:
    return {(n, facts_digest(facts_text(f))): dict(f) for n, per in zip(fleet.nodes, facts, strict=True)
            for _, f in per}  # fmt: skip


def twenty_nodes(
    rng: np.random.Generator, p: int, length: int, step: float, sigma: float = 0.01
) -> pd.DataFrame:
    y = rng.normal(0.0, sigma, (20, length))
    y[0, p:] -= step
    node = np.repeat([f"n{i:02d}" for i in range(20)], length)
    day = np.tile(np.arange(length), 20)
    return pd.DataFrame({
        "node": node, "probe": "stream", "variant": "stream-x", "unit": "GB/s",
        "campaign": [f"{d + 1:032x}" for d in day], "median": 100.0 * np.exp(y.reshape(-1)),
        "higher_is_better": True, "started_at": pd.Timestamp(START) + pd.to_timedelta(day, unit="D"),
        "facts_digest": "x", "excluded": False,
    })  # fmt: skip


def delay(frame: pd.DataFrame, p: int, alone: bool) -> int | None:
    """The first k (1..5) at which the first p + k entries show node 0's change at p (+-1)."""
    no_notes = pd.DataFrame()
    for k in range(1, 6):
        if p + k < 8:
            continue
        part = frame[frame["started_at"] < pd.Timestamp(START) + pd.Timedelta(days=p + k)]
        if alone:
            part = part[part["node"] == "n00"]
        found = find_changes(part, {}, no_notes)
        if any(c.node == "n00" and abs(c.index - p) <= 1 for c in found):
            return k
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeats", type=int, default=40, help="repeats per position for the delay")
    args = parser.parse_args()
    failed = False
    import tailscope.history.changes as module

    print(f"code: {Path(module.__file__).resolve().parent.parent.parent}")

    # 1. the year
    fleet, y, facts = make_fleet(args.nodes, args.days, probes=4, seed=2026)
    fmap = fleet_facts(fleet, facts)
    start = time.perf_counter()
    changes = find_changes(fleet_frame(fleet, y, facts, args.days), fmap, pd.DataFrame())
    s = score(fleet, changes)
    print(
        f"fleet {args.nodes} nodes x {args.days} days x 4 probes: recall {s['recall']:.3f} of {s['eligible']}"
        " "
        f"injected changes >= 3 sds; {s['false_changes']} false changes = {s['false_per_100_years']:.2f} per "
        f"100 node-probe-years; facts named for {s['facts_named']:.3f} ({time.perf_counter() - start:.1f} s)"
    )
    failed |= s["false_changes"] > 0
    sys.stdout.flush()

    # 2. the first weeks
    series = args.nodes * 4
    for days in (8, 10, 12, 15, 20, 30, 60):
        fleet.days = days
        found = find_changes(fleet_frame(fleet, y, facts, days), fmap, pd.DataFrame())
        truths = {(t.node, t.probe, t.index) for t in fleet.truth if t.index < days}
        false = [c for c in found if not any((c.node, c.probe, c.index + d) in truths for d in (-1, 0, 1))]
        print(f"  first {days:>2} days: {len(found)} changes, {len(false)} false = "
              f"{100 * len(false) / series:.2f} per 100 series")  # fmt: skip
    fleet.days = args.days
    sys.stdout.flush()

    # 3. detection delay of a 5-sd step
    rng = np.random.default_rng(5)
    print(f"5-sd step (5% on 1% noise), {args.repeats} repeats: share found within 5 entries, median delay")
    for p in (3, 4, 5, 7, 10, 15, 20, 30, 50, 100, 200, 360):
        row = []
        for alone in (False, True):
            delays = [delay(twenty_nodes(rng, p, p + 5, 0.05), p, alone) for _ in range(args.repeats)]
            hits = [d for d in delays if d is not None]
            share = len(hits) / len(delays)
            row.append(f"{share:.2f}, {np.median(hits) if hits else float('nan'):.0f}")
            failed |= share < 0.95 and p + 5 >= 10 and not alone
        print(f"  step after {p:>3} entries (lengths {max(8, p + 1)}..{p + 5}): fleet of 20: {row[0]}; "
              f"the node alone: {row[1]}")  # fmt: skip
        sys.stdout.flush()

    # 4. the example
    hits = siblings = 0
    for seed in range(args.repeats):
        frame = twenty_nodes(np.random.default_rng(1000 + seed), 5, 10, -np.log(0.94))
        found = find_changes(frame, {}, pd.DataFrame())
        hits += any(c.node == "n00" and c.index == 5 for c in found)
        siblings += sum(c.node != "n00" for c in found)
    print(f"10 entries, 1% noise, 6% step at entry 6 on 1 of 20 nodes: found {hits}/{args.repeats}, "
          f"changes on the 19 siblings: {siblings}")  # fmt: skip
    failed |= hits < args.repeats or siblings > 0
    print("FAILED: a target was missed" if failed else "all targets met")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
