"""The report's "Counters" section: which counters explain the slow runs (analysis/attribution.py).

Per probe variant with counters:
- the ranking table (counter, effect size, q-value, r over all runs and over the outlier view, excess);
- time-vs-counter scatter plots for the top counters, slow runs marked (seed Figs. 2-4, 7);
- per-unit bars (per core, per CHA) for the slowest runs against the preceding good trial (seed Figs. 5-6);
- the OS-interference check.
And, when the campaign holds monitor samples, one timeline per node of the busiest series (rates per second
between consecutive samples; seed's periodic sampler view). Nothing is shown when there are no counters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tailscope.analysis.model import CampaignAnalysis
from tailscope.report import plotly_figures as plots
from tailscope.report.markup import esc

__all__ = ["counters_section", "monitor_timelines"]

TABLE_ROWS = 12
SLOW_RUN_ROWS = 10
TIMELINE_SERIES = 4
TIMELINE_POINTS = 600


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not np.isfinite(value):
        return "-"
    return f"{value:.{digits}g}"


def _figure(plot: str, text: str) -> str:
    return f'<figure class="plotbox">{plot}<figcaption>{esc(text)}</figcaption></figure>'


def counters_section(
    analysis: CampaignAnalysis, samples: pd.DataFrame | None = None, figs: plots.Figures | None = None
) -> str:
    """HTML of the section ('' when there is nothing to show). `figs` numbers the report's figures."""
    figs = figs or plots.Figures()
    section = getattr(analysis, "attribution", None)
    parts: list[str] = []
    if section:
        from tailscope.probes.catalogue import variant_name

        names = {v.variant: variant_name(v.probe, dict(v.params)) for v in analysis.variants}
        for variant in section.get("variants", []):
            parts.append(_variant_part(variant, figs, names.get(str(variant["variant"]))))
    timelines = monitor_timelines(samples, figs) if samples is not None and not samples.empty else []
    if timelines:
        parts.append("<h3>Monitor timelines</h3>")
        parts.append('<div class="figs">' + "".join(timelines) + "</div>")
    if not parts:
        return ""
    intro = (
        "Per counter: how strongly the node-median-scaled run time (1 = the node's median) "
        "follows it, over all "
        "runs and over the slow runs plus a sample of normal ones (the rare slow runs are hidden "
        "among the normal "
        "ones otherwise), and how well it separates slow from normal runs (rank-biserial effect: "
        "+1 when every "
        "slow run counts more than every normal one; q: Benjamini-Hochberg adjusted p-value)."
    )
    return (
        '<section id="counters"><h2>Counters: what explains the slow runs</h2>'
        f'<p class="explain">{esc(intro)}</p>' + "\n".join(parts) + "</section>"
    )


def _variant_part(variant: dict[str, Any], figs: plots.Figures, human: str | None = None) -> str:
    name = str(variant["variant"])
    out = [
        f"<h3>{esc(human or name)}: {variant['runs']} runs with counters, {variant['slow_runs']} slow</h3>"
    ]
    rows = []
    for c in variant["counters"][:TABLE_ROWS]:
        rows.append(
            "<tr>"
            + "".join(
                f'<td class="num">{esc(v)}</td>' if i else f"<td><code>{esc(v)}</code></td>"
                for i, v in enumerate(
                    [
                        c["counter"],
                        _fmt(c["rank_biserial"]),
                        _fmt(c["q_value"], 2),
                        _fmt(c["pearson_r"]),
                        _fmt(c["spearman_rho"]),
                        _fmt(c["outlier_view_r"]),
                        _fmt(c["slow_excess_median"]),
                        _fmt(c["normal_excess_median"]),
                    ]
                )
            )
            + "</tr>"
        )
    headers = ["counter", "effect", "q", "r", "rho", "r (outlier view)", "excess (slow)", "excess (normal)"]
    out.append(
        "<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr>" + "".join(rows) + "</table>"
    )
    per_run = variant.get("slow_run_counters", [])[:SLOW_RUN_ROWS]
    if per_run:
        body = "".join(
            f'<tr><td>{esc(r["node"])}</td><td class="num">{r["trial"]}</td>'
            f'<td class="num">{r["perf_ratio"]:.3f}</td><td>'
            + ", ".join(f"<code>{esc(a['counter'])}</code> (z {_fmt(a['z'])})" for a in r["abnormal"][:3])
            + "</td></tr>"
            for r in per_run
        )
        out.append(
            "<table><tr><th>node</th><th>slow trial</th><th>perf ratio</th>"
            "<th>counters furthest above the normal runs (robust z)</th></tr>" + body + "</table>"
        )
    interference = variant.get("interference")
    if interference:
        out.append(
            f'<p class="explain">OS interference ({esc(interference["method"])}): '
            f"{interference['flagged']} runs "
            f"flagged, {interference['slow_flagged']} of the {interference['slow']} slow runs.</p>"
        )
    drawn = [_scatter(figs, name, counter, points) for counter, points in variant.get("points", {}).items()]
    for pair in variant.get("pairs", [])[:2]:
        for counter, per_unit in list(pair["counters"].items())[:2]:
            drawn.append(_pair_bars(figs, name, pair, counter, per_unit))
    if drawn:
        out.append('<div class="figs">' + "".join(drawn) + "</div>")
    return "\n".join(out)


