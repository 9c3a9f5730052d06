"""`tailscope check --deep`: the top-down workflow of seed 003 (SJTU) as one command.

Step 1, the default suite (`verbs/check.py`), shows which probe is degraded (slow runs, a failed verdict
check). Step 2 runs the micro-architecture probes that isolate that probe's component, into the same
campaign:

    dgemm  (arithmetic, clock)      -> arith (FP CPI per precision) + the effective clock it measures
    stream (memory bandwidth)       -> latency (DRAM), stream --scaling (1..all cores), DIMM facts
    l2sum  (L2, snoop filter)       -> latency (L2 and L3 working sets), the pages records of l2sum itself
    fwq    (OS noise)               -> c2c (core-to-core), nothing else isolates noise better than fwq

Step 3, counters, runs only where a PMU exists (`--events` on the default suite); in a VM it is skipped and
said so. The chain (which probe, why it was followed, what each follow-up measured, what a healthy component
would show and whether it did) is returned as lines, written to DIR/deep.json and drawn by the report's
"Top-down follow-up" section (report/deep_section.py, read back with `load_deep`; the chain's model,
`DeepResult`, is in report/models.py).

Expectations (`_evidence`): arith and latency are judged by analysis/deep_judge.py: the clock against the
node's usual clock (the campaign's median) and its nominal frequency, each instruction and cache level
against the published tables of the part (analysis/reference_tables.toml); stream on 1..all cores, no core
count more than 5% below the one before it; c2c is reported, not judged (no rule fits every topology).
Under an inconclusive verdict (too busy) a followed probe is not called degraded (DeepResult.verdict).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailscope.analysis.arith_table import table_data
from tailscope.analysis.deep_judge import NodeReference, judge_arith, judge_latency, node_reference
from tailscope.analysis.model import CampaignAnalysis
from tailscope.probes.catalogue import ProbeVariant
from tailscope.report.models import AS_EXPECTED, DIFFERS, NOT_JUDGED, DeepResult, Step, load_deep

if TYPE_CHECKING:
    from tailscope.campaign.runner import RunOutcome

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


SCALING_SLACK = 0.95  # stream on k+1 cores may be 5% slower than on k before it "differs"


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
    from tailscope.verbs.scaling import scaling_variants

    out = []
    for probe in probes:
        for name, params, trials, isolates in FOLLOW_UPS.get(probe, ()):
            opts = {k: v for k, v in params.items() if k != "scaling"}
            if params.get("scaling"):
                out += [(probe, v, trials, isolates) for v in scaling_variants(name, opts)]
            else:
                out.append((probe, ProbeVariant(name, opts), trials, isolates))
    return out


def _evidence(
    probe: str, summaries: list[dict[str, Any]], values: list[float], ref: NodeReference
) -> tuple[str, str, str]:
    """(finding, expected, status) of a follow-up probe from its stored summaries: one sentence of what it
    measured, what a healthy component shows, and whether it did."""
    if not summaries:
        return "no successful trial", "", NOT_JUDGED
    s = summaries[-1]
    if probe in ("arith", "latency"):  # arith: every trial (a pair refused in any of them is named)
        j = judge_arith(summaries, ref) if probe == "arith" else judge_latency(s, ref)
        status = NOT_JUDGED if j.differs is None else DIFFERS if j.differs else AS_EXPECTED
        return j.finding, j.expected, status
    if probe == "c2c":
        from tailscope.node.hwloc import HwlocError, read_topology, summarise_c2c

        pairs = [(p["a"], p["b"], p["ns"]["median"]) for p in s.get("pairs", [])]
        expected = "pairs within one L3 complex faster than pairs across complexes, dies or sockets"
        try:  # hwloc's groups (L3 complex, die, socket) and what no pair covered
            return "; ".join(summarise_c2c(pairs, read_topology()).lines()), expected, NOT_JUDGED
        except HwlocError as exc:
            groups = ", ".join(f"{k} {v['median_ns']:.1f} ns" for k, v in s.get("groups", {}).items())
            return f"one-way median {groups} (sysfs groups; hwloc: {exc})", expected, NOT_JUDGED
    if values:
        return f"median {sorted(values)[len(values) // 2]:.3f} over {len(values)} trials", "", NOT_JUDGED
    return "measured", "", NOT_JUDGED


def _node_reference(con: Any) -> NodeReference:
    """The node's reference for the judges: its part, nominal clock, and the campaign's usual clock (every
    clock reading stored: the probes' summary clocks and the evidence's effective_mhz)."""
    rows = con.execute("SELECT summary FROM runs WHERE status = 'ok' AND summary IS NOT NULL").fetchall()
    summaries = [json.loads(r[0]) for r in rows if r[0]]
    mhz: list[float] = []
    if con.campaign.shard_files("counters"):
        query = "SELECT value FROM counters WHERE event = 'effective_mhz'"
        mhz = [r[0] for r in con.execute(query).fetchall()]
    return node_reference(summaries, mhz)


def _judge_scaling(follow_ups: list[dict[str, Any]]) -> None:
    """stream on 1..all cores: each core count against the one before it (bandwidth must not drop)."""
    scaling = [f for f in follow_ups if f["probe"].startswith("stream on ") and f.get("median") is not None]
    if len(scaling) > 1:
        scaling[0]["expected"] = "the reference for the core counts after it"
    for prev, cur in pairwise(scaling):
        cur["expected"] = (
            f"at least {SCALING_SLACK:g} x the bandwidth on the fewer cores before it "
            f"({prev['median']:.3f} on {prev['probe'].removeprefix('stream on ')})"
        )
        cur["status"] = DIFFERS if cur["median"] < SCALING_SLACK * prev["median"] else AS_EXPECTED


class DeepInterrupted(Exception):
    """SIGINT during the follow-up probes: `outcome` is their run's (finished trials stored)."""

    def __init__(self, outcome: RunOutcome) -> None:
        super().__init__("interrupted during the follow-up probes")
        self.outcome = outcome


