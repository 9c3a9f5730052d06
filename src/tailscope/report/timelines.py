"""Which runs the report draws iteration by iteration, and the one series drawn for each.

Selection (`select_timeline_runs`): per (variant, node) with slow runs, the slowest slow runs (at most
`PER_NODE` per node and `PER_VARIANT` per variant, slowest first across the variant's nodes, so a fleet
with many slow nodes still gives a report of bounded size) and one typical run: the run of that node whose
performance ratio is closest to 1 (the node median), the reference the slow runs are drawn against.

Series (`iteration_series`): one value per non-warm-up iteration. The team record (thread null: barrier
to barrier, what the whole team waited for) when the run has one, else the slowest thread of each
iteration (lowest value for higher-is-better metrics, highest for times), the same view as the slow-run
classifier takes. stream's records carry a `kernel`: its triad rows are drawn (triad is stream's metric).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailscope.analysis.model import CampaignAnalysis, RunVerdict

__all__ = ["PER_NODE", "PER_VARIANT", "IterationSeries", "TimelinePick", "iteration_series", "pick_timelines"]

PER_NODE = 6  # slow runs drawn per (variant, node)
PER_VARIANT = 12  # slow runs drawn per variant, over all its nodes
DRAWN_KERNEL = "triad"  # stream: the kernel its headline metric is computed from


@dataclass(frozen=True)
class TimelinePick:
    """The runs of one (variant, node) to draw: the typical run and the slow runs, slowest first."""

    variant: str
    node: str
    typical: RunVerdict | None
    slow: tuple[RunVerdict, ...]

    @property
    def run_ids(self) -> list[str]:
        """Typical run first (when there is one), then the slow runs slowest first."""
        head = [self.typical.run_id] if self.typical is not None else []
        return head + [r.run_id for r in self.slow]


def pick_timelines(
    analysis: CampaignAnalysis, *, per_node: int = PER_NODE, per_variant: int = PER_VARIANT
) -> dict[tuple[str, str], TimelinePick]:
    """Per (variant, node) that has a drawn slow run, what to draw; ordered by variant, then node."""
    slow_of: dict[str, list[RunVerdict]] = defaultdict(list)  # one pass over the runs for the slow ones
    for run in analysis.runs:
        if run.slow:
            slow_of[run.variant].append(run)
    chosen: dict[tuple[str, str], list[RunVerdict]] = defaultdict(list)
    for variant in sorted(slow_of):
        slow = sorted(slow_of[variant], key=lambda r: (r.perf_ratio, r.node, r.trial, r.run_id))
        taken = 0
        for run in slow:
            if taken >= per_variant:
                break
            key = (run.variant, run.node)
            if len(chosen[key]) < per_node:
                chosen[key].append(run)
                taken += 1
    wanted = {k for k, runs in chosen.items() if runs}
    normal_of: dict[tuple[str, str], list[RunVerdict]] = defaultdict(list)  # and one for the chosen groups'
    for run in analysis.runs:
        if not run.slow and (run.variant, run.node) in wanted:
            normal_of[(run.variant, run.node)].append(run)
    picks = {}
    for key in sorted(wanted):
        normal = normal_of[key]
        typical = min(normal, key=lambda r: (abs(r.perf_ratio - 1.0), r.trial, r.run_id), default=None)
        picks[key] = TimelinePick(key[0], key[1], typical, tuple(chosen[key]))
    return picks


@dataclass(frozen=True)
class IterationSeries:
    """One value per iteration of one run, and what it is ('team', 'slowest of 4 threads', '... triad')."""

    iterations: np.ndarray
    values: np.ndarray
    what: str

    @property
    def empty(self) -> bool:
        return len(self.values) == 0

    @property
    def median(self) -> float:
        return float(np.median(self.values)) if len(self.values) else float("nan")


NEEDED_COLUMNS = ("run_id", "iteration", "thread", "value")


def iteration_series(iterations: pd.DataFrame, run_id: str, higher_is_better: bool) -> IterationSeries:
    """The drawn series of one run from the store's iterations rows (any runs; other rows are ignored)."""
    none = IterationSeries(np.array([], dtype=float), np.array([], dtype=float), "no iterations stored")
    if iterations.empty or any(c not in iterations.columns for c in NEEDED_COLUMNS):
        return none
    rows = iterations.loc[iterations["run_id"] == run_id]
    if "warmup" in rows.columns:
        rows = rows.loc[~rows["warmup"].fillna(False).astype(bool)]
    what = ""
    if "kernel" in rows.columns and (rows["kernel"] == DRAWN_KERNEL).any():
        rows = rows.loc[rows["kernel"] == DRAWN_KERNEL]
        what = f", {DRAWN_KERNEL}"
    rows = rows.loc[pd.to_numeric(rows["value"], errors="coerce").notna()]
    if rows.empty:
        return none
    team = rows.loc[rows["thread"].isna()]
    if len(team):
        picked = team
        what = "team record" + what
    else:
        picked = rows
        threads = rows["thread"].nunique()
        what = (f"slowest of {threads} threads" if threads > 1 else "thread") + what
    value = picked["value"].astype(float)
    per_iteration = value.groupby(picked["iteration"].astype("int64"), sort=True)
    series = per_iteration.min() if higher_is_better else per_iteration.max()
    return IterationSeries(series.index.to_numpy(dtype=float), series.to_numpy(dtype=float), what)
