"""What a cause reads: per-run evidence features from the store's rows, and the node's usual values.

Evidence follows the contract in EVIDENCE.md: `counters` rows with source "os" (pmu cpu / task / vm /
trial) and the `corunners` table. Per run the rows are reduced to one flat set of features (shares of the
probe CPUs' time, rates, counts); the *usual* value of a feature is its median over the node's normal (not
flagged) runs of the same variant, so every finding is "this run vs this node's own normal runs".
A feature whose source was not readable is absent (never zero), and a cause that needs it stays silent.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tailscope.analysis.model import KindEvidence
from tailscope.evidence.corunners import Corunner

OS_SOURCE = "os"
CPU_TIME_EVENTS = ("user_s", "nice_s", "system_s", "idle_s", "iowait_s", "irq_s", "softirq_s", "steal_s")
VM_EVENTS = (
    "thp_fault_alloc", "thp_fault_fallback", "thp_collapse_alloc", "pgmajfault", "pgscan_kswapd",
    "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct", "compact_stall", "compact_fail",
    "allocstall_normal", "allocstall_movable", "numa_hit", "numa_miss", "numa_foreign", "numa_local",
    "numa_other",
)  # fmt: skip
TASK_SUMS = (
    "run_delay_s",
    "run_s",
    "voluntary_switches",
    "involuntary_switches",
    "migrations",
    "minflt",
    "majflt",
)
RECLAIM_THREADS = ("kswapd", "kcompactd")
PROCESS_SHARE = "corunner_share:"  # + a command name: that name's share of the probe CPUs
OTHERS_NOISE_S = 0.02  # /proc/stat counts 10 ms ticks: below this per CPU a time is noise
# A preemption whose run-queue wait is this short is a detour (an interrupt-like wake-up of a timer, a
# kernel thread or a daemon), not a time slice of a CPU-bound co-runner: CFS gives those 0.75-3 ms and a
# cgroup quota holds a thread back for tens of ms. Measured on this project's VM: os-noise wake-ups cost
# the probe 17-20 us each, a duty-cycled busy loop 1.5-2 ms, a CPU quota ~40 ms (docs/causes.md).
SHORT_DETOUR_S = 100e-6
KSWAPD_BATCH = 32  # pages kswapd scans per batch (SWAP_CLUSTER_MAX): fewer is no reclaim pass
MIN_EXTRA_PREEMPT_PER_S = 200.0  # per probe thread: below this the detours are the usual tick-rate ones


@dataclass(frozen=True)
class RunContext:
    """Everything a cause may read about one flagged run."""

    run_id: str
    node: str
    probe: str
    variant: str
    trial: int
    slowdown: float  # 1 - performance ratio vs the node median (> 0 = slower)
    kind: str  # systematic | transient | unclassified (classify.py)
    kind_evidence: KindEvidence | None
    has_evidence: bool  # the run has os counters rows
    now: Mapping[str, float]  # this run's features
    usual: Mapping[str, float]  # median over the node's normal runs of the variant
    cpus: tuple[int, ...]  # the probe CPUs
    corunners: tuple[Corunner, ...]  # biggest share first
    facts: Mapping[str, Any] = field(default_factory=dict)  # the node's facts (nodes table row)
    params: Mapping[str, Any] = field(default_factory=dict)  # the probe's parameters
    page_policy: str | None = None  # runs.page_policy: what the run's pages were (the default is stored too)

    def value(self, name: str) -> float | None:
        v = self.now.get(name)
        return None if v is None or not math.isfinite(v) else float(v)

    def typical(self, name: str) -> float | None:
        v = self.usual.get(name)
        return None if v is None or not math.isfinite(v) else float(v)

    def excess(self, name: str) -> float | None:
        """This run's value minus the node's usual one (the value itself when no usual one exists)."""
        now = self.value(name)
        if now is None:
            return None
        usual = self.typical(name)
        return now - (usual if usual is not None else 0.0)

    def drop(self, name: str) -> float | None:
        """How far below the node's usual value this run's was, as a fraction of the usual one (1 - now /
        usual; negative when above); None without both."""
        now, usual = self.value(name), self.typical(name)
        return None if now is None or usual is None or usual <= 0 else 1.0 - now / usual

    def short_of_memory(self) -> bool:
        """kswapd reclaimed beyond the usual in this trial: free memory fell below the low watermark, a
        shortage of memory. Failed huge-page allocations alone do not wake kswapd under THP's default defrag
        ('madvise'): recorded here under tsinject thp-fragment, 148 fallbacks and 23,000 pages of direct
        reclaim per trial with no kswapd scan; under memthrash (the node paging) 130,000-190,000 kswapd
        scans and 7,000-10,000 major faults per trial. The one test memory-pressure and thp-fallback share
        for whose the trial's stalls and direct reclaim are."""
        return (self.excess("pgscan_kswapd") or 0.0) >= KSWAPD_BATCH

    def cpu_text(self) -> str:
        return cpu_list_text(self.cpus)

    def preemptions(self) -> Preemptions | None:
        """The probe threads' extra preemptions over the node's usual, and the run-queue wait they cost."""
        rate, share = self.excess("preempt_per_s"), self.excess("run_delay_share")
        if rate is None or share is None or rate <= 0 or share <= 0:
            return None
        return Preemptions(extra_per_s=rate, detour_s=share / rate, share=share)


