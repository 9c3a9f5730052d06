"""The report's interactive figures: Plotly, its JavaScript embedded once per report, nothing fetched.

Each figure is a `<div class="plot">` plus its Plotly spec as JSON in a `<script type="application/json">`;
one small script draws a figure when it scrolls into view (a fleet report holds many figures; drawing only
what is seen keeps the page opening fast). Hover shows node, trial, start time, value and cause of a run.

- `time_figure`: value against wall-clock start time per node, slow runs marked, injected windows shaded;
- `sorted_figure`: node-median-scaled values sorted slowest first (the seed's Fig. 1 and Fig. 8);
- `ecdf_figure`: the cumulative distribution of the node-scaled values;
- `nodes_figure`: per-node min / median / max, nodes sorted by median (the seed's Fig. 9);
- `compare_figure`: the sorted node-scaled values of variants overlaid (Fig. 8 of 4 KiB / 2 MiB / 1 GiB);
- `timeline_figure`: one slow run's iterations against its node's typical run.
A value axis is logarithmic wherever the data span more than 10x. Large series are thinned for drawing
(normal runs only; every slow run stays a point), and the caption says so.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tailscope.analysis.model import GroupSummary, RunVerdict, Settings, VariantSummary
from tailscope.analysis.run_columns import RunVerdicts
from tailscope.analysis.wording import pct
from tailscope.report.answer import by_ratio, text_rank, top_causes
from tailscope.report.markup import esc

MAX_POINTS = 4000  # normal runs drawn per figure; beyond, evenly thinned (slow runs are always drawn)
MAX_NODE_TRACES = 8  # up to this many nodes get a trace (and legend entry) each
LOG_SPAN = 10.0
COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
SLOW_COLOR = "#d62728"
CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["sendDataToCloud"]}

BOOT = """
(function(){
  function draw(div){
    if(div.getAttribute('data-drawn'))return;
    div.setAttribute('data-drawn','1');
    var spec=JSON.parse(document.getElementById(div.id+'-spec').textContent);
    Plotly.newPlot(div,spec.data,spec.layout,spec.config);
  }
  var plots=Array.prototype.slice.call(document.querySelectorAll('div.plot'));
  window.tailscopeDraw=function(){plots.forEach(draw);};
  if(!('IntersectionObserver' in window)){plots.forEach(draw);return;}
  var seen=new IntersectionObserver(function(entries){
    entries.forEach(function(e){if(e.isIntersecting){draw(e.target);seen.unobserve(e.target);}});
  },{rootMargin:'400px'});
  plots.forEach(function(p){seen.observe(p);});
})();
"""


def plotly_js() -> str:
    """plotly.min.js from the installed `plotly` package (the same file for every report): the file its
    get_plotlyjs() reads, found without importing plotly (whose import, importlib.metadata and all, was
    60-70 ms of a `report`)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("plotly")  # a top-level package is found, not run
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "package_data" / "plotly.min.js"
        if path.is_file():
            return path.read_bytes().decode("utf-8")
    from plotly.offline import get_plotlyjs  # packaged some other way (a zip): its own reader

    return str(get_plotlyjs())


def scripts() -> str:
    """The library and the drawing script, once per report, at the end of the body."""
    return f"<script>{plotly_js()}</script>\n<script>{BOOT}</script>"


