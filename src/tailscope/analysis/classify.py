"""Why was a flagged run slow: a level shift over the whole run, or part of the run disturbed?

The seed's decisive clue (seed 000, notes/statistics.md "Within a run"): a slow run was slow in every
iteration, because the slowdown was set once, by the physical pages the run got; interference by other
activity hits only some iterations. We tell the two apart from the run's own iterations. The labels mean
exactly what they say; the cause (pages, a co-runner lasting the whole run, ...) is the cause catalogue's
job (analysis/causes), not the label's.

Reference level. Each non-warm-up iteration record of a flagged run (slow at the primary threshold, or a
robust outlier) is compared with the typical value of the same (variant, node, kernel, thread) record: the
median of that record over the node's normal (not flagged) runs. That typical value is the one reference:
the label, its evidence (`KindEvidence.reference`, `low_cut`) and the report's timeline lines all use it.
The ratio is value / typical for higher-is-better metrics and typical / value for lower-is-better ones, so
below 1 is slower. A run's team records (thread null: barrier to barrier) are used when it has them, else
its per-thread records. Where one iteration has several records the iteration's ratio is the lowest of
them: a synchronous program waits for its slowest part.

Rule, with s the run's own slowdown (1 - its performance ratio; the primary threshold d when the caller
does not give it) and sigma the iteration noise of the node's normal runs (1.4826 x MAD of their
iteration ratios):
- an iteration is low when its ratio < 1 - max(s / 2, 3 sigma): it carries at least half the run's
  slowdown and stands out of the iteration noise;
- unclassified: fewer than 3 iterations (no typical value, or too few iterations to tell a level
  from a spike), or no low iteration at all (the iterations do not show the run's slowdown);
- systematic ("slow in every iteration: a level shift"): at least 95% of the iterations are low (one in
  twenty may cross the cut by noise);
- transient ("slow in part of the run: interference"): otherwise. The evidence says how many.
IQR (`spread`) uses linear interpolation between order statistics; it is reported, not used for the label.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from tailscope.analysis.model import KindEvidence, RunKind
from tailscope.analysis.robust import MAD_TO_SD, group_medians, sorted_group_medians

METHOD = (
    "slow-run kind: iteration ratios vs the typical iteration of the node's normal runs (same kernel and "
    "thread); low when < 1 - max(s/2, 3 sigma) (s: the run's slowdown, sigma: iteration noise of normal "
    "runs); systematic when >= 95% of iterations are low, transient otherwise; unclassified below 3 "
    "iterations or with no low iteration"
)

MIN_ITERATIONS = 3  # below this a level cannot be told from a spike
SYSTEMATIC_FRACTION_LOW = 0.95  # "every iteration", one in twenty may cross the cut by noise
NOISE_SDS = 3.0  # a low iteration stands this many iteration-noise sds below the reference

EVIDENCE_COLUMNS = (
    "iterations", "low", "fraction_low", "median_ratio", "min_ratio", "spread", "low_cut", "reference",
)  # fmt: skip


def low_cut(slowdown: float, noise_sd: float = 0.0) -> float:
    """An iteration is low below this ratio: 1 - max(s/2, 3 sigma) (run slowdown s, iteration noise sigma)."""
    return 1.0 - max(slowdown / 2.0, NOISE_SDS * noise_sd)


class _Ratios(NamedTuple):
    """`iteration_ratios` as arrays, one row per (slow run, iteration), sorted by run then iteration."""

    run_ids: NDArray[np.object_]  # the candidate runs; `run` indexes this
    run: NDArray[np.int64]
    iteration: NDArray[np.int64]
    ratio: NDArray[np.float64]
    noise: NDArray[np.float64]  # the iteration noise sigma of the run's node (0 where it has none)
    reference: NDArray[np.float64]  # the run's typical value when it has one record per iteration, else NaN


def iteration_ratios(iterations: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, iteration) of every slow run: the lowest ratio of its records to their typical value.

    `runs` needs run_id, variant, node, higher_is_better and slow (bool: the runs to classify; the others
    are the node's normal runs); `iterations` the store's columns run_id, iteration, thread, kernel, warmup,
    value. Only nodes with a slow run are touched. Columns: run_id, iteration, ratio, noise (the iteration
    noise sigma of the run's node), reference (the typical value of the run's record when it has one record
    per iteration, else NaN).
    """
    r = _iteration_ratios(iterations, runs)
    if r is None:
        return pd.DataFrame(
            {"run_id": pd.Series(dtype=object), "iteration": [], "ratio": [], "noise": [], "reference": []}
        )
    return pd.DataFrame(
        {
            "run_id": r.run_ids[r.run],
            "iteration": r.iteration,
            "ratio": r.ratio,
            "noise": r.noise,
            "reference": r.reference,
        }
    )