@dataclass(frozen=True)
class Preemptions:
    """Involuntary switches of the probe threads beyond the usual, per thread-second, and their cost."""

    extra_per_s: float
    detour_s: float  # mean extra run-queue wait per extra preemption
    share: float  # extra run-queue wait, as a share of the threads' wall time

    @property
    def short(self) -> bool:
        """Many short detours: the OS-noise pattern (FWQ's spectrum), not a co-runner's time slices."""
        return self.detour_s <= SHORT_DETOUR_S and self.extra_per_s >= MIN_EXTRA_PREEMPT_PER_S


def cpu_list_text(cpus: Sequence[int]) -> str:
    """'CPU 0', 'CPUs 0-3', 'CPUs 0,2,5'."""
    if not cpus:
        return "the probe CPUs"
    if len(cpus) == 1:
        return f"CPU {cpus[0]}"
    return f"CPUs {ranges_text(cpus, sep=',')}"


def ranges_text(numbers: Sequence[int], sep: str = ", ") -> str:
    """13, 14, 15, 21 -> '13-15, 21'."""
    values = sorted(set(int(n) for n in numbers))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return sep.join(parts)


def run_features(counters: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, tuple[int, ...]]]:
    """Per run_id: one column per feature, and the probe CPUs of each run.

    `counters` has the store's columns run_id, source, pmu, unit, event, value; only source "os" is read.
    """
    if counters.empty:
        return pd.DataFrame(), {}
    c = counters.loc[counters["source"] == OS_SOURCE, ["run_id", "pmu", "unit", "event", "value"]]
    if c.empty:
        return pd.DataFrame(), {}
    c = c.assign(value=c["value"].astype(float))
    cpu = c.loc[c["pmu"] == "cpu"]
    cpu = cpu.assign(unit=pd.to_numeric(cpu["unit"], errors="coerce"))
    cpus = {
        str(run): tuple(sorted({int(u) for u in g["unit"].dropna()}))
        for run, g in cpu.groupby("run_id", sort=False)
    }
    per_cpu = cpu.pivot_table(index=["run_id", "unit"], columns="event", values="value", aggfunc="sum")
    out = pd.DataFrame(index=pd.Index(sorted(c["run_id"].astype(str).unique()), name="run_id"))
    if not per_cpu.empty:
        sums = per_cpu.groupby(level="run_id").sum(min_count=1)
        out["ncpu"] = per_cpu.groupby(level="run_id").size()
        for event in (*CPU_TIME_EVENTS, "others_s", "interrupts", "local_timer_interrupts", "throttle_count"):
            if event in sums.columns:
                out[event] = sums[event]
        for event, how in (
            ("effective_mhz", "median"),
            ("available_fraction", "min"),
            ("cpufreq_khz", "mean"),
        ):
            if event in per_cpu.columns:
                out[event] = per_cpu[event].groupby(level="run_id").agg(how)
    task = c.loc[c["pmu"] == "task"]
    if not task.empty:
        tsum = task.pivot_table(index="run_id", columns="event", values="value", aggfunc="sum")
        out["threads"] = task.groupby("run_id")["unit"].nunique()
        for event in TASK_SUMS:
            if event in tsum.columns:
                out[f"task_{event}"] = tsum[event]
    vm = c.loc[c["pmu"] == "vm"]
    if not vm.empty:
        vsum = vm.pivot_table(index="run_id", columns="event", values="value", aggfunc="sum")
        for event in VM_EVENTS:
            if event in vsum.columns:
                out[event] = vsum[event]
    trial = c.loc[(c["pmu"] == "trial") & (c["event"] == "wall_s")]
    if not trial.empty:
        out["wall_s"] = trial.groupby("run_id")["value"].max()
    _derive(out)
    return out, cpus