class Figures:
    """Numbers the figures of one report (ids must be unique in the page)."""

    def __init__(self) -> None:
        self.count = 0

    def html(
        self,
        kind: str,
        variant: str,
        data: list[dict[str, Any]],
        layout: dict[str, Any],
        height: int,
        *,
        extra: Mapping[str, str] | None = None,
    ) -> str:
        self.count += 1
        fid = f"plot{self.count}"
        top, bottom = 36, 84  # the legend goes under the x axis title, whatever the figure's height
        base = {
            "height": height,
            "margin": {"l": 64, "r": 16, "t": top, "b": bottom},
            "hovermode": "closest",
            "legend": {
                "orientation": "h",
                "x": 0,
                "y": -52 / max(60, height - top - bottom),
                "yanchor": "top",
            },
            "font": {"size": 12},
            "modebar": {"orientation": "v"},
        }
        spec = {"data": data, "layout": {**base, **layout}, "config": CONFIG}
        text = json.dumps(spec, separators=(",", ":"), allow_nan=False, default=_json_default)
        text = text.replace("<", "\\u003c")  # no markup inside the script element, whatever a name holds
        attrs = "".join(f' data-{k}="{esc(v)}"' for k, v in (extra or {}).items())
        return (
            f'<div class="plot" id="{fid}" data-figure="{esc(kind)}" data-variant="{esc(variant)}"{attrs} '
            f'style="height:{height}px"></div>'
            f'<script type="application/json" id="{fid}-spec">{text}</script>'
        )


def _json_default(obj: object) -> object:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    raise TypeError(type(obj).__name__)


def _round(x: float) -> float:
    return float(f"{x:.5g}") if math.isfinite(x) else 0.0


def log_axis(values: Iterable[float]) -> bool:
    """True when the positive values span more than LOG_SPAN (the axis is then logarithmic)."""
    return _log_axis(values)


def axis(title: str, log: bool = False, **extra: Any) -> dict[str, Any]:
    return _axis(title, log, **extra)


def hline(y: float, color: str) -> dict[str, Any]:
    return _hline(y, color)


