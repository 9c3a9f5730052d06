"""The answer a report leads with: a verdict per node, and the flagged runs' causes grouped across probes.

`answer_of(analysis)` is the single place the terminal and the HTML report take the verdict from. It reads
what the analysis decided and derives nothing of its own:
- the node verdicts are `analysis.nodes` (analysis/health.py: healthy | degraded | inconclusive, with
  reasons and the node's causes);
- the causes are the flagged runs' ranked `causes` (analysis/causes: the catalogue), grouped by each run's
  top cause across probes, together with the node-level findings that no run carries (hardware-config of
  a node the fleet screen drains, cpu-contention of a node too busy to judge). A cause named by a node
  that is not healthy ranks first, then by the slowdown its runs account for.

Terms, explained once where they are shown (`TERMS`):
- slow run: more than the primary threshold (5%) below its node's median for the same probe variant;
- flagged run: slow, or an outlier against its node's runs (the runs that get a shape and causes);
- systematic: slow in every iteration (a level shift, as when the run's physical pages conflict);
- transient: slow in a few iterations only (interference: daemons, interrupts, other jobs).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tailscope.analysis.model import CampaignAnalysis, CauseFinding, NodeHealth, RunVerdict
from tailscope.analysis.run_columns import RunVerdicts
from tailscope.analysis.wording import pct
from tailscope.probes.catalogue import PROBES, variant_name

State = Literal["healthy", "degraded", "inconclusive"]

# The catalogue's names (analysis/causes) in words a reader meets first.
CAUSE_WORDS = {
    "cpu-contention": "other processes on the probe's CPUs",
    "os-noise": "interrupts and kernel work on the probe's CPUs",
    "memory-pressure": "memory reclaim, compaction or major faults",
    "thp-fallback": "small pages where huge pages were asked for",
    "frequency": "a lower clock than usual",
    "numa-placement": "memory from a remote NUMA node",
    "memory-bandwidth-contention": "memory bandwidth taken by other work",
    "cache-contention": "shared caches evicted by other work",
    "page-placement": "the physical pages the run got (a level shift)",
    "hardware-config": "a node configured unlike its peers",
    "unknown": "no cause found in the evidence",
}
# A tailscope command that tests the cause, where one does (the catalogue's mitigation says what to fix).
NEXT_COMMAND = {
    "page-placement": "tailscope run {probe} --page 2m,1g --trials 100 --campaign {campaign}-pages && "
    "tailscope compare {campaign}-pages --by page_policy",
    "thp-fallback": "tailscope run {probe} --page thp,2m --trials 100 --campaign {campaign}-pages && "
    "tailscope compare {campaign}-pages --by page_policy",
    "unknown": "tailscope run {probe} --trials 100 --monitor --campaign {campaign}-monitor",
    "hardware-config": "tailscope facts   (on the node and on a peer; compare)",
}
TERMS = (
    "slow = more than {threshold} below its node's median; flagged = slow, or an outlier against its "
    "node's runs; systematic = slow in every iteration (a level shift); transient = slow in a few "
    "iterations (interference); ! = more slow runs than the allowed rate {allowed} explains ({test})"
)
ORDER: tuple[State, ...] = ("degraded", "inconclusive", "healthy")


@dataclass(frozen=True)
class NodeAnswer:
    """One node's verdict as the renderers show it (from analysis/health.py's NodeHealth)."""

    node: str
    state: State
    reasons: tuple[str, ...]  # plain words, most important first
    causes: tuple[str, ...] = ()  # the catalogue names of the node's causes, most likely first


@dataclass(frozen=True)
class CauseGroup:
    """One cause of the catalogue across probes and nodes: the runs it is the top cause of."""

    cause: str  # the catalogue's name
    title: str
    runs: int  # flagged runs whose top cause this is
    nodes: tuple[str, ...]
    probes: tuple[str, ...]
    evidence: str  # the count, and the sentence of the best-explained run or node with its values
    mitigation: str  # the catalogue's: what to do about it
    next_command: str  # a tailscope command that tests it, or "" where none does
    confidence: str  # of the finding quoted in `evidence`
    verdicts: int = 0  # nodes that are not healthy and name this cause
    score: float = 0.0  # slowdown its runs account for (sum of slowdown x score)
    finding: CauseFinding | None = field(default=None, compare=False)  # the one quoted


@dataclass(frozen=True)
class Answer:
    nodes: tuple[NodeAnswer, ...]
    causes: tuple[CauseGroup, ...]

    @property
    def state(self) -> State:
        """The worst node's verdict; inconclusive when no node was judged (never green above nothing)."""
        states = {n.state for n in self.nodes}
        return next((s for s in ORDER if s in states), "inconclusive")