def _codes(values: NDArray[Any]) -> tuple[NDArray[np.int64], int]:
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return codes.astype(np.int64), len(uniques)


def _iteration_ratios(iterations: pd.DataFrame, runs: pd.DataFrame) -> _Ratios | None:
    """In numpy throughout (sorts and bincounts, no group-by objects): 5 million iteration rows take about
    a second, and a 10-node campaign's few thousand a few milliseconds instead of pandas' fixed costs."""
    slow = runs["slow"].to_numpy(dtype=bool)
    if not slow.any() or iterations.empty:
        return None
    variant, variants = _codes(runs["variant"].to_numpy())
    node, _ = _codes(runs["node"].to_numpy())
    group_of_run = node * variants + variant
    candidate = np.isin(group_of_run, group_of_run[slow])
    run_ids = runs["run_id"].to_numpy()[candidate]
    run_group = np.unique(group_of_run[candidate], return_inverse=True)[1].astype(np.int64)
    run_slow = slow[candidate]
    run_hib = runs["higher_is_better"].to_numpy(dtype=bool)[candidate]

    run_index = pd.Index(run_ids).get_indexer(iterations["run_id"])  # -1: not a candidate run
    keep = (run_index >= 0) & ~iterations["warmup"].to_numpy(dtype=bool)
    if not keep.any():
        return None
    run_index = run_index[keep]
    thread = iterations["thread"].to_numpy(dtype=float, na_value=np.nan)[keep]
    kernel_code = _codes(iterations["kernel"].to_numpy()[keep])[0]
    iteration = iterations["iteration"].to_numpy(dtype="int64")[keep]
    value = iterations["value"].to_numpy(dtype=float)[keep]

    # Team records (thread null) where the run has any, else per-thread records.
    is_team = np.isnan(thread)
    run_has_team = np.zeros(len(run_ids), dtype=bool)
    run_has_team[run_index[is_team]] = True
    use = is_team == run_has_team[run_index]
    run_index, thread, kernel_code = run_index[use], thread[use], kernel_code[use]
    iteration, value = iteration[use], value[use]
    thread_code = np.where(np.isnan(thread), 0, thread + 1).astype("int64")

    # Typical value per (variant, node, kernel, thread) record over the node's normal runs.
    record = (run_group[run_index] * (kernel_code.max() + 1) + kernel_code) * (thread_code.max() + 1)
    record, records = _codes(record + thread_code)
    normal = ~run_slow[run_index]
    reference = group_medians(value[normal], record[normal], records)[record]
    hib = run_hib[run_index]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hib, value / reference, reference / value)
    usable = (reference > 0) & (value > 0)  # also drops records without a typical value (NaN)
    run_index, record, iteration = run_index[usable], record[usable], iteration[usable]
    ratio, reference, normal = ratio[usable], reference[usable], normal[usable]
    group = run_group[run_index]

    # Iteration noise of the node's normal runs: 1.4826 x MAD of their iteration ratios.
    noise = MAD_TO_SD * group_medians(np.abs(ratio[normal] - 1.0), group[normal], int(run_group.max()) + 1)
    slow_rows = ~normal
    if not slow_rows.any():
        return None
    run_index, record, iteration = run_index[slow_rows], record[slow_rows], iteration[slow_rows]
    ratio, reference = ratio[slow_rows], reference[slow_rows]

    # The lowest ratio of each (run, iteration), in (run, iteration) order.
    order = np.lexsort((iteration, run_index))
    run_sorted, iteration_sorted = run_index[order], iteration[order]
    changed = (run_sorted[1:] != run_sorted[:-1]) | (iteration_sorted[1:] != iteration_sorted[:-1])
    starts = np.flatnonzero(np.concatenate([[True], changed]))
    lowest = np.minimum.reduceat(ratio[order], starts)
    run_of = run_sorted[starts]

    # A run's reference where it has one record per iteration (one typical value), else NaN.
    pairs = np.unique(np.stack([run_index, record]), axis=1)
    one_record = np.bincount(pairs[0], minlength=len(run_ids)) == 1
    run_reference = np.full(len(run_ids), np.nan)
    run_reference[run_index] = reference  # one value per run wherever it has one record
    run_noise = noise[run_group]
    run_noise[np.isnan(run_noise)] = 0.0
    return _Ratios(
        run_ids=run_ids,
        run=run_of,
        iteration=iteration_sorted[starts],
        ratio=lowest,
        noise=run_noise[run_of],
        reference=np.where(one_record, run_reference, np.nan)[run_of],
    )


