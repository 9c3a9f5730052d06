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

import numpy as np
import pandas as pd

from tailscope.analysis.model import KindEvidence, RunKind
from tailscope.analysis.robust import MAD_TO_SD

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


def iteration_ratios(iterations: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, iteration) of every slow run: the lowest ratio of its records to their typical value.

    `runs` needs run_id, variant, node, higher_is_better and slow (bool: the runs to classify; the others
    are the node's normal runs); `iterations` the store's columns run_id, iteration, thread, kernel, warmup,
    value. Only nodes with a slow run are touched. Columns: run_id, iteration, ratio, noise (the iteration
    noise sigma of the run's node), reference (the typical value of the run's record when it has one record
    per iteration, else NaN). Vectorised: 5 million iteration rows take about a second.
    """
    empty = pd.DataFrame(
        {"run_id": pd.Series(dtype=object), "iteration": [], "ratio": [], "noise": [], "reference": []}
    )
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
    reference = typical.reindex(record).to_numpy()
    hib = run_hib[run_index]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hib, value / reference, reference / value)
    usable = (reference > 0) & (value > 0)  # also drops records without a typical value (NaN)
    frame = pd.DataFrame(
        {
            "run": run_index[usable],
            "group": run_group[run_index][usable],
            "record": record[usable],
            "iteration": iteration[usable],
            "ratio": ratio[usable],
            "reference": reference[usable],
            "normal": normal[usable],
        }
    )
    # Iteration noise of the node's normal runs: 1.4826 x MAD of their iteration ratios.
    normal_ratio = frame.loc[frame["normal"], ["group", "ratio"]]
    dev = (normal_ratio["ratio"] - 1.0).abs()
    noise = MAD_TO_SD * dev.groupby(normal_ratio["group"]).median()
    slow_frame = frame.loc[~frame["normal"]]
    if slow_frame.empty:
        return empty
    per_iteration = slow_frame.groupby(["run", "iteration"], sort=True)["ratio"].min().reset_index()
    per_iteration["noise"] = (
        noise.reindex(run_group[per_iteration["run"].to_numpy()]).fillna(0.0).to_numpy()
    )
    records = slow_frame.groupby("run")["record"].nunique()
    single = records[records == 1].index
    ref = slow_frame.loc[slow_frame["run"].isin(single)].groupby("run")["reference"].first()
    per_iteration["reference"] = ref.reindex(per_iteration["run"]).to_numpy()
    per_iteration.insert(0, "run_id", run_ids[per_iteration.pop("run").to_numpy()])
    return per_iteration


def evidence_table(
    ratios: pd.DataFrame, threshold: float, slowdowns: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """Per run_id: the KindEvidence numbers and the kind, from `iteration_ratios` output.

    `slowdowns` maps run_id to the run's own slowdown (1 - performance ratio); runs not in it (or all
    runs, when it is None) use the primary threshold `threshold` instead.
    """
    columns = [*EVIDENCE_COLUMNS, "kind"]
    if ratios.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="run_id"))
    g = ratios.groupby("run_id", sort=True)
    n = g.size()
    shift = pd.Series(threshold, index=n.index, dtype=float)
    if slowdowns:
        given = pd.Series(slowdowns, dtype=float).reindex(n.index)
        shift = given.where(given > 0, shift).fillna(shift)
    noise = g["noise"].first()
    cut = 1.0 - np.maximum(shift / 2.0, NOISE_SDS * noise)
    low = (ratios["ratio"] < cut.reindex(ratios["run_id"]).to_numpy()).groupby(ratios["run_id"], sort=True)
    table = pd.DataFrame(
        {
            "iterations": n,
            "low": low.sum().reindex(n.index).astype("int64"),
            "median_ratio": g["ratio"].median(),
            "min_ratio": g["ratio"].min(),
            "spread": g["ratio"].quantile(0.75) - g["ratio"].quantile(0.25),
            "low_cut": cut,
            "reference": g["reference"].first(),
        }
    )
    table["fraction_low"] = table["low"] / table["iterations"]
    table["kind"] = np.select(
        [
            (table["iterations"] < MIN_ITERATIONS) | (table["low"] == 0),
            table["fraction_low"] >= SYSTEMATIC_FRACTION_LOW,
        ],
        ["unclassified", "systematic"],
        default="transient",
    )
    return table[columns]


def classify_slow_runs(
    iterations: pd.DataFrame,
    runs: pd.DataFrame,
    threshold: float,
    slowdowns: Mapping[str, float] | None = None,
) -> dict[str, tuple[RunKind, KindEvidence | None]]:
    """Kind and evidence of every slow run in `runs` (see the module docstring for the rule).

    A slow run without usable iterations is ("unclassified", None).
    """
    table = evidence_table(iteration_ratios(iterations, runs), threshold, slowdowns)
    found: dict[str, tuple[RunKind, KindEvidence | None]] = {}
    for row in table.itertuples():  # one pass, not a .loc per run (hundreds of flagged runs)
        reference = float(row.reference)
        evidence = KindEvidence(
            iterations=int(row.iterations),
            low=int(row.low),
            fraction_low=float(row.fraction_low),
            median_ratio=float(row.median_ratio),
            min_ratio=float(row.min_ratio),
            spread=float(row.spread),
            low_cut=float(row.low_cut),
            reference=None if np.isnan(reference) else reference,
        )
        found[str(row.Index)] = (str(row.kind), evidence)  # type: ignore[assignment]
    unclassified: tuple[RunKind, KindEvidence | None] = ("unclassified", None)
    return {run_id: found.get(run_id, unclassified) for run_id in runs.loc[runs["slow"], "run_id"]}
