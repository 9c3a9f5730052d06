"""`tailscope check --deep`: the top-down workflow of seed 003 (SJTU) as one command.

Step 1, the default suite (`check.py`), shows which probe is degraded (slow runs, a failed verdict check).
Step 2 runs the micro-architecture probes that isolate that probe's component, into the same campaign:

    dgemm  (arithmetic, clock)      -> arith (FP CPI per precision) + the effective clock it measures
    stream (memory bandwidth)       -> latency (DRAM), stream --scaling (1..all cores), DIMM facts
    l2sum  (L2, snoop filter)       -> latency (L2 and L3 working sets), the pages records of l2sum itself
    fwq    (OS noise)               -> c2c (core-to-core), nothing else isolates noise better than fwq

Step 3, counters, runs only where a PMU exists (`--events` on the default suite); in a VM it is skipped and
said so. The chain (which probe, why it was followed, what each follow-up measured) is returned as lines
and written to DIR/deep.json next to the report.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tailscope.analysis.model import CampaignAnalysis
from tailscope.probes.catalogue import ProbeVariant

# probe -> (follow-up probe, its options, trials, what it isolates)
FOLLOW_UPS: dict[str, tuple[tuple[str, dict[str, Any], int, str], ...]] = {
    "dgemm": (("arith", {}, 3, "FP latency/throughput per precision and the effective core clock"),),
    "stream": (
        ("latency", {}, 3, "load latency per level, DRAM last"),
        ("stream", {"scaling": True}, 3, "bandwidth on 1..all cores (min/median/max)"),
    ),
    "l2sum": (
        ("latency", {}, 3, "L1/L2/L3/DRAM latency: is the L2 or the L3 slower than its level should be"),
    ),
    "fwq": (("c2c", {}, 3, "core-to-core latency between the CPUs"),),
}


@dataclass
class Step:
    probe: str  # the degraded probe
    why: str  # what made it degraded
    follow_ups: list[dict[str, Any]] = field(default_factory=list)  # {probe, isolates, finding}


@dataclass
class DeepResult:
    steps: list[Step]
    counters: str  # what step 3 did
    dimms: dict[str, Any] | None = None

    def lines(self) -> list[str]:
        if not self.steps:
            return ["deep: no probe was degraded; no micro-architecture follow-up needed"]
        out = []
        for s in self.steps:
            out.append(f"deep: {s.probe} degraded: {s.why}")
            for f in s.follow_ups:
                out.append(f"  -> {f['probe']} ({f['isolates']}): {f['finding']}")
        out.append(f"deep: counters: {self.counters}")
        if self.dimms is not None:
            out.append(f"deep: DIMMs: {self.dimms.get('dimms_unreadable') or self.dimms.get('summary')}")
        return out


def degraded(analysis: CampaignAnalysis) -> dict[str, str]:
    """Probes with slow runs or a failed verdict check, with the reason in words."""
    out: dict[str, str] = {}
    for g in analysis.groups:
        if g.n_slow:
            out.setdefault(g.probe, f"{g.n_slow} of {g.n} runs slower than the node median by the threshold")
        if g.node_outlier:
            out.setdefault(
                g.probe, f"node {g.node} slower than its peers ({g.node_ratio:.3f} of the fleet median)"
            )
    for c in analysis.verdict.checks:
        if not c.passed:
            out.setdefault(c.scope.split("/")[0].split("-")[0], c.message)
    return out


def follow_up_variants(probes: list[str]) -> list[tuple[str, ProbeVariant, int, str]]:
    """(degraded probe, follow-up variant, trials, what it isolates); --scaling expands per core count."""
    from tailscope.probes.scaling import scaling_variants

    out = []
    for probe in probes:
        for name, params, trials, isolates in FOLLOW_UPS.get(probe, ()):
            opts = {k: v for k, v in params.items() if k != "scaling"}
            if params.get("scaling"):
                out += [(probe, v, trials, isolates) for v in scaling_variants(name, opts)]
            else:
                out.append((probe, ProbeVariant(name, opts), trials, isolates))
    return out


def _finding(probe: str, summaries: list[dict[str, Any]], values: list[float]) -> str:
    """One sentence of evidence from a follow-up probe's stored summaries."""
    if not summaries:
        return "no successful trial"
    s = summaries[-1]
    if probe == "arith":
        rows = {(r["precision"], r["width"], r["op"]): r for r in s.get("table", [])}
        clock = s.get("clock", [{}])[0].get("effective_hz", 0) / 1e9
        fma = [r for (p, _, op), r in rows.items() if p == "fp64" and op == "fma"]
        parts = [f"effective clock {clock:.2f} GHz"]
        for r in fma:
            parts.append(
                f"FP64 {r['width']} fma latency {r['latency_cycles']['median']:.2f} cycles, "
                f"reciprocal throughput {r['rthroughput_cycles']['median']:.2f}"
            )
        return "; ".join(parts)
    if probe == "latency":
        sets = ", ".join(
            f"{w['name']} {w['ns']['median']:.1f} ns ({w['cycles']['median']:.0f} cycles)"
            for w in s.get("working_sets", [])
        )
        return sets
    if probe == "c2c":
        from tailscope.node.hwloc import HwlocError, read_topology, summarise_c2c

        pairs = [(p["a"], p["b"], p["ns"]["median"]) for p in s.get("pairs", [])]
        try:  # hwloc's groups (L3 complex, die, socket) and what no pair covered
            return "; ".join(summarise_c2c(pairs, read_topology()).lines())
        except HwlocError as exc:
            groups = ", ".join(f"{k} {v['median_ns']:.1f} ns" for k, v in s.get("groups", {}).items())
            return f"one-way median {groups} (sysfs groups; hwloc: {exc})"
    if values:
        return f"median {sorted(values)[len(values) // 2]:.3f} over {len(values)} trials"
    return "measured"


