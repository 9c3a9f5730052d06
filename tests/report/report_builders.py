"""Hand-made analysis results for the report tests (imported by name: a module, not the conftest,
so it cannot collide with another directory's conftest when the whole suite runs).

The builders fill the analysis dataclasses directly with numbers chosen by hand, so these tests do not
depend on the statistics code: a run's performance ratio is given, and its value follows from the node
median by the model's convention (value = median x ratio for higher-is-better metrics, median / ratio
for times).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from tailscope.analysis.model import (
    CampaignAnalysis,
    CauseFinding,
    Check,
    GroupSummary,
    KindEvidence,
    NodeHealth,
    QuantileCI,
    QuantileRule,
    RunKind,
    RunVerdict,
    Settings,
    TailCount,
    TrialsNeeded,
    VariantSummary,
    Verdict,
)
from tailscope.report.html import render_html
from tailscope.store.manifest import Manifest

HOSTILE = "<script>alert('x')</script>&amp;"  # a node name no report may pass through unescaped


def run_verdict(
    variant: str,
    node: str,
    trial: int,
    ratio: float,
    *,
    median: float = 100.0,
    global_median: float | None = None,
    probe: str | None = None,
    unit: str = "GB/s",
    higher_is_better: bool = True,
    kind: RunKind | None = None,
    evidence: KindEvidence | None = None,
    threshold: float = 0.05,
    extras: dict | None = None,
    causes: Sequence[CauseFinding] = (),
) -> RunVerdict:
    """One run whose performance ratio vs its node median is `ratio` (< 1 = slower)."""
    value = median * ratio if higher_is_better else median / ratio
    g = median if global_median is None else global_median
    slow = ratio < 1.0 - threshold
    return RunVerdict(
        run_id=f"{variant}:{node}:{trial}",
        node=node,
        probe=probe or variant.split("-")[0],
        variant=variant,
        trial=trial,
        started_at=f"2026-11-02T10:{trial // 60:02d}:{trial % 60:02d}.000000Z",
        value=value,
        unit=unit,
        perf_ratio=ratio,
        scaled_value=value * g / median,
        robust_score=-5.0 if slow else 0.0,
        robust_outlier=slow,
        slow=slow,
        slowdown=1.0 - ratio,
        kind=(kind or ("unclassified" if slow else "none")),
        evidence=evidence,
        extras=extras or {},
        flagged=slow,
        causes=tuple(causes),
    )


def tail(
    threshold: float, k: int, n: int, *, p_value: float = 0.5, low: float = 0.0, high: float = 0.3
) -> TailCount:
    return TailCount(threshold, k, n, k / n, low, high, 0.01, p_value, p_value < 0.05)


def group(
    variant: str,
    node: str,
    *,
    n: int = 10,
    median: float = 100.0,
    ci: tuple[float | None, float | None] = (99.5, 100.5),
    unit: str = "GB/s",
    higher_is_better: bool = True,
    cv: float | None = 0.005,
    k5: int = 0,
    k10: int = 0,
    p5: float = 0.5,
    n_systematic: int = 0,
    n_transient: int = 0,
    n_failed: int = 0,
    minimum: float = 90.0,
    maximum: float = 101.0,
    node_ratio: float = 1.0,
    node_outlier: bool = False,
    extras: dict | None = None,
) -> GroupSummary:
    lo, hi = ci
    return GroupSummary(
        probe=variant.split("-")[0],
        variant=variant,
        node=node,
        metric="bandwidth" if higher_is_better else "quantum_time",
        unit=unit,
        higher_is_better=higher_is_better,
        n=n,
        n_failed=n_failed,
        median=median,
        median_ci=QuantileCI(
            0.5, median, lo, hi, 2 if lo else None, 9 if hi else None, 0.979 if lo else None
        ),
        minimum=minimum,
        maximum=maximum,
        mean=median,
        sd=None if cv is None else cv * median,
        cv=cv,
        mad=0.25,
        low_quantile=QuantileCI(0.01, minimum, None, None, None, None, None),
        quantile_rule=QuantileRule(0.01, minimum, (minimum - median) / median, -0.005, False),
        tails=(tail(0.05, k5, n, p_value=p5), tail(0.10, k10, n)),
        n_slow=k5,
        n_systematic=n_systematic,
        n_transient=n_transient,
        trials_needed=(
            TrialsNeeded(k5 / n, "observed", 0.95, 29 if k5 else None),
            TrialsNeeded(k5 / n, "observed", 0.99, 44 if k5 else None),
            TrialsNeeded(0.005, "given", 0.95, 598),
            TrialsNeeded(0.005, "given", 0.99, 919),
        ),
        extras=extras or {},
        node_ratio=node_ratio,
        node_score=-4.0 if node_outlier else 0.0,
        node_outlier=node_outlier,
    )


def variant_summary(
    variant: str,
    *,
    nodes: int,
    n: int,
    global_median: float = 100.0,
    unit: str = "GB/s",
    higher_is_better: bool = True,
) -> VariantSummary:
    return VariantSummary(
        probe=variant.split("-")[0],
        variant=variant,
        params={"page": "thp", "note": "<b>bold</b>"},
        metric="bandwidth" if higher_is_better else "quantum_time",
        unit=unit,
        higher_is_better=higher_is_better,
        nodes=nodes,
        n=n,
        global_median=global_median,
    )


SYSTEMATIC = KindEvidence(
    iterations=20,
    low=20,
    fraction_low=1.0,
    median_ratio=0.88,
    min_ratio=0.86,
    spread=0.01,
    low_cut=0.94,
    reference=100.0,
)
TRANSIENT = KindEvidence(iterations=20, low=2, fraction_low=0.1, median_ratio=1.0, min_ratio=0.5, spread=0.02)


def cause(name: str, trial: int, slowdown: float, score: float, confidence: str, text: str) -> CauseFinding:
    """A catalogue finding as analysis/causes writes it (sentence 'trial N (x% slower): ...')."""
    return CauseFinding(
        cause=name,
        score=score,
        confidence=confidence,  # type: ignore[arg-type]
        evidence={"probe": "made by hand"},
        sentence=f"trial {trial} ({slowdown:.0%} slower): {text}",
        mitigation=f"what to do about {name}",
    )


# The causes of the demo's flagged runs: l2sum trial 3 (systematic), trial 7 (transient), fwq trial 2.
DEMO_CAUSES = {
    ("l2sum-1a2b", 3): (
        cause("page-placement", 3, 0.12, 0.45, "low", "slow in every iteration; nothing else changed"),
    ),
    ("l2sum-1a2b", 7): (
        cause("cpu-contention", 7, 0.07, 0.9, "high", "stress-ng (pid 4242) took 41% of CPU 0"),
        cause("os-noise", 7, 0.07, 0.1, "low", "irq 1.2% (usual 0.4%)"),
    ),
    ("fwq-9f9f", 2): (cause("cpu-contention", 2, 0.2, 0.6, "medium", "others took 30% of CPU 1"),),
}


def demo_analysis(*, checks: Sequence[Check] = (), notes: Sequence[str] = ()) -> CampaignAnalysis:
    """Two variants: l2sum (GB/s) on n1 and a hostile-named node, fwq (us, lower is better) on n1.

    l2sum n1: 10 runs, trial 3 is 12% slower (systematic), trial 7 is 7% slower (transient);
    l2sum HOSTILE: 10 runs, none slow; fwq n1: 10 runs, trial 2 is 20% slower (unclassified).
    """
    ratios = [1.0, 1.002, 0.998, 0.88, 1.001, 0.999, 1.003, 0.93, 0.997, 1.0004]
    runs = []
    for t, r in enumerate(ratios):
        kind: RunKind | None = {3: "systematic", 7: "transient"}.get(t)
        ev = {3: SYSTEMATIC, 7: TRANSIENT}.get(t)
        runs.append(
            run_verdict(
                "l2sum-1a2b",
                "n1",
                t,
                r,
                kind=kind,
                evidence=ev,
                causes=DEMO_CAUSES.get(("l2sum-1a2b", t), ()),
            )
        )
    for t in range(10):
        runs.append(
            run_verdict("l2sum-1a2b", HOSTILE, t, 1.0 + 0.001 * (t - 5), median=98.0, global_median=99.0)
        )
    for t in range(10):
        r = 0.8 if t == 2 else 1.0 + 0.002 * (t % 3)
        extras = {"noise_fraction": 0.011, "noise_events": 3, "noise_period_s": 0.004} if t == 2 else None
        runs.append(
            run_verdict(
                "fwq-9f9f",
                "n1",
                t,
                r,
                unit="us",
                higher_is_better=False,
                extras=extras,
                causes=DEMO_CAUSES.get(("fwq-9f9f", t), ()),
            )
        )
    groups = (
        group(
            "fwq-9f9f",
            "n1",
            unit="us",
            higher_is_better=False,
            k5=1,
            k10=1,
            minimum=99.0,
            maximum=125.0,
            extras={
                "noise_fraction_median": 0.011,
                "noise_period_s_median": 0.004,
                "noise_rate_per_s_median": 2.5,
                "noise_rule": "<rule>",
            },
        ),
        group("l2sum-1a2b", HOSTILE, median=98.0, ci=(97.9, 98.1), node_ratio=0.9899, node_outlier=True),
        group(
            "l2sum-1a2b",
            "n1",
            median=95.123,
            ci=(94.98, 95.2),
            k5=2,
            k10=1,
            p5=0.0043,
            n_systematic=1,
            n_transient=1,
            n_failed=1,
            cv=0.0412,
        ),
    )
    variants = (
        variant_summary("fwq-9f9f", nodes=1, n=10, unit="us", higher_is_better=False),
        variant_summary("l2sum-1a2b", nodes=2, n=20, global_median=99.0),
    )
    return CampaignAnalysis(
        campaign="c0ffee",
        settings=Settings(),
        variants=variants,
        groups=groups,
        runs=tuple(runs),
        verdict=Verdict(
            passed=all(c.passed for c in checks),
            checks=tuple(checks),
            state="healthy" if all(c.passed for c in checks) else "degraded",
        ),
        notes=tuple(notes),
        methods={"quantiles": "order statistics", "kind": "level vs spread"},
        nodes=tuple(
            NodeHealth(
                node=node,
                verdict="healthy"
                if all(c.passed for c in checks if c.scope.endswith(f"/{node}"))
                else "degraded",
                reasons=tuple(c.message for c in checks if c.scope.endswith(f"/{node}") and not c.passed)
                or ("every probe within the limits",),
                causes=_node_causes(node, runs, checks),
                limits=("slow-run rate at most 1%",),
            )
            for node in sorted({g.node for g in groups})
        ),
    )


def _node_causes(node: str, runs: Sequence[RunVerdict], checks: Sequence[Check]) -> tuple[CauseFinding, ...]:
    """As analysis/health.py: a degraded node's flagged runs grouped by their top cause ('runs' in the
    evidence marks a group made from runs)."""
    if all(c.passed for c in checks if c.scope.endswith(f"/{node}")):
        return ()
    by: dict[str, list[RunVerdict]] = {}
    for r in runs:
        if r.node == node and r.causes:
            by.setdefault(r.causes[0].cause, []).append(r)
    return tuple(
        CauseFinding(
            cause=name,
            score=len(rs) / 3,
            confidence=rs[0].causes[0].confidence,
            evidence={"runs": [r.run_id for r in rs], "trials": [r.trial for r in rs]},
            sentence=f"{name} in trials {', '.join(str(r.trial) for r in rs)}",
            mitigation=rs[0].causes[0].mitigation,
        )
        for name, rs in sorted(by.items(), key=lambda kv: -len(kv[1]))
    )


def team_iterations(
    run_id: str, values: Sequence[float], *, warmup: float | None = None, kernel: str | None = None
):
    """Iterations rows (store columns) of one run's team records; an optional warm-up iteration 0."""
    rows = []
    offset = 0
    if warmup is not None:
        rows.append((run_id, 0, None, kernel, None, True, 0.01, warmup))
        offset = 1
    rows += [(run_id, i + offset, None, kernel, None, False, 0.01, v) for i, v in enumerate(values)]
    return rows


