"""memory-pressure: the kernel reclaimed or compacted memory, or the probe took major faults, in the trial.

Reads /proc/vmstat deltas (pgscan_direct, allocstall_*, compact_stall, pgmajfault, pgscan_kswapd), the probe
threads' major faults and kswapd/kcompactd among the co-runners. Explained slowdown, with stated costs
(not measured): 1 ms per allocation or compaction stall, 100 us per major fault, plus the reclaim threads'
share of the probe CPUs; a run with direct reclaim or stalls scores at least 0.3 (direct evidence).
When the same trial's huge-page faults fell back to small pages and kswapd did not reclaim (free memory
stayed above the low watermark: `RunContext.short_of_memory`), its compaction and allocation stalls and
direct reclaim are the failed 2 MiB allocations' (fragmentation: thp-fallback reads them), not a shortage of
memory: then only major faults, kswapd and the reclaim threads count here. When kswapd reclaimed, the node
was short of memory, the fallbacks are one of its effects, and the stalls count here (validate on this VM
under memthrash: 8 of 36 runs slowed 40-75% were named thp-fallback first while the stalls went to it).
"""

from __future__ import annotations

from tailscope.analysis.causes.base import explained_score, finding
from tailscope.analysis.causes.context import RunContext
from tailscope.analysis.model import CauseFinding
from tailscope.analysis.wording import pct

NAME = "memory-pressure"
READS = ("pgscan_direct", "allocstall", "compact_stall", "pgmajfault", "task_majflt", "pgscan_kswapd")
STALL_COST_S = 1e-3
MAJOR_FAULT_COST_S = 1e-4
DIRECT_FLOOR = 0.3
MITIGATION = (
    "free memory on the node before benchmarks (other jobs, page cache: sync; echo 3 > "
    "/proc/sys/vm/drop_caches), check memory limits and swap; size the probe's buffers below free memory"
)


def assess(ctx: RunContext) -> CauseFinding | None:
    ex = {n: max(0.0, ctx.excess(n) or 0.0) for n in READS}
    faults = max(ex["pgmajfault"], ex["task_majflt"])
    if max(0.0, ctx.excess("thp_fault_fallback") or 0.0) >= 1 and not ctx.short_of_memory():
        # fragmentation, not a shortage: the stalls are thp-fallback's
        ex["allocstall"] = ex["compact_stall"] = ex["pgscan_direct"] = 0.0
    stalls = ex["allocstall"] + ex["compact_stall"]
    reclaimers = [c for c in ctx.corunners if c.comm.startswith(("kswapd", "kcompactd"))]
    if (
        stalls <= 0
        and ex["pgscan_direct"] <= 0
        and faults < 1
        and not reclaimers
        and ex["pgscan_kswapd"] <= 0
    ):
        return None
    wall = ctx.value("wall_s") or 0.0
    explained = sum(c.share for c in reclaimers)
    if wall > 0:
        explained += (stalls * STALL_COST_S + faults * MAJOR_FAULT_COST_S) / wall
    score = explained_score(explained, ctx.slowdown)
    if stalls > 0 or ex["pgscan_direct"] > 0:
        score = max(score, DIRECT_FLOOR)
    parts = [
        f"{ex[n]:,.0f} {words}"
        for n, words in (
            ("pgscan_direct", "pages scanned by direct reclaim"),
            ("allocstall", "allocation stalls"),
            ("compact_stall", "compaction stalls"),
            ("pgscan_kswapd", "pages scanned by kswapd"),
        )
        if ex[n] > 0
    ]
    if faults >= 1:
        parts.append(f"{faults:,.0f} major faults")
    parts += [f"{c.comm} (pid {c.pid}) took {pct(c.share)} of {ctx.cpu_text()}" for c in reclaimers[:2]]
    sentence = "the node was short of memory during the trial: " + ", ".join(parts) + " beyond the usual"
    evidence = {
        "explained": explained,
        **{n: ctx.value(n) for n in READS},
        **{f"usual_{n}": ctx.typical(n) for n in READS},
    }
    return finding(NAME, ctx, score, sentence, MITIGATION, evidence)
