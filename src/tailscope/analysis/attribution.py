"""Which counters explain the slow runs: attribution over an ensemble (seed 000 III, IV.A-C, Figs. 2-7).

Inputs: the analysed runs (`RunVerdict`: performance ratio and the slow flag at the primary threshold, from
summary.analyze, which did the node-median scaling) and the `counters` table (per-run deltas per unit).

Per probe variant:
1. One feature per counter: the run's delta summed over units (CPUs, CHAs, ...), keyed `pmu/event`; counters
   of time (cycles, clock ticks, CPU time, interrupts: `time_like`) as rates per second (`pmu/event/s`), since
   their per-run totals grow with any slower run by construction; counts of events stay per run. Where
   the counters allow it, derived features are added: `cpu_time_lost` (1 - task-clock / (seconds x threads):
   the share of the timed region the probe's threads did not run), `threads_per_core` (sum of unhalted
   reference cycles over the TSC: > 1 means a second thread shared the cores, the seed's section III test).
2. Run time: the node-median-scaled relative time t = 1 / performance ratio (1 = the node's median,
   1.10 = 10% slower; seed Fig. 1 scaling). Per counter: Pearson r, r^2 and the least-squares slope of t on
   the counter, Spearman rho, all over every run and over the outlier view (the slow runs plus a random
   sample of at most 4 normal runs per slow one, at least 20; seed IV.A: "99% of runs with normal execution
   times hide the 1% slow ones").
3. Separation: Mann-Whitney U of the counter in slow vs normal runs, two-sided, effect size the
   rank-biserial correlation r_rb = 2U / (n_slow n_normal) - 1 (+1: every slow run above every normal
   one), p-values adjusted over all counters of the variant by Benjamini-Hochberg (notes/statistics.md).
   "Excess" (seed Fig. 7): the counter minus the ensemble minimum; reported as the median excess of slow
   and of normal runs.
4. Ranking: BH q-value, then |r_rb|, then |Spearman rho|. Counters constant over the ensemble are left out.
5. Per slow run, the counters furthest above the normal runs (robust z > cut): what was different in it.
6. Slow/good pairs (seed Figs. 5-6): for each of the slowest runs, the nearest earlier trial on the same node
   that was at least at the node median (else the nearest not-slow trial), compared unit by unit for the
   top counters that have units (per core, per CHA).
7. OS interference: threads_per_core when reference cycles and the TSC were counted, else cpu_time_lost, else
   involuntary context switches: runs beyond the robust cut are flagged and counted among the slow runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from tailscope.analysis import robust
from tailscope.analysis.model import RunVerdict
from tailscope.analysis.run_columns import RunVerdicts

METHOD = (
    "attribution: per counter, Pearson/Spearman of node-median-scaled relative time (1 / performance ratio) "
    "on the per-run counter, also over slow runs + a random sample of normal ones; Mann-Whitney U slow vs "
    "normal with rank-biserial effect size, Benjamini-Hochberg q over the variant's counters; ranked by q, "
    "|effect|, |rho|"
)
OUTLIER_VIEW_NORMAL_PER_SLOW = 4
OUTLIER_VIEW_MIN_NORMAL = 20
TOP_PAIRS = 3
TOP_PAIR_COUNTERS = 4
_NORMAL = re.compile(r"[^a-z0-9]+")
_TASK_CLOCK = {"task_clock"}
_REF_CYCLES = {"ref_cycles", "cpu_clk_unhalted_ref", "cpu_clk_unhalted_ref_tsc"}
_TSC = {"tsc"}
_INVOLUNTARY = {
    "nonvoluntary_ctxt_switches", "involuntary_context_switches", "involuntary_switches",
    "nivcsw", "rusage_nivcsw",
}  # fmt: skip
_CONTEXT_SWITCHES = {"context_switches", "cs"}
_TIME_LIKE = {
    "cycles", "cpu_cycles", "ref_cycles", "task_clock", "cpu_clock", "tsc", "aperf", "mperf", "dclk", "uclk",
    "ubox_uclk", "interrupts", "clockticks",
}  # fmt: skip


def _norm(event: str) -> str:
    return _NORMAL.sub("_", event.lower()).strip("_")


@dataclass(frozen=True)
class CounterScore:
    counter: str
    n: int
    pearson_r: float | None
    r2: float | None
    slope: float | None  # relative time per count
    spearman_rho: float | None
    outlier_view_n: int
    outlier_view_r: float | None
    outlier_view_r2: float | None
    slow_median: float | None
    normal_median: float | None
    slow_excess_median: float | None  # median of (value - ensemble minimum) over slow runs
    normal_excess_median: float | None
    rank_biserial: float | None
    p_value: float | None
    q_value: float | None


def run_features(counters: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run_id, one column per counter `pmu/event` (summed over units) plus derived features.

    `runs` needs run_id and may have seconds, wall_s and threads (the store's runs columns).
    """
    if counters.empty:
        return pd.DataFrame(index=pd.Index([], name="run_id"))
    frame = counters.assign(counter=counter_names(counters))
    wide = frame.pivot_table(index="run_id", columns="counter", values="value", aggfunc="sum")
    wide.columns.name = None
    norm = {c: _norm(c.split("/", 1)[1]) for c in wide.columns}
    info = runs.set_index("run_id").reindex(wide.index)
    seconds = _seconds(info)
    threads = (
        info["threads"].astype(float).fillna(1.0) if "threads" in info else pd.Series(1.0, index=wide.index)
    )
    task = [c for c, n in norm.items() if n in _TASK_CLOCK]
    if task and seconds is not None:
        cpu_s = wide[task[0]] / 1e9  # perf's task-clock is in nanoseconds
        wide["derived/cpu_time_lost"] = (1.0 - cpu_s / (seconds * threads.clip(lower=1.0))).clip(lower=0.0)
    ref = [c for c, n in norm.items() if n in _REF_CYCLES]
    tsc = [c for c, n in norm.items() if n in _TSC]
    if ref and tsc:
        wide["derived/threads_per_core"] = wide[ref[0]] / (wide[tsc[0]] * threads.clip(lower=1.0))
    return _per_second(wide, norm, frame, info)


