"""cpu-contention: other processes (or the host) ran on the probe's CPUs and took their time.

Reads the share of the probe CPUs' time used by other processes (others_s, /proc/stat steal), the probe
threads' run-queue wait (schedstat), and the named co-runners. Kernel threads are left to os-noise.
Explained slowdown = the largest excess over the node's usual of: others' share (less kernel threads),
the named co-runners' share (the process scan: finer than /proc/stat's 10 ms ticks on short trials),
steal, run-queue wait. Run-queue wait that came as many short detours (context.Preemptions.short) is
os-noise's, and so is the CPU time of whoever made them: it is taken off every candidate. The add-chain
loop's lost time (available_fraction) is a ~0.6 ms sample taken after the trial, so it is reported as
evidence but never makes the finding on its own. The sentence leads with the evidence that made the finding
and names co-runners by what they took beyond their own usual share on this node (their command name's
median over the normal trials, 0 for a newcomer): only those at least MIN_EXCESS above it, the most unusual
first. A process that takes as much in every trial (a monitoring daemon, another user's job) is the node's
background, in the usual others_share too: it is not what made this trial slow, and naming it first sent
the reader to the wrong process (seen: python and sh named before a stress-ng started during the window).
"""

from __future__ import annotations

from collections import defaultdict

from tailscope.analysis.causes.base import explained_score, finding, vs_usual
from tailscope.analysis.causes.context import OTHERS_NOISE_S, RunContext, process_feature
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct
from tailscope.evidence.corunners import Corunner

NAME = "cpu-contention"
READS = ("others_share", "corunner_share", "steal_share", "run_delay_share", "lost_share", "corunners")
MIN_EXCESS = 0.02  # 2% of the probe CPUs' time
MITIGATION = (
    "rerun when the node is idle, or reserve the probe's CPUs (Slurm --exclusive, a cpuset, isolcpus); "
    "find out what started the co-runner"
)


WORDS = {
    "others_share": "other processes used (/proc/stat)",
    "corunner_share": "the named processes took",
    "steal_share": "the hypervisor stole",
    "run_delay_share": "the probe threads waited on the run queue",
    "lost_share": "the timing loop lost",
}


def assess(ctx: RunContext) -> CauseFinding | None:
    kthreads = sum(c.share for c in ctx.corunners if c.kernel_thread)
    detours = ctx.preemptions()
    noise = detours.share if detours is not None and detours.short else 0.0
    corunners = (ctx.excess("corunner_share") or 0.0) - noise
    others, wall = ctx.excess("others_share"), ctx.value("wall_s")
    if others is not None and wall:
        # The process scan gives a process's CPU *rate* since its last reading, which can span time before
        # the trial (seen: an injector's minute of set-up named at 45% of a trial in which /proc/stat saw
        # 6% more than usual). /proc/stat counts the trial itself, to its 10 ms ticks: the named share may
        # exceed it by that resolution, not more.
        corunners = min(corunners, others + OTHERS_NOISE_S / wall)
    candidates = {
        "others_share": (ctx.excess("others_share") or 0.0) - kthreads - noise,
        "corunner_share": corunners,
        "steal_share": ctx.excess("steal_share") or 0.0,
        "run_delay_share": (ctx.excess("run_delay_share") or 0.0) - noise,
    }
    key, explained = max(candidates.items(), key=lambda kv: kv[1])
    if explained < MIN_EXCESS:
        return None
    jobs = unusual_corunners(ctx)
    where = ctx.cpu_text()
    if key == "steal_share":
        sentence = f"the hypervisor stole {vs_usual(ctx.value(key), ctx.typical(key))} of {where}"
    elif jobs:
        top = jobs[0]
        sentence = f"{top.comm} (pid {top.pid}) took {_took(ctx, top)} of {where} during the trial"
        if len(jobs) > 1:
            sentence += "; also " + ", ".join(f"{c.comm} (pid {c.pid}) {_took(ctx, c)}" for c in jobs[1:3])
    elif key == "run_delay_share" and (ctx.excess("others_share") or 0.0) < MIN_EXCESS:
        sentence = (
            f"the probe threads waited on the run queue {vs_usual(ctx.value(key), ctx.typical(key))} of the "
            "time while no process of this OS took their CPUs: a CPU quota on the probe's cgroup (cpu.max) "
            "or the host held them back"
        )
    else:
        sentence = f"other activity took the probe's {where}"
    if key == "steal_share" and jobs:
        sentence += "; also " + ", ".join(f"{c.comm} (pid {c.pid}) {_took(ctx, c)}" for c in jobs[:2])
    parts = []
    for name in ("others_share", "steal_share", "run_delay_share", "lost_share"):
        value = ctx.value(name)
        said = name == key and (key == "steal_share" or sentence.startswith("the probe threads waited"))
        if value is not None and value > 0 and not said:  # zeros (or below tick resolution) say nothing
            parts.append(f"{WORDS[name]} {vs_usual(value, ctx.typical(name))}")
    if noise > 0:
        parts.append(f"less {pct(noise)} of short detours counted as os-noise")
    if parts:
        sentence += " (" + "; ".join(parts) + ")"
    score = explained_score(explained, ctx.slowdown)
    evidence = {
        "explained": explained,
        "by": key,
        "short_detour_share": noise or None,
        "cpus": list(ctx.cpus),
        **{f"{k}": ctx.value(k) for k in (*candidates, "lost_share")},
        **{f"usual_{k}": ctx.typical(k) for k in (*candidates, "lost_share")},
        "corunners": [
            {"pid": c.pid, "comm": c.comm, "share": round(c.share, 4)}
            | ({"usual": round(u, 4)} if (u := _usual(ctx, c.comm)) else {})
            for c in jobs[:5]
        ],
    }
    return finding(NAME, ctx, score, sentence, MITIGATION, evidence)


def unusual_corunners(ctx: RunContext) -> list[Corunner]:
    """The run's co-runners (not kernel threads) that took at least MIN_EXCESS of the probe CPUs, and whose
    command name took at least MIN_EXCESS more than its usual share on this node: the most unusual name
    first (its processes biggest first)."""
    took: dict[str, float] = defaultdict(float)  # per name, all its processes
    for c in ctx.corunners:
        if not c.kernel_thread:
            took[c.comm] += c.share
    excess = {comm: share - _usual(ctx, comm) for comm, share in took.items()}
    jobs = [c for c in ctx.corunners if c.share >= MIN_EXCESS and excess.get(c.comm, 0.0) >= MIN_EXCESS]
    return sorted(jobs, key=lambda c: (-excess[c.comm], c.comm, -c.share, c.pid))


def _usual(ctx: RunContext, comm: str) -> float:
    return ctx.typical(process_feature(comm)) or 0.0


def _took(ctx: RunContext, c: Corunner) -> str:
    """'20%', or '60% (usual 30%)' for a name that also runs in the normal trials."""
    usual = _usual(ctx, c.comm)
    return vs_usual(c.share, usual if usual > 0 else None)