def run_deep(
    campaign: Path, analysis: CampaignAnalysis, *, force: list[str] | None = None, show_progress: bool = True
) -> DeepResult:
    """Follow up every degraded probe (or the probes in `force`) in `campaign`; write DIR/deep.json."""
    from tailscope.node.dimms import collect as dimm_facts
    from tailscope.node.dimms import summary as dimm_summary
    from tailscope.store.read import connect
    from tailscope.workflow import RunRequest, run_campaign

    reasons = degraded(analysis)
    for probe in force or []:
        reasons.setdefault(probe, "requested (--deep on every probe of the suite)")
    steps = {p: Step(p, why) for p, why in reasons.items() if p in FOLLOW_UPS}
    planned = follow_up_variants(list(steps))
    if planned:
        run_campaign(
            RunRequest(
                variants=tuple((v, n) for _, v, n, _ in planned),
                campaign_dir=campaign,
                show_progress=show_progress,
                label="deep",
            )
        )
    con = connect(campaign)
    try:
        for probe, variant, _, isolates in planned:
            rows = con.ok_summaries(variant.variant_id)
            summaries = [json.loads(r[0]) for r in rows if r[0]]
            finding = _finding(variant.probe, summaries, [r[1] for r in rows if r[1] is not None])
            label = variant.probe + (f" on {variant.params['cpus']}" if "cpus" in variant.params else "")
            steps[probe].follow_ups.append({"probe": label, "isolates": isolates, "finding": finding})
        hw_counts = con.hardware_counter_values()
    finally:
        con.close()
    counters = (
        f"{hw_counts} hardware counter values stored with the suite"
        if hw_counts
        else "no hardware counters (no PMU here, or the suite ran without --events): step 3 skipped"
    )
    dimms = None
    if "stream" in steps:
        facts = dimm_facts()
        dimms = {**facts, "summary": dimm_summary(facts["dimms"]) if facts["dimms"] else None}
    result = DeepResult(list(steps.values()), counters, dimms)
    (campaign / "deep.json").write_text(json.dumps(asdict(result), indent=1, default=str) + "\n")
    return result
