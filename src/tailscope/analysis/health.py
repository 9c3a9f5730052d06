"""The node verdict: healthy, degraded (with its causes) or inconclusive (too busy or too noisy to judge).

One screen per node, used by the terminal, the report, `verdict --nhc`, `--drain` and Prometheus alike:

0. inconclusive, emulated: the node's facts say its probes ran under an emulator (qemu-user: an aarch64
   tailscope on an x86 host, node/arm.py); timings are the emulator's, so nothing is judged.
1. inconclusive, busy: in the median trial, other processes (and the hypervisor's steal) took more than
   `max_busy_share` of the probe CPUs (evidence rows, EVIDENCE.md). Says how busy, who ran, what to do.
2. degraded: a (variant, node) group that is not too noisy fails a check (verdict.py: slow-run rate with
   the binomial test, the SJTU quantile rule widened to the node's own noise, CV far above the noise floor),
   or the fleet screen (cluster.py: Bonferroni) drains the node. The causes are the node's flagged runs'
   top causes (analysis/causes), grouped, with their trials; hardware-config for a drained node; for a
   group that fails on the spread of its runs alone (no run flagged), 'unknown' saying which way they spread.
3. inconclusive, noisy: a group's noise floor (3 robust sds) is above the slow threshold, so slow runs
   cannot be told from noise there; or the fleet screen selects the node for a re-test only (BH). The floor
   is the node's own noise: where the runs' spread comes from interference that direct evidence names
   (a flagged run whose first cause has medium or high confidence: a co-runner, OS noise, reclaim, ...),
   the floor is taken again without those runs (`own_floors`), and a group within it is judged. Otherwise
   a co-runner during a quarter of the trials made every probe "too noisy" and the node inconclusive,
   when its answer is "degraded: cpu-contention in those trials" (issue 14's window case, seen here).
4. healthy otherwise.
The campaign's state is the worst node's: degraded > inconclusive > healthy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tailscope.analysis.causes import hardware_config, unknown
from tailscope.analysis.causes.context import corunner_lists, cpu_list_text, ranges_text, run_features
from tailscope.analysis.model import (
    CauseFinding,
    Check,
    GroupSummary,
    NodeHealth,
    NodeState,
    RunVerdict,
    Settings,
)
from tailscope.analysis.robust import mad, noise_floor, robust_cv
from tailscope.analysis.run_columns import RunVerdicts
from tailscope.analysis.verdict import limits_text
from tailscope.analysis.wording import pct, runs_word, some

METHOD = (
    "node verdict: inconclusive when others took more than max_busy_share of the probe CPUs in the median "
    "trial; degraded when a group within its noise floor fails a check or the fleet screen drains the node; "
    "inconclusive when a group's noise floor (3 robust sds, without the runs that evidenced interference "
    "explains) exceeds the slow threshold or the node is only selected for a re-test; healthy otherwise"
)

MIN_RUNS_FOR_FLOOR = 6  # a median interval needs 6 runs; below that the noise floor is not judged
BUSY_ADVICE = (
    "rerun when the node is idle, or reserve the probe CPUs (Slurm --exclusive, a cpuset, isolcpus) so "
    "nothing else runs there"
)
NOISY_ADVICE = (
    "quiet the probe (pinned threads, huge pages, fixed frequency, idle node) or judge with a larger "
    "--threshold"
)
SEVERITY: dict[str, int] = {"healthy": 0, "inconclusive": 1, "degraded": 2}
EXIT_CODES: dict[str, int] = {"healthy": 0, "degraded": 1, "inconclusive": 3}


@dataclass(frozen=True)
class Busy:
    """How busy a node's probe CPUs were, from the evidence of all its trials."""

    trials: int  # trials with evidence
    median_share: float  # others + steal, share of the probe CPUs, median over trials
    busy_trials: tuple[int, ...]  # trials above the limit
    cpus: tuple[int, ...]
    # (comm, its pids, median share over the trials it ran in, trials seen), biggest total first
    corunners: tuple[tuple[str, tuple[int, ...], float, int], ...]
    source: str = "os"  # os: evidence rows (EVIDENCE.md); fwq: the fwq probe's noise fraction (no evidence)