# the shares of the probe CPUs' time, and the per-CPU times (evidence rows) each is the sum of
SHARES = (
    ("others_share", ("others_s",)),
    ("steal_share", ("steal_s",)),
    ("irq_share", ("irq_s", "softirq_s")),
)


def cpu_share(seconds: Any, ncpu: Any, cpu_time: Any) -> Any:
    """A time as a share of the probe CPUs' time (scalars or Series alike): /proc/stat's 10 ms ticks make a
    time below OTHERS_NOISE_S per probe CPU noise, counted as 0 (EVIDENCE.md)."""
    noise = np.asarray(seconds, dtype=float) < OTHERS_NOISE_S * np.asarray(ncpu, dtype=float)
    if isinstance(seconds, pd.Series):
        return seconds.where(seconds.isna() | ~noise, 0.0) / cpu_time
    return (0.0 if noise else seconds) / cpu_time


def trial_busy_share(rows: Iterable[Mapping[str, Any]]) -> float | None:
    """One trial's others' share plus steal share of its probe CPUs from its evidence rows (the store's
    counters columns, dicts), as run_features and _derive give them for a frame, without pandas: `check`
    asks it after every trial (campaign/stopping.py). None without the rows it needs."""
    cpus: set[Any] = set()
    sums: dict[str, float] = defaultdict(float)
    wall: float | None = None
    for r in rows:
        if r.get("source") != OS_SOURCE or r.get("value") is None:
            continue
        if r.get("pmu") == "cpu" and r.get("unit") is not None:
            cpus.add(str(r["unit"]))
            sums[str(r["event"])] += float(r["value"])
        elif r.get("pmu") == "trial" and r.get("event") == "wall_s":
            wall = max(wall or float(r["value"]), float(r["value"]))
    ncpu = len(cpus)
    if wall is None:
        present = [e for e in CPU_TIME_EVENTS if e in sums]
        wall = sum(sums[e] for e in present) / ncpu if present and ncpu else None
    if not ncpu or not wall or wall <= 0:
        return None
    shares = [cpu_share(sums[p], ncpu, wall * ncpu) for name, (p,) in SHARES[:2] if p in sums]
    return float(sum(shares)) if shares else None


def _derive(out: pd.DataFrame) -> None:
    """Shares of the probe CPUs' time and rates, from the sums (in place)."""
    if "wall_s" not in out.columns:
        present = [e for e in CPU_TIME_EVENTS if e in out.columns]
        if present and "ncpu" in out.columns:  # /proc/stat jiffies of all states add up to wall time per CPU
            out["wall_s"] = out[present].sum(axis=1, min_count=1) / out["ncpu"]
    if "wall_s" not in out.columns or "ncpu" not in out.columns:
        return
    cpu_time = (out["wall_s"] * out["ncpu"]).where(lambda x: x > 0)
    for share, parts in SHARES:
        present = [p for p in parts if p in out.columns]
        if present:
            out[share] = cpu_share(out[present].sum(axis=1, min_count=1), out["ncpu"], cpu_time)
    for rate, event in (("interrupts_per_s", "interrupts"), ("timer_per_s", "local_timer_interrupts")):
        if event in out.columns:
            out[rate] = out[event] / cpu_time
    if "task_run_delay_s" in out.columns and "threads" in out.columns:
        thread_s = (out["wall_s"] * out["threads"]).where(lambda x: x > 0)
        out["run_delay_share"] = out["task_run_delay_s"] / thread_s
        if "task_involuntary_switches" in out.columns:
            out["preempt_per_s"] = out["task_involuntary_switches"] / thread_s
    if "available_fraction" in out.columns:
        out["lost_share"] = 1.0 - out["available_fraction"]
    stalls = [e for e in ("allocstall_normal", "allocstall_movable") if e in out.columns]
    if stalls:
        out["allocstall"] = out[stalls].sum(axis=1, min_count=1)
    numa = [e for e in ("numa_hit", "numa_miss", "numa_other") if e in out.columns]
    if "numa_hit" in out.columns and len(numa) > 1:
        remote = out[[e for e in numa if e != "numa_hit"]].sum(axis=1)
        total = out[numa].sum(axis=1).where(lambda x: x > 0)
        out["numa_remote_fraction"] = remote / total


