"""`jobs show`: the answer (which nodes make jobs slow, since when, what the epilog saw) and its forms:
terminal lines, the `--json` object, the verdict and the Prometheus textfile.

A node is *slow* when its effect's interval lies above 0 with Benjamini-Hochberg q < Q_SLOW (attribution.py);
the verdict is *degraded* when a slow node's effect is beyond the judging settings' primary slow threshold (5%
by default: what a run is judged by; `--threshold`), *inconclusive* when no class has enough completed jobs to
judge anything, else *healthy*. Exit codes as `verdict`: 0 healthy, 1 degraded, 3 inconclusive.

Epilog evidence: for each of a node's timed jobs with an epilog record from that node, the counters that
say something went wrong during the job (EVIDENCE: thermal throttling, memory errors, machine checks,
compaction stalls, co-runners outside the job's cgroup); absolute counters (`.total`: no start snapshot)
say nothing about the job and are not counted.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tailscope.jobs.attribution import Attribution, NodeResult
from tailscope.jobs.classes import DEFAULT_CLASS_BY, ClassSummary, slowdowns
from tailscope.printable import printable
from tailscope.printable import prometheus_label as _label

if TYPE_CHECKING:
    from tailscope.analysis.model import Settings

MAX_NODES_SHOWN = 15
EVIDENCE: tuple[tuple[str, Callable[[str, float], bool]], ...] = (  # the epilog's names: docs/jobs-epilog.md
    ("thermal throttling", lambda n, v: n.startswith("thermal.") and "throttle" in n and v > 0),
    ("corrected memory errors", lambda n, v: n == "edac.ce_count" and v > 0),
    ("uncorrected memory errors", lambda n, v: n == "edac.ue_count" and v > 0),
    ("machine-check events", lambda n, v: n.startswith("mce.") and v > 0),
    ("memory compaction stalls", lambda n, v: n == "vmstat.compact_stall" and v > 0),
    ("co-runners outside the job", lambda n, v: n == "corunners.cpu_s" and v >= 1.0),
)


@dataclass(frozen=True)
class EvidenceCount:
    what: str
    jobs: int
    of: int

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "jobs": self.jobs, "of": self.of}


@dataclass(frozen=True)
class NodeAnswer:
    result: NodeResult
    since: pd.Timestamp | None
    first_job: pd.Timestamp | None
    evidence: tuple[EvidenceCount, ...]
    records: int  # the node's timed jobs with an epilog record from it
    class_counts: tuple[tuple[str, int], ...] = ()  # (class, jobs) of a node asked for by name
    counted: bool = False  # the epilog evidence was counted (a slow node, or the node asked for)

    @property
    def node(self) -> str:
        return self.result.node

    def sentence(self) -> str:
        r = self.result
        if r.lower is None or r.upper is None:
            interval = "[no 95% interval from so few jobs]"
        else:
            interval = f"[{math.expm1(r.lower) * 100:.1f}, {math.expm1(r.upper) * 100:.1f}]"
        pct = r.percent
        how = f"{abs(pct):.1f}% {'slower' if pct >= 0 else 'faster'}"
        text = (
            f"{printable(r.node)}: jobs that ran on it were {how} {interval} than the same classes elsewhere "
            f"({r.jobs} jobs, {r.classes} classes, {_q_text(r.q)})"
        )
        day = self.since_day()
        if day is not None:
            text += (
                f" since {day}" if self.since is not None else f" since at least {day} (its first job here)"
            )
        if self.evidence:
            text += "; epilog: " + ", ".join(f"{e.what} in {e.jobs} of {e.of}" for e in self.evidence[:3])
        elif self.records:
            text += f"; epilog: nothing unusual in {self.records} jobs"
        return text

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "node": r.node,
            "effect": math.expm1(r.effect),
            "effect_ci": {
                "lower": None if r.lower is None else math.expm1(r.lower),
                "upper": None if r.upper is None else math.expm1(r.upper),
            },
            "jobs": r.jobs,
            "classes": r.classes,
            "q": r.q,
            "since": self.since_day(),
            "since_at_least": self.result.slow and self.since is None and self.first_job is not None,
            "evidence": [e.to_json() for e in self.evidence] if self.counted else None,
        }

    def since_day(self) -> str | None:
        """The day a slow node became slow (its change point), else its first job here (it was slow at
        least since then); None for a node that is not slow."""
        if not self.result.slow:
            return None
        at = self.since if self.since is not None else self.first_job
        return None if at is None else at.strftime("%Y-%m-%d")


def _q_text(q: float) -> str:
    """`q = 0.003`, `q < 0.0001`."""
    if q < 1e-4:
        return "q < 0.0001"
    return f"q = {q:.2g}" if q < 0.01 else f"q = {q:.2f}"


@dataclass
class JobsAnswer:
    nodes: list[NodeAnswer]  # slow nodes first (largest effect first), then the others by q
    classes: list[ClassSummary]
    threshold: float
    total: int
    timed: int
    untimed: dict[str, int]
    span: tuple[pd.Timestamp | None, pd.Timestamp | None]
    damaged: list[str] = field(default_factory=list)
    selected: str | None = None  # --node
    series: Callable[[NodeAnswer], pd.DataFrame] | None = None  # a node's jobs over time (the report)

    @property
    def degraded(self) -> list[NodeAnswer]:
        return [n for n in self.nodes if n.result.slow and math.expm1(n.result.effect) > self.threshold]

    @property
    def verdict(self) -> str:
        if self.selected is not None:
            mine = [n for n in self.nodes if n.node == self.selected]
            if not mine:
                return "inconclusive"
            return "degraded" if mine[0] in self.degraded else "healthy"
        if not self.classes:
            return "inconclusive"
        return "degraded" if self.degraded else "healthy"

    def reason(self, node: NodeAnswer) -> str:
        """One line for NHC and the drain reason."""
        r = node.result
        return (
            f"jobs on it {r.percent:.1f}% slower than the same classes elsewhere ({r.jobs} jobs, "
            f"{_q_text(r.q)}; more than the {self.threshold:.0%} the settings allow)"
        )


def _evidence_index(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(str(r.get("cluster") or ""), str(r["job_id"]), str(r["node"])): r for r in records}


def _evidence(
    rows: np.ndarray, node: str, timed: pd.DataFrame, index: dict
) -> tuple[tuple[EvidenceCount, ...], int]:
    if not index or not len(rows):
        return (), 0
    clusters = timed["cluster"].to_numpy()[rows]
    jobs = timed["job_id"].to_numpy()[rows]
    counts = dict.fromkeys((w for w, _ in EVIDENCE), 0)
    found = 0
    for c, j in zip(clusters, jobs, strict=True):
        rec = index.get((str(c), str(j), node))
        if rec is None:
            continue
        found += 1
        ev = rec.get("evidence") or {}
        for what, rule in EVIDENCE:
            if any(
                isinstance(v, int | float) and not name.endswith(".total") and rule(name, float(v))
                for name, v in ev.items()
            ):
                counts[what] += 1
    shown = tuple(EvidenceCount(w, n, found) for w, n in sorted(counts.items(), key=lambda x: -x[1]) if n)
    return shown, found


def figures_of(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """(cluster, job_id) -> the figures of merit the epilog found in the job's output."""
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in records:
        if r.get("figures"):
            out.setdefault((str(r.get("cluster") or ""), str(r["job_id"])), {}).update(r["figures"])
    return out