def minmax_thin(xs: Any, ys: Any, limit: int) -> tuple[list[float], list[float]]:
    """At most `limit` points: each bucket of consecutive points keeps its lowest and highest, in order, so
    single-sample spikes stay visible."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size <= limit:
        return x.tolist(), y.tolist()
    buckets = np.array_split(np.arange(x.size), max(1, limit // 2))
    keep: list[int] = []
    for b in buckets:
        lo, hi = b[np.argmin(y[b])], b[np.argmax(y[b])]
        keep += sorted({int(lo), int(hi)})
    return x[keep].tolist(), y[keep].tolist()


def _log_axis(values: Iterable[float]) -> bool:
    v = np.asarray(values, dtype=float) if isinstance(values, np.ndarray) else np.fromiter(values, float)
    v = v[np.isfinite(v) & (v > 0)]
    return bool(v.size) and float(v.max()) > LOG_SPAN * float(v.min())  # no ratio: 8e300 / 1e-300 has none


def _axis(title: str, log: bool = False, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "type": "log" if log else "linear", "automargin": True, **extra}


def _thin(items: Sequence[Any], limit: int = MAX_POINTS) -> list[Any]:
    if len(items) <= limit:
        return list(items)
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def _epoch_ms(iso: str) -> int | None:
    try:
        t = dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)


def _hover(unit: str, x_label: str) -> str:
    return (
        "node %{customdata[0]}<br>trial %{customdata[1]}<br>started %{customdata[3]}<br>"
        f"{x_label}%{{y:.4g}} {unit}<br>cause %{{customdata[2]}}<extra></extra>"
    )


def _custom(runs: RunVerdicts, rows: Sequence[int]) -> list[list[Any]]:
    """The hover data of these rows of `runs`: node, trial, top cause ('-': none), start time."""
    top = top_causes(runs)
    index = np.asarray(rows, dtype=np.int64)
    columns = (runs.column("node")[index].tolist(), runs.column("trial")[index].tolist(),
               runs.column("started_at")[index].tolist())  # fmt: skip
    return [
        [node, trial, top[row].cause if row in top else "-", str(started)[:19].replace("T", " ")]
        for row, node, trial, started in zip(rows, *columns, strict=True)
    ]


def _slow_level(reference: float, threshold: float, higher_is_better: bool) -> float:
    return reference * (1.0 - threshold) if higher_is_better else reference / (1.0 - threshold)


def time_figure(
    figs: Figures,
    variant: VariantSummary,
    name: str,
    runs: Sequence[RunVerdict],
    windows: Sequence[tuple[str, str, str]] = (),
) -> str:
    """Value against start time per node; slow runs as red crosses; `windows` (node, start, end) shaded."""
    runs = RunVerdicts.of(runs)  # by column: the drawn runs' values are read, no object is built
    node_of = runs.column("node")
    nodes = sorted(set(node_of.tolist()))
    per_node = len(nodes) <= MAX_NODE_TRACES
    slow = np.asarray(runs.column("slow"), dtype=bool)
    order = np.asarray(_by_start(runs), dtype=np.int64)
    normal = order[~slow[order]]  # the normal runs in start order
    by_trace: dict[str, list[int]] = {}
    if per_node:
        for node in nodes:
            mine = normal[node_of[normal] == node].tolist()
            if mine:
                by_trace[node] = mine
    elif len(normal):
        by_trace["all nodes"] = normal.tolist()
    data: list[dict[str, Any]] = []
    for i, (label, chosen) in enumerate(sorted(by_trace.items())):
        shown = _thin(chosen)
        text = f"{label} ({len(chosen)}" + (f", {len(shown)} drawn)" if len(shown) < len(chosen) else ")")
        data.append(_time_trace(runs, shown, text, COLORS[i % len(COLORS)], variant.unit))
    slow_rows = np.flatnonzero(slow).tolist()
    if slow_rows:
        label = f"slow ({len(slow_rows)})"
        data.append(_time_trace(runs, slow_rows, label, SLOW_COLOR, variant.unit, symbol="x", size=8))
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": _epoch_ms(start),
            "x1": _epoch_ms(end),
            "y0": 0,
            "y1": 1,
            "fillcolor": "rgba(255,152,0,0.18)",
            "line": {"width": 0},
            "layer": "below",
        }
        for _, start, end in windows
        if _epoch_ms(start) is not None and _epoch_ms(end) is not None
    ]
    layout = {
        "title": {"text": "value against time" + (" per node" if per_node else ""), "x": 0},
        "xaxis": _axis("run start (UTC)", type="date", tickangle=0, nticks=6),
        "yaxis": _axis(f"{variant.metric} ({variant.unit})", _log_axis(runs.column("value"))),
        "shapes": shapes,
    }
    return figs.html("time", variant.variant, data, layout, 380)


def _by_start(runs: Sequence[RunVerdict]) -> list[int]:
    """Positions of `runs` in (started_at text, trial) order, ties in their order: `sorted(runs, key=...)`
    by numpy on the runs' columns (50,000 runs: a Python key sort took 30 ms)."""
    if not runs:
        return []
    columns = RunVerdicts.of(runs)
    trial = np.asarray(columns.column("trial"), dtype=np.int64)
    return np.lexsort((trial, text_rank([str(s) for s in columns.column("started_at").tolist()]))).tolist()


def _time_trace(
    runs: RunVerdicts,
    rows: Sequence[int],
    label: str,
    color: str,
    unit: str,
    symbol: str = "circle",
    size: int = 5,
) -> dict[str, Any]:
    index = np.asarray(rows, dtype=np.int64)
    return {
        "type": "scatter",
        "mode": "markers",
        "name": label,
        "x": [_epoch_ms(str(s)) for s in runs.column("started_at")[index].tolist()],
        "y": [_round(v) for v in runs.column("value")[index].tolist()],
        "customdata": _custom(runs, rows),
        "hovertemplate": _hover(unit, ""),
        "marker": {"color": color, "size": size, "symbol": symbol},
    }


