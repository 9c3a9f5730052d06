"""Job classes and slowdowns: which jobs are the same work, and how much slower each one ran than its class.

A job's class is, by default, (user, job name, node count, CPUs per node, partition): the same user running
the same job script at the same size repeats the same work. `--class-by` picks other fields (of CLASS_FIELDS).
A job that tags itself (`#SBATCH --comment=tailscope:NAME`; sacct's Comment, kept by slurmdbd with
`AccountingStoreFlags=job_comment`) is in class `tailscope:NAME` whatever else it is, so a site can group runs
whose names differ. A class is timed when it has at least MIN_CLASS_JOBS completed jobs.

Only COMPLETED jobs that ran at least MIN_ELAPSED_S are timed (failed, cancelled and timed-out jobs are kept
in the store and counted, never timed: a job killed at its limit says nothing about its speed).

A job's slowdown is log(elapsed / the class's median elapsed) over the jobs of its class that started in the
same week (UTC weeks from Monday), so a class whose input grows over weeks is compared within each week, and
its drift does not read as slow nodes. A class-week of fewer than MIN_WEEK_JOBS jobs takes the median of its
neighbouring weeks too (three weeks), else of the whole class. log: a slowdown of 0.05 is 5.1% slower.

Where an application definition names the class's figure of merit and the epilog found it in the job's
output (the epilog record's `figures`), the figure replaces elapsed: slowdown = log(class median / figure)
when higher is better, log(figure / class median) when lower is better. A class uses a figure when at least
MIN_CLASS_JOBS of its completed jobs have it (the first such name, alphabetically); its jobs without it are
then not timed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tailscope.jobs.classby import CLASS_FIELDS, DEFAULT_CLASS_BY, TAG

MIN_CLASS_JOBS = 10
MIN_WEEK_JOBS = 5
MIN_ELAPSED_S = 1.0
WEEK = pd.Timedelta(days=7)
EPOCH_MONDAY = pd.Timestamp("1970-01-05", tz="UTC")


@dataclass(frozen=True)
class ClassSummary:
    label: str
    jobs: int  # timed jobs
    median_elapsed_s: float
    basis: str  # "elapsed" | "figure:NAME"
    tagged: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "class": self.label,
            "jobs": self.jobs,
            "median_elapsed_s": self.median_elapsed_s,
            "basis": self.basis,
        }


@dataclass
class Timed:
    """The timed jobs (columns: cluster, job_id, class, nodelist, start_at, end_at, elapsed_s, slowdown), the
    timed classes, and why the other jobs are not timed (reason -> count)."""

    jobs: pd.DataFrame
    classes: list[ClassSummary]
    untimed: dict[str, int] = field(default_factory=dict)
    total: int = 0


def labels(jobs: pd.DataFrame, class_by: Sequence[str] = DEFAULT_CLASS_BY) -> pd.Series:
    """Every job's class label (a tag wins)."""
    if jobs.empty:
        return pd.Series([], dtype=object)
    cpn = (jobs["cpus"].astype("int64") // jobs["nnodes"].clip(lower=1).astype("int64")).astype(str)
    parts = []
    for name in class_by:
        if name == "cpus_per_node":
            parts.append("cpn=" + cpn)
        elif name == "nodes":
            parts.append("N=" + jobs["nnodes"].astype(str))
        elif name == "partition":
            parts.append("@" + jobs["partition"].astype(str))
        elif name == "user":
            parts.append(jobs["user_name"].astype(str) + ":")
        else:
            parts.append(jobs[CLASS_FIELDS[name]].fillna("").astype(str))
    label = parts[0]
    for p in parts[1:]:
        label = label + np.where(label.str.endswith(":"), "", " ") + p
    tags = jobs["comment"].fillna("").astype(str).str.extract(TAG, expand=False)
    return pd.Series(np.where(tags.notna(), "tailscope:" + tags.fillna(""), label), index=jobs.index)


def _week(start: pd.Series) -> np.ndarray:
    return ((start - EPOCH_MONDAY) // WEEK).to_numpy(np.int64)


def baselines(
    log_value: np.ndarray, cls: np.ndarray, week: np.ndarray, pool: np.ndarray | None = None
) -> np.ndarray:
    """Per job the median log value of its class-week's jobs in `pool` (all jobs when None), widened to three
    weeks, then the whole class, when its week has fewer than MIN_WEEK_JOBS of them."""
    pool = np.ones(len(log_value), dtype=bool) if pool is None else pool
    frame = pd.DataFrame({"c": cls, "w": week, "y": log_value})
    inside = frame[pool]
    per_week = inside.groupby(["c", "w"], sort=False)["y"].agg(["median", "size"])
    index = pd.MultiIndex.from_arrays([cls, week])
    base = per_week["median"].reindex(index).to_numpy(float).copy()
    size = per_week["size"].reindex(index).fillna(0).to_numpy(int)
    thin = np.flatnonzero(size < MIN_WEEK_JOBS)
    if len(thin):
        by_class = {c: g for c, g in inside.groupby("c", sort=False)}
        everything = frame.groupby("c", sort=False)["y"].median()
        cache: dict[tuple[Any, int], float] = {}
        for i in thin:
            c, w = cls[i], int(week[i])
            if (c, w) not in cache:
                g = by_class.get(c)
                near = g["y"][(g["w"] >= w - 1) & (g["w"] <= w + 1)] if g is not None else []
                if len(near) >= MIN_WEEK_JOBS:
                    cache[(c, w)] = float(np.median(near))
                elif g is not None and len(g) >= MIN_WEEK_JOBS:
                    cache[(c, w)] = float(g["y"].median())
                else:
                    cache[(c, w)] = float(everything[c])
            base[i] = cache[(c, w)]
    return base


def slowdowns(
    jobs: pd.DataFrame,
    class_by: Sequence[str] = DEFAULT_CLASS_BY,
    figures: dict[tuple[str, str], dict[str, dict[str, Any]]] | None = None,
) -> Timed:
    """The timed jobs with their classes and slowdowns (see the module's description). `figures`: (cluster,
    job_id) -> the epilog records' figures of merit of that job."""
    total = len(jobs)
    untimed: dict[str, int] = {}
    if jobs.empty:
        return Timed(jobs.assign(**{"class": [], "slowdown": []}), [], untimed, 0)
    label = labels(jobs, class_by)
    jobs = jobs.assign(**{"class": label.to_numpy()})
    done = (jobs["state"].astype(str) == "COMPLETED").to_numpy()
    for state, n in jobs.loc[~done, "state"].astype(str).value_counts().items():
        untimed[state.lower()] = int(n)
    ran = (
        (jobs["elapsed_s"].to_numpy(float) >= MIN_ELAPSED_S)
        & jobs["start_at"].notna().to_numpy()
        & (jobs["nodelist"].astype(str) != "").to_numpy()
    )
    if (done & ~ran).any():
        untimed["completed in under 1 s or without nodes"] = int((done & ~ran).sum())
    jobs = jobs[done & ran].copy()
    value = jobs["elapsed_s"].to_numpy(float)
    basis = np.full(len(jobs), "elapsed", dtype=object)
    sign = np.ones(len(jobs))
    if figures:
        value, basis, sign, lost = _figures(jobs, figures, value, basis, sign)
        if lost:
            untimed["without the figure of merit their class is timed by"] = lost
        keep = ~np.isnan(value)
        jobs, value, basis, sign = jobs[keep], value[keep], basis[keep], sign[keep]
    counts = jobs.groupby("class", sort=False)["class"].transform("size").to_numpy(int)
    small = counts < MIN_CLASS_JOBS
    if small.any():
        untimed[f"in classes of fewer than {MIN_CLASS_JOBS} completed jobs"] = int(small.sum())
    jobs, value, basis, sign = jobs[~small], value[~small], basis[~small], sign[~small]
    if jobs.empty:
        return Timed(jobs.assign(slowdown=[]), [], untimed, total)
    logv = np.log(value)
    cls = jobs["class"].to_numpy()
    week = _week(jobs["start_at"])
    jobs["log_value"] = sign * logv  # oriented: larger is slower
    jobs["slowdown"] = jobs["log_value"].to_numpy() - baselines(sign * logv, cls, week)
    jobs["week"] = week
    jobs["basis"] = basis
    summary = []
    for name, g in jobs.groupby("class", sort=True):
        summary.append(
            ClassSummary(
                label=str(name),
                jobs=len(g),
                median_elapsed_s=float(np.median(g["elapsed_s"].to_numpy(float))),
                basis=str(g["basis"].iloc[0]),
                tagged=str(name).startswith("tailscope:"),
            )
        )
    return Timed(jobs.reset_index(drop=True), summary, untimed, total)


def _figures(
    jobs: pd.DataFrame,
    figures: dict[tuple[str, str], dict[str, dict[str, Any]]],
    value: np.ndarray,
    basis: np.ndarray,
    sign: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Classes with a figure of merit in at least MIN_CLASS_JOBS of their jobs are timed by it."""
    keys = list(zip(jobs["cluster"].astype(str), jobs["job_id"].astype(str), strict=True))
    found = [figures.get(k, {}) for k in keys]
    value, basis, sign = value.copy(), basis.copy(), sign.copy()
    lost = 0
    cls = jobs["class"].to_numpy()
    for name in pd.unique(cls):
        idx = np.flatnonzero(cls == name)
        counts: dict[str, int] = {}
        for i in idx:
            for f in found[i]:
                counts[f] = counts.get(f, 0) + 1
        usable = sorted(f for f, n in counts.items() if n >= MIN_CLASS_JOBS)
        if not usable:
            continue
        figure = usable[0]
        for i in idx:
            got = found[i].get(figure)
            if got is None:
                value[i] = np.nan
                lost += 1
                continue
            value[i] = float(got["value"])
            basis[i] = f"figure:{figure}"
            sign[i] = -1.0 if got["higher_is_better"] else 1.0
    return value, basis, sign, lost
