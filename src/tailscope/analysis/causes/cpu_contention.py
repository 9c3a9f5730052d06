"""cpu-contention: other processes (or the host) ran on the probe's CPUs and took their time.

Reads the share of the probe CPUs' time used by other processes (others_s, /proc/stat steal), the probe
threads' run-queue wait (schedstat), and the named co-runners. Kernel threads are left to os-noise.
Explained slowdown = the largest excess over the node's usual of: others' share (less kernel threads),
the named co-runners' share (the process scan: finer than /proc/stat's 10 ms ticks on short trials),
steal, run-queue wait. The add-chain loop's lost time (available_fraction) is a ~0.6 ms sample taken after
the trial, so it is reported as evidence but never makes the finding on its own.
"""

from __future__ import annotations

from tailscope.analysis.causes.base import explained_score, finding, vs_usual
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct

NAME = "cpu-contention"
READS = ("others_share", "corunner_share", "steal_share", "run_delay_share", "lost_share", "corunners")
MIN_EXCESS = 0.02  # 2% of the probe CPUs' time
MITIGATION = (
    "rerun when the node is idle, or reserve the probe's CPUs (Slurm --exclusive, a cpuset, isolcpus); "
    "find out what started the co-runner"
)


def assess(ctx: RunContext) -> CauseFinding | None:
    kthreads = sum(c.share for c in ctx.corunners if c.kernel_thread)
    candidates = {
        "others_share": (ctx.excess("others_share") or 0.0) - kthreads,
        "corunner_share": ctx.excess("corunner_share") or 0.0,
        "steal_share": ctx.excess("steal_share") or 0.0,
        "run_delay_share": ctx.excess("run_delay_share") or 0.0,
    }
    key, explained = max(candidates.items(), key=lambda kv: kv[1])
    jobs = [c for c in ctx.corunners if not c.kernel_thread]
    if explained < MIN_EXCESS:
        return None
    where = ctx.cpu_text()
    if jobs:
        top = jobs[0]
        sentence = f"{top.comm} (pid {top.pid}) took {pct(top.share)} of {where} during the trial"
        if len(jobs) > 1:
            sentence += "; also " + ", ".join(f"{c.comm} (pid {c.pid}) {pct(c.share)}" for c in jobs[1:3])
    else:
        sentence = f"other activity took the probe's {where}"
    parts = []
    for name, words in (
        ("others_share", "other processes used (/proc/stat)"),
        ("steal_share", "the hypervisor stole"),
        ("run_delay_share", "the probe threads waited on the run queue"),
        ("lost_share", "the timing loop lost"),
    ):
        value = ctx.value(name)
        if value is not None and (value > 0 or name == key):  # zeros (or below tick resolution) say nothing
            parts.append(f"{words} {vs_usual(value, ctx.typical(name))}")
    if parts:
        sentence += " (" + "; ".join(parts) + ")"
    if key == "run_delay_share" and not jobs and (ctx.excess("others_share") or 0.0) < MIN_EXCESS:
        sentence += "; no process of this OS took the time, so the host did (a guest may not count steal)"
    score = explained_score(explained, ctx.slowdown)
    evidence = {
        "explained": explained,
        "by": key,
        "cpus": list(ctx.cpus),
        **{f"{k}": ctx.value(k) for k in (*candidates, "lost_share")},
        **{f"usual_{k}": ctx.typical(k) for k in (*candidates, "lost_share")},
        "corunners": [{"pid": c.pid, "comm": c.comm, "share": round(c.share, 4)} for c in jobs[:5]],
    }
    return finding(NAME, ctx, score, sentence, MITIGATION, evidence)