def sorted_figure(
    figs: Figures, variant: VariantSummary, name: str, runs: Sequence[RunVerdict], settings: Settings
) -> str:
    runs = RunVerdicts.of(runs)  # by column: the drawn runs' values are read, no object is built
    order = by_ratio(runs)  # rank k (from 1) is runs[order[k - 1]]; only the drawn runs are looked at again
    slow_at = np.asarray(runs.column("slow"), dtype=bool)[np.asarray(order, dtype=np.int64)]
    n_slow = int(slow_at.sum())
    normal_ranks = _thin((np.flatnonzero(~slow_at) + 1).tolist())
    slow_ranks = (np.flatnonzero(slow_at) + 1).tolist()
    scaled = runs.column("scaled_value")
    data = []
    for label, ranks, color, symbol in (
        ("normal", normal_ranks, COLORS[0], "circle"),
        ("slow", slow_ranks, SLOW_COLOR, "x"),
    ):
        if ranks:
            chosen = [order[k - 1] for k in ranks]
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": f"{label} ({len(chosen) if label == 'slow' else len(order) - n_slow}"
                    + (
                        f", {len(chosen)} drawn)"
                        if label == "normal" and len(chosen) < len(order) - n_slow
                        else ")"
                    ),
                    "x": ranks,
                    "y": [_round(v) for v in scaled[np.asarray(chosen, dtype=np.int64)].tolist()],
                    "customdata": _custom(runs, chosen),
                    "hovertemplate": _hover(variant.unit, "scaled "),
                    "marker": {"color": color, "size": 5 if label == "normal" else 7, "symbol": symbol},
                }
            )
    g = variant.global_median
    lines = [(g, "median", "#555")] + [
        (_slow_level(g, d, variant.higher_is_better), f"{d:.0%} slower", "#ff7f0e" if i == 0 else "#9467bd")
        for i, d in enumerate(settings.thresholds)
    ]
    log = _log_axis(scaled)
    at = (lambda y: math.log10(y)) if log else (lambda y: y)  # annotations on a log axis are placed in log10
    layout = {
        "title": {"text": f"{len(order)} runs sorted, node-scaled", "x": 0},
        "xaxis": _axis("run rank (slowest first)"),
        "yaxis": _axis(f"{variant.metric}, node-scaled ({variant.unit})", log),
        "shapes": [_hline(y, color) for y, _, color in lines],  # shapes take data values
        "annotations": [_hlabel(at(y), text) for y, text, _ in lines],
    }
    return figs.html("sorted", variant.variant, data, layout, 360)


def _hline(y: float, color: str) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "y0": y,
        "y1": y,
        "line": {"color": color, "width": 1, "dash": "dash"},
    }


def _hlabel(y: float, text: str) -> dict[str, Any]:
    return {
        "xref": "paper",
        "x": 0.01,
        "y": y,
        "text": text,
        "showarrow": False,
        "xanchor": "left",
        "yanchor": "bottom",
        "font": {"size": 10, "color": "#555"},
    }


def ecdf_figure(figs: Figures, variant: VariantSummary, name: str, runs: Sequence[RunVerdict]) -> str:
    runs = RunVerdicts.of(runs)  # by column
    node_of = runs.column("node")
    scaled = np.asarray(runs.column("scaled_value"), dtype=float)
    nodes = sorted(set(node_of.tolist()))
    groups = (
        {n: scaled[node_of == n] for n in nodes} if len(nodes) <= MAX_NODE_TRACES else {"all nodes": scaled}
    )
    data = []
    for i, (label, chosen) in enumerate(groups.items()):
        values = np.sort(chosen)
        n = len(values)
        idx = _thin(list(range(n)), 1000)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "line": {"shape": "hv", "color": COLORS[i % len(COLORS)]},
                "name": f"{label} ({n})",
                "x": [_round(values[j]) for j in idx],
                "y": [round((j + 1) / n, 5) for j in idx],
                "hovertemplate": f"%{{x:.4g}} {variant.unit}: %{{y:.1%}} of runs at or below"
                f"<extra>{esc(label)}</extra>",
            }
        )
    layout = {
        "title": {"text": "cumulative distribution, node-scaled", "x": 0},
        "xaxis": _axis(f"{variant.metric}, node-scaled ({variant.unit})", _log_axis(scaled)),
        "yaxis": _axis("fraction of runs at or below", range=[0, 1.02]),
    }
    return figs.html("ecdf", variant.variant, data, layout, 320)