def answer(
    jobs: pd.DataFrame,
    records: list[dict[str, Any]],
    settings: Settings,
    *,
    node: str | None = None,
    since: dt.datetime | None = None,
    class_by: tuple[str, ...] = DEFAULT_CLASS_BY,
    damaged: list[str] | None = None,
) -> JobsAnswer:
    if since is not None and not jobs.empty:
        jobs = jobs[jobs["end_at"] >= pd.Timestamp(since)]
    timed = slowdowns(jobs, class_by, figures_of(records))
    frame = timed.jobs
    span = (frame["start_at"].min(), frame["end_at"].max()) if not frame.empty else (None, None)
    nodes: list[NodeAnswer] = []
    series = None
    if not frame.empty:
        fit = Attribution(frame)
        whole: dict[str, NodeResult] = {}  # every node's result over all its jobs (the report's series)

        def series(n: NodeAnswer, fit: Attribution = fit) -> pd.DataFrame:
            return fit.job_series(whole.get(n.node, n.result))

        results = fit.results()
        index = _evidence_index(records)
        start = fit.start
        for r in results:
            whole[r.node] = r
            wanted = r.slow or r.node == node
            since = fit.since(r) if r.slow else None
            first = pd.Timestamp(int(start[r.job_rows].min()), tz="UTC") if len(r.job_rows) else None
            if since is not None:  # its level since it became slow, and what the epilog saw since
                r = fit.level_since(r, since)
            evidence, found = _evidence(r.job_rows, r.node, frame, index) if wanted else ((), 0)
            counts: tuple[tuple[str, int], ...] = ()
            if r.node == node:
                vc = frame["class"].iloc[r.job_rows].value_counts()
                counts = tuple((str(c), int(n)) for c, n in vc.items())
            nodes.append(NodeAnswer(r, since, first, evidence, found, counts, counted=wanted))
        nodes.sort(key=_order)
    return JobsAnswer(
        nodes=nodes,
        classes=timed.classes,
        threshold=settings.primary_threshold,
        total=timed.total,
        timed=len(frame),
        untimed=timed.untimed,
        span=span,
        damaged=list(damaged or []),
        selected=node,
        series=series,
    )