def time_like(event: str) -> bool:
    """Events that count time (cycles, clock ticks, CPU time): they grow with any slower run by design."""
    name = _norm(event)
    return (
        name in _TIME_LIKE
        or name.startswith(("cpu_clk_unhalted", "stat_"))
        or name.endswith(("_cycles", "_clockticks"))
    )


def _per_second(
    wide: pd.DataFrame, norm: dict[str, str], frame: pd.DataFrame, info: pd.DataFrame
) -> pd.DataFrame:
    """Time-like counters as rates (`name/s`): over the process wall time for what the runner read around the
    process (source proc), over the timed region otherwise. Counts of events stay per run."""
    timed, wall = _seconds(info), info["wall_s"].astype(float) if "wall_s" in info else None
    proc_only = (
        frame.groupby("counter")["source"].agg(lambda s: set(s) == {"proc"}) if "source" in frame else None
    )
    renamed = {}
    for column, name in norm.items():
        if not time_like(name):
            continue
        by_wall = proc_only is not None and bool(proc_only.get(column, False)) and wall is not None
        seconds = wall if by_wall else timed
        if seconds is None:
            continue
        wide[column] = wide[column] / seconds.where(seconds > 0)
        renamed[column] = f"{column}/s"
    return wide.rename(columns=renamed)


def counter_names(counters: pd.DataFrame) -> pd.Series:
    """`pmu/event`, or `source:pmu/event` where several sources (probe, monitor cut) count the same event."""
    plain = counters["pmu"].astype(str) + "/" + counters["event"].astype(str)
    if "source" not in counters:
        return plain
    sources = counters.groupby(plain)["source"].transform("nunique")
    return plain.where(sources <= 1, counters["source"].astype(str) + ":" + plain)