def corunner_lists(corunners: pd.DataFrame) -> dict[str, tuple[Corunner, ...]]:
    """Per run_id: its co-runners, biggest share first."""
    if corunners is None or corunners.empty:
        return {}
    out: dict[str, tuple[Corunner, ...]] = {}
    frame = corunners.sort_values(["run_id", "share", "pid"], ascending=[True, False, True], kind="stable")
    has_cmd = "cmdline" in frame.columns
    for run_id, g in frame.groupby("run_id", sort=False):
        out[str(run_id)] = tuple(
            Corunner(
                pid=int(r["pid"]),
                comm=str(r["comm"]),
                cmdline=(str(r["cmdline"]) if has_cmd and isinstance(r["cmdline"], str) else None),
                cpu_s=float(r["cpu_s"]),
                share=float(r["share"]),
            )
            for _, r in g.iterrows()
        )
    return out


def add_corunner_share(
    features: pd.DataFrame,
    corunners: Mapping[str, Sequence[Corunner]],
    named_in: Iterable[str] = (),
) -> pd.DataFrame:
    """Add `corunner_share`: the share of the probe CPUs the named co-runners (not kernel threads) took, from
    the process scan (finer than /proc/stat's ticks on short trials); 0 for runs with evidence but none.
    For every command name of a co-runner of the runs `named_in` (the flagged ones), also add that name's
    share (`process_feature`: all its processes, 0 where it did not run), so that a process's usual share
    is a feature's usual like any other. By name, not pid: a co-runner restarted between trials, a shell
    loop's children, stress-ng's workers get a new pid every time and are still the same "who"."""
    if features.empty:
        return features
    shares = {r: sum(c.share for c in cs if not c.kernel_thread) for r, cs in corunners.items()}
    out = features.copy()
    out["corunner_share"] = pd.Series(shares, dtype=float).reindex(out.index).fillna(0.0)
    names = {c.comm for r in named_in for c in corunners.get(r, ()) if not c.kernel_thread}
    if names:
        by_name: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for r, cs in corunners.items():
            for c in cs:
                if c.comm in names:
                    by_name[process_feature(c.comm)][r] += c.share
        columns = pd.DataFrame(by_name, dtype=float).reindex(out.index).fillna(0.0)
        out = pd.concat([out, columns], axis=1)
    return out


def process_feature(comm: str) -> str:
    """The feature of one command name's share of the probe CPUs (add_corunner_share)."""
    return f"{PROCESS_SHARE}{comm}"


def usual_features(features: pd.DataFrame, normal_ids: Sequence[str]) -> dict[str, float]:
    """Median of every feature over the given normal runs (features without values are left out)."""
    rows = features.reindex([r for r in normal_ids if r in features.index])
    if rows.empty:
        return {}
    med = rows.median(numeric_only=True)
    return {str(k): float(v) for k, v in med.items() if np.isfinite(v)}


def usual_features_by_group(
    features: pd.DataFrame, normal_ids: Sequence[str], group: np.ndarray
) -> dict[int, dict[str, float]]:
    """`usual_features` of many groups in one group-by: group number -> median of every feature over that
    group's normal runs (`normal_ids[i]` belongs to `group[i]`); groups without any value are left out."""
    rows = features.reindex(list(normal_ids))  # runs without features: all NaN, skipped by the median
    med = rows.select_dtypes("number").groupby(np.asarray(group), sort=False).median()
    out: dict[int, dict[str, float]] = {}
    columns = [str(c) for c in med.columns]
    for g, values in zip(med.index, med.to_numpy(dtype=float), strict=True):
        usual = {k: float(v) for k, v in zip(columns, values, strict=True) if np.isfinite(v)}
        if usual:
            out[int(g)] = usual
    return out


def features_of(features: pd.DataFrame, run_id: str) -> dict[str, float]:
    if features.empty or run_id not in features.index:
        return {}
    row = features.loc[run_id]
    return {str(k): float(v) for k, v in row.items() if pd.notna(v)}