def busy_by_node(
    scored: pd.DataFrame,
    counters: pd.DataFrame | None,
    corunners: pd.DataFrame | None,
    limit: float,
    fwq: Mapping[str, Mapping[str, Any]] | None = None,
    features: tuple[pd.DataFrame, dict[str, tuple[int, ...]]] | None = None,
) -> dict[str, Busy]:
    """Per node with evidence: the Busy numbers (all its trials, every probe). A node without evidence
    rows but with fwq runs is judged by fwq's noise fraction: the share of each quantum's time the probe
    thread did not run its work (others, the host, interrupts), which is what "busy" means here.
    `features`: run_features(counters) where the caller has it already."""
    out = _fwq_busy(scored, fwq or {}, limit)
    share, cpus = trial_busy_shares(counters if counters is not None else pd.DataFrame(), features)
    if share.empty:
        return out
    co = corunner_lists(corunners if corunners is not None else pd.DataFrame())
    for node, g in scored.groupby("node", sort=True):
        ids = [r for r in g["run_id"].astype(str) if r in share.index and pd.notna(share.get(r))]
        if not ids:
            continue
        trial_of = dict(zip(g["run_id"].astype(str), g["trial"].astype(int), strict=True))
        shares = share.reindex(ids)
        # By command name: a co-runner restarted between trials, or one with several worker processes
        # (stress-ng-cpu), is one "who"; its share per trial is the sum over its processes.
        per_trial: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        pids: dict[str, set[int]] = defaultdict(set)
        for r in ids:
            for c in co.get(r, ()):
                per_trial[c.comm][r] += c.share
                pids[c.comm].add(c.pid)
        top = sorted(per_trial.items(), key=lambda kv: -sum(kv[1].values()))[:5]
        node_cpus = sorted({c for r in ids for c in cpus.get(r, ())})
        out[str(node)] = Busy(
            trials=len(ids),
            median_share=float(np.median(shares.to_numpy(dtype=float))),
            busy_trials=tuple(sorted({trial_of[r] for r in ids if shares[r] > limit})),
            cpus=tuple(node_cpus),
            corunners=tuple(
                (comm, tuple(sorted(pids[comm])), float(np.median(list(v.values()))), len(v))
                for comm, v in top
            ),
        )
    return out


def trial_busy_shares(
    counters: pd.DataFrame, features: tuple[pd.DataFrame, dict[str, tuple[int, ...]]] | None = None
) -> tuple[pd.Series, dict[str, tuple[int, ...]]]:
    """Per run_id: others' share of its probe CPUs plus the hypervisor's steal (NaN without either), from
    the evidence rows (source os, or their run_features where given); and each run's probe CPUs. One
    definition for the campaign's verdict and for `check`'s stopping, trial by trial
    (campaign/stopping.py)."""
    features, cpus = features if features is not None else run_features(counters)
    if features.empty or not {"others_share", "steal_share"} & set(features.columns):
        return pd.Series(dtype=float), cpus
    return features.reindex(columns=["others_share", "steal_share"]).sum(axis=1, min_count=1), cpus


def _fwq_busy(scored: pd.DataFrame, fwq: Mapping[str, Mapping[str, Any]], limit: float) -> dict[str, Busy]:
    out = {}
    usable = [r for r, e in fwq.items() if e.get("noise_fraction") is not None]
    runs = scored.loc[scored["run_id"].astype(str).isin(usable), ["node", "run_id", "trial"]]
    for node, g in runs.groupby("node", sort=True):
        shares = {
            int(t): float(fwq[str(r)]["noise_fraction"]) for r, t in zip(g["run_id"], g["trial"], strict=True)
        }
        out[str(node)] = Busy(
            trials=len(shares),
            median_share=float(np.median(list(shares.values()))),
            busy_trials=tuple(sorted(t for t, s in shares.items() if s > limit)),
            cpus=(),
            corunners=(),
            source="fwq",
        )
    return out