def answer_of(analysis: CampaignAnalysis, campaign_dir: str = "DIR") -> Answer:
    """The node verdicts and the causes, as the analysis gave them (see the module doc)."""
    return Answer(
        nodes=tuple(node_answer(n) for n in sorted(analysis.nodes, key=lambda n: n.node)),
        causes=tuple(_cause_groups(analysis, campaign_dir)),
    )


def node_answer(n: NodeHealth) -> NodeAnswer:
    return NodeAnswer(
        node=n.node,
        state=n.verdict,
        reasons=tuple(n.reasons),
        causes=tuple(dict.fromkeys(c.cause for c in n.causes)),
    )


def _cause_groups(analysis: CampaignAnalysis, campaign_dir: str) -> list[CauseGroup]:
    names = {v.variant: variant_name(v.probe, dict(v.params)) for v in analysis.variants}
    runs_of: dict[str, list[RunVerdict]] = defaultdict(list)
    runs = RunVerdicts.of(analysis.runs)
    for r in runs.rows(list(runs.per_run("causes"))):  # only the runs with causes are built
        if r.causes:
            runs_of[r.causes[0].cause].append(r)
    # Node-level findings no run carries (health.py's run groups have "runs" in their evidence).
    node_findings: dict[str, list[tuple[str, CauseFinding]]] = defaultdict(list)
    named_by: dict[str, set[str]] = defaultdict(set)
    for n in analysis.nodes:
        for c in n.causes:
            if n.verdict != "healthy":
                named_by[c.cause].add(n.node)
            if "runs" not in c.evidence:
                node_findings[c.cause].append((n.node, c))
    out = []
    for cause in {*runs_of, *node_findings}:
        runs = runs_of.get(cause, [])
        at_nodes = node_findings.get(cause, [])
        per_probe: dict[str, int] = defaultdict(int)
        for r in runs:
            per_probe[names.get(r.variant, r.probe)] += 1
        parts = []
        quoted: CauseFinding | None = None
        if runs:
            best = max(runs, key=lambda r: (r.causes[0].score, r.slowdown))
            quoted = best.causes[0]
            slow = sum(1 for r in runs if r.slow)
            counts = ", ".join(f"{p} {k}" for p, k in sorted(per_probe.items(), key=lambda kv: -kv[1]))
            parts.append(
                f"top cause of {_count(len(runs), 'flagged run')}, {slow} slow ({counts}); "
                f"e.g. {best.node} {quoted.sentence}"
            )
        for node, f in at_nodes[:2]:
            quoted = quoted or f
            parts.append(f"{node}: {f.sentence}")
        if len(at_nodes) > 2:
            parts.append(f"and {len(at_nodes) - 2} more nodes")
        if quoted is None:  # neither runs nor node findings: cannot happen, the loop is over their causes
            continue
        top_probe = _runnable_probe(per_probe, analysis)
        out.append(
            CauseGroup(
                cause=cause,
                title=f"{cause}: {CAUSE_WORDS[cause]}" if cause in CAUSE_WORDS else cause,
                runs=len(runs),
                nodes=tuple(sorted({r.node for r in runs} | {n for n, _ in at_nodes})),
                probes=tuple(sorted(per_probe)),
                evidence="; ".join(parts),
                mitigation=quoted.mitigation,
                next_command=next_command(cause, top_probe, campaign_dir, analysis),
                confidence=quoted.confidence,
                verdicts=len(named_by.get(cause, ())),
                score=sum(r.slowdown * r.causes[0].score for r in runs) + sum(f.score for _, f in at_nodes),
                finding=quoted,
            )
        )
    return sorted(out, key=lambda c: (-c.verdicts, -c.score, -c.runs, c.cause))