def _scatter(figs: plots.Figures, variant: str, counter: str, points: dict[str, list[Any]]) -> str:
    xs, ts, slow = points["x"], points["t"], points["slow"]
    data = []
    for flag, label, color in (
        (False, "normal runs", plots.COLORS[0]),
        (True, "slow runs", plots.SLOW_COLOR),
    ):
        idx = [i for i, s in enumerate(slow) if s == flag and xs[i] is not None and ts[i] is not None]
        if idx:
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": f"{label} ({len(idx)})",
                    "x": [float(xs[i]) for i in idx],
                    "y": [round(float(ts[i]), 5) for i in idx],
                    "marker": {
                        "color": color,
                        "size": 5 if not flag else 7,
                        "symbol": "x" if flag else "circle",
                    },
                    "hovertemplate": f"{esc(counter)} %{{x:.4g}}<br>relative time %{{y:.4f}}"
                    f"<extra>{label}</extra>",
                }
            )
    values = [float(x) for x in xs if x is not None]
    layout = {
        "title": {"text": f"run time vs {esc(counter)}", "x": 0},
        "xaxis": plots.axis(counter, plots.log_axis(values)),
        "yaxis": plots.axis("relative run time (node median = 1)"),
        "shapes": [plots.hline(1.0, "#555")],
    }
    plot = figs.html("counter-scatter", variant, data, layout, 280, extra={"counter": counter})
    return _figure(
        plot, f"Each point is one run: {counter} (summed over units) against its node-scaled time."
    )


def _pair_bars(
    figs: plots.Figures, variant: str, pair: dict[str, Any], counter: str, per_unit: dict[str, list[Any]]
) -> str:
    units = [str(u) for u in per_unit["units"]]

    def values(key: str) -> list[float | None]:
        return [float(v) if v is not None and np.isfinite(float(v)) else None for v in per_unit[key]]

    data = [
        {"type": "bar", "name": f"good trial {pair['good_trial']}", "x": units, "y": values("good"),
         "marker": {"color": plots.COLORS[0]}},
        {"type": "bar", "name": f"slow trial {pair['slow_trial']}", "x": units, "y": values("slow"),
         "marker": {"color": plots.SLOW_COLOR}},
    ]  # fmt: skip
    layout = {
        "title": {"text": f"{esc(counter)} per unit, {esc(str(pair['node']))}", "x": 0},
        "barmode": "group",
        "xaxis": plots.axis("unit (CPU, CHA, channel)", type="category"),
        "yaxis": plots.axis(counter, rangemode="tozero"),
    }
    plot = figs.html(
        "counter-pair", variant, data, layout, 280, extra={"counter": counter, "run": str(pair["slow_run"])}
    )
    return _figure(
        plot,
        f"Seed Figs. 5-6: the slow trial {pair['slow_trial']} (perf ratio {pair['slow_perf_ratio']:.3f}) "
        f"against the preceding good trial {pair['good_trial']} (perf ratio {pair['good_perf_ratio']:.3f}) "
        f"of node {pair['node']}, unit by unit.",
    )


def monitor_timelines(samples: pd.DataFrame, figs: plots.Figures | None = None) -> list[str]:
    """Per node and source: rates of the series that vary most, per second between consecutive samples.

    `samples`: node, source, sample, t_ns, pmu, event, value (summed over units by the caller or not).
    """
    figs = figs or plots.Figures()
    out: list[str] = []
    frame = samples.groupby(["node", "source", "pmu", "event", "sample"], sort=True).agg(
        t_ns=("t_ns", "first"), value=("value", "sum")
    )
    for (node, source), part in frame.groupby(level=["node", "source"], sort=True):
        series: list[tuple[float, str, np.ndarray, np.ndarray]] = []
        for (pmu, event), s in part.groupby(level=["pmu", "event"], sort=True):
            t = s["t_ns"].to_numpy(dtype=float) / 1e9
            v = s["value"].to_numpy(dtype=float)
            if len(v) < 3:
                continue
            dt = np.diff(t)
            dv = np.diff(v)
            ok = (dt > 0) & (dv >= 0)
            if ok.sum() < 2:
                continue
            rate = dv[ok] / dt[ok]
            spread = float(np.std(rate) / (np.mean(rate) or 1.0))
            series.append((spread, f"{pmu}/{event}", t[1:][ok] - t[0], rate))
        series.sort(key=lambda s: (-s[0], s[1]))
        for spread, name, xs, ys in series[:TIMELINE_SERIES]:
            dx, dy = plots.minmax_thin(xs, ys, TIMELINE_POINTS)
            data = [
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": name,
                    "x": [round(float(x), 6) for x in dx],
                    "y": [float(f"{y:.5g}") for y in dy],
                    "line": {"color": plots.COLORS[0], "width": 1},
                    "hovertemplate": "%{x:.3f} s: %{y:.4g}/s<extra></extra>",
                }
            ]
            layout = {
                "title": {"text": f"{esc(str(node))}: {esc(name)} ({esc(str(source))})", "x": 0},
                "xaxis": plots.axis("seconds"),
                "yaxis": plots.axis(f"{name} per second", plots.log_axis(dy)),
            }
            plot = figs.html("monitor", "", data, layout, 240, extra={"node": str(node), "series": name})
            out.append(_figure(plot, f"Rate between consecutive samples; variation (sd/mean) {spread:.3g}."))
    return out
