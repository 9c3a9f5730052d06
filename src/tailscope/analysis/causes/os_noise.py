"""os-noise: interrupts, softirqs, kernel threads and timer ticks on the probe's CPUs (FWQ's spectrum).

Reads irq/softirq time (/proc/stat), interrupt and local-timer counts (/proc/interrupts), kernel threads
among the co-runners, the probe threads' preemptions and run-queue wait (schedstat, /proc/PID/status), and
for fwq runs the measured noise fraction and period (analysis/fwq_noise.py).
Explained slowdown = excess irq+softirq share + kernel threads' share + excess interrupts x 2 us (a typical
interrupt entry/exit and handler cost; stated, not measured) + for fwq the excess noise fraction + the
run-queue wait of extra preemptions when they are short detours (context.Preemptions.short: many wake-ups of
under 100 us each, whoever wakes: a kernel thread, a timer-driven daemon, an injector), since noise is a
spectrum of short detours, not a process's CPU share.
"""

from __future__ import annotations

from tailscope.analysis.causes.base import explained_score, finding, vs_usual
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct

NAME = "os-noise"
READS = (
    "irq_share", "interrupts_per_s", "timer_per_s", "corunners", "noise_fraction", "preempt_per_s",
    "run_delay_share",
)  # fmt: skip
INTERRUPT_COST_S = 2e-6
MIN_EXPLAINED = 0.003
MITIGATION = (
    "keep interrupts and kernel threads off the probe CPUs (irqbalance --banirq / smp_affinity, "
    "nohz_full and isolcpus for timer ticks, rcu_nocbs); match a periodic noise to the node's timers and "
    "daemons"
)


def assess(ctx: RunContext) -> CauseFinding | None:
    irq = max(0.0, ctx.excess("irq_share") or 0.0)
    kthreads = [
        c for c in ctx.corunners if c.kernel_thread and not c.comm.startswith(("kswapd", "kcompactd"))
    ]
    kshare = sum(c.share for c in kthreads)
    extra_irq = max(0.0, ctx.excess("interrupts_per_s") or 0.0)
    fwq = max(0.0, ctx.excess("noise_fraction") or 0.0)
    detours = ctx.preemptions()
    short = detours.share if detours is not None and detours.short else 0.0
    explained = irq + kshare + extra_irq * INTERRUPT_COST_S + fwq + short
    if explained < MIN_EXPLAINED:
        return None
    # (share of the slowdown it accounts for, words): the sentence leads with what explains the most
    parts: list[tuple[float, str]] = []
    if detours is not None and short > 0:
        jobs = [c for c in ctx.corunners if not c.kernel_thread]
        parts.append(
            (
                short,
                f"the probe threads were preempted {detours.extra_per_s:,.0f} more times a second than "
                f"usual, {detours.detour_s * 1e6:.0f} us each ({pct(short)} of their time on the run queue)"
                + (f", most likely by {jobs[0].comm} (pid {jobs[0].pid})" if jobs else ""),
            )
        )
    if ctx.value("irq_share") is not None:
        parts.append((irq, f"irq+softirq took {vs_usual(ctx.value('irq_share'), ctx.typical('irq_share'))}"))
    if ctx.value("interrupts_per_s") is not None:
        rate = vs_usual(ctx.value("interrupts_per_s"), ctx.typical("interrupts_per_s"), "rate")
        parts.append((extra_irq * INTERRUPT_COST_S, f"{rate} interrupts per CPU"))
    if ctx.value("timer_per_s") is not None:
        parts.append(
            (0.0, f"timer ticks {vs_usual(ctx.value('timer_per_s'), ctx.typical('timer_per_s'), 'rate')}")
        )
    if kthreads:
        parts.append(
            (
                kshare,
                "kernel threads " + ", ".join(f"{c.comm} (pid {c.pid}) {pct(c.share)}" for c in kthreads[:3]),
            )
        )
    if ctx.value("noise_fraction") is not None:
        period = ctx.value("noise_period_s")
        parts.append(
            (
                fwq,
                f"FWQ noise {vs_usual(ctx.value('noise_fraction'), ctx.typical('noise_fraction'))} of each "
                "quantum" + (f", recurring every {period * 1e3:.3g} ms" if period else ""),
            )
        )
    parts.sort(key=lambda p: -p[0])  # stable: ties keep the order above
    sentence = f"the OS interrupted the probe on {ctx.cpu_text()}: " + "; ".join(text for _, text in parts)
    evidence = {
        "explained": explained,
        "irq_share": ctx.value("irq_share"),
        "usual_irq_share": ctx.typical("irq_share"),
        "interrupts_per_s": ctx.value("interrupts_per_s"),
        "usual_interrupts_per_s": ctx.typical("interrupts_per_s"),
        "timer_per_s": ctx.value("timer_per_s"),
        "noise_fraction": ctx.value("noise_fraction"),
        "usual_noise_fraction": ctx.typical("noise_fraction"),
        "kernel_threads": [{"pid": c.pid, "comm": c.comm, "share": round(c.share, 4)} for c in kthreads[:5]],
        "extra_preempt_per_s": detours.extra_per_s if detours is not None else None,
        "detour_us": detours.detour_s * 1e6 if detours is not None else None,
        "short_detour_share": short if short > 0 else None,
    }
    return finding(NAME, ctx, explained_score(explained, ctx.slowdown), sentence, MITIGATION, evidence)