def _quantile(
    sorted_values: NDArray[np.float64], starts: NDArray[np.int64], sizes: NDArray[np.int64], q: float
) -> NDArray[np.float64]:
    """The q quantile of each group of sorted values, interpolated linearly between order statistics as
    pandas' group-by quantile does it (value + (next - value) x fraction)."""
    position = q * (sizes - 1)
    index = position.astype(np.int64)
    fraction = position % 1
    value = sorted_values[starts + index]
    following = sorted_values[starts + np.minimum(index + 1, sizes - 1)]
    return np.where(fraction == 0.0, value, value + (following - value) * fraction)


def classify_slow_runs(
    iterations: pd.DataFrame,
    runs: pd.DataFrame,
    threshold: float,
    slowdowns: Mapping[str, float] | None = None,
) -> dict[str, tuple[RunKind, KindEvidence | None]]:
    """Kind and evidence of every slow run in `runs` (see the module docstring for the rule).

    A slow run without usable iterations is ("unclassified", None). `slowdowns` maps run_id to the run's own
    slowdown (1 - performance ratio); runs not in it (or all runs, when it is None) use the primary threshold
    `threshold` instead.
    """
    found: dict[str, tuple[RunKind, KindEvidence | None]] = {}
    r = _iteration_ratios(iterations, runs)
    if r is not None:
        starts = np.flatnonzero(np.concatenate([[True], r.run[1:] != r.run[:-1]]))
        sizes = np.diff(np.append(starts, len(r.run)))
        run_of = r.run[starts]
        ids = [str(x) for x in r.run_ids[run_of]]
        shift = np.full(len(ids), float(threshold))
        if slowdowns:
            given = np.array([slowdowns.get(i, np.nan) for i in ids], dtype=float)
            shift = np.where(given > 0, given, shift)
        cut = 1.0 - np.maximum(shift / 2.0, NOISE_SDS * r.noise[starts])
        low = np.add.reduceat((r.ratio < np.repeat(cut, sizes)).astype(np.int64), starts)
        ordered = r.ratio[np.lexsort((r.ratio, r.run))]  # already grouped by run: sort within each
        medians = sorted_group_medians(ordered, sizes)
        spread = _quantile(ordered, starts, sizes, 0.75) - _quantile(ordered, starts, sizes, 0.25)
        fraction_low = low / sizes
        for j, run_id in enumerate(ids):
            reference = float(r.reference[starts[j]])
            kind: RunKind = "transient"
            if sizes[j] < MIN_ITERATIONS or low[j] == 0:
                kind = "unclassified"
            elif fraction_low[j] >= SYSTEMATIC_FRACTION_LOW:
                kind = "systematic"
            found[run_id] = (
                kind,
                KindEvidence(
                    iterations=int(sizes[j]),
                    low=int(low[j]),
                    fraction_low=float(fraction_low[j]),
                    median_ratio=float(medians[j]),
                    min_ratio=float(ordered[starts[j]]),
                    spread=float(spread[j]),
                    low_cut=float(cut[j]),
                    reference=None if np.isnan(reference) else reference,
                ),
            )
    unclassified: tuple[RunKind, KindEvidence | None] = ("unclassified", None)
    return {run_id: found.get(run_id, unclassified) for run_id in runs.loc[runs["slow"], "run_id"]}
