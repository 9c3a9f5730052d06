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

Expectations (`_evidence`): arith, the effective clock at least 0.97 x the nominal (TSC) rate and steady
(before/after within 3%), FP64 FMA latency 4 cycles on x86-64 (Skylake.., Zen 2..; vendor optimisation
manuals); latency, each level no faster than the one before (5% slack); stream on 1..all cores, no core
count more than 5% below the one before it; c2c is reported, not judged (no rule fits every topology).
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


CLOCK_FLOOR = 0.97  # effective clock below this fraction of the nominal (TSC) rate: the frequency dropped
CLOCK_DRIFT = 0.03  # effective clock before vs after the kernels
FMA_CYCLES_X86 = 4.0  # FP64 FMA latency, Intel Skylake.. and AMD Zen 2..5 (Intel SDM, AMD SOG, uops.info)
LEVEL_SLACK = 0.95  # a cache level may read 5% faster than the one before it (noise) before it "differs"
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
    probe: str, summaries: list[dict[str, Any]], values: list[float], tsc_hz: float | None
) -> tuple[str, str, str]:
    """(finding, expected, status) of a follow-up probe from its stored summaries: one sentence of what it
    measured, what a healthy component shows, and whether it did."""
    if not summaries:
        return "no successful trial", "", NOT_JUDGED
    s = summaries[-1]
    if probe == "arith":
        return _arith(s, tsc_hz)
    if probe == "latency":
        return _latency(s)
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


def _arith(s: dict[str, Any], tsc_hz: float | None) -> tuple[str, str, str]:
    clock = s.get("clock", [{}])[0]
    eff = clock.get("effective_hz", 0) / 1e9
    before, after = clock.get("effective_hz_before"), clock.get("effective_hz_after")
    rows = {(r["precision"], r["width"], r["op"]): r for r in s.get("table", [])}
    fma = [r for (p, _, op), r in rows.items() if p == "fp64" and op == "fma"]
    parts = [f"effective clock {eff:.2f} GHz"]
    for r in fma:
        parts.append(
            f"FP64 {r['width']} fma latency {r['latency_cycles']['median']:.2f} cycles, "
            f"reciprocal throughput {r['rthroughput_cycles']['median']:.2f}"
        )
    expected, bad = [], []
    if tsc_hz:
        floor = CLOCK_FLOOR * tsc_hz / 1e9
        expected.append(f"effective clock at least {floor:.2f} GHz ({CLOCK_FLOOR:g} x the nominal TSC rate)")
        if eff < floor:
            bad.append(f"the clock ran at {eff / (tsc_hz / 1e9):.2f} of nominal")
    if before and after:
        expected.append(f"steady within {CLOCK_DRIFT:.0%} before and after the kernels")
        if abs(after - before) / before > CLOCK_DRIFT:
            bad.append(f"the clock moved {before / 1e9:.2f} -> {after / 1e9:.2f} GHz during the run")
    if platform.machine() in ("x86_64", "AMD64") and fma:
        expected.append(f"FP64 fma latency {FMA_CYCLES_X86:g} cycles (x86-64 since Skylake and Zen 2)")
        off = [r for r in fma if abs(r["latency_cycles"]["median"] - FMA_CYCLES_X86) > 0.5]
        bad += [f"{r['width']} fma took {r['latency_cycles']['median']:.2f} cycles" for r in off]
    status = (DIFFERS if bad else AS_EXPECTED) if expected else NOT_JUDGED
    finding = "; ".join(parts) + (f" ({'; '.join(bad)})" if bad else "")
    return finding, "; ".join(expected), status


def _latency(s: dict[str, Any]) -> tuple[str, str, str]:
    sets = s.get("working_sets", [])
    finding = ", ".join(
        f"{w['name']} {w['ns']['median']:.1f} ns ({w['cycles']['median']:.0f} cycles)" for w in sets
    )
    bad = [
        f"{b['name']} ({b['ns']['median']:.1f} ns) faster than {a['name']} ({a['ns']['median']:.1f} ns)"
        for a, b in pairwise(sets)
        if b["ns"]["median"] < LEVEL_SLACK * a["ns"]["median"]
    ]
    expected = "each level slower than the one before it (" + " < ".join(w["name"] for w in sets) + ")"
    if bad:
        finding += f" ({'; '.join(bad)})"
    return finding, expected, (DIFFERS if bad else AS_EXPECTED) if len(sets) > 1 else NOT_JUDGED


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
        for probe, variant, _, isolates in planned:
            rows = con.ok_summaries(variant.variant_id)
            summaries = [json.loads(r[0]) for r in rows if r[0]]
            values = [r[1] for r in rows if r[1] is not None]
            finding, expected, status = _evidence(variant.probe, summaries, values, _tsc_hz(con, variant))
            label = variant.probe + (f" on {variant.params['cpus']}" if "cpus" in variant.params else "")
            steps[probe].follow_ups.append(
                {
                    "probe": label,
                    "isolates": isolates,
                    "finding": finding,
                    "expected": expected,
                    "status": status,
                    "median": sorted(values)[len(values) // 2] if values else None,
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
    result = DeepResult(list(steps.values()), counters, dimms)
    (campaign / "deep.json").write_text(json.dumps(asdict(result), indent=1, default=str) + "\n")
    return result


def _tsc_hz(con: Any, variant: ProbeVariant) -> float | None:
    """The nominal rate the probe measured against (its config record's tsc_hz), from its last ok trial."""
    row = con.execute(
        "SELECT config FROM runs WHERE variant = ? AND status = 'ok' AND config IS NOT NULL "
        "ORDER BY trial DESC LIMIT 1",
        [variant.variant_id],
    ).fetchone()
    if not row or not row[0]:
        return None
    value = json.loads(row[0]).get("tsc_hz")
    return float(value) if value else None


__all__ = ["AS_EXPECTED", "DIFFERS", "NOT_JUDGED", "DeepResult", "Step", "degraded", "load_deep", "run_deep"]
