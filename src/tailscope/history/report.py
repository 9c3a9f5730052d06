"""`history report`: one offline HTML page (Plotly embedded once, nothing fetched): the answer in words,
a fleet heat map per probe (nodes x dates, each entry's median scaled by the node's own baseline, so a rack
or a rollout is a band), and per node a timeline of its medians with their intervals and its change points
annotated with the facts that changed and the notes of their window.

The figures are the campaign report's (`report.plotly_figures`: the same `Figures` divs, the same drawing
script, drawn when scrolled into view). At most MAX_TIMELINES timelines: the series with changes first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tailscope.history.changes import Change, iso
from tailscope.history.data import HistoryData
from tailscope.history.show import HistoryAnswer, render
from tailscope.report.markup import esc, plotly_text
from tailscope.report.plotly_figures import Figures, scripts

MAX_TIMELINES = 60
MAX_HEAT_COLUMNS = 120  # dates per heat map; beyond, entries are binned by week

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px;color:#222}
pre{background:#f6f6f6;padding:.8em;white-space:pre-wrap}
h2{margin-top:1.6em}
"""


def _baseline(block: pd.DataFrame) -> float:
    """The node's level: the median of its first entries (up to 10), or of all it has."""
    values = block.sort_values("started_at")["median"].to_numpy(float)[:10]
    return float(np.median(values)) if len(values) else float("nan")


def heat_figure(figs: Figures, entries: pd.DataFrame, probe: str) -> str:
    rows = entries[(entries["probe"].astype(str) == probe) & ~entries["excluded"].astype(bool)]
    if rows.empty:
        return ""
    rows = rows.assign(node=rows["node"].astype(str))
    hib = bool(rows["higher_is_better"].iloc[0])
    base = rows.groupby("node", observed=True).apply(_baseline, include_groups=False)
    ratio = rows["median"].to_numpy(float) / base.reindex(rows["node"]).to_numpy(float)
    if not hib:
        ratio = 1.0 / ratio
    day = pd.to_datetime(rows["started_at"], utc=True).dt.floor("D")
    if day.nunique() > MAX_HEAT_COLUMNS:
        day = day.dt.to_period("W").dt.start_time.dt.tz_localize("UTC")
    frame = pd.DataFrame({"node": rows["node"].to_numpy(), "day": day.to_numpy(), "ratio": ratio})
    grid = frame.pivot_table(index="node", columns="day", values="ratio", aggfunc="median")
    z = [[None if np.isnan(v) else round(float(v), 4) for v in row] for row in grid.to_numpy()]
    data = [{
        "type": "heatmap", "x": [iso(d)[:10] for d in grid.columns], "z": z,
        "y": [plotly_text(n) for n in grid.index],
        "zmin": 0.9, "zmax": 1.1, "colorscale": "RdBu", "colorbar": {"title": {"text": "vs baseline"}},
        "hovertemplate": "%{y} %{x}: %{z:.3f}<extra></extra>",
    }]  # fmt: skip
    height = int(min(1400, max(260, 14 * len(grid.index) + 120)))
    layout = {
        "title": {"text": f"{plotly_text(probe)}: median / node baseline (below 1 is slower)"},
        "yaxis": {"automargin": True, "autorange": "reversed"},
        "xaxis": {"title": {"text": "date"}},
    }
    return figs.html("history-heatmap", probe, data, layout, height)


