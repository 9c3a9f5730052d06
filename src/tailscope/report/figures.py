"""The report's figures, each built from analysis results into one SVG (see svg.py for the drawing).

- `sorted_chart`: the seed's Fig. 1, every run's node-median-scaled value sorted slowest first;
- `ecdf_chart` and `histogram_chart`: the distribution of the performance ratio;
- `nodes_chart`: the seed's Fig. 9, per-node min / median / max;
- `timeline_chart`: one slow run's iterations against the node's typical run.
Slow thresholds are drawn where the analysis puts them: a run is slow at d when its performance ratio is
below 1 - d, i.e. below reference x (1 - d) for higher-is-better metrics and above reference / (1 - d)
for times (analysis/model.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from tailscope.analysis.model import GroupSummary, RunVerdict, Settings, VariantSummary
from tailscope.analysis.wording import pct
from tailscope.report.numbers import decimals_for, value_text
from tailscope.report.svg import (
    GREY,
    KIND_COLORS,
    PALETTE,
    Chart,
    axis_label,
    ecdf,
    histogram,
    minmax_decimate,
)
from tailscope.report.timelines import IterationSeries

__all__ = [
    "MAX_SCATTER_POINTS",
    "MAX_TIMELINE_POINTS",
    "ecdf_chart",
    "histogram_chart",
    "nodes_chart",
    "slow_level",
    "sorted_chart",
    "timeline_chart",
]

MAX_SCATTER_POINTS = (
    1500  # above this, normal runs are one line (no per-point tooltip); slow runs stay points
)
MAX_TIMELINE_POINTS = 400  # per drawn run; more iterations are min/max decimated
MARKED_POINTS = 60  # timelines with at most this many iterations also mark each iteration with a dot
MAX_ECDF_NODES = 8  # one ECDF per node up to this many nodes, else one over all runs
KIND_LABELS = {
    "none": "normal",
    "systematic": "slow, systematic",
    "transient": "slow, transient",
    "unclassified": "slow, unclassified",
}
RATIO_LABEL = "performance ratio (run vs node median; < 1 is slower)"


def slow_level(reference: float, threshold: float, higher_is_better: bool) -> float:
    """The value a run must be beyond to be slow at `threshold`, relative to `reference`."""
    return reference * (1.0 - threshold) if higher_is_better else reference / (1.0 - threshold)


def run_tooltip(run: RunVerdict) -> str:
    d = decimals_for(run.value)
    kind = "" if run.kind == "none" else f"; slow ({run.kind})"
    return (
        f"run {run.run_id}\nnode {run.node}, trial {run.trial}, {run.started_at}\n"
        f"{value_text(run.value, d)} {run.unit} (scaled {value_text(run.scaled_value, d)})\n"
        f"ratio {run.perf_ratio:.4f} vs node median{kind}"
    )


def sorted_chart(variant: VariantSummary, runs: Sequence[RunVerdict], settings: Settings) -> str:
    ordered = sorted(runs, key=lambda r: (r.perf_ratio, r.node, r.trial, r.run_id))
    chart = Chart(
        title=f"{variant.variant}: {len(ordered)} runs, node-median scaled, slowest first",
        x_label="run rank (slowest first)",
        y_label=axis_label(f"{variant.metric}, node-median scaled", variant.unit),
    )
    g = variant.global_median
    chart.hline(g, label=f"median {value_text(g, decimals_for(g))}", color=GREY, dash="")
    for i, d in enumerate(settings.thresholds):
        chart.hline(
            slow_level(g, d, variant.higher_is_better),
            label=f"{pct(d)} slower",
            color=PALETTE[1] if i == 0 else PALETTE[4],
        )
    rank = {r.run_id: i + 1 for i, r in enumerate(ordered)}
    normal = [r for r in ordered if r.kind == "none"]
    if len(ordered) > MAX_SCATTER_POINTS:
        chart.line(
            [rank[r.run_id] for r in normal],
            [r.scaled_value for r in normal],
            label=f"{KIND_LABELS['none']} ({len(normal)})",
            color=KIND_COLORS["none"],
            width=2.0,
        )
    for kind in ("none", "systematic", "transient", "unclassified"):
        chosen = [r for r in ordered if r.kind == kind]
        if not chosen or (kind == "none" and len(ordered) > MAX_SCATTER_POINTS):
            continue
        chart.scatter(
            [rank[r.run_id] for r in chosen],
            [r.scaled_value for r in chosen],
            label=f"{KIND_LABELS[kind]} ({len(chosen)})",
            color=KIND_COLORS[kind],
            tooltips=[run_tooltip(r) for r in chosen],
            radius=2.5 if kind == "none" else 3.5,
        )
    return chart.render(data={"figure": "sorted", "variant": variant.variant})


def ecdf_chart(variant: VariantSummary, runs: Sequence[RunVerdict], settings: Settings) -> str:
    chart = Chart(
        title=f"{variant.variant}: cumulative distribution of the performance ratio",
        x_label=RATIO_LABEL,
        y_label="fraction of runs at or below",
    )
    for i, d in enumerate(settings.thresholds):
        chart.vline(1.0 - d, label=f"{pct(d)} slower", color=PALETTE[1] if i == 0 else PALETTE[4])
    nodes = sorted({r.node for r in runs})
    if 1 < len(nodes) <= MAX_ECDF_NODES:
        for i, node in enumerate(nodes):
            xs, ys = ecdf([r.perf_ratio for r in runs if r.node == node])
            chart.step(xs, ys, label=f"node {node}", color=PALETTE[(i + 2) % len(PALETTE)])
    else:
        xs, ys = ecdf([r.perf_ratio for r in runs])
        label = f"node {nodes[0]}" if len(nodes) == 1 else f"all {len(nodes)} nodes"
        chart.step(xs, ys, label=label, color=PALETTE[0])
    return chart.render(data={"figure": "ecdf", "variant": variant.variant})


def histogram_chart(variant: VariantSummary, runs: Sequence[RunVerdict], settings: Settings) -> str:
    chart = Chart(
        title=f"{variant.variant}: histogram of the performance ratio",
        x_label=RATIO_LABEL,
        y_label="runs",
        y_from_zero=True,
    )
    edges, counts = histogram([r.perf_ratio for r in runs])
    tips = [f"{edges[i]:.4g} to {edges[i + 1]:.4g}: {c} runs" for i, c in enumerate(counts)]
    chart.bars(edges[:-1], edges[1:], counts, label=f"{len(runs)} runs", color=PALETTE[0], tooltips=tips)
    for i, d in enumerate(settings.thresholds):
        chart.vline(1.0 - d, label=f"{pct(d)} slower", color=PALETTE[1] if i == 0 else PALETTE[4])
    return chart.render(data={"figure": "histogram", "variant": variant.variant})


def nodes_chart(variant: VariantSummary, groups: Sequence[GroupSummary]) -> str:
    # Slowest median first: lowest value for higher-is-better metrics, highest for times.
    ordered = sorted(groups, key=lambda g: (g.node_ratio, g.node))
    chart = Chart(
        title=f"{variant.variant}: min / median / max per node ({len(ordered)} nodes)",
        x_label="node (slowest median first)",
        y_label=axis_label(variant.metric, variant.unit),
        x_categories=[g.node for g in ordered],
    )
    chart.hline(variant.global_median, label="median of all runs", color=GREY, dash="")
    d = decimals_for(variant.global_median)
    for outlier, label, color in ((False, "node", PALETTE[0]), (True, "slower than its peers", PALETTE[1])):
        idx = [i for i, g in enumerate(ordered) if g.node_outlier == outlier]
        if not idx:
            continue
        chart.error_bars(
            idx,
            [ordered[i].minimum for i in idx],
            [ordered[i].median for i in idx],
            [ordered[i].maximum for i in idx],
            label=f"{label} ({len(idx)})",
            color=color,
            tooltips=[
                f"node {g.node}: {g.n} runs\nmin {value_text(g.minimum, d)}, "
                f"median {value_text(g.median, d)}, "
                f"max {value_text(g.maximum, d)} {g.unit}\nnode median vs all: {g.node_ratio:.4f} "
                f"(robust score {g.node_score:.2f})"
                for g in (ordered[i] for i in idx)
            ],
        )
    return chart.render(data={"figure": "nodes", "variant": variant.variant})


def timeline_chart(
    variant: VariantSummary,
    slow: RunVerdict,
    slow_series: IterationSeries,
    typical: RunVerdict | None,
    typical_series: IterationSeries | None,
    settings: Settings,
) -> str:
    title = (
        f"{variant.variant} on {slow.node}: trial {slow.trial} ({pct(slow.slowdown)} slower, {slow.kind})"
        + (f" vs typical trial {typical.trial}" if typical is not None else "")
    )
    chart = Chart(
        title=title,
        x_label="iteration",
        y_label=axis_label(f"{variant.metric} per iteration", variant.unit),
        height=260,
    )
    if typical is not None and typical_series is not None and not typical_series.empty:
        xs, ys = minmax_decimate(typical_series.iterations, typical_series.values, MAX_TIMELINE_POINTS)
        label = f"typical trial {typical.trial} ({typical_series.what})"
        chart.line(xs, ys, label=label, color=GREY)
        if len(xs) <= MARKED_POINTS:
            chart.scatter(xs, ys, label=label, color=GREY, radius=2.0, legend=False)
        ev = slow.evidence
        if ev is not None and ev.reference is not None:
            # The classifier's own reference and cut (classify.py), so the lines show what the label used.
            chart.hline(ev.reference, label="typical iteration (the label's reference)", color=GREY)
            chart.hline(
                slow_level(ev.reference, 1.0 - ev.low_cut, variant.higher_is_better),
                label=f"low iteration: more than {pct(1.0 - ev.low_cut)} below it",
                color=PALETTE[1],
            )
        else:
            reference = typical_series.median
            chart.hline(
                slow_level(reference, settings.primary_threshold, variant.higher_is_better),
                label=f"{pct(settings.primary_threshold)} slower than the typical median",
                color=PALETTE[1],
            )
    if not slow_series.empty:
        xs, ys = minmax_decimate(slow_series.iterations, slow_series.values, MAX_TIMELINE_POINTS)
        label = f"slow trial {slow.trial} ({slow_series.what})"
        color = KIND_COLORS[slow.kind]
        chart.line(xs, ys, label=label, color=color, width=1.8)
        if len(xs) <= MARKED_POINTS:
            tips = [
                f"run {slow.run_id}, iteration {x:.0f}: {y:.4g} {variant.unit}"
                for x, y in zip(xs, ys, strict=True)
            ]
            chart.scatter(xs, ys, label=label, color=color, radius=2.5, legend=False, tooltips=tips)
    return chart.render(
        data={"figure": "timeline", "variant": variant.variant, "node": slow.node, "run": slow.run_id}
    )