SCREEN_COLORS = {"drain": SLOW_COLOR, "retest": "#ff7f0e", "ok": COLORS[0]}


def nodes_figure(
    figs: Figures,
    variant: VariantSummary,
    name: str,
    groups: Sequence[GroupSummary],
    screen: Mapping[str, str] | None = None,
) -> str:
    """The seed's Fig. 9: per node the median with a bar from min to max, nodes sorted by median. With the
    node screen of the cluster analysis (node -> drain | retest | ok) the nodes are coloured by its verdict,
    so this one figure agrees with the screen; without it, a node slower than its peers is red."""
    ordered = sorted(groups, key=lambda g: g.median, reverse=not variant.higher_is_better)
    rank = {g.node: i + 1 for i, g in enumerate(ordered)}

    def verdict(g: GroupSummary) -> str:
        if screen is not None:
            return screen.get(g.node, "ok")
        return "drain" if g.node_outlier else "ok"

    data = []
    for state, label in (
        ("ok", "ok"),
        ("retest", "re-test"),
        ("drain", "drain" if screen else "slower than peers"),
    ):
        chosen = [g for g in ordered if verdict(g) == state]
        if not chosen:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{label} ({len(chosen)}): median, bar min to max",
                "x": [rank[g.node] for g in chosen],
                "y": [_round(g.median) for g in chosen],
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [_round(g.maximum - g.median) for g in chosen],
                    "arrayminus": [_round(g.median - g.minimum) for g in chosen],
                    "color": "#999",
                    "thickness": 1,
                    "width": 0,
                },
                "customdata": [[g.node, g.n, _round(g.minimum), _round(g.maximum)] for g in chosen],
                "hovertemplate": (
                    "node %{customdata[0]} (%{customdata[1]} runs)<br>median %{y:.4g}<br>"
                    f"min %{{customdata[2]}} max %{{customdata[3]}} {variant.unit}<extra>{label}</extra>"
                ),
                "marker": {"color": SCREEN_COLORS[state], "size": 5 if state == "ok" else 7},
            }
        )
    values = [g.minimum for g in ordered] + [g.maximum for g in ordered]
    layout = {
        "title": {"text": f"per node min / median / max ({len(ordered)} nodes)", "x": 0},
        "xaxis": _axis("node rank (by median, slowest first)"),
        "yaxis": _axis(f"{variant.metric} ({variant.unit})", _log_axis(values)),
    }
    return figs.html("nodes", variant.variant, data, layout, 340)


def compare_figure(figs: Figures, comparison: Any) -> str:
    """Sorted node-scaled values of each variant against the fraction of its runs (Fig. 8 overlaid)."""
    data = []
    for i, arm in enumerate(comparison.arms):
        n = len(arm.scaled)
        idx = _thin(list(range(n)), 2000)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers" if n <= 200 else "lines",
                "marker": {"size": 4},
                "line": {"color": COLORS[i % len(COLORS)] if i else "#555"},
                "name": f"{arm.label} ({arm.slow} of {arm.n} slow)",
                "x": [round((j + 0.5) / n, 5) for j in idx],
                "y": [_round(arm.scaled[j]) for j in idx],
                "hovertemplate": f"{esc(arm.label)}: %{{y:.4g}} {arm.unit} at %{{x:.1%}} of runs"
                "<extra></extra>",
            }
        )
    all_values = [v for a in comparison.arms for v in a.scaled]
    layout = {
        "title": {"text": f"sorted node-scaled values by {comparison.option}", "x": 0},
        "xaxis": _axis("fraction of runs (slowest first)", tickformat=".0%"),
        "yaxis": _axis(f"node-scaled value ({comparison.arms[0].unit})", _log_axis(all_values)),
    }
    return figs.html("compare", comparison.probe, data, layout, 360)