def timeline_figure(figs: Figures, block: pd.DataFrame, changes: list[Change]) -> str:
    block = block.sort_values("started_at")
    node, variant = str(block["node"].iloc[0]), str(block["variant"].iloc[0])
    unit = str(block["unit"].iloc[0])
    keep = ~block["excluded"].astype(bool)
    x = [iso(t) for t in block["started_at"]]
    med = block["median"].to_numpy(float)
    lo = block["median_lower"].to_numpy(float)
    hi = block["median_upper"].to_numpy(float)

    def pick(mask: np.ndarray) -> dict[str, Any]:
        idx = np.flatnonzero(mask)
        return {
            "x": [x[i] for i in idx],
            "y": [float(med[i]) for i in idx],
            "error_y": {
                "type": "data",
                "symmetric": False,
                "array": [None if np.isnan(hi[i]) else float(hi[i] - med[i]) for i in idx],
                "arrayminus": [None if np.isnan(lo[i]) else float(med[i] - lo[i]) for i in idx],
            },
        }

    data = [{"type": "scatter", "mode": "lines+markers", "name": "median (95% CI)", **pick(keep.to_numpy())}]
    if (~keep).any():
        data.append({"type": "scatter", "mode": "markers", "name": "excluded", "marker": {"symbol": "x",
                     "color": "#999"}, **pick((~keep).to_numpy())})  # fmt: skip
    shapes, notes = [], []
    for c in changes:
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": c.at, "x1": c.at, "y0": 0, "y1": 1,
                       "line": {"color": "#d62728", "dash": "dot"}})  # fmt: skip
        low, high = (c.ratio_lower - 1) * 100, (c.ratio_upper - 1) * 100
        text = f"{(c.ratio - 1) * 100:+.1f}% [{low:+.1f}, {high:+.1f}]"
        for f in c.facts_changed[:3]:
            before, after = plotly_text(str(f.before)[:24]), plotly_text(str(f.after)[:24])
            text += f"<br>{plotly_text(f.fact)}: {before} → {after}"
        for n in c.notes[:2]:  # a note is anyone's text: its markup shown as typed, never applied
            text += f"<br>note: {plotly_text(n[:60])}"
        notes.append({"x": c.at, "y": 1, "xref": "x", "yref": "paper", "text": text, "showarrow": False,
                      "xanchor": "left", "yanchor": "top", "align": "left"})  # fmt: skip
    layout = {"title": {"text": plotly_text(f"{node} {variant}")}, "shapes": shapes, "annotations": notes,
              "yaxis": {"title": {"text": plotly_text(unit)}}, "showlegend": True}  # fmt: skip
    return figs.html("history-timeline", variant, data, layout, 320, extra={"node": node})


def write_report(
    result: HistoryAnswer,
    data: HistoryData,
    output: Path,
    *,
    sections: Sequence[Callable[[Figures], str]] = (),
) -> Path:
    """The page; `sections` add HTML drawn with its figures (the jobs section: tailscope.jobs.report)."""
    figs = Figures()
    entries = result.entries
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>tailscope history</title>",
        f"<style>{STYLE}</style></head><body><h1>tailscope history</h1>",
        f"<pre>{esc(chr(10).join(render(result, with_series=False)))}</pre>",
    ]
    if not entries.empty:
        parts.append("<h2>Fleet</h2>")
        for probe in sorted({str(p) for p in entries["probe"].unique()}):
            parts.append(heat_figure(figs, entries, probe))
        by_series: dict[tuple[str, str], list[Change]] = {}
        for c in result.changes:
            by_series.setdefault((c.node, c.variant), []).append(c)
        keys = sorted(by_series) + sorted(
            {(str(n), str(v)) for n, v in zip(entries["node"], entries["variant"], strict=True)}
            - set(by_series)
        )
        shown = keys[:MAX_TIMELINES]
        parts.append("<h2>Nodes</h2>")
        if len(keys) > len(shown):
            parts.append(f"<p>{len(shown)} of {len(keys)} series (those with change points first); "
                         "`tailscope history report --node N` draws one node's.</p>")  # fmt: skip
        groups = {
            (str(n), str(v)): g
            for (n, v), g in entries.groupby(["node", "variant"], observed=True, sort=False)
        }
        for key in shown:
            parts.append(timeline_figure(figs, groups[key], by_series.get(key, [])))
    parts += [section(figs) for section in sections]
    parts.append(scripts())
    parts.append("</body></html>")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    from tailscope.store.campaign import write_atomic_bytes

    write_atomic_bytes(output, "\n".join(parts).encode())
    return output