def thread_iterations(run_id: str, per_thread: Sequence[Sequence[float]]):
    return [
        (run_id, i, t, None, t, False, 0.0001, v)
        for t, values in enumerate(per_thread)
        for i, v in enumerate(values)
    ]


ITERATION_COLUMNS = ["run_id", "iteration", "thread", "kernel", "cpu", "warmup", "seconds", "value"]


def iterations_frame(rows) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows), columns=ITERATION_COLUMNS)
    frame["thread"] = frame["thread"].astype("Int32")
    return frame


def nodes_frame(rows: Sequence[dict]) -> pd.DataFrame:
    """Rows of the store's nodes table; `facts` given as a dict is written as JSON."""
    out = []
    for row in rows:
        row = dict(row)
        if isinstance(row.get("facts"), dict):
            row["facts"] = json.dumps(row["facts"])
        row.setdefault("task", "t1")
        out.append(row)
    frame = pd.DataFrame(out)
    frame["collected_at"] = pd.to_datetime(frame["collected_at"], utc=True)
    return frame


MANIFEST = Manifest(
    campaign_id="c0ffee",
    name="demo",
    created="2026-11-02T09:00:00+00:00",
    tool_version="0.1.0",
    schema_version=2,
)


CHECKS = (
    Check("max_slow_rate", "l2sum-1a2b/n1", 0.2, 0.01, False, "node n1, l2sum-1a2b: 2 of 10 runs were slow"),
    Check("max_cv", "fwq-9f9f/n1", 0.005, 0.02, True, "node n1, fwq-9f9f: CV 0.5%; limit 2%: passed"),
)
NOTES = ("first note: node n1 has slow runs", f"second note about {HOSTILE}", "third note")