def _order(n: NodeAnswer) -> tuple[bool, float, str]:
    """Slow nodes first, the largest effect first; then the others by q."""
    return (not n.result.slow, -n.result.effect if n.result.slow else n.result.q, n.node)


def _nodes(n: int) -> str:
    return f"{n:,} node" + ("" if n == 1 else "s")


def verdict_line(result: JobsAnswer) -> str:
    """The answer in one line, first: the verdict and why."""
    threshold = f"{result.threshold:.0%}"
    state = result.verdict
    if result.selected is not None:
        mine = [n for n in result.nodes if n.node == result.selected]
        name = printable(result.selected)
        if not mine:
            return f"verdict: INCONCLUSIVE (no timed job ran on {name} here)"
        slower = f"{name} makes its jobs {mine[0].result.percent:.1f}% slower"
        if state == "degraded":
            return f"verdict: DEGRADED ({slower}: more than the {threshold} allowed)"
        if mine[0].result.slow:
            return f"verdict: HEALTHY ({slower}: within the {threshold} allowed)"
        return f"verdict: HEALTHY ({name} does not make its jobs slow)"
    if state == "inconclusive":
        return "verdict: INCONCLUSIVE (no class has 10 completed jobs yet: nothing to judge)"
    if state == "degraded":
        bad = result.degraded
        names = ", ".join(printable(n.node) for n in bad[:10]) + (", ..." if len(bad) > 10 else "")
        verb = "makes its" if len(bad) == 1 else "make their"
        return f"verdict: DEGRADED ({_nodes(len(bad))} {verb} jobs more than {threshold} slower: {names})"
    slow = [n for n in result.nodes if n.result.slow]
    if slow:
        verb = "makes its" if len(slow) == 1 else "make their"
        return f"verdict: HEALTHY ({_nodes(len(slow))} {verb} jobs slower, within the {threshold} allowed)"
    return f"verdict: HEALTHY (no node makes its jobs slow, of {_nodes(len(result.nodes))})"