def _seconds(info: pd.DataFrame) -> pd.Series | None:
    for column in ("seconds", "wall_s"):
        if column in info and info[column].notna().any():
            return info[column].astype(float)
    return None


def attribute(
    verdicts: Sequence[RunVerdict],
    counters: pd.DataFrame,
    runs: pd.DataFrame,
    *,
    robust_cut: float = 3.5,
    seed: int = 0,
) -> dict[str, Any] | None:
    """The `attribution` section of `analyze --json`, or None when no analysed run has counters."""
    if counters.empty or not verdicts:
        return None
    features = run_features(counters, runs)
    variants = []
    verdicts = RunVerdicts.of(verdicts)
    names = ("variant", "run_id", "node", "trial", "perf_ratio", "slow")
    columns = {name: verdicts.column(name).tolist() for name in names}
    by_variant: dict[str, list[int]] = {}
    for i, variant in enumerate(columns["variant"]):
        by_variant.setdefault(variant, []).append(i)
    for variant, its in sorted(by_variant.items()):
        mine = [i for i in its if columns["run_id"][i] in features.index]
        ids = [columns["run_id"][i] for i in mine]
        if len(ids) < 3:
            continue
        table = features.loc[ids].dropna(axis=1, how="all")
        info = pd.DataFrame(
            {
                "run_id": ids,
                "node": [columns["node"][i] for i in mine],
                "trial": [columns["trial"][i] for i in mine],
                "perf_ratio": [columns["perf_ratio"][i] for i in mine],
                "slow": [columns["slow"][i] for i in mine],
            }
        ).set_index("run_id")
        scores = rank_counters(
            table, info["perf_ratio"].to_numpy(), info["slow"].to_numpy(dtype=bool), seed=seed
        )
        top = [s.counter for s in scores[:TOP_PAIR_COUNTERS]]
        variants.append(
            {
                "variant": variant,
                "runs": len(ids),
                "slow_runs": int(info["slow"].sum()),
                "counters": [s.__dict__ for s in scores],
                "top": top,
                "pairs": slow_good_pairs(info, counters, top),
                "slow_run_counters": abnormal_counters(table, info, robust_cut),
                "interference": interference(table, info, robust_cut),
                "points": _points(table, info, top),
            }
        )
    if not variants:
        return None
    return {"method": METHOD, "seed": seed, "variants": variants}


def rank_counters(
    table: pd.DataFrame, perf_ratio: np.ndarray, slow: np.ndarray, *, seed: int = 0
) -> list[CounterScore]:
    """Score and rank every non-constant counter column of `table` (rows = runs in the order of "
    "perf_ratio)."""
    rel_time = 1.0 / np.asarray(perf_ratio, dtype=float)
    rng = np.random.default_rng(seed)
    slow_idx = np.flatnonzero(slow)
    normal_idx = np.flatnonzero(~slow)
    n_view = min(len(normal_idx), max(OUTLIER_VIEW_MIN_NORMAL, OUTLIER_VIEW_NORMAL_PER_SLOW * len(slow_idx)))
    view = (
        np.sort(np.concatenate([slow_idx, rng.choice(normal_idx, size=n_view, replace=False)]))
        if len(slow_idx)
        else np.zeros(0, dtype=int)
    )
    raw: list[dict[str, Any]] = []
    for counter in table.columns:
        x = table[counter].to_numpy(dtype=float)
        ok = np.isfinite(x)
        if ok.sum() < 3 or np.ptp(x[ok]) == 0:
            continue
        xs, ts = x[ok], rel_time[ok]
        entry: dict[str, Any] = {"counter": str(counter), "n": int(ok.sum())}
        entry.update(_correlation(xs, ts))
        vx = x[view]
        vok = np.isfinite(vx)
        view_r = _pearson(vx[vok], rel_time[view][vok]) if len(view) else None
        entry["outlier_view_n"] = int(vok.sum()) if len(view) else 0
        entry["outlier_view_r"] = view_r
        entry["outlier_view_r2"] = None if view_r is None else view_r * view_r
        s_vals, n_vals = x[slow & ok], x[~slow & ok]
        minimum = float(xs.min())
        entry["slow_median"] = float(np.median(s_vals)) if len(s_vals) else None
        entry["normal_median"] = float(np.median(n_vals)) if len(n_vals) else None
        entry["slow_excess_median"] = float(np.median(s_vals - minimum)) if len(s_vals) else None
        entry["normal_excess_median"] = float(np.median(n_vals - minimum)) if len(n_vals) else None
        if len(s_vals) and len(n_vals):
            u, p = stats.mannwhitneyu(s_vals, n_vals, alternative="two-sided")
            entry["rank_biserial"] = float(2.0 * u / (len(s_vals) * len(n_vals)) - 1.0)
            entry["p_value"] = float(p)
        else:
            entry["rank_biserial"] = entry["p_value"] = None
        raw.append(entry)
    pvals = [e["p_value"] for e in raw if e["p_value"] is not None]
    qvals = iter(stats.false_discovery_control(pvals, method="bh").tolist() if pvals else [])
    for e in raw:
        e["q_value"] = float(next(qvals)) if e["p_value"] is not None else None
    raw.sort(
        key=lambda e: (
            e["q_value"] if e["q_value"] is not None else 2.0,
            -abs(e["rank_biserial"] or 0.0),
            -abs(e["spearman_rho"] or 0.0),
            e["counter"],
        )
    )
    return [CounterScore(**e) for e in raw]


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(stats.pearsonr(x, y).statistic)


