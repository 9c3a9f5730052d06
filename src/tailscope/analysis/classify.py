"""Why was a slow run slow: a level shift over the whole run, or a few disturbed iterations?

The seed's decisive clue (seed 000, notes/statistics.md "Within a run"): a slow run was slow in every
iteration, because the slowdown was set once, by the physical pages the run got; interference by other
activity hits only some iterations. We tell the two apart from the run's own iterations.

Iteration ratios. Each non-warm-up iteration record of a slow run is compared with the typical value of
the same (variant, node, kernel, thread) record: the median of that record over the node's normal
(not slow) runs. The ratio is value / typical for higher-is-better metrics and typical / value for
lower-is-better ones, so below 1 is slower. A run's team records (thread null: barrier to barrier, what
the whole team waited for) are used when it has them, else its per-thread records. Where one iteration
has several records (stream's four kernels, or one per thread) the iteration's ratio is the lowest of
them: a synchronous program waits for its slowest part.

Rule, with d the primary slow threshold (a run is slow when its ratio is below 1 - d):
- an iteration is low when its ratio < 1 - d/2 (half the slowdown that made the run slow);
- unclassified: fewer than 3 such iterations (no typical value, or too few iterations to tell a level
  from a spike), or no low iteration at all (the iterations do not show the run's slowdown);
- systematic: at least 80% of the iterations are low and their interquartile range is at most half the
  shift (IQR <= (1 - median ratio) / 2): the run sat at a lower level throughout. Address-dependent
  causes (pages, cache-slice conflicts) look like this; so does interference that lasted the whole run;
- transient: otherwise, a minority of iterations (or a part of the run) was low: interference.
IQR uses linear interpolation between order statistics (numpy's default); it only measures tightness.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tailscope.analysis.model import KindEvidence, RunKind

METHOD = (
    "slow-run kind: iteration ratios vs the node's normal runs (same kernel and thread); low when "
    "< 1 - d/2; systematic when >= 80% low and IQR <= half the shift; transient otherwise; unclassified "
    "below 3 iterations"
)

MIN_ITERATIONS = 3  # below this a level cannot be told from a spike
SYSTEMATIC_FRACTION_LOW = 0.8  # "all or most" iterations low
SPREAD_PER_SHIFT = 0.5  # level shift is "tight" when IQR <= this x (1 - median ratio)

EVIDENCE_COLUMNS = ("iterations", "low", "fraction_low", "median_ratio", "min_ratio", "spread")


def low_cut(threshold: float) -> float:
    """An iteration is low below this ratio: 1 - d/2 for primary threshold d."""
    return 1.0 - threshold / 2.0


def iteration_ratios(iterations: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, iteration) of every slow run: the lowest ratio of its records to their typical value.

    `runs` needs run_id, variant, node, higher_is_better and slow (bool); `iterations` the store's
    columns run_id, iteration, thread, kernel, warmup, value. Only nodes with a slow run are touched.
    Vectorised: rows are keyed by integer codes, so 5 million iteration rows take about a second.
    """
    empty = pd.DataFrame({"run_id": pd.Series(dtype=object), "iteration": [], "ratio": []})
    slow_groups = runs.loc[runs["slow"], ["variant", "node"]].drop_duplicates()
    if slow_groups.empty or iterations.empty:
        return empty
    candidates = runs.merge(slow_groups, on=["variant", "node"])
    run_ids = candidates["run_id"].to_numpy()
    run_group = candidates.groupby(["variant", "node"], sort=False).ngroup().to_numpy()
    run_slow = candidates["slow"].to_numpy(dtype=bool)
    run_hib = candidates["higher_is_better"].to_numpy(dtype=bool)

    run_index = pd.Index(run_ids).get_indexer(iterations["run_id"])  # -1: not a candidate run
    keep = (run_index >= 0) & ~iterations["warmup"].to_numpy(dtype=bool)
    if not keep.any():
        return empty
    run_index = run_index[keep]
    thread = iterations["thread"].to_numpy(dtype=float, na_value=np.nan)[keep]
    kernel_code = pd.factorize(iterations["kernel"].to_numpy()[keep], use_na_sentinel=False)[0]
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
    record = record + thread_code
    normal = ~run_slow[run_index]
    typical = pd.Series(value[normal]).groupby(record[normal]).median()
    slow = ~normal
    reference = typical.reindex(record[slow]).to_numpy()
    slow_value = value[slow]
    hib = run_hib[run_index[slow]]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hib, slow_value / reference, reference / slow_value)
    usable = (reference > 0) & (slow_value > 0)  # also drops records without a typical value (NaN)
    frame = pd.DataFrame(
        {"run": run_index[slow][usable], "iteration": iteration[slow][usable], "ratio": ratio[usable]}
    )
    per_iteration = frame.groupby(["run", "iteration"], sort=True)["ratio"].min().reset_index()
    per_iteration.insert(0, "run_id", run_ids[per_iteration.pop("run").to_numpy()])
    return per_iteration


def evidence_table(ratios: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Per run_id: the KindEvidence numbers and the kind, from `iteration_ratios` output."""
    columns = [*EVIDENCE_COLUMNS, "kind"]
    if ratios.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="run_id"))
    g = ratios.groupby("run_id", sort=True)["ratio"]
    n = g.size()
    low = (ratios["ratio"] < low_cut(threshold)).groupby(ratios["run_id"], sort=True).sum()
    table = pd.DataFrame(
        {
            "iterations": n,
            "low": low.reindex(n.index).astype("int64"),
            "median_ratio": g.median(),
            "min_ratio": g.min(),
            "spread": g.quantile(0.75) - g.quantile(0.25),
        }
    )
    table["fraction_low"] = table["low"] / table["iterations"]
    table["kind"] = np.select(
        [
            (table["iterations"] < MIN_ITERATIONS) | (table["low"] == 0),
            (table["fraction_low"] >= SYSTEMATIC_FRACTION_LOW)
            & (table["spread"] <= SPREAD_PER_SHIFT * (1.0 - table["median_ratio"])),
        ],
        ["unclassified", "systematic"],
        default="transient",
    )
    return table[columns]


def classify_slow_runs(
    iterations: pd.DataFrame, runs: pd.DataFrame, threshold: float
) -> dict[str, tuple[RunKind, KindEvidence | None]]:
    """Kind and evidence of every slow run in `runs` (see the module docstring for the rule).

    A slow run without usable iterations is ("unclassified", None).
    """
    table = evidence_table(iteration_ratios(iterations, runs), threshold)
    result: dict[str, tuple[RunKind, KindEvidence | None]] = {}
    for run_id in runs.loc[runs["slow"], "run_id"]:
        if run_id not in table.index:
            result[run_id] = ("unclassified", None)
            continue
        row = table.loc[run_id]
        evidence = KindEvidence(
            iterations=int(row["iterations"]),
            low=int(row["low"]),
            fraction_low=float(row["fraction_low"]),
            median_ratio=float(row["median_ratio"]),
            min_ratio=float(row["min_ratio"]),
            spread=float(row["spread"]),
        )
        result[run_id] = (str(row["kind"]), evidence)  # type: ignore[assignment]
    return result