def _runnable_probe(per_probe: dict[str, int], analysis: CampaignAnalysis) -> str | None:
    """The tailscope probe a next command can run: of the cause's runs' probes the one with most of them
    (the campaign's first probe for a node-level finding without runs); None where that is imported
    (`imported:hpl`: `tailscope run` cannot run it)."""
    ranked = sorted(per_probe, key=lambda p: -per_probe[p])
    candidates = [p.split(" ")[0] for p in ranked] or [v.probe for v in analysis.variants[:1]]
    return next((p for p in candidates if p in PROBES or p.startswith("app:")), None)


def next_command(
    cause: str, probe: str | None, campaign_dir: str, analysis: CampaignAnalysis | None = None
) -> str:
    """The command that tests `cause` (NEXT_COMMAND), or "" where it would run a probe and none can run."""
    if probe is not None and probe.startswith("app:"):
        return _app_next_command(cause, probe, campaign_dir, analysis)
    template = NEXT_COMMAND.get(cause, "")
    if "{probe}" in template and probe is None:
        return ""
    return template.format(probe=probe, campaign=campaign_dir)


def _app_next_command(cause: str, probe: str, campaign_dir: str, analysis: CampaignAnalysis | None) -> str:
    """For an application (`app:NAME`) its stored command line is replayed (with the monitor, for
    `unknown`); the page causes are tested with the l2sum probe (pages are recorded only for probes)."""
    if cause in ("page-placement", "thp-fallback"):
        return NEXT_COMMAND[cause].format(probe="l2sum", campaign=campaign_dir)
    if cause != "unknown":
        return NEXT_COMMAND.get(cause, "")
    from tailscope.app.variant import command_line

    variants = analysis.variants if analysis is not None else ()
    params = next((v.params for v in variants if v.probe == probe), {})
    again = f"{campaign_dir}-monitor"
    return command_line(probe, params, "--trials", "100", "--monitor", "--campaign", again)


def by_ratio(runs: Sequence[RunVerdict]) -> list[int]:
    """Positions of `runs` ordered by (perf_ratio, node, trial), ties in their order: what
    `sorted(range(len(runs)), key=...)` gives, by numpy on the runs' columns (50,000 runs: 10 ms instead
    of 90 ms)."""
    import numpy as np

    if not runs:
        return []
    columns = RunVerdicts.of(runs)
    ratio = np.asarray(columns.column("perf_ratio"), dtype=float)
    trial = np.asarray(columns.column("trial"), dtype=np.int64)
    return np.lexsort((trial, text_rank(columns.column("node")), ratio)).tolist()


def text_rank(texts: Sequence[str]) -> Any:
    """Each text's rank in plain string order (equal texts, equal ranks), as a numpy integer array: a sort
    key for np.lexsort. pandas' hash factorize: 3 ms for 50,000 texts, where np.unique's sort took 18."""
    import numpy as np
    import pandas as pd

    return pd.factorize(np.asarray(texts, dtype=object), sort=True)[0]


def run_cause(run: RunVerdict) -> str:
    """The cause shown for a run (hover, slow-run tables, runs CSV): its top cause from the catalogue;
    '-' for runs that were not flagged."""
    return run.causes[0].cause if run.causes else "-"


def top_causes(runs: RunVerdicts) -> dict[int, CauseFinding]:
    """Row -> the top cause of each of `runs` that has causes (`run_cause` by column; the others: '-')."""
    return {row: causes[0] for row, causes in runs.per_run("causes").items() if causes}


def run_cause_text(run: RunVerdict) -> str:
    """The top cause's sentence (with the values it read), or the shape of the run when it has none."""
    if run.causes:
        return run.causes[0].sentence
    ev = run.evidence
    if ev is None:
        return "-"
    return f"{ev.low} of {ev.iterations} iterations low (median ratio {ev.median_ratio:.2f})"


def terms(analysis: CampaignAnalysis) -> str:
    s = analysis.settings
    # a check stopped when settled marks its slow runs by the anytime-valid test (analysis/summary.py)
    test = "anytime-valid test" if "stopping" in analysis.methods else "binomial test"
    return TERMS.format(threshold=pct(s.primary_threshold), allowed=pct(s.allowed_slow_rate), test=test)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