def run_deep(
    campaign: Path, analysis: CampaignAnalysis, *, force: list[str] | None = None, show_progress: bool = True
) -> DeepResult:
    """Follow up every degraded probe (or the probes in `force`) in `campaign`; write DIR/deep.json."""
    from tailscope.node.dimms import collect as dimm_facts
    from tailscope.node.dimms import summary as dimm_summary
    from tailscope.store.read import connect
    from tailscope.verbs.workflow import RunRequest, run_campaign

    reasons = degraded(analysis)
    for probe in force or []:
        reasons.setdefault(probe, "requested (--deep on every probe of the suite)")
    steps = {p: Step(p, why) for p, why in reasons.items() if p in FOLLOW_UPS}
    planned = follow_up_variants(list(steps))
    if planned:
        outcome = run_campaign(
            RunRequest(
                variants=tuple((v, n) for _, v, n, _ in planned),
                campaign_dir=campaign,
                show_progress=show_progress,
                label="deep",
            )
        )
        if outcome.interrupted:  # Ctrl-C: the finished follow-ups are stored; no chain judged from a part
            raise DeepInterrupted(outcome)
    con = connect(campaign)
    try:
        ref = _node_reference(con) if planned else None
        for probe, variant, _, isolates in planned:
            rows = con.ok_summaries(variant.variant_id)
            summaries = [json.loads(r[0]) for r in rows if r[0]]
            values = [r[1] for r in rows if r[1] is not None]
            assert ref is not None
            finding, expected, status = _evidence(variant.probe, summaries, values, ref)
            label = variant.probe + (f" on {variant.params['cpus']}" if "cpus" in variant.params else "")
            steps[probe].follow_ups.append(
                {
                    "probe": label,
                    "isolates": isolates,
                    "finding": finding,
                    "expected": expected,
                    "status": status,
                    "median": sorted(values)[len(values) // 2] if values else None,
                    # arith: the seed's table (instructions x precision, absolute/pipelined) for the report
                    "arith_table": (
                        table_data(summaries) if variant.probe == "arith" and summaries else None
                    ),
                }
            )
        for step in steps.values():
            _judge_scaling(step.follow_ups)
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
    result = DeepResult(list(steps.values()), counters, dimms, verdict=analysis.verdict.state)
    (campaign / "deep.json").write_text(json.dumps(asdict(result), indent=1, default=str) + "\n")
    return result


__all__ = ["AS_EXPECTED", "DIFFERS", "NOT_JUDGED", "DeepResult", "Step", "degraded", "load_deep", "run_deep"]