def demo_iterations() -> pd.DataFrame:
    rows = []
    rows += team_iterations("l2sum-1a2b:n1:0", [100.0] * 20, warmup=50.0)  # the typical run
    rows += team_iterations("l2sum-1a2b:n1:3", [88.0] * 20, warmup=50.0)  # systematic
    rows += team_iterations("l2sum-1a2b:n1:7", [100.0] * 18 + [50.0, 50.0], warmup=50.0)  # transient
    rows += thread_iterations("fwq-9f9f:n1:0", [[100.0] * 50, [101.0] * 50])
    rows += thread_iterations("fwq-9f9f:n1:2", [[125.0] * 50, [100.0] * 50])
    return iterations_frame(rows)


def demo_nodes() -> pd.DataFrame:
    return nodes_frame(
        [
            # Two collections of n1: only the later one is current.
            dict(node="n1", collected_at="2026-11-01T08:00:00Z", microcode="0x1", l2_bytes=1048576,
                 facts={"microcode": "0x1", "cpu": {"model": "Xeon 8160"}}),
            dict(node="n1", collected_at="2026-11-02T08:00:00Z", microcode="0x2", l2_bytes=1048576,
                 facts={"microcode": "0x2", "cpu": {"model": "Xeon 8160"}, "thp": "madvise"}),
            dict(node=HOSTILE, collected_at="2026-11-02T08:00:00Z", microcode="0x3", l2_bytes=2097152,
                 facts={"microcode": "0x3", "cpu": {"model": "Xeon 8160"}, "thp": "<always>"}),
        ]
    )  # fmt: skip


def render(analysis: CampaignAnalysis | None = None, **kw: object) -> str:
    """The demo report (failed check, three notes, iterations and node facts) or `analysis`'s."""
    return render_html(
        analysis or demo_analysis(checks=CHECKS, notes=NOTES),
        manifest=kw.get("manifest", MANIFEST),  # type: ignore[arg-type]
        nodes=kw.get("nodes", demo_nodes()),  # type: ignore[arg-type]
        iterations=kw.get("iterations", demo_iterations()),  # type: ignore[arg-type]
        generated_at="2026-11-02T12:00:00+00:00",
        validation=kw.get("validation"),  # type: ignore[arg-type]
    )
