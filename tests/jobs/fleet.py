"""A synthetic production fleet for `tailscope jobs`: nodes, job classes repeating over weeks on contiguous
node ranges (as a scheduler hands them out), a few slow nodes, per-class noise; written as the jobs table's
rows or as a `sacct -P` dump. Shared by tests/jobs and bench/bench_jobs.py.

A job's elapsed time = its class's base x the class's weekly drift x exp(noise) x (1 + the largest effect
among its nodes): a bulk-synchronous job runs at its slowest node's pace.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

START = dt.datetime(2026, 9, 7, tzinfo=dt.UTC)  # a Monday
SIZES = np.array([1, 2, 4, 8, 16, 32, 64])
SIZE_WEIGHTS = np.array([0.30, 0.18, 0.16, 0.13, 0.10, 0.08, 0.05])
SACCT_HEADER = (
    "JobID|JobName|User|Account|Partition|NodeList|NNodes|AllocCPUS|ElapsedRaw|Submit|Start|End|State|"
    "ExitCode|Comment|Cluster"
)


@dataclass
class Fleet:
    nodes: list[str]
    slow: dict[str, float]  # node -> true effect (0.05: 5% slower)
    rows: list[dict]  # jobs-table rows (without source / added_at)
    partners: dict[str, set[str]] = field(default_factory=dict)  # slow node -> its most frequent partners
    co: dict[str, dict[str, int]] = field(default_factory=dict)


def node_name(i: int, width: int) -> str:
    return f"c{i:0{width}d}"


def hostlist_of(first: int, count: int, width: int) -> str:
    if count == 1:
        return node_name(first, width)
    return f"c[{first:0{width}d}-{first + count - 1:0{width}d}]"


def make_fleet(
    *,
    nodes: int = 60,
    jobs: int = 3000,
    days: int = 28,
    classes: int = 12,
    slow: dict[int, float] | None = None,
    max_size: int = 64,
    noise: tuple[float, float] = (0.02, 0.10),
    drift_share: float = 0.3,
    failed_share: float = 0.05,
    seed: int = 1,
) -> Fleet:
    rng = np.random.default_rng(seed)
    width = len(str(nodes))
    names = [node_name(i + 1, width) for i in range(nodes)]
    slow = slow if slow is not None else {}
    effect = np.zeros(nodes)
    for i, e in slow.items():
        effect[i] = e
    sizes = SIZES[min(max_size, nodes) >= SIZES]
    weights = SIZE_WEIGHTS[: len(sizes)] / SIZE_WEIGHTS[: len(sizes)].sum()
    cls_size = rng.choice(sizes, size=classes, p=weights)
    cls_base = np.exp(rng.uniform(np.log(300), np.log(20000), size=classes))
    cls_sigma = rng.uniform(noise[0], noise[1], size=classes)
    cls_drift = np.where(rng.random(classes) < drift_share, rng.uniform(-0.05, 0.08, size=classes), 0.0)
    cls_cpn = rng.choice([16, 32, 64, 128], size=classes)
    users = [f"u{int(u):03d}" for u in rng.integers(0, max(2, classes // 3), size=classes)]
    popularity = rng.dirichlet(np.ones(classes) * 2.0)
    cls = rng.choice(classes, size=jobs, p=popularity)
    start_s = np.sort(rng.uniform(0, days * 86400.0, size=jobs))
    week = (start_s // (7 * 86400)).astype(int)
    k = cls_size[cls]
    first = (rng.random(jobs) * (nodes - k + 1)).astype(int)
    # the slowest node of each job's contiguous range
    worst = np.array([effect[f : f + kk].max() for f, kk in zip(first, k, strict=True)])
    elapsed = (
        cls_base[cls]
        * np.exp(cls_drift[cls] * week)
        * np.exp(rng.normal(0.0, cls_sigma[cls]))
        * (1.0 + worst)
    )
    elapsed = np.maximum(np.round(elapsed), 2.0)
    state = np.where(
        rng.random(jobs) < failed_share,
        rng.choice(["FAILED", "CANCELLED", "TIMEOUT"], size=jobs),
        "COMPLETED",
    )
    rows = []
    for j in range(jobs):
        c = int(cls[j])
        begin = START + dt.timedelta(seconds=float(start_s[j]))
        end = begin + dt.timedelta(seconds=float(elapsed[j]))
        rows.append(
            {
                "cluster": "synth",
                "job_id": str(1000 + j),
                "name": f"app{c:03d}",
                "user_name": users[c],
                "account": "acct",
                "partition": "compute",
                "nodelist": hostlist_of(int(first[j]) + 1, int(k[j]), width),
                "nnodes": int(k[j]),
                "cpus": int(k[j] * cls_cpn[c]),
                "submit_at": begin - dt.timedelta(seconds=30),
                "start_at": begin,
                "end_at": end,
                "elapsed_s": float(elapsed[j]),
                "state": str(state[j]),
                "exit_code": "0:0" if state[j] == "COMPLETED" else "1:0",
                "comment": None,
            }
        )
    fleet = Fleet(names, {names[i]: e for i, e in slow.items()}, rows)
    fleet.co = co_occurrence(first, k, [i for i in slow], names)
    for s_name, counts in fleet.co.items():
        total = counts.get(s_name, 0)
        fleet.partners[s_name] = {n for n, c in counts.items() if n != s_name and c >= 0.25 * total}
    return fleet


def co_occurrence(
    first: np.ndarray, k: np.ndarray, slow: list[int], names: list[str]
) -> dict[str, dict[str, int]]:
    """For each slow node, how many jobs each node shared with it (its own count under its own name)."""
    out = {}
    for s in slow:
        mask = (first <= s) & (first + k > s)
        counts: dict[str, int] = {}
        for f, kk in zip(first[mask], k[mask], strict=True):
            for i in range(f, f + kk):
                counts[names[i]] = counts.get(names[i], 0) + 1
        out[names[s]] = counts
    return out


def _time(value: dt.datetime | None) -> str:
    return "Unknown" if value is None else value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def write_sacct(rows: list[dict], path: Path) -> Path:
    """The rows as `TZ=UTC sacct -P -X -o <SACCT_HEADER fields>` prints them."""
    lines = [SACCT_HEADER]
    for r in rows:
        lines.append(
            "|".join(
                [
                    r["job_id"],
                    r["name"],
                    r["user_name"],
                    r["account"] or "",
                    r["partition"],
                    r["nodelist"] or "None assigned",
                    str(r["nnodes"]),
                    str(r["cpus"]),
                    str(int(r["elapsed_s"])),
                    _time(r["submit_at"]),
                    _time(r["start_at"]),
                    _time(r["end_at"]),
                    r["state"],
                    r["exit_code"] or "",
                    r["comment"] or "",
                    r["cluster"],
                ]
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path
