"""Recorded-format evidence for the cause catalogue: rows as the `evidence` branch stores them (EVIDENCE.md).

Per trial: `counters` rows with source "os" (pmu cpu / task / vm / trial) and `corunners` rows. The numbers
are shaped like what /proc/stat, /proc/interrupts, /proc/PID/task/TID/schedstat and /proc/vmstat gave on
this 2-vCPU KVM guest (clock 3694 MHz, a few hundred interrupts per second per CPU, steal 0), so the
tests do not depend on an idle machine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tailscope.store.schema import ITERATIONS, RUNS

WALL_S = 0.5
MHZ = 3694.0
AMD_ZEN4 = {
    "cpu_vendor": "AuthenticAMD",
    "cpu_family": 25,
    "cpu_model": 17,
    "cpu_model_name": "AMD EPYC 9654",
}
INTEL_SKX = {
    "cpu_vendor": "GenuineIntel", "cpu_family": 6, "cpu_model": 85,
    "cpu_model_name": "Intel(R) Xeon(R) Platinum 8160 CPU @ 2.10GHz",
}  # fmt: skip


START = pd.Timestamp("2026-11-02T10:00:00", tz="UTC")


def run_row(node: str, trial: int, probe: str, params: str, page_policy: str = "thp") -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(RUNS.names)
    row.update(
        run_id=f"{probe}-x:{node}:{trial}", campaign="c1", node=node, probe=probe, variant=f"{probe}-x",
        params=params, trial=trial, started_at=START + pd.Timedelta(minutes=trial), metric="bandwidth",
        unit="GB/s", higher_is_better=True, status="ok", source="probe", task="t1", page_policy=page_policy,
    )  # fmt: skip
    return row


def team_iterations(run_id: str, values: list[float], warmup: float) -> pd.DataFrame:
    vals = [warmup, *values]
    return pd.DataFrame(
        {
            "run_id": run_id,
            "iteration": np.arange(len(vals), dtype="int32"),
            "thread": pd.array([None] * len(vals), dtype="Int32"),
            "kernel": None,
            "cpu": pd.array([None] * len(vals), dtype="Int32"),
            "warmup": [i == 0 for i in range(len(vals))],
            "seconds": 1.0 / np.asarray(vals, dtype=float),
            "value": np.asarray(vals, dtype=float),
        }
    )


@dataclass
class Trial:
    """What happened during one trial; defaults are a quiet trial."""

    slowdown: float = 0.0  # the run's value is this much lower (higher-is-better)
    iteration_slow: Mapping[int, float] = field(default_factory=dict)  # iteration -> its own slowdown
    others: float = 0.004  # share of the probe CPUs used by other processes
    corunners: tuple[tuple[int, str, float], ...] = ()  # (pid, comm, share)
    irq: float = 0.001  # irq + softirq share
    interrupts_per_s: float = 250.0
    mhz: float = MHZ
    vm: Mapping[str, float] = field(default_factory=dict)  # /proc/vmstat deltas beyond the quiet ones
    run_delay: float | None = None  # share of wall time the probe thread waited (default: = others)
    preempt_per_s: float | None = None  # involuntary switches per second (default: 4 + 800 x run_delay,
    # i.e. 1.25 ms of wait per preemption: a co-runner's time slices)
    steal: float = 0.0  # share of the probe CPUs the hypervisor stole


QUIET_VM = {"thp_fault_alloc": 32.0, "thp_fault_fallback": 0.0, "pgmajfault": 0.0, "pgscan_direct": 0.0,
            "allocstall_normal": 0.0, "compact_stall": 0.0, "numa_hit": 20000.0, "numa_miss": 0.0,
            "numa_other": 0.0}  # fmt: skip


def evidence_rows(run_id: str, t: Trial, cpus: Iterable[int] = (0,)) -> tuple[list[dict], list[dict]]:
    """counters rows (source os) and corunners rows of one trial, following EVIDENCE.md."""
    cpus = list(cpus)
    rows: list[dict[str, Any]] = []

    def add(pmu: str, unit: int | None, event: str, value: float) -> None:
        rows.append(
            {"run_id": run_id, "source": "os", "pmu": pmu, "unit": unit, "event": event, "value": value}
        )

    for cpu in cpus:
        others = t.others * WALL_S
        irq = t.irq * WALL_S
        user = WALL_S - others - irq
        add("cpu", cpu, "user_s", user + others * 0.9)
        add("cpu", cpu, "system_s", others * 0.1)
        add("cpu", cpu, "idle_s", 0.0)
        add("cpu", cpu, "irq_s", irq / 2)
        add("cpu", cpu, "softirq_s", irq / 2)
        add("cpu", cpu, "steal_s", t.steal * WALL_S)
        add("cpu", cpu, "others_s", others)
        add("cpu", cpu, "interrupts", t.interrupts_per_s * WALL_S)
        add("cpu", cpu, "local_timer_interrupts", 250.0 * WALL_S)
        add("cpu", cpu, "effective_mhz", t.mhz)
        add("cpu", cpu, "available_fraction", 1.0 - t.others)
    delay = t.others if t.run_delay is None else t.run_delay
    add("task", 0, "run_delay_s", delay * WALL_S)
    add("task", 0, "run_s", (1.0 - delay) * WALL_S)
    switches = 2.0 + 400.0 * delay if t.preempt_per_s is None else t.preempt_per_s * WALL_S
    add("task", 0, "involuntary_switches", switches)
    add("task", 0, "majflt", 0.0)
    for event, value in {**QUIET_VM, **t.vm}.items():
        add("vm", None, event, value)
    add("trial", None, "wall_s", WALL_S)
    co = [
        {"run_id": run_id, "pid": pid, "comm": comm, "cmdline": comm, "cpu_s": share * WALL_S * len(cpus),
         "share": share}
        for pid, comm, share in t.corunners
    ]  # fmt: skip
    return rows, co


@dataclass
class Ensemble:
    runs: pd.DataFrame
    iterations: pd.DataFrame
    counters: pd.DataFrame
    corunners: pd.DataFrame
    nodes: pd.DataFrame


def ensemble(
    trials: Mapping[int, Trial] | None = None,
    *,
    n: int = 40,
    node: str = "n1",
    probe: str = "l2sum",
    level: float = 100.0,
    noise: float = 0.002,
    iterations: int = 20,
    facts: Mapping[str, Any] = AMD_ZEN4,
    with_evidence: bool = True,
    seed: int = 14,
    params: str = '{"sums": 1000}',
    page_policy: str = "thp",  # runs.page_policy, as the runner stores it (the default thp too)
    quiet_vm: Mapping[str, float] | None = None,
) -> Ensemble:
    """`n` trials of one probe on one node; trials not in `trials` are quiet. Values: the mean of the
    iterations (each iteration `level` x (1 - its slowdown) x noise)."""
    rng = np.random.default_rng(seed)
    trials = trials or {}
    runs, parts, counters, corunners = [], [], [], []
    for k in range(1, n + 1):
        t = trials.get(k, Trial())
        row = run_row(node, k, probe, params, page_policy)
        if quiet_vm is not None and k not in trials:
            t = Trial(vm=dict(quiet_vm))
        iters = []
        for i in range(iterations):
            slow = t.iteration_slow.get(i, t.slowdown)
            iters.append(level * (1.0 - slow) * (1.0 + rng.normal(0.0, noise)))
        row["value"] = float(np.mean(iters))
        runs.append(row)
        parts.append(team_iterations(row["run_id"], iters, warmup=level * 0.5))
        if with_evidence:
            c, co = evidence_rows(row["run_id"], t)
            counters += c
            corunners += co
    nodes = pd.DataFrame([{"node": node, **facts}])
    frame = pd.DataFrame(runs, columns=RUNS.names)
    frame["trial"] = frame["trial"].astype("int32")
    iters = pd.concat(parts, ignore_index=True)
    for name in ITERATIONS.names:
        if name not in iters.columns:
            iters[name] = None
    return Ensemble(
        runs=frame,
        iterations=iters[ITERATIONS.names],
        counters=pd.DataFrame(counters, columns=["run_id", "source", "pmu", "unit", "event", "value"]),
        corunners=pd.DataFrame(corunners, columns=["run_id", "pid", "comm", "cmdline", "cpu_s", "share"]),
        nodes=nodes,
    )


def analyze_ensemble(e: Ensemble, **settings: Any):
    from tailscope.analysis.model import Settings
    from tailscope.analysis.summary import analyze

    return analyze(
        e.runs, e.iterations, Settings(**settings), "c1",
        counters=e.counters, corunners=e.corunners, nodes=e.nodes,
    )  # fmt: skip
