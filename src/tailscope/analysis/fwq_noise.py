"""OS noise seen by the fixed-work-quantum probe (fwq: LLNL FWQ; docs/probes.md).

Every fwq sample is one fixed quantum of work timed on one pinned thread, back to back, no barrier; the
`value` is the quantum's time in microseconds. Any time above the undisturbed quantum is time the thread
was not running its work: interrupts, daemons, timer ticks, other tasks. Per run, over non-warm-up
per-thread samples:

- noise fraction: (sum - n x min) / sum per thread (the FWQ convention: the fastest quantum is the
  noiseless one), pooled over threads as sum over threads of (sum - n min) / sum over threads of sum.
- noise events: a sample is noisy when it exceeds its thread's median quantum by more than 10%
  (`NOISY_EXCESS`; the median is the undisturbed quantum, robust to a lucky fast minimum, e.g. a turbo
  burst; 10% of a 100 us quantum is 10 us, well above TSC read jitter). An event is a maximal run of
  consecutive noisy samples on one thread (one long interruption can spill over two quanta); its start
  is the start of its first sample.
- event rate: events per second of sampled time, summed over threads (events / sum of sample seconds).
- noise period: the median interval between consecutive event starts on the same thread, pooled over
  the run's threads (a 250 Hz tick gives 4 ms; a daemon waking every second gives 1 s), and its
  regularity: the share of intervals within 10% of that median (near 1: one periodic source; low: many
  sources or random arrivals). None below 2 intervals.
Sample start times are `mono_start_ns` where every sample of the thread has one, else the running sum
of the thread's sample seconds (samples are back to back; the timer overhead between them is ignored).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

METHOD = (
    "fwq noise: fraction (sum - n min) / sum per thread; event = run of consecutive samples > 1.1 x the "
    "thread's median quantum; period = median interval between event starts on a thread"
)

NOISY_EXCESS = 0.10  # a sample is noisy above (1 + this) x its thread's median quantum
PERIOD_TOLERANCE = 0.10  # an interval is "regular" within this fraction of the median interval

RUN_COLUMNS = ("noise_fraction", "noise_events", "noise_rate_per_s", "noise_period_s", "period_regularity")
NOISE_RULE = (
    "noise fraction = (sum - n x min) / sum of per-thread quanta; event = consecutive samples more than "
    f"{NOISY_EXCESS:.0%} above the thread's median quantum; period = median interval between event starts"
)


def fwq_noise(iterations: pd.DataFrame, run_ids: pd.Series | list[str]) -> pd.DataFrame:
    """Noise measures per fwq run (index run_id, columns RUN_COLUMNS plus samples and threads)."""
    columns = ["samples", "threads", *RUN_COLUMNS]
    keep = iterations["run_id"].isin(pd.Index(run_ids)) & ~iterations["warmup"].astype(bool)
    keep &= iterations["thread"].notna()
    it = iterations.loc[keep]
    if it.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="run_id"))
    mono = it["mono_start_ns"] if "mono_start_ns" in it.columns else pd.Series(np.nan, index=it.index)
    frame = pd.DataFrame(
        {
            "run_id": it["run_id"].to_numpy(),
            "thread": it["thread"].astype("int64").to_numpy(),
            "iteration": it["iteration"].astype("int64").to_numpy(),
            "value": it["value"].astype(float).to_numpy(),
            "seconds": it["seconds"].astype(float).to_numpy(),
            "mono_s": mono.astype("float64").to_numpy() / 1e9,
        }
    ).sort_values(["run_id", "thread", "iteration"], kind="stable", ignore_index=True)
    by_thread = frame.groupby(["run_id", "thread"], sort=False)

    # Noise fraction, pooled over threads.
    per_thread = by_thread["value"].agg(["min", "sum", "size"])
    per_thread["excess"] = per_thread["sum"] - per_thread["size"] * per_thread["min"]
    per_run = per_thread.groupby(level="run_id").agg(
        excess=("excess", "sum"), total=("sum", "sum"), samples=("size", "sum"), threads=("size", "size")
    )
    per_run["noise_fraction"] = per_run["excess"] / per_run["total"]

    # Events: maximal runs of consecutive noisy samples on one thread.
    median = by_thread["value"].transform("median")
    noisy = frame["value"] > (1.0 + NOISY_EXCESS) * median
    previous_noisy = noisy.groupby([frame["run_id"], frame["thread"]], sort=False).shift(fill_value=False)
    starts = noisy & ~previous_noisy.astype(bool)
    fallback = by_thread["seconds"].cumsum() - frame["seconds"]  # start of sample i = sum of earlier ones
    has_mono = frame["mono_s"].notna().groupby([frame["run_id"], frame["thread"]]).transform("all")
    frame["start_s"] = np.where(has_mono, frame["mono_s"], fallback)
    events = frame.loc[starts, ["run_id", "thread", "start_s"]]
    per_run["noise_events"] = events.groupby("run_id").size().reindex(per_run.index, fill_value=0)
    sampled_s = frame.groupby("run_id")["seconds"].sum().reindex(per_run.index)
    per_run["noise_rate_per_s"] = per_run["noise_events"] / sampled_s.where(sampled_s > 0)

    # Period: intervals between consecutive event starts on the same thread.
    interval = events.groupby(["run_id", "thread"], sort=False)["start_s"].diff()
    intervals = pd.DataFrame({"run_id": events["run_id"], "interval": interval}).dropna()
    intervals = intervals.loc[intervals["interval"] > 0]
    per_run["noise_period_s"] = np.nan
    per_run["period_regularity"] = np.nan
    if len(intervals):
        count = intervals.groupby("run_id").size()
        period = intervals.groupby("run_id")["interval"].median()
        own_period = intervals["run_id"].map(period).astype(float)
        near = (intervals["interval"] - own_period).abs() <= PERIOD_TOLERANCE * own_period
        regularity = near.groupby(intervals["run_id"]).mean()
        enough = count[count >= 2].index
        per_run["noise_period_s"] = period.reindex(enough).reindex(per_run.index)
        per_run["period_regularity"] = regularity.reindex(enough).reindex(per_run.index)
    return per_run[columns]


def run_extras(row: pd.Series) -> dict[str, Any]:
    """One run's noise measures as plain Python values (None where undefined), for RunVerdict.extras."""
    return {
        "noise_fraction": _num(row["noise_fraction"]),
        "noise_events": int(row["noise_events"]),
        "noise_rate_per_s": _num(row["noise_rate_per_s"]),
        "noise_period_s": _num(row["noise_period_s"]),
        "period_regularity": _num(row["period_regularity"]),
    }


def group_extras(per_run: pd.DataFrame) -> dict[str, Any]:
    """Aggregate of one (variant, node)'s runs for GroupSummary.extras (medians over runs)."""
    periods = per_run["noise_period_s"].dropna()
    return {
        "noise_runs": len(per_run),
        "noise_fraction_median": _num(per_run["noise_fraction"].median()),
        "noise_fraction_max": _num(per_run["noise_fraction"].max()),
        "noise_events_median": _num(per_run["noise_events"].median()),
        "noise_rate_per_s_median": _num(per_run["noise_rate_per_s"].median()),
        "noise_period_s_median": _num(periods.median()) if len(periods) else None,
        "noise_period_runs": len(periods),
        "noise_rule": NOISE_RULE,
    }


def _num(x: object) -> float | None:
    value = float(x)  # type: ignore[arg-type]
    return None if np.isnan(value) else value