def node_health(
    *,
    groups: Sequence[GroupSummary],
    runs: Sequence[RunVerdict],
    checks: Sequence[Check],
    cluster: Sequence[Any],
    settings: Settings,
    busy: Mapping[str, Busy],
    facts: Mapping[str, Mapping[str, Any]],
    unsettled: Mapping[str, tuple[list[str], list[str]]] | None = None,
) -> tuple[NodeHealth, ...]:
    """One NodeHealth per node of `groups`, sorted by node name. `unsettled` (a campaign stopped when
    settled, analysis/sequential.py): per node, the reasons its unsettled probes make it inconclusive, and
    the notes its verdict carries."""
    limits = limits_text(settings, stopped=unsettled is not None)
    by_scope: dict[str, list[Check]] = defaultdict(list)
    for c in checks:
        by_scope[c.scope].append(c)
    runs = RunVerdicts.of(runs)
    flagged: dict[tuple[str, str], list[RunVerdict]] = defaultdict(list)
    for r in runs.rows(runs.column("flagged")):  # objects of the flagged runs only
        flagged[(r.variant, r.node)].append(r)
    screen: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    for summary in cluster:
        for effect in summary.nodes:
            screen[effect.node].append((summary, effect))
    config = hardware_config.fleet(facts)  # node/fleet.py: the one comparison of node configuration
    emulated = {node: text for node, f in facts.items() if (text := _emulation(f))}
    floors = own_floors(groups, runs, settings.primary_threshold)
    groups_of: dict[str, list[GroupSummary]] = defaultdict(list)  # one pass, not one per node (5,000 nodes)
    for g in groups:
        groups_of[g.node].append(g)
    out = []
    for node in sorted(groups_of):
        mine = groups_of[node]
        out.append(
            _one_node(
                node,
                mine,
                by_scope,
                flagged,
                screen.get(node, []),
                settings,
                busy.get(node),
                config.get(node, []),
                limits,
                floors,
                emulated.get(node),
                (unsettled or {}).get(node, ([], [])),
            )
        )
    return tuple(out)


def _emulation(facts: Mapping[str, Any]) -> str | None:
    """The node's 'emulated aarch64 on <host>' fact (nodes table: in its facts JSON), if it has one."""
    if facts.get("emulation"):
        return str(facts["emulation"])
    raw = facts.get("facts")
    if isinstance(raw, str) and '"emulation"' in raw:
        import json

        try:
            value = json.loads(raw).get("emulation")
        except (ValueError, AttributeError):
            return None
        return str(value) if value else None
    return None


@dataclass(frozen=True)
class OwnFloor:
    """The noise floor a noisy group is judged by: its own, without the runs that evidenced interference
    explains, where some are left out and MIN_RUNS_FOR_FLOOR stay; else the floor over all its runs."""

    floor: float  # 3 robust sds
    robust_cv: float
    left_out: int  # flagged runs whose first cause has direct evidence (0: the floor over all runs)


def explained_by_interference(r: RunVerdict) -> bool:
    """A flagged run whose first cause rests on direct evidence (a co-runner's CPU time, interrupts,
    reclaim, fallen-back huge pages, a lower clock): its slowness is not the node's own noise."""
    return r.flagged and bool(r.causes) and r.causes[0].confidence != "low"


