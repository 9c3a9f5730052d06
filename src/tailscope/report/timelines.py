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
from tailscope.analysis.run_columns import RunVerdicts

__all__ = [
    "PER_NODE",
    "PER_VARIANT",
    "IterationSeries",
    "RunIterations",
    "TimelinePick",
    "iteration_series",
    "pick_timelines",
]

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
    """Per (variant, node) that has a drawn slow run, what to draw; ordered by variant, then node.

    Read by column (analysis/run_columns.py): the slow runs and the normal runs of the chosen nodes are
    looked at, in the runs' order, and RunVerdict objects are built for the picked runs alone."""
    runs = RunVerdicts.of(analysis.runs)
    slow = np.asarray(runs.column("slow"), dtype=bool)
    variant_of, node_of = runs.column("variant"), runs.column("node")
    ratio, trial, run_id = runs.column("perf_ratio"), runs.column("trial"), runs.column("run_id")

    def keys(rows: np.ndarray) -> dict[int, tuple[float, str, int, str, str]]:
        """Row -> (perf_ratio, node, trial, run_id, variant) of these rows, as Python values."""
        fields = (ratio[rows].tolist(), node_of[rows].tolist(), trial[rows].tolist(),
                  run_id[rows].tolist(), variant_of[rows].tolist())  # fmt: skip
        return dict(zip(rows.tolist(), zip(*fields, strict=True), strict=True))

    slow_keys = keys(np.flatnonzero(slow))  # one pass over the runs for the slow ones
    slow_of: dict[str, list[int]] = defaultdict(list)
    for row, key in slow_keys.items():
        slow_of[key[4]].append(row)
    chosen: dict[tuple[str, str], list[int]] = defaultdict(list)
    for variant in sorted(slow_of):
        taken = 0
        for row in sorted(slow_of[variant], key=lambda row: slow_keys[row][:4]):
            if taken >= per_variant:
                break
            group = (variant, slow_keys[row][1])
            if len(chosen[group]) < per_node:
                chosen[group].append(row)
                taken += 1
    wanted = {k for k, rows in chosen.items() if rows}
    # and one pass for the chosen groups' normal runs: those on a chosen node
    nodes = {node for _, node in wanted}
    near = np.fromiter((n in nodes for n in node_of.tolist()), dtype=bool, count=len(runs))
    normal_of: dict[tuple[str, str], list[int]] = defaultdict(list)
    normal_keys = keys(np.flatnonzero(near & ~slow))
    for row, key in normal_keys.items():
        if (key[4], key[1]) in wanted:
            normal_of[(key[4], key[1])].append(row)
    typical_of = {}
    for group in wanted:
        typical_of[group] = min(
            normal_of[group],
            key=lambda row: (abs(normal_keys[row][0] - 1.0), normal_keys[row][2], normal_keys[row][3]),
            default=None,
        )
    needed = sorted({row for rows in chosen.values() for row in rows}
                    | {row for row in typical_of.values() if row is not None})  # fmt: skip
    built = dict(zip(needed, runs.rows(needed), strict=True))
    picks = {}
    for group in sorted(wanted):
        typical = None if typical_of[group] is None else built[typical_of[group]]
        picks[group] = TimelinePick(group[0], group[1], typical, tuple(built[r] for r in chosen[group]))
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
    return RunIterations(iterations).series(run_id, higher_is_better)


class RunIterations:
    """The store's iterations rows of some runs, split by run once: each run's drawn series is then read
    from its own rows by numpy (a report draws two dozen runs; pandas' filters over every row for each run
    took 8 ms a run, for 230 rows)."""

    def __init__(self, iterations: pd.DataFrame) -> None:
        self._usable = not iterations.empty and all(c in iterations.columns for c in NEEDED_COLUMNS)
        if not self._usable:
            return
        self._rows = iterations.groupby("run_id", sort=False).indices  # run id -> its row positions
        n = len(iterations)
        warmup = iterations["warmup"].fillna(False).astype(bool) if "warmup" in iterations.columns else None
        self._warmup = np.zeros(n, dtype=bool) if warmup is None else warmup.to_numpy(dtype=bool)
        kernel = iterations["kernel"] == DRAWN_KERNEL if "kernel" in iterations.columns else None
        self._drawn_kernel = None if kernel is None else kernel.to_numpy(dtype=bool, na_value=False)
        value = pd.to_numeric(iterations["value"], errors="coerce")  # NaN: no number
        self._has_value = value.notna().to_numpy()
        self._value = value.to_numpy(dtype=float, na_value=np.nan)
        self._team = iterations["thread"].isna().to_numpy()
        self._thread = iterations["thread"]
        self._iteration = iterations["iteration"]

    def series(self, run_id: str, higher_is_better: bool) -> IterationSeries:
        """The drawn series of one run (see the module doc), empty when no iteration of it is stored."""
        none = IterationSeries(np.array([], dtype=float), np.array([], dtype=float), "no iterations stored")
        rows = self._rows.get(run_id) if self._usable else None
        if rows is None:
            return none
        rows = rows[~self._warmup[rows]]
        what = ""
        if self._drawn_kernel is not None and self._drawn_kernel[rows].any():
            rows = rows[self._drawn_kernel[rows]]
            what = f", {DRAWN_KERNEL}"
        rows = rows[self._has_value[rows]]
        if not len(rows):
            return none
        team = rows[self._team[rows]]
        if len(team):
            picked = team
            what = "team record" + what
        else:
            picked = rows
            threads = self._thread.iloc[rows].nunique()
            what = (f"slowest of {threads} threads" if threads > 1 else "thread") + what
        value = self._value[picked]
        iteration = self._iteration.iloc[picked].astype("int64").to_numpy()
        order = np.argsort(iteration, kind="stable")
        index, starts = np.unique(iteration[order], return_index=True)
        reduce = np.minimum if higher_is_better else np.maximum
        return IterationSeries(index.astype(float), reduce.reduceat(value[order], starts), what)