def render(result: JobsAnswer, *, width: int | None = None) -> list[str]:
    """The terminal answer: the verdict first, what was counted, one sentence per slow node (or the node
    asked for), the terms once; wrapped at `width` (the terminal's)."""
    from tailscope.report.terminal import terminal_width, wrap_lines

    width = width or terminal_width()
    out: list[str] = []

    def put(text: str, indent: str = "") -> None:  # continuation lines under the first word, as check's
        out.extend(wrap_lines([indent + text], width))

    put(verdict_line(result))
    first, last = result.span
    when = f" from {first:%Y-%m-%d} to {last:%Y-%m-%d}" if first is not None and last is not None else ""
    counted = (
        f"{result.total:,} jobs{when}: {result.timed:,} timed in {len(result.classes)} classes on "
        f"{_nodes(len(result.nodes))}"
    )
    if result.untimed:
        most = sorted(result.untimed.items(), key=lambda x: (-x[1], x[0]))
        counted += "; not timed: " + ", ".join(f"{n:,} {why}" for why, n in most)
    put(counted)
    shown: list[NodeAnswer] = []
    if result.selected is not None:
        shown = [n for n in result.nodes if n.node == result.selected]
        for n in shown:
            put(n.sentence())
            if n.class_counts:
                names = [f"{printable(c)} ({k})" for c, k in n.class_counts[:8]]
                more = len(n.class_counts) - len(names)
                put("its jobs' classes: " + "; ".join(names) + (f"; {more} more" if more > 0 else ""), "  ")
    elif result.classes:
        shown = [n for n in result.nodes if n.result.slow][:MAX_NODES_SHOWN]
        slow = sum(n.result.slow for n in result.nodes)
        if shown:
            out.append(f"nodes that make jobs slow ({slow}), the largest effect first:")
        for n in shown:
            put(n.sentence(), "  ")
        if slow > len(shown):
            out.append(f"  ... {slow - len(shown)} more (--json lists every node)")
    else:
        put("a class is the jobs of one user, job name, node count, CPUs per node and partition "
            "(--class-by), or those tagged #SBATCH --comment=tailscope:NAME; failed, cancelled and "
            "timed-out jobs are not timed")  # fmt: skip
    if shown:
        terms = (
            f"terms: [a, b], the effect's 95% interval; q, the false-discovery rate over the "
            f"{_nodes(len(result.nodes))} (Benjamini-Hochberg; slow: q < 0.05 and the interval above 0); "
            "epilog, what the node's epilog saw during those jobs"
        )
        if result.selected is not None:
            terms += "; a class, user:name N=nodes cpn=CPUs per node @partition (--class-by)"
        put(terms)
    return out


def to_json(result: JobsAnswer) -> dict[str, Any]:
    return {
        "nodes": [n.to_json() for n in result.nodes if result.selected is None or n.node == result.selected],
        "classes": [c.to_json() for c in result.classes],
        "verdict": result.verdict,
    }


def prometheus_text(result: JobsAnswer) -> str:
    """node_exporter textfile metrics: per node its effect, q and verdict from the site's jobs."""
    import time

    lines = [
        "# HELP tailscope_jobs_node_effect fraction by which jobs on the node were slower than their classes",
        "# TYPE tailscope_jobs_node_effect gauge",
    ]
    lines += [f'tailscope_jobs_node_effect{{node="{_label(n.node)}"}} {math.expm1(n.result.effect):.6g}'
              for n in result.nodes]  # fmt: skip
    lines += ["# HELP tailscope_jobs_node_q Benjamini-Hochberg q of the node's effect",
              "# TYPE tailscope_jobs_node_q gauge"]  # fmt: skip
    lines += [f'tailscope_jobs_node_q{{node="{_label(n.node)}"}} {n.result.q:.6g}' for n in result.nodes]
    lines += ["# HELP tailscope_jobs_node_degraded 1 when the node makes jobs slower than the settings allow",
              "# TYPE tailscope_jobs_node_degraded gauge"]  # fmt: skip
    bad = {n.node for n in result.degraded}
    lines += [
        f'tailscope_jobs_node_degraded{{node="{_label(n.node)}"}} {int(n.node in bad)}' for n in result.nodes
    ]
    lines += [
        "# HELP tailscope_jobs_timestamp_seconds when these were computed",
        "# TYPE tailscope_jobs_timestamp_seconds gauge",
        f"tailscope_jobs_timestamp_seconds {time.time():.3f}",
    ]
    return "\n".join(lines) + "\n"
