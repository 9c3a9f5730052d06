"""`jobs report`: the history report (history/report.py) with a jobs section, or the jobs section alone when
the history holds no probe entries.

The section: the answer in words (`jobs show`'s lines), the effect of every node with its 95% interval (the
slow ones in red, ordered by node name so a rack or a switch reads as a band), and for each slow node (at
most MAX_NODE_FIGURES) its jobs over time: each job's slowdown against its class's clean jobs, the node's
effect, and the change point it is slow since.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tailscope.jobs.show import JobsAnswer, NodeAnswer, render
from tailscope.report.markup import esc, plotly_text
from tailscope.report.plotly_figures import Figures, scripts

if TYPE_CHECKING:
    from tailscope.analysis.model import Settings
    from tailscope.history.data import HistoryData

MAX_NODE_FIGURES = 12

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px;color:#222}
pre{background:#f6f6f6;padding:.8em;white-space:pre-wrap}
h2{margin-top:1.6em}
"""


def _pct(value: float | None) -> float | None:
    return None if value is None else round(math.expm1(value) * 100.0, 3)


def _gap(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def effects_figure(figs: Figures, result: JobsAnswer) -> str:
    nodes = sorted(result.nodes, key=lambda n: n.node)
    if not nodes:
        return ""
    data = []
    for slow, name, color in ((False, "nodes", "#1f77b4"), (True, "slow nodes (q < 0.05)", "#d62728")):
        chosen = [n for n in nodes if n.result.slow == slow]
        if not chosen:
            continue
        eff = [_pct(n.result.effect) for n in chosen]
        up = [_gap(_pct(n.result.upper), e) for n, e in zip(chosen, eff, strict=True)]
        down = [_gap(e, _pct(n.result.lower)) for n, e in zip(chosen, eff, strict=True)]
        text = [f"{n.result.jobs} jobs, {n.result.classes} classes, q = {n.result.q:.2g}" for n in chosen]
        data.append({
            "type": "scatter", "mode": "markers", "name": name, "x": [plotly_text(n.node) for n in chosen],
            "y": eff,
            "marker": {"color": color, "size": 6 if slow else 4},
            "error_y": {"type": "data", "symmetric": False, "array": up, "arrayminus": down, "thickness": 1,
                        "width": 0},
            "text": text,
            "hovertemplate": "%{x}: %{y:.2f}% (%{text})<extra></extra>",
        })  # fmt: skip
    threshold = result.threshold * 100.0
    layout = {
        "title": {"text": "jobs on each node: % slower than the same classes elsewhere (95% interval)"},
        "xaxis": {"title": {"text": "node"}, "type": "category", "categoryorder": "array",
                  "categoryarray": [plotly_text(n.node) for n in nodes], "showticklabels": len(nodes) <= 80},
        "yaxis": {"title": {"text": "% slower"}, "zeroline": True},
        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": threshold, "y1": threshold,
                    "line": {"color": "#d62728", "dash": "dot", "width": 1}}],
        "annotations": [{"xref": "paper", "x": 1, "y": threshold, "xanchor": "right", "yanchor": "bottom",
                         "showarrow": False, "text": f"slow threshold {threshold:g}%",
                         "font": {"color": "#d62728", "size": 11}}],
    }  # fmt: skip
    return figs.html("jobs-effects", "nodes", data, layout, 420)


def node_figure(figs: Figures, node: NodeAnswer, series: pd.DataFrame) -> str:
    """One slow node's jobs over time (start, slowdown against the class's clean jobs, class)."""
    r = node.result
    data = [{
        "type": "scatter", "mode": "markers", "name": "its jobs",
        "x": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in series["start"]],
        "y": [round(math.expm1(v) * 100.0, 3) for v in series["difference"]],
        "text": [plotly_text(c) for c in series["class"].astype(str)],  # a user's job name: shown as typed
        "hovertemplate": "%{x}: %{y:.1f}% (%{text})<extra></extra>", "marker": {"size": 4},
    }]  # fmt: skip
    level = {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": r.percent, "y1": r.percent,
             "line": {"color": "#d62728", "width": 1}}  # fmt: skip
    shapes, notes = [level], []
    if node.since is not None:  # its effect is its level since then: drawn from there
        at = node.since.strftime("%Y-%m-%dT%H:%M:%SZ")
        last = max(series["start"]).strftime("%Y-%m-%dT%H:%M:%SZ") if len(series) else at
        level.update(xref="x", x0=at, x1=last)
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": at, "x1": at, "y0": 0, "y1": 1,
                       "line": {"color": "#d62728", "dash": "dot"}})  # fmt: skip
        notes.append({"x": at, "y": 1, "xref": "x", "yref": "paper", "showarrow": False, "xanchor": "left",
                      "yanchor": "top", "text": f"slow since {node.since:%Y-%m-%d}"})  # fmt: skip
    layout = {
        "title": {"text": f"{plotly_text(r.node)}: its jobs, % slower than their classes' clean jobs "
                          f"({r.percent:.1f}%)"},
        "yaxis": {"title": {"text": "% slower"}}, "xaxis": {"title": {"text": "job start"}},
        "shapes": shapes, "annotations": notes,
    }  # fmt: skip
    return figs.html("jobs-node", r.node, data, layout, 300, extra={"node": r.node})


def section(result: JobsAnswer, figs: Figures) -> str:
    text = "\n".join(render(result, width=1_000_000))  # the page wraps it (pre-wrap), at its own width
    parts = ["<h2>Jobs</h2>", f"<pre>{esc(text)}</pre>", effects_figure(figs, result)]
    slow = [n for n in result.nodes if n.result.slow][:MAX_NODE_FIGURES]
    if slow and result.series is not None:
        parts.append("<h3>Slow nodes: their jobs over time</h3>")
        for n in slow:
            parts.append(node_figure(figs, n, result.series(n)))
    return "\n".join(p for p in parts if p)


def write_report(result: JobsAnswer, history: HistoryData | None, settings: Settings, output: Path) -> Path:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    if history is not None and not history.entries.empty:
        from tailscope.history.report import write_report as history_report
        from tailscope.history.show import answer

        return history_report(
            answer(history, settings), history, output, sections=[lambda f: section(result, f)]
        )
    figs = Figures()
    page = "\n".join([
        "<!doctype html><html><head><meta charset='utf-8'><title>tailscope jobs</title>",
        f"<style>{STYLE}</style></head><body><h1>tailscope jobs</h1>",
        section(result, figs), scripts(), "</body></html>",
    ])  # fmt: skip
    from tailscope.store.files import write_atomic_bytes

    write_atomic_bytes(output, page.encode())
    return output