def own_floors(
    groups: Sequence[GroupSummary], runs: Sequence[RunVerdict], threshold: float
) -> dict[tuple[str, str], OwnFloor]:
    """The floor of each (variant, node) group whose noise floor over all its runs is above `threshold`
    (the only groups in the answer: a group not in it is within its floor). One pass over the runs of the
    noisy groups only (a fleet's quiet groups cost nothing)."""
    noisy = {
        (g.variant, g.node): g
        for g in groups
        if g.n >= MIN_RUNS_FOR_FLOOR and g.median > 0 and noise_floor(g.mad, g.median) > threshold
    }
    if not noisy:
        return {}
    kept: dict[tuple[str, str], list[float]] = defaultdict(list)
    left_out: dict[tuple[str, str], int] = defaultdict(int)
    runs = RunVerdicts.of(runs)
    keys = zip(runs.column("variant").tolist(), runs.column("node").tolist(), strict=True)
    for r in runs.rows([i for i, key in enumerate(keys) if key in noisy]):
        key = (r.variant, r.node)
        if not np.isfinite(r.perf_ratio):
            continue
        if explained_by_interference(r):
            left_out[key] += 1
        else:
            kept[key].append(r.perf_ratio)
    out = {}
    for key, g in noisy.items():
        x = np.asarray(kept.get(key, ()), dtype=float)
        median = float(np.median(x)) if len(x) else 0.0
        if left_out.get(key) and len(x) >= MIN_RUNS_FOR_FLOOR and median > 0:
            spread = mad(x)
            out[key] = OwnFloor(noise_floor(spread, median), robust_cv(spread, median), left_out[key])
        else:
            out[key] = OwnFloor(noise_floor(g.mad, g.median), robust_cv(g.mad, g.median), 0)
    return out


def campaign_state(nodes: Sequence[NodeHealth]) -> NodeState:
    """The worst node verdict; inconclusive when there is no node to judge."""
    if not nodes:
        return "inconclusive"
    worst: NodeState = "healthy"
    for n in nodes:
        if SEVERITY[n.verdict] > SEVERITY[worst]:
            worst = n.verdict
    return worst


def _one_node(
    node: str,
    groups: Sequence[GroupSummary],
    checks: Mapping[str, list[Check]],
    flagged: Mapping[tuple[str, str], list[RunVerdict]],
    screen: Sequence[tuple[Any, Any]],
    settings: Settings,
    busy: Busy | None,
    config: Sequence[hardware_config.ConfigFinding],
    limits: tuple[str, ...],
    floors: Mapping[tuple[str, str], OwnFloor],
    emulated: str | None = None,
    unsettled: tuple[list[str], list[str]] = ([], []),
) -> NodeHealth:
    degraded: list[str] = []
    drains: list[str] = []
    unsure: list[str] = list(unsettled[0])
    causes: list[CauseFinding] = []
    slow_runs: list[RunVerdict] = []
    spread: list[CauseFinding] = []  # failed groups without a flagged run
    for g in groups:
        judged = floors.get((g.variant, g.node))
        if judged is not None and judged.floor > settings.primary_threshold:
            without = (
                f"; {pct(judged.robust_cv)} without the {runs_word(judged.left_out)} that evidenced "
                "interference explains"
                if judged.left_out
                else ""
            )
            unsure.append(
                f"{g.probe}: too noisy to judge: runs vary by {pct(robust_cv(g.mad, g.median))} (robust "
                f"CV over {g.n} runs{without}), so only slowdowns above {pct(judged.floor)} stand out, more "
                f"than the {pct(settings.primary_threshold)} threshold; {NOISY_ADVICE}"
            )
            continue
        failed = [c for c in checks.get(f"{g.variant}/{g.node}", []) if not c.passed]
        if failed:
            degraded += [f"{c.name}: {c.message}" for c in failed]
            mine = flagged.get((g.variant, g.node), [])
            slow_runs += mine
            # an application's --reference and the level against the node's history judge the node's level,
            # not its spread: their own lines say it
            of_spread = [c for c in failed if c.name not in ("reference", "max_level_drop")]
            if not mine and of_spread:
                spread.append(_spread_cause(g, of_spread))
    drained = any(e.drain for _, e in screen)
    retest = any(e.retest and not e.drain for _, e in screen)
    for summary, e in screen:
        if e.drain:
            drains.append(
                f"{summary.probe} {pct(e.slowdown)} slower than the median node ({e.median:.4g} vs "
                f"{summary.fleet_median:.4g} {summary.unit}, p = {e.p_value:.2g} < "
                f"{summary.settings.alpha_drain:g}/{len(summary.nodes)}, Bonferroni)"
            )
        elif e.retest:
            unsure.append(
                f"{summary.probe}: {pct(e.slowdown)} slower than the median node, selected for a re-test "
                f"(Benjamini-Hochberg at {summary.settings.alpha_retest:g}) but not significant after "
                "Bonferroni: run a second batch of trials"
            )
    worst = max((e.slowdown for _, e in screen if e.drain), default=None) if drained else None
    hw = hardware_config.assess_node(node, config, worst)  # named even when the node is not (yet) slower
    if hw is not None:
        causes.append(hw)
    causes = _run_causes(slow_runs) + spread + causes
    if emulated:
        state: NodeState = "inconclusive"
        reasons = [
            f"{emulated}: the timings are the emulator's, not the node's; run tailscope natively on this "
            "part to judge it"
        ]
    elif busy is not None and busy.median_share > settings.max_busy_share:
        reasons = [_busy_text(busy, settings), *drains, *degraded, *unsure]
        state = "inconclusive"
        causes = [_busy_cause(busy), *causes]
    elif degraded or drains:
        state = "degraded"
        reasons = [*drains, *(_cause_line(c) for c in causes[:3]), *degraded, *unsure]
    elif unsure:
        state, reasons = "inconclusive", unsure
    else:
        state = "healthy"
        reasons = [
            _healthy_text(groups, busy),
            *([_cause_line(hw)] if hw is not None else []),
            *unsettled[1],
        ]
    return NodeHealth(
        node=node,
        verdict=state,
        reasons=tuple(reasons),
        causes=tuple(causes),
        limits=limits,
        busy_share=busy.median_share if busy is not None else None,
        drain=drained,
        retest=retest,
    )