def _correlation(x: np.ndarray, t: np.ndarray) -> dict[str, Any]:
    if np.ptp(t) == 0:
        return {"pearson_r": None, "r2": None, "slope": None, "spearman_rho": None}
    fit = stats.linregress(x, t)
    rho = stats.spearmanr(x, t).statistic
    return {
        "pearson_r": float(fit.rvalue),
        "r2": float(fit.rvalue**2),
        "slope": float(fit.slope),
        "spearman_rho": None if rho is None or math.isnan(rho) else float(rho),
    }


def abnormal_counters(
    table: pd.DataFrame, info: pd.DataFrame, robust_cut: float, *, limit: int = 50, top: int = 5
) -> list[dict[str, Any]]:
    """Per slow run (slowest first, at most `limit`): the counters furthest above the normal runs.

    Robust z = (x - median of normal runs) / robust.robust_sigma(normal runs) (MAD / 0.6745, meanAD x 1.2533
    when MAD = 0); counters with z > robust_cut are listed, highest first. It answers "what was different in
    this run" where the ranking answers "what separates the slow runs as a group".
    """
    slow = info[info["slow"]].sort_values("perf_ratio").head(limit)
    normal = table.loc[info.index[~info["slow"].to_numpy(dtype=bool)]]
    if normal.empty or slow.empty:
        return []
    centre = normal.median()
    scale = normal.apply(lambda c: robust.robust_sigma(c.dropna()))
    out = []
    for run_id, row in slow.iterrows():
        x = table.loc[run_id]
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (x - centre) / scale
        z = z.where(scale > 0, np.where(x > centre, np.inf, 0.0))
        hits = z[z > robust_cut].sort_values(ascending=False).head(top)
        out.append(
            {
                "run_id": str(run_id),
                "node": str(row["node"]),
                "trial": int(row["trial"]),
                "perf_ratio": float(row["perf_ratio"]),
                "abnormal": [
                    {
                        "counter": str(c),
                        "value": float(x[c]),
                        "normal_median": float(centre[c]),
                        "z": _finite_or_none(hits[c]),
                    }
                    for c in hits.index
                ],
            }
        )
    return out


