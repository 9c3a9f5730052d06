"""The answer a report leads with: a verdict per node, and the causes of the slow runs grouped across probes.

`answer_of(analysis)` is the single place the terminal and the HTML report take the verdict from. Today it
derives the verdict from what the analysis provides (per-group tail-count tests, the node-vs-fleet score,
the user's limit checks in analysis/verdict.py, the systematic/transient kind of each slow run); when the
analysis gains node verdicts (`healthy | degraded | inconclusive` with reasons) and per-run causes, this
function is re-pointed to read them and nothing else changes: `NodeAnswer` and `CauseFinding` are what
the renderers use.

Terms, explained once where they are shown (`TERMS`):
- slow run: more than the primary threshold (5%) below its node's median for the same probe variant;
- systematic: slow in every iteration (a level shift, as when the run's physical pages conflict);
- transient: slow in a few iterations only (interference: daemons, interrupts, other jobs).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from tailscope.analysis.model import CampaignAnalysis, GroupSummary, RunVerdict
from tailscope.probes.catalogue import variant_name

State = Literal["healthy", "degraded", "inconclusive"]
MIN_RUNS = 6  # fewer ok runs than this on a (variant, node): its median has no 95% interval

CAUSE_WORDS = {
    "systematic": "level shift (systematic slow runs)",
    "transient": "interference (transient slow runs)",
    "unclassified": "slow runs without iterations to classify",
    "node": "node slower than its peers",
    "limit": "a limit you set failed",
}
NEXT_COMMAND = {
    "systematic": "tailscope run {probe} --page 2m,1g --trials 100 --campaign {campaign}-pages && "
    "tailscope compare {campaign}-pages --by page_policy",
    "transient": "tailscope run {probe} --trials 100 --monitor --campaign {campaign}-monitor",
    "unclassified": "tailscope run {probe} --trials 50 --campaign {campaign}",
    "node": "tailscope facts   (on the node; compare with a peer)",
    "limit": "tailscope analyze {campaign} --verbose",
}
TERMS = (
    "slow = more than {threshold} below the node's median for the same probe variant; "
    "systematic = slow in every iteration (a level shift, e.g. conflicting physical pages); "
    "transient = slow in a few iterations (interference: daemons, interrupts, other jobs); "
    "! = the slow-run count is more than the allowed rate {allowed} explains (binomial tail-count test)"
)


@dataclass(frozen=True)
class NodeAnswer:
    node: str
    state: State
    reasons: tuple[str, ...]  # plain words, most important first


@dataclass(frozen=True)
class CauseFinding:
    cause: str  # key of CAUSE_WORDS, or a cause name from the analysis
    title: str
    runs: int
    nodes: tuple[str, ...]
    probes: tuple[str, ...]
    evidence: str
    next_command: str
    score: float  # ranking: runs affected, weighted by how slow


@dataclass(frozen=True)
class Answer:
    nodes: tuple[NodeAnswer, ...]
    causes: tuple[CauseFinding, ...]
    provisional: bool  # True while the verdict is derived here rather than given by the analysis


def answer_of(analysis: CampaignAnalysis, campaign_dir: str = "DIR") -> Answer:
    """The verdict per node and the causes, from whatever the analysis provides (see the module doc).

    When the analysis carries node verdicts (`analysis.nodes` or `analysis.node_verdicts`: items with
    node, verdict, reasons) they are used as given; when its runs carry ranked `causes` ({cause, score,
    evidence}), the slow runs are grouped by their first cause. Otherwise both are derived here.
    """
    given = _given_nodes(analysis)
    caused = any(getattr(r, "causes", None) for r in analysis.runs)
    return Answer(
        nodes=tuple(given) if given else tuple(_node_answers(analysis)),
        causes=tuple(_given_causes(analysis, campaign_dir) if caused else _causes(analysis, campaign_dir)),
        provisional=not (given and caused),
    )


def _field(item: Any, name: str, default: Any = None) -> Any:
    return item.get(name, default) if isinstance(item, dict) else getattr(item, name, default)


def _given_nodes(analysis: CampaignAnalysis) -> list[NodeAnswer]:
    items = getattr(analysis, "nodes", None) or getattr(analysis, "node_verdicts", None) or ()
    out = []
    for item in items:
        state = str(_field(item, "verdict", ""))
        if state not in ("healthy", "degraded", "inconclusive"):
            return []  # not the shape this reads: derive instead
        reasons = _field(item, "reasons", ()) or ()
        out.append(NodeAnswer(str(_field(item, "node")), state, tuple(str(r) for r in reasons)))  # type: ignore[arg-type]
    return sorted(out, key=lambda n: n.node)


def _given_causes(analysis: CampaignAnalysis, campaign_dir: str) -> list[CauseFinding]:
    """Slow runs grouped by their top-ranked cause (the analysis' own), most affected first."""
    names = {v.variant: variant_name(v.probe, dict(v.params)) for v in analysis.variants}
    by_cause: dict[str, list[tuple[RunVerdict, Any]]] = defaultdict(list)
    for r in analysis.runs:
        causes = getattr(r, "causes", None)
        if r.slow and causes:
            by_cause[str(_field(causes[0], "cause"))].append((r, causes[0]))
    out = []
    for cause, items in by_cause.items():
        runs = [r for r, _ in items]
        per_probe: dict[str, int] = defaultdict(int)
        for r in runs:
            per_probe[names.get(r.variant, r.probe)] += 1
        best = max(items, key=lambda it: float(_field(it[1], "score", 0.0) or 0.0))
        counts = ", ".join(f"{p} {k}" for p, k in sorted(per_probe.items(), key=lambda kv: -kv[1]))
        evidence = f"{len(runs)} slow runs ({counts}); e.g. {best[0].node} trial {best[0].trial}: " + str(
            _field(best[1], "evidence", "")
        )
        top_probe = max(per_probe, key=lambda p: per_probe[p]).split(" ")[0]
        command = NEXT_COMMAND.get(cause, NEXT_COMMAND["unclassified"])
        out.append(
            CauseFinding(
                cause=cause,
                title=CAUSE_WORDS.get(cause, cause.replace("_", " ")),
                runs=len(runs),
                nodes=tuple(sorted({r.node for r in runs})),
                probes=tuple(sorted(per_probe)),
                evidence=evidence,
                next_command=command.format(probe=top_probe, campaign=campaign_dir),
                score=sum(r.slowdown for r in runs),
            )
        )
    return sorted(out, key=lambda c: -c.score)


def run_cause(run: RunVerdict) -> str:
    """The cause shown when hovering over a run: the analysis' first cause when it has one, else the kind."""
    causes: Any = getattr(run, "causes", None)
    if causes:
        first = causes[0]
        return str(first.get("cause") if isinstance(first, dict) else getattr(first, "cause", first))
    if not run.slow:
        return "-"
    return {"systematic": "level shift", "transient": "interference"}.get(run.kind, run.kind)


def terms(analysis: CampaignAnalysis) -> str:
    s = analysis.settings
    return TERMS.format(threshold=f"{s.primary_threshold:.0%}", allowed=f"{s.allowed_slow_rate:.0%}")


def _node_answers(analysis: CampaignAnalysis) -> list[NodeAnswer]:
    groups: dict[str, list[GroupSummary]] = defaultdict(list)
    for g in analysis.groups:
        groups[g.node].append(g)
    failed_checks: dict[str, list[str]] = defaultdict(list)
    for c in analysis.verdict.checks:
        if not c.passed:
            failed_checks[c.scope.rsplit("/", 1)[-1]].append(c.message)
    out = []
    for node in sorted(groups):
        degraded: list[str] = list(failed_checks.get(node, []))
        unsure: list[str] = []
        for g in sorted(groups[node], key=lambda g: g.probe):
            name = variant_name(g.probe, _params(analysis, g.variant))
            tail = g.tails[0]
            if g.node_outlier:
                degraded.append(f"{name} {abs(g.node_ratio - 1):.1%} slower than its peers")
            if tail.rejects:
                kinds = [
                    f"{g.n_systematic} systematic" if g.n_systematic else "",
                    f"{g.n_transient} transient" if g.n_transient else "",
                ]
                kind = ", ".join(k for k in kinds if k)
                degraded.append(
                    f"{name}: {tail.k} of {tail.n} runs slow ({kind})"
                    if kind
                    else f"{name}: {tail.k} of {tail.n} runs slow"
                )
            elif g.n < MIN_RUNS:
                unsure.append(f"{name}: only {g.n} ok runs")
            if g.n_failed:
                unsure.append(f"{name}: {g.n_failed} trials failed")
        if degraded:
            out.append(NodeAnswer(node, "degraded", tuple(degraded)))
        elif unsure:
            out.append(NodeAnswer(node, "inconclusive", tuple(unsure)))
        else:
            runs = sum(g.n for g in groups[node])
            out.append(NodeAnswer(node, "healthy", (f"{runs} runs, slow-run rates within the allowed rate",)))
    return out


def _params(analysis: CampaignAnalysis, variant: str) -> dict[str, Any]:
    return next((dict(v.params) for v in analysis.variants if v.variant == variant), {})


def _causes(analysis: CampaignAnalysis, campaign_dir: str) -> list[CauseFinding]:
    by_cause: dict[str, list[RunVerdict]] = defaultdict(list)
    for r in analysis.runs:
        if r.slow:
            by_cause[r.kind if r.kind in ("systematic", "transient") else "unclassified"].append(r)
    names = {v.variant: variant_name(v.probe, dict(v.params)) for v in analysis.variants}
    out = []
    for cause, runs in by_cause.items():
        probes = tuple(sorted({names.get(r.variant, r.probe) for r in runs}))
        nodes = tuple(sorted({r.node for r in runs}))
        worst = max(runs, key=lambda r: r.slowdown)
        per_probe = defaultdict(int)
        for r in runs:
            per_probe[names.get(r.variant, r.probe)] += 1
        counts = ", ".join(f"{p} {k}" for p, k in sorted(per_probe.items(), key=lambda kv: -kv[1]))
        evidence = (
            f"{len(runs)} slow runs ({counts}); slowest: {names.get(worst.variant, worst.probe)} trial "
            f"{worst.trial} on {worst.node}, {worst.slowdown:.0%} below its node median"
        )
        ev = [r.evidence for r in runs if r.evidence is not None]
        if ev:
            low = sum(e.fraction_low for e in ev) / len(ev)
            evidence += f"; on average {low:.0%} of their iterations were low"
        top_probe = max(per_probe, key=lambda p: per_probe[p]).split(" ")[0]
        out.append(
            CauseFinding(
                cause=cause,
                title=CAUSE_WORDS.get(cause, cause),
                runs=len(runs),
                nodes=nodes,
                probes=probes,
                evidence=evidence,
                next_command=NEXT_COMMAND.get(cause, NEXT_COMMAND["unclassified"]).format(
                    probe=top_probe, campaign=campaign_dir
                ),
                score=sum(r.slowdown for r in runs),
            )
        )
    slow_nodes = [g for g in analysis.groups if g.node_outlier]
    if slow_nodes:
        nodes = tuple(sorted({g.node for g in slow_nodes}))
        out.append(
            CauseFinding(
                cause="node",
                title=CAUSE_WORDS["node"],
                runs=sum(g.n for g in slow_nodes),
                nodes=nodes,
                probes=tuple(sorted({g.probe for g in slow_nodes})),
                evidence=", ".join(
                    f"{g.node} {g.probe} median {abs(g.node_ratio - 1):.1%} below the fleet"
                    for g in sorted(slow_nodes, key=lambda g: g.node_ratio)[:5]
                ),
                next_command=NEXT_COMMAND["node"],
                score=sum(g.n * (1 - g.node_ratio) for g in slow_nodes) * 10,
            )
        )
    return sorted(out, key=lambda c: -c.score)