def _run_causes(runs: Sequence[RunVerdict]) -> list[CauseFinding]:
    """Node-level findings: the flagged runs grouped by their top cause, with trials and evidence."""
    by_cause: dict[str, list[RunVerdict]] = defaultdict(list)
    for r in runs:
        if r.causes:
            by_cause[r.causes[0].cause].append(r)
    total = len(runs)
    out = []
    for cause, rs in sorted(by_cause.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        trials = ranges_text([r.trial for r in rs])
        probes = sorted({r.probe for r in rs})
        best = max(rs, key=lambda r: r.causes[0].score)
        top = best.causes[0]
        detail = top.sentence.split(": ", 1)[-1]
        corunner = _common_corunner(rs)
        if corunner:
            detail = corunner
        sentence = (
            f"{cause} in trials {trials} ({len(rs)} of {total} flagged runs of {', '.join(probes)}): {detail}"
        )
        out.append(
            CauseFinding(
                cause=cause,
                score=round(len(rs) / total, 4),
                confidence=top.confidence,
                evidence={"trials": [r.trial for r in rs], "runs": [r.run_id for r in rs], "probes": probes},
                sentence=sentence,
                mitigation=top.mitigation,
            )
        )
    return out


def _spread_cause(group: GroupSummary, failed: Sequence[Check]) -> CauseFinding:
    """A group fails a spread check (CV, CV ratio) with no run past its node's lines: say which way the
    runs spread, since no run has evidence of its own to read."""
    m = group.median
    low, high = (group.minimum, group.maximum) if group.higher_is_better else (group.maximum, group.minimum)
    slower, faster = abs(m - low) / m, abs(high - m) / m
    far = f"{pct(faster)} faster" if faster > slower else f"{pct(slower)} slower"
    names = [c.name for c in failed]
    return CauseFinding(
        cause=unknown.NAME,
        score=0.0,
        confidence="low",
        evidence={
            "probe": group.probe,
            "checks": names,
            "slowest": round(slower, 4),
            "fastest": round(faster, 4),
        },
        sentence=(
            f"{group.probe}: the spread of the runs fails {', '.join(names)} with no run past the node's "
            f"quantile line: the farthest run is {far} than the node median (runs on two levels, or a few "
            "runs faster than the rest)"
        ),
        mitigation=unknown.MITIGATION,
    )


def _common_corunner(runs: Sequence[RunVerdict]) -> str | None:
    """'stress-ng (pid 4242) took 41% of CPU 0' when one co-runner is named in these runs' top causes."""
    seen: dict[tuple[str, int], list[float]] = defaultdict(list)
    cpus: set[int] = set()
    for r in runs:
        ev = r.causes[0].evidence
        cpus.update(ev.get("cpus", []))
        for c in ev.get("corunners", [])[:1]:
            seen[(c["comm"], c["pid"])].append(c["share"])
    if not seen:
        return None
    (comm, pid), shares = max(seen.items(), key=lambda kv: len(kv[1]))
    return f"{comm} (pid {pid}) took {pct(float(np.median(shares)))} of {cpu_list_text(sorted(cpus))}"


def _busy_text(busy: Busy, settings: Settings) -> str:
    if busy.source == "fwq":
        return (
            f"too busy to judge: the fwq probe lost {pct(busy.median_share)} of each quantum's time to other "
            f"work in its median run (limit {pct(settings.max_busy_share)}), {len(busy.busy_trials)} of "
            f"{busy.trials} fwq runs above the limit; who ran is not recorded (no evidence rows in this "
            f"campaign: it was imported or run before evidence collection); {BUSY_ADVICE}"
        )
    who = some(
        [
            f"{_who(comm, pids)} {pct(share)} in {n} trial{'' if n == 1 else 's'}"
            for comm, pids, share, n in busy.corunners
        ]
    )
    return (
        f"too busy to judge: other processes took {pct(busy.median_share)} of {cpu_list_text(busy.cpus)} in "
        f"the median trial (limit {pct(settings.max_busy_share)}), {len(busy.busy_trials)} of {busy.trials} "
        "trials "
        f"above the limit" + (f"; who ran there: {who}" if who else "") + f"; {BUSY_ADVICE}"
    )


def _who(comm: str, pids: Sequence[int]) -> str:
    """'stress-ng (pid 4242)', 'stream (pids 28980, 29025, 29049)', 'x (pids 1, 2, 3 and 4 more)'."""
    if len(pids) == 1:
        return f"{comm} (pid {pids[0]})"
    shown = ", ".join(str(p) for p in pids[:3])
    return f"{comm} (pids {shown}" + (f" and {len(pids) - 3} more)" if len(pids) > 3 else ")")


def _busy_cause(busy: Busy) -> CauseFinding:
    if busy.source == "fwq":
        return CauseFinding(
            cause="cpu-contention",
            score=1.0,
            confidence="medium",
            evidence={"fwq_noise_fraction_median": round(busy.median_share, 4), "fwq_runs": busy.trials},
            sentence=f"the probe CPUs were busy: fwq lost {pct(busy.median_share)} of each quantum",
            mitigation=BUSY_ADVICE,
        )
    names = [{"comm": c, "pids": list(p), "share": round(s, 4), "trials": n} for c, p, s, n in busy.corunners]
    head = f"{_who(*busy.corunners[0][:2])} " if busy.corunners else "other processes "
    return CauseFinding(
        cause="cpu-contention",
        score=1.0,
        confidence="high" if busy.corunners else "medium",
        evidence={"median_share": round(busy.median_share, 4), "trials": busy.trials, "corunners": names},
        sentence=f"{head}kept {cpu_list_text(busy.cpus)} busy: {pct(busy.median_share)} in the median trial",
        mitigation=BUSY_ADVICE,
    )


def _cause_line(c: CauseFinding) -> str:
    return f"{c.sentence}; {c.mitigation}"


def _healthy_text(groups: Sequence[GroupSummary], busy: Busy | None) -> str:
    probes = ", ".join(
        f"{g.probe} ({g.n} runs, noise {pct(robust_cv(g.mad, g.median))})" for g in groups if g.median > 0
    )
    quiet = f"; others took {pct(busy.median_share)} of the probe CPUs in the median trial" if busy else ""
    return f"every probe within the limits: {probes}{quiet}"