def timeline_figure(
    figs: Figures,
    variant: VariantSummary,
    slow: RunVerdict,
    series: Any,
    typical: RunVerdict | None,
    typical_series: Any,
    settings: Settings | None = None,
) -> str:
    """Iterations of one slow run (and its node's typical run) in iteration order, with the level the
    run's label was judged against: the classifier's own reference and low cut (analysis/classify.py)
    where the run has them, else the slow threshold below the typical run's median iteration."""
    data = []
    for label, run, s, color in (
        (f"typical trial {typical.trial}" if typical else "", typical, typical_series, COLORS[0]),
        (f"slow trial {slow.trial}", slow, series, SLOW_COLOR),
    ):
        if run is None or s is None or s.empty:
            continue
        idx = _thin(list(range(len(s.values))), 2000)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{label} ({s.what})",
                "x": [int(s.iterations[i]) for i in idx],
                "y": [_round(float(s.values[i])) for i in idx],
                "line": {"color": color, "width": 1},
                "hovertemplate": f"{esc(label)} on {esc(run.node)}: iteration %{{x}}, %{{y:.4g}}"
                "<extra></extra>",
            }
        )
    levels = timeline_levels(variant, slow, typical_series, settings)
    values = [v for d in data for v in d["y"]] + [y for y, _, _, _ in levels]
    log = _log_axis(values)
    at = (lambda y: math.log10(y)) if log else (lambda y: y)  # annotations on a log axis are placed in log10
    title = f"{esc(slow.node)} trial {slow.trial}: iterations"
    layout = {
        "title": {"text": title, "x": 0},
        "xaxis": _axis("iteration (in order)"),
        "yaxis": _axis(variant.unit, log),
        "shapes": [
            {**_hline(y, color), "line": {"color": color, "width": 1, "dash": dash}}
            for y, _, color, dash in levels
        ],
        "annotations": [_hlabel(at(y), text) for y, text, _, _ in levels],
    }
    return figs.html("timeline", variant.variant, data, layout, 260)


def timeline_levels(
    variant: VariantSummary, slow: RunVerdict, typical_series: Any, settings: Settings | None
) -> list[tuple[float, str, str, str]]:
    """(value, label, colour, dash) of the horizontal lines of a timeline: the label's reference and low
    cut when the classifier recorded them, else the primary slow threshold below the typical median."""
    ev = slow.evidence
    if ev is not None and ev.reference is not None and ev.reference > 0:
        cut = 1.0 - ev.low_cut
        if cut >= 1.0:  # the node's iteration noise is so wide that no iteration can be low: no such line
            return [(ev.reference, "typical iteration (the label's reference; no low line: noise too wide)",
                     "#555", "dot")]  # fmt: skip
        return [
            (ev.reference, "typical iteration (the label's reference)", "#555", "dot"),
            (
                _slow_level(ev.reference, cut, variant.higher_is_better),
                f"low iteration: more than {pct(cut)} {'below' if variant.higher_is_better else 'above'} it",
                "#ff7f0e",
                "dash",
            ),
        ]
    if settings is None or typical_series is None or typical_series.empty:
        return []
    reference = float(typical_series.median)
    if not math.isfinite(reference) or reference <= 0:
        return []
    d = settings.primary_threshold
    return [
        (
            _slow_level(reference, d, variant.higher_is_better),
            f"{pct(d)} slower than the typical median",
            "#ff7f0e",
            "dash",
        )
    ]


def windows_of(injections: Any, nodes: Mapping[str, Any] | None = None) -> list[tuple[str, str, str]]:
    """(node, start, end) of injected windows from an `injections` table, whatever its time column names."""
    if injections is None or len(injections) == 0:
        return []
    cols = set(injections.columns)
    start = next((c for c in ("started_at", "start", "start_at", "t_start") if c in cols), None)
    end = next((c for c in ("ended_at", "end", "end_at", "stopped_at", "t_end") if c in cols), None)
    if start is None or end is None:
        return []
    node_col = "node" if "node" in cols else None
    out = []
    for _, row in injections.iterrows():
        s, e = row[start], row[end]
        out.append((str(row[node_col]) if node_col else "", _iso(s), _iso(e)))
    return out


def _iso(value: Any) -> str:
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)