def slow_good_pairs(info: pd.DataFrame, counters: pd.DataFrame, top: Sequence[str]) -> list[dict[str, Any]]:
    """Seed Figs. 5-6: slowest runs against the preceding good trial of the same node, per unit."""
    out: list[dict[str, Any]] = []
    slow = info[info["slow"]].sort_values("perf_ratio").head(TOP_PAIRS)
    named = counters.assign(counter=counter_names(counters))
    counted = named[named["unit"].notna()]
    with_units = [c for c in top if c in set(counted["counter"])]
    for run_id, row in slow.iterrows():
        same = info[(info["node"] == row["node"]) & (~info["slow"])]
        earlier = same[same["trial"] < row["trial"]].sort_values("trial", ascending=False)
        good = earlier[earlier["perf_ratio"] >= 1.0]
        pick = good if len(good) else (earlier if len(earlier) else same.sort_values("trial"))
        if pick.empty:
            continue
        good_id = str(pick.index[0])
        per_counter = {}
        for counter in with_units:
            part = counted[(counted["counter"] == counter) & counted["run_id"].isin([run_id, good_id])]
            grid = part.pivot_table(index="unit", columns="run_id", values="value", aggfunc="sum")
            units = [int(u) for u in grid.index]
            per_counter[counter] = {
                "units": units,
                "good": [float(v) for v in grid.get(good_id, pd.Series(np.nan, index=grid.index)).tolist()],
                "slow": [float(v) for v in grid.get(run_id, pd.Series(np.nan, index=grid.index)).tolist()],
            }
        out.append(
            {
                "slow_run": str(run_id),
                "slow_trial": int(row["trial"]),
                "slow_perf_ratio": float(row["perf_ratio"]),
                "good_run": good_id,
                "good_trial": int(info.loc[good_id, "trial"]),
                "good_perf_ratio": float(info.loc[good_id, "perf_ratio"]),
                "node": str(row["node"]),
                "counters": per_counter,
            }
        )
    return out


def interference(table: pd.DataFrame, info: pd.DataFrame, robust_cut: float) -> dict[str, Any] | None:
    """The OS-interference check with the best evidence the counters give (see the module docstring)."""
    norm = {c: _norm(c.split("/", 1)[-1]) for c in table.columns}
    if "derived/threads_per_core" in table:
        column, method = (
            "derived/threads_per_core",
            "threads per core = sum of unhalted reference cycles / TSC",
        )
        flagged = table[column] > 1.02
    else:
        if "derived/cpu_time_lost" in table:
            column, method = "derived/cpu_time_lost", "CPU time lost = 1 - task-clock / (seconds x threads)"
        else:
            named = [c for c, n in norm.items() if n in _INVOLUNTARY] or [
                c for c, n in norm.items() if n in _CONTEXT_SWITCHES
            ]
            if not named:
                return None
            column, method = named[0], f"{named[0]}: context switches during the run"
        values = table[column].astype(float).fillna(0.0)
        score = robust.modified_z(values.to_numpy())
        flagged = pd.Series(score > robust_cut, index=table.index)
    slow = info["slow"].reindex(table.index).fillna(False).astype(bool)
    return {
        "method": method,
        "counter": column,
        "flagged_runs": sorted(str(r) for r in table.index[flagged.to_numpy(dtype=bool)]),
        "flagged": int(flagged.sum()),
        "slow_flagged": int((flagged & slow).sum()),
        "slow": int(slow.sum()),
    }


def _points(table: pd.DataFrame, info: pd.DataFrame, top: Sequence[str]) -> dict[str, Any]:
    """Per top counter, the (counter, relative time, slow) points the report's scatter plots draw."""
    rel = (1.0 / info["perf_ratio"]).reindex(table.index)
    slow = info["slow"].reindex(table.index)
    return {
        c: {
            "x": [_finite_or_none(v) for v in table[c].tolist()],
            "t": [_finite_or_none(v) for v in rel.tolist()],
            "slow": [bool(v) for v in slow.tolist()],
        }
        for c in top[:3]
    }


def _finite_or_none(value: object) -> float | None:
    number = float(value)  # type: ignore[arg-type]
    return number if math.isfinite(number) else None
