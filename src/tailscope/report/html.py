"""The offline HTML report, built around the answer: one self-contained file that fetches nothing.

`render_html` lays out, in order: the verdict per node and the causes of the slow runs (report/answer.py,
the one place they come from), with the VM / no-counters caveat beside them; a table of contents; the
variants compared when a probe has variants differing in one option (compare.py); per probe variant its
interactive figures (value against time, sorted node-scaled values, ECDF, per-node min/median/max: see
plotly_figures.py) and then, collapsed, its node table and slow runs (the slowest 20; all rows in the CSV
files written beside the report) and iteration timelines; then all findings, counters, the node screen,
node facts, pages, settings and methods; a `tailscope validate` campaign's scores come before the findings
(validation_section.py).

The caller (verbs/workflow.py: write_report) passes the store's `nodes` table, the `iterations` rows of the
runs that `select_timeline_runs` names, the monitor samples and, when the store has them, the `injections` and
`validation` tables.
A Content-Security-Policy meta tag forbids any network access (scripts run inline only: the Plotly library,
embedded once, and the figure drawer), so even a stray URL in a node fact cannot make the browser fetch.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tailscope.analysis.health import SEVERITY
from tailscope.analysis.model import (
    CampaignAnalysis,
    GroupSummary,
    Settings,
    VariantSummary,
)
from tailscope.analysis.run_columns import RunVerdicts
from tailscope.analysis.wording import p_value, pct, period
from tailscope.probes.catalogue import variant_name
from tailscope.report import explain
from tailscope.report import plotly_figures as plots
from tailscope.report.answer import Answer, answer_of, terms
from tailscope.report.cluster_section import render_cluster_section
from tailscope.report.counters_section import counters_section
from tailscope.report.markup import esc
from tailscope.report.markup import explain as _explain
from tailscope.report.markup import table as _table
from tailscope.report.markup import td as _td
from tailscope.report.numbers import (
    bytes_text,
    decimals_for,
    kinds_text,
    median_ci_text,
    tail_rate_text,
    tail_text,
    value_text,
)
from tailscope.report.pages_section import inferred_parts, install_limits, pages_section, virtual_nodes
from tailscope.report.timelines import RunIterations, TimelinePick, pick_timelines
from tailscope.store.manifest import Manifest
from tailscope.store.schema import NODES

if TYPE_CHECKING:
    from tailscope.report.models import DeepResult

__all__ = ["render_html", "select_timeline_runs"]

MAX_FACT_NODES = 32  # nodes whose full facts are listed; the table of differing facts covers all
MAX_FACT_TEXT = 300  # characters of one fact value shown (long lists: cpu flags)

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;
margin:0 auto;max-width:1200px;padding:0 16px 40px;overflow-wrap:anywhere}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;margin:26px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:14px 0 6px}h2 .id{font-size:12px;color:#888;font-weight:normal}
.headline{color:#555;margin:0 0 8px}
.answer{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
.verdict{flex:1 1 560px;min-width:0;padding:10px 14px;border-radius:4px;margin:6px 0}
.verdict.v-healthy{background:#e8f5e9;border:1px solid #66bb6a}
.verdict.v-degraded{background:#fdecea;border:1px solid #e57373}
.verdict.v-inconclusive{background:#fff8e1;border:1px solid #f0c36d}
.verdict .word{font-size:20px;font-weight:bold}
.verdict ul,.verdict ol{margin:6px 0;padding-left:22px}.verdict li{margin:3px 0}
.caveat{flex:0 1 300px;min-width:0;background:#f5f5f5;border:1px solid #ccc;border-radius:4px;
padding:8px 12px;font-size:13px;margin:6px 0}.caveat p{margin:6px 0}
#toc ol{columns:2;margin:4px 0;padding-left:22px}#toc h2{font-size:15px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px;max-width:100%}
th,td{border:1px solid #d4d4d4;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.meta td:first-child{color:#555}
.notes{background:#fff8e1;border:1px solid #f0c36d;padding:8px 14px 8px 34px;border-radius:4px}
.notes li{margin:4px 0}
.explain{color:#444;max-width:980px;font-size:13px;margin:4px 0 10px}
.figs{display:flex;flex-wrap:wrap;gap:8px}
.plot{flex:0 1 calc(50% - 4px);box-sizing:border-box;min-width:320px;max-width:100%;border:1px solid #eee}
figure.plotbox{flex:0 1 calc(50% - 4px);box-sizing:border-box;min-width:320px}figure.plotbox .plot{width:100%}
.scroll{max-width:100%;overflow-x:auto}
figure{margin:0;max-width:100%}svg.chart{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:12px;color:#555;max-width:640px}
.bad{color:#b71c1c;font-weight:bold}.good{color:#1b5e20}.warn{color:#8d6e00;font-weight:bold}
.differ{background:#fff3e0}
ol.chain{padding-left:22px}ol.chain>li{margin:5px 0}
ol.chain th:last-child,ol.chain td:last-child{white-space:nowrap}
details>summary{cursor:pointer;font-weight:bold;margin:6px 0}
code{font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere}
"""


def select_timeline_runs(analysis: CampaignAnalysis) -> dict[tuple[str, str], list[str]]:
    """Per (variant, node) with slow runs: the run ids whose iterations the report draws.

    Each list holds the typical run first (the node's run closest to its median), then the slow runs,
    slowest first (at most 6 per node and 12 per variant; see timelines.py). The caller loads these runs'
    rows of the `iterations` table and passes them to `render_html`.
    """
    return {key: pick.run_ids for key, pick in pick_timelines(analysis).items()}


def render_html(
    analysis: CampaignAnalysis,
    *,
    manifest: Manifest,
    nodes: pd.DataFrame,
    iterations: pd.DataFrame,
    generated_at: str,
    samples: pd.DataFrame | None = None,
    injections: pd.DataFrame | None = None,
    validation: pd.DataFrame | None = None,
    csv_files: Mapping[str, str] | None = None,
    campaign_dir: str = "DIR",
    hardware_counters: bool | None = None,
    deep: DeepResult | None = None,
) -> str:
    """The whole report as one HTML document (str).

    `csv_files` names the CSV files written beside the report (keys `runs`, `nodes`), linked from the long
    tables; `injections` (node, start, end) shades injected windows; `validation` (the table of that name,
    a `tailscope validate` campaign's scores) gets its own section; `hardware_counters` says whether any
    perf counter was recorded (None: unknown), for the caveat beside the verdict; `deep` is the chain of
    `check --deep` (report/models.py: load_deep), drawn right after the verdict.
    """
    from tailscope.compare import compare

    name = str(manifest.name or analysis.campaign)
    title = f"tailscope report: {name}"
    variants = {v.variant: v for v in analysis.variants}
    groups_of: dict[str, list[GroupSummary]] = defaultdict(list)
    for g in analysis.groups:
        groups_of[g.variant].append(g)
    runs = RunVerdicts.of(analysis.runs)  # by column: no object per run is built for the figures
    runs_variant = runs.column("variant")
    runs_of = {v: runs.take(runs_variant == v) for v in variants}
    picks = pick_timelines(analysis)
    anchors = {v: f"v{i + 1}" for i, v in enumerate(variants)}
    names = {v.variant: variant_name(v.probe, dict(v.params)) for v in variants.values()}
    figs = plots.Figures()
    windows = plots.windows_of(injections)
    comparisons = compare(analysis)
    csv_files = csv_files or {}
    screens = {c.variant: {n.node: n.verdict for n in c.nodes} for c in analysis.cluster}

    sections: list[tuple[str, str, str]] = []  # (anchor, heading, html)
    if deep is not None:  # the top-down chain follows the verdict it explains
        probe_of = {v.variant: v.probe for v in analysis.variants}
        from tailscope.report.deep_section import deep_section  # only here: arith_table and statistics

        html_deep = deep_section(deep, analysis.attribution, probe_of)
        sections.append(("deep", "Top-down follow-up (check --deep)", html_deep))
    if comparisons:
        sections.append(("compare", "Variants compared", _comparisons_section(comparisons, figs)))
    for variant in sorted(variants.values(), key=lambda v: (v.probe, names[v.variant])):
        sections.append(
            (
                anchors[variant.variant],
                names[variant.variant],
                _variant_section(
                    variant,
                    names[variant.variant],
                    groups_of[variant.variant],
                    runs_of[variant.variant],
                    [p for k, p in picks.items() if k[0] == variant.variant],
                    iterations,
                    analysis.settings,
                    anchors[variant.variant],
                    figs,
                    [w for w in windows if not w[0] or w[0] in {g.node for g in groups_of[variant.variant]}],
                    csv_files,
                    screens.get(variant.variant),
                ),
            )
        )
    validated = ""
    if validation is not None:  # a `tailscope validate` campaign's scores (their module imports inject's)
        from tailscope.report.validation_section import validation_section

        validated = validation_section(validation, figs, hardware_counters=hardware_counters)
    extra = [
        ("validation", "Validation", validated),
        ("findings", "All findings", _notes_section(analysis.notes)),
        ("counters", "Counters", counters_section(analysis, samples, figs)),
        ("cluster", "Nodes against the fleet", render_cluster_section(analysis)),
        ("nodes", "Node facts", _nodes_section(nodes)),
        ("pages", "Pages and mitigation", pages_section(nodes)),
        ("settings", "Settings", _settings_section(analysis, manifest, generated_at)),
        ("methods", "Methods", _methods_section(analysis)),
    ]
    for _, heading, html in extra:  # the anchor is the section's own id
        found = re.search(r'id="([^"]+)"', html) if html else None
        if found:
            sections.append((found.group(1), heading, html))
    answer = answer_of(analysis, campaign_dir)
    body: list[str] = [
        f"<h1>{esc(title)}</h1>",
        _headline(analysis, manifest, generated_at),
        _answer_section(analysis, answer, nodes, hardware_counters),
        _toc(sections),
        *(html for _, _, html in sections),
        f'<footer class="explain">Generated {esc(generated_at)} by tailscope '
        f"{esc(manifest.tool_version)}. This file is self-contained: it loads nothing from the "
        "network; its figures are drawn by the Plotly library embedded in it.</footer>",
    ]
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
        'img-src data: blob:; font-src data:">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
    )
    tail = "\n" + plots.scripts() + "\n</body>\n</html>\n" if figs.count else "\n</body>\n</html>\n"
    return head + "\n".join(body) + tail


# --- small HTML helpers ----------------------------------------------------------------------------------


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _fraction(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else pct(x)


# --- sections --------------------------------------------------------------------------------------------


def _settings_section(analysis: CampaignAnalysis, manifest: Manifest, generated_at: str) -> str:
    return (
        '<section id="settings"><h2>Settings</h2>'
        + _meta_table(analysis, manifest, generated_at)
        + "</section>"
    )


def _meta_table(analysis: CampaignAnalysis, manifest: Manifest, generated_at: str) -> str:
    s = analysis.settings
    n_runs = len(analysis.runs)
    n_failed = sum(g.n_failed for g in analysis.groups)
    n_nodes = len({g.node for g in analysis.groups})
    rows = [
        ("campaign", f"{manifest.name} ({analysis.campaign})"),
        ("created", manifest.created or "-"),
        ("report generated", generated_at),
        (
            "tailscope",
            f"{manifest.tool_version or '-'}, store schema {manifest.schema_version}",
        ),
        (
            "runs",
            f"{n_runs} ok, {n_failed} failed, {_count(len(analysis.variants), 'variant')}, "
            f"{_count(n_nodes, 'node')}",
        ),
        (
            "slow thresholds",
            ", ".join(pct(d) for d in s.thresholds)
            + f" below the node median (primary {pct(s.primary_threshold)})",
        ),
        (
            "tests",
            f"tail count vs allowed rate {pct(s.allowed_slow_rate)} at alpha {s.alpha:g}; "
            f"{pct(s.confidence)} intervals; quantile rule q = {s.quantile_rule_q:g}, "
            f"limit {pct(s.quantile_rule_limit)}; robust cut {s.robust_cut:g}",
        ),
        (
            "limits",
            ", ".join(
                [
                    f"{label} {pct(v)}"
                    for label, v in (
                        ("max slow rate", s.max_slow_rate),
                        ("max q01 drop", s.max_q01_drop),
                        ("max CV", s.max_cv),
                    )
                    if v is not None
                ]
                + ([f"max CV ratio {s.max_cv_ratio:g}x the robust CV"] if s.max_cv_ratio is not None else [])
                + [f"max busy share {pct(s.max_busy_share)}"]
            ),
        ),
    ]
    return _table(None, ([_td(k), _td(v)] for k, v in rows), css="meta")


def _notes_section(notes: Sequence[str]) -> str:
    if not notes:
        return '<section id="notes"><h2>Findings</h2><p>No findings.</p></section>'
    items = "\n".join(f"<li>{esc(n)}</li>" for n in notes)
    return (
        '<section id="notes"><h2>Findings</h2>'
        f'<p class="explain">Most important first.</p><ol class="notes">\n{items}\n</ol></section>'
    )


def _headline(analysis: CampaignAnalysis, manifest: Manifest, generated_at: str) -> str:
    n_nodes = len({g.node for g in analysis.groups})
    n_failed = sum(g.n_failed for g in analysis.groups)
    probes = sorted({v.probe for v in analysis.variants})
    return (
        f'<p class="headline">{_count(len(analysis.runs), "ok run")}'
        + (f", {n_failed} failed" if n_failed else "")
        + f" of {', '.join(esc(p) for p in probes)} on {_count(n_nodes, 'node')}; "
        f"campaign {esc(str(manifest.name or ''))} <code>{esc(analysis.campaign)}</code>; "
        f"generated {esc(generated_at)}</p>"
    )


STATE_CSS = {"healthy": "good", "degraded": "bad", "inconclusive": "warn"}
MAX_ANSWER_NODES = 20  # nodes listed by name in the verdict; the rest are counted (all are in the CSV)


def _answer_section(
    analysis: CampaignAnalysis, answer: Answer, nodes: pd.DataFrame, hardware_counters: bool | None
) -> str:
    """The campaign state and one line per node (analysis/health.py), the causes grouped across probes
    (analysis/causes), the limits and checks. The box's colour is the worst node's verdict, inconclusive
    when no node was judged: it is green only when every node is healthy, so never above a failing cell."""
    states = Counter(n.state for n in answer.nodes)
    state = answer.state
    summary = ", ".join(f"{states[k]} {k}" for k in ("degraded", "inconclusive", "healthy") if states[k])
    shown = sorted(
        answer.nodes, key=lambda n: (("degraded", "inconclusive", "healthy").index(n.state), n.node)
    )
    listed = [n for n in shown if n.state != "healthy"][:MAX_ANSWER_NODES]
    healthy = [n for n in shown if n.state == "healthy"]
    if len(healthy) <= 3:
        listed += healthy
    items = []
    for n in listed:
        causes = f": {', '.join(n.causes)}" if n.state == "degraded" and n.causes else ""
        head = f'<li><b>{esc(n.node)}</b>: <span class="{STATE_CSS[n.state]}">{n.state}{esc(causes)}</span>'
        if n.state == "healthy":  # one line: what was judged
            items.append(head + (f" &mdash; {esc(n.reasons[0])}" if n.reasons else "") + "</li>")
            continue
        reasons = "".join(f"<li>{esc(r)}</li>" for r in n.reasons[:3])
        if len(n.reasons) > 3:
            reasons += f"<li>{len(n.reasons) - 3} more in the node verdict table below</li>"
        items.append(f'{head}<ul class="reasons">{reasons}</ul></li>')
    unlisted = len(shown) - len(listed)
    if unlisted:
        rest = Counter(n.state for n in shown if n not in listed)
        items.append(
            "<li>"
            + ", ".join(f"{k} more {s}" for s, k in rest.items())
            + " (every node in the node verdict table and the CSV)</li>"
        )
    causes = [
        f'<li data-cause="{esc(c.cause)}"><b>{esc(c.title)}</b> ({esc(c.confidence)} confidence): '
        f"{esc(c.evidence)}. <i>What to do:</i> {esc(c.mitigation)}."
        + (f" Test it: <code>{esc(c.next_command)}</code>" if c.next_command else "")
        + "</li>"
        for c in answer.causes[:5]
    ]
    verdict = [
        f'<section id="verdict" class="verdict v-{state}">',
        f'<div class="word">Verdict: {esc(state.upper())} ({esc(summary or "no node had ok runs to judge")})'
        "</div>",
        f'<ul class="nodes">{"".join(items)}</ul>',
    ]
    if causes:
        more = f" (the first 5 of {len(answer.causes)})" if len(answer.causes) > 5 else ""
        verdict.append(f'<h3>Causes of the flagged runs{more}</h3><ol class="causes">{"".join(causes)}</ol>')
    elif analysis.runs:
        verdict.append("<p>No flagged runs: nothing to explain.</p>")
    verdict.append(_explain(explain.verdict_text(bool(analysis.verdict.checks))))
    if analysis.claims:  # a check stopped when settled: what its confidence sequences claim
        claims = "".join(
            f'<li data-claim="{esc(c.kind)}">{esc(c.node)}: {esc(c.text)}</li>' for c in analysis.claims
        )
        verdict.append("<h3>Claims (anytime-valid: they hold whenever the check stopped)</h3>")
        verdict.append(f'<ul class="claims">{claims}</ul>')
    limits = next((n.limits for n in analysis.nodes if n.limits), ())
    if limits:
        verdict.append(_explain("Limits: " + "; ".join(limits) + "."))
    verdict.append(_explain(terms(analysis)))
    if len(analysis.nodes) > len(listed) or any(len(n.reasons) > 3 for n in analysis.nodes):
        verdict.append(_node_verdicts_table(analysis))
    if analysis.verdict.checks:
        verdict.append(_checks_table(analysis))
    verdict.append("</section>")
    caveats = []
    virtual = virtual_nodes(nodes)
    if virtual:
        caveats.append(
            f"Ran in a virtual machine ({esc(', '.join(sorted(set(virtual.values()))))}): other guests share "
            "the host, so slow runs may come from outside this node; guest-physical pages say nothing about "
            "host cache sets."
        )
    caveats.extend(esc(line[0].upper() + line[1:]) + "." for line in inferred_parts(nodes))
    if hardware_counters is False:
        caveats.append(
            "No hardware counters were recorded (no PMU here, or no --events set): causes are judged from "
            "timing and the OS evidence of each trial (/proc, /sys, co-runners), not from cache or memory "
            "counters."
        )
    caveats.extend(esc(line[0].upper() + line[1:]) + "." for line in install_limits(nodes))
    aside = (
        '<aside class="caveat"><b>Caveat</b>' + "".join(f"<p>{c}</p>" for c in caveats) + "</aside>"
        if caveats
        else ""
    )
    return f'<div class="answer">{"".join(verdict)}{aside}</div>'


def _node_verdicts_table(analysis: CampaignAnalysis) -> str:
    """Every node's verdict with all its reasons (collapsed)."""
    rows = [
        [
            _td(n.node),
            _td(n.verdict, css=STATE_CSS[n.verdict]),
            _td(", ".join(dict.fromkeys(c.cause for c in n.causes)) or "-"),
            _td("; ".join(n.reasons)),
        ]
        for n in sorted(analysis.nodes, key=lambda n: (-SEVERITY[n.verdict], n.node))
    ]
    return (
        f"<details><summary>Node verdicts ({len(rows)} node{'s' if len(rows) != 1 else ''}, every reason)"
        "</summary>"
        + _table(["node", "verdict", "causes", "reasons"], rows)
        + "</details>"
    )


def _checks_table(analysis: CampaignAnalysis) -> str:
    rows = [
        [
            _td(c.name),
            _td(c.scope),
            _td(_fraction(c.observed), num=True),
            _td(_fraction(c.limit), num=True),
            _td("passed" if c.passed else "FAILED", css="good" if c.passed else "bad"),
            _td(c.message),
        ]
        for c in sorted(analysis.verdict.checks, key=lambda c: (c.passed, c.scope, c.name))
    ]
    failed = sum(1 for c in analysis.verdict.checks if not c.passed)
    return (
        f"<details><summary>Checks: {failed} of {len(analysis.verdict.checks)} "
        "failed</summary>"
        + _table(["check", "variant/node", "observed", "limit", "result", "what was seen"], rows)
        + "</details>"
    )


def _toc(sections: Sequence[tuple[str, str, str]]) -> str:
    items = "".join(f'<li><a href="#{esc(a)}">{esc(h)}</a></li>' for a, h, _ in sections)
    return f'<nav id="toc"><h2>Contents</h2><ol>{items}</ol></nav>'


def _comparisons_section(comparisons: Sequence[Any], figs: plots.Figures) -> str:
    out = [
        '<section id="compare"><h2>Variants compared</h2>',
        _explain(
            "Variants of one probe that differ in one option, run on the same nodes. For each: the "
            "slow-run rate with its Clopper-Pearson interval, Fisher's exact test against the reference "
            "(the first row), and the shift of the median with its bootstrap interval."
        ),
    ]
    for c in comparisons:
        rows = [
            [
                _td(a.label + (" (reference)" if i == 0 else "")),
                _td(a.n, num=True),
                _td(f"{a.slow} ({pct(a.rate)})", num=True),
                _td(f"{pct(a.rate_low)} - {pct(a.rate_high)}", num=True),
                _td(f"{a.median:.4g} {a.unit}", num=True),
            ]
            for i, a in enumerate(c.arms)
        ]
        out.append(f"<h3>{esc(c.probe)} by {esc(c.option)}</h3>")
        out.append(
            '<ul class="findings">' + "".join(f"<li>{esc(k.sentence)}</li>" for k in c.contrasts) + "</ul>"
        )
        out.append(plots.compare_figure(figs, c))
        out.append(_table(["variant", "runs", "slow", f"{pct(c.confidence)} interval", "median"], rows))
    out.append("</section>")
    return "\n".join(out)


MAX_TABLE_ROWS = 20  # rows of a long table shown in the report; the CSV beside it has all


def figures_text(settings: Settings, higher_is_better: bool, nodes: int) -> str:
    d = pct(settings.primary_threshold)
    side = "below" if higher_is_better else "above"
    text = (
        f"Red crosses are slow runs: more than {d} slower than their node's median. Value against time: "
        "every run at its start time, so a collapse or drift during the campaign shows at once (shaded: "
        "windows where interference was injected). Sorted: every run node-median scaled (value x median of "
        "all runs / median of its node, the seed's Fig. 1), slowest first; the healthy shape is flat, the "
        f"slow tail is the drop at the left, {side} the dashed threshold lines. Cumulative distribution: the "
        "fraction of runs at or below each node-scaled value."
    )
    if nodes > 1:
        text += " Per node: the median with a bar from the slowest to the fastest run (the seed's Fig. 9)."
    return (
        text + " Axes are logarithmic where the values span more than 10x. Hover a point for its node, "
        "trial, start time, value and cause; drag to zoom, double-click to reset."
    )


def _variant_section(
    variant: VariantSummary,
    name: str,
    groups: Sequence[GroupSummary],
    runs: RunVerdicts,
    picks: Sequence[TimelinePick],
    iterations: pd.DataFrame,
    settings: Settings,
    anchor: str,
    figs: plots.Figures,
    windows: Sequence[tuple[str, str, str]],
    csv_files: Mapping[str, str],
    screen: Mapping[str, str] | None = None,
) -> str:
    direction = "higher is better" if variant.higher_is_better else "lower is better"
    n_slow = int(np.count_nonzero(runs.column("slow")))
    out = [
        f'<section class="variant" id="{anchor}" data-variant="{esc(variant.variant)}">',
        f'<h2>{esc(name)} <span class="id">{esc(variant.variant)}</span></h2>',
        f"<p>{esc(variant.metric)} in {esc(variant.unit)} ({direction}); "
        + (f"page policy {esc(variant.page_policy)}; " if variant.page_policy else "")
        + f"{_count(variant.n, 'ok run')} on "
        f"{_count(variant.nodes, 'node')}; median "
        f"{esc(value_text(variant.global_median, decimals_for(variant.global_median)))} {esc(variant.unit)}; "
        f"{n_slow} slow (more than {pct(settings.primary_threshold)} below the node median).</p>",
        '<div class="figs">',
        plots.time_figure(figs, variant, name, runs, windows),
        plots.sorted_figure(figs, variant, name, runs, settings),
        plots.ecdf_figure(figs, variant, name, runs),
    ]
    if len(groups) > 1:
        out.append(plots.nodes_figure(figs, variant, name, groups, screen))
    out.append("</div>")
    out.append(_explain(figures_text(settings, variant.higher_is_better, len(groups))))
    shown = sorted(groups, key=lambda g: g.node_ratio)[:MAX_TABLE_ROWS]
    more = f"slowest {len(shown)} of {len(groups)}" if len(groups) > len(shown) else f"{len(groups)}"
    link = _csv_link(csv_files, "nodes")
    out.append(
        f"<details><summary>Nodes ({more})</summary>"
        + _groups_table(shown, settings)
        + _explain(explain.table_text(settings))
        + link
        + "</details>"
    )
    extras = _extras_table(groups[:MAX_TABLE_ROWS])
    if extras:
        out.append(f"<details><summary>Probe-specific numbers</summary>{extras}</details>")
    out.append(_slow_runs_table(runs, settings, name, csv_files))
    out.append(_timelines(variant, picks, iterations, settings, figs))
    out.append("</section>")
    return "\n".join(out)


def _csv_link(csv_files: Mapping[str, str], key: str) -> str:
    target = csv_files.get(key)
    if not target:
        return ""
    link = f'<a href="{esc(target)}">{esc(target)}</a>'
    return f'<p class="explain">All rows: {link} (CSV beside this report).</p>'


def _groups_table(groups: Sequence[GroupSummary], settings: Settings) -> str:
    headers = [
        "node",
        "runs (failed)",
        f"median [{pct(settings.confidence)} CI]",
        "CV",
        *(f"slow >{pct(d)}" for d in settings.thresholds),
        "kinds",
        "vs fleet",
    ]
    rows = []
    for g in groups:
        rows.append(
            [
                _td(g.node),
                _td(f"{g.n} ({g.n_failed})", num=True, css="bad" if g.n_failed else ""),
                _td(median_ci_text(g), num=True),
                _td(_fraction(g.cv), num=True),
                *(
                    _td(
                        tail_text(t) + ("!" if t.rejects else ""),
                        num=True,
                        css="bad" if t.rejects else "",
                        title=f"rate {tail_rate_text(t)}, "
                        + (
                            f"p = {p_value(t.p_value)}"
                            if t.test == "binomial"
                            else "judged by the anytime-valid test (the check stopped when settled)"
                        ),
                    )
                    for t in g.tails
                ),
                _td(kinds_text(g)),
                _td(pct(g.node_ratio - 1.0), num=True, css="bad" if g.node_outlier else ""),
            ]
        )
    return _table(headers, rows)


def _extras_table(groups: Sequence[GroupSummary]) -> str:
    """Probe-specific group numbers (fwq noise): one row per node, one column per key."""
    keys = sorted({k for g in groups for k in g.extras})
    if not keys:
        return ""
    text_keys = [k for k in keys if any(isinstance(g.extras.get(k), str) for g in groups)]
    num_keys = [k for k in keys if k not in text_keys]
    rows = [
        [_td(g.node), *(_td(_extra_value(k, g.extras.get(k)), num=True) for k in num_keys)] for g in groups
    ]
    notes = "".join(
        _explain(f"{k}: {v}")
        for k in text_keys
        for v in sorted({str(g.extras[k]) for g in groups if k in g.extras})
    )
    return "<h3>Probe-specific numbers</h3>" + _table(["node", *num_keys], rows) + notes


def _extra_value(key: str, value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if "fraction" in key:
        return pct(float(value))
    if "_per_s" in key:  # a rate: noise_rate_per_s
        return f"{value:.3g}/s"
    if re.search(r"_s(_|$)", key):  # seconds: noise_period_s, noise_period_s_median
        return period(float(value))
    return f"{value:.4g}"


def _slow_runs_table(runs: RunVerdicts, settings: Settings, name: str, csv_files: Mapping[str, str]) -> str:
    rows = np.flatnonzero(runs.column("slow")).tolist()  # by column: objects only for the rows shown
    key = list(zip(*(runs.column(c)[rows].tolist() for c in ("perf_ratio", "node", "trial")), strict=True))
    slow = [rows[i] for i in sorted(range(len(rows)), key=key.__getitem__)]  # sorted runs, ties in order
    if not slow:
        return f"<p>No slow runs among {len(runs)}.</p>"
    shown = runs.rows(slow[:MAX_TABLE_ROWS])
    rows = []
    for r in shown:
        d = decimals_for(r.value)
        top = r.causes[0] if r.causes else None
        cause = f"{top.cause} ({top.confidence})" if top is not None else "-"
        ev = r.evidence
        shape = r.kind if r.kind in ("systematic", "transient") else ""
        if ev is not None:
            shape += f"{', ' if shape else ''}{ev.low} of {ev.iterations} iterations low"
        evidence = top.sentence.split("): ", 1)[-1] if top is not None else "-"
        rows.append(
            [
                _td(r.node),
                _td(r.trial, num=True),
                _td(str(r.started_at)[11:19], title=str(r.started_at)),
                _td(f"{value_text(r.value, d)} {r.unit}", num=True),
                _td(pct(r.slowdown), num=True, css="bad"),
                _td(cause + (f"; {shape}" if shape else "")),
                _td(evidence),
            ]
        )
    count = f"slowest {len(shown)} of {len(slow)}" if len(slow) > len(shown) else f"{len(slow)}"
    headers = ["node", "trial", "started", "value", "slower by", "cause", "evidence"]
    return (
        f"<details><summary>Slow runs of {esc(name)} ({count})</summary>"
        + _table(headers, rows)
        + _csv_link(csv_files, "runs")
        + "</details>"
    )


def _timelines(
    variant: VariantSummary,
    picks: Sequence[TimelinePick],
    iterations: pd.DataFrame,
    settings: Settings,
    figs: plots.Figures,
) -> str:
    if not picks:
        return ""
    out = [
        "<details><summary>Iterations of the slowest runs</summary>",
        _explain(explain.timeline_text()),
        '<div class="figs">',
    ]
    hib = variant.higher_is_better
    missing: list[str] = []
    stored = RunIterations(iterations)
    for pick in picks:
        typical_series = stored.series(pick.typical.run_id, hib) if pick.typical is not None else None
        if pick.typical is not None and typical_series is not None and typical_series.empty:
            missing.append(f"{pick.typical.node} trial {pick.typical.trial} (typical)")
        for slow in pick.slow:
            series = stored.series(slow.run_id, hib)
            if series.empty:
                missing.append(f"{slow.node} trial {slow.trial} (slow)")
                continue
            out.append(
                plots.timeline_figure(figs, variant, slow, series, pick.typical, typical_series, settings)
            )
    out.append("</div>")
    if missing:
        out.append(
            _explain(
                f"No iterations stored for the slow run or its typical run of {len(missing)} of these: "
                + ", ".join(missing[:8])
                + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
                + " (imported results or runs without per-iteration records)."
            )
        )
    out.append("</details>")
    return "\n".join(out)


# --- node facts ------------------------------------------------------------------------------------------

BYTE_COLUMNS = {c.name for c in NODES.columns if c.unit == "B"}
HIDDEN_COLUMNS = {"facts", "task", "node"}
TRANSPOSE_NODES = 8  # up to this many nodes the facts table has one column per node


def _nodes_section(nodes: pd.DataFrame) -> str:
    head = '<section id="nodes"><h2>Node facts</h2>'
    if nodes is None or nodes.empty or "node" not in nodes.columns:
        return head + "<p>No node facts were recorded in this campaign.</p></section>"
    latest = nodes
    if "collected_at" in nodes.columns:
        latest = nodes.sort_values(["node", "collected_at"], kind="stable")
    latest = latest.groupby("node", sort=True).tail(1).sort_values("node", kind="stable")
    columns = [  # the schema's columns in its order, without those no node reported
        c for c in NODES.names if c in latest.columns and c not in HIDDEN_COLUMNS and latest[c].notna().any()
    ]
    names = [str(n) for n in latest["node"]]
    cells = {c: [_fact_cell(c, v) for v in latest[c]] for c in columns}
    if len(names) <= TRANSPOSE_NODES:  # facts down, nodes across: neighbours are easy to compare
        rows = [
            [_td(c), *(_td(v, css="differ" if len(set(cells[c])) > 1 else "") for v in cells[c])]
            for c in columns
        ]
        table = _table(["fact", *names], rows)
    else:
        rows = [[_td(n), *(_td(cells[c][i]) for c in columns)] for i, n in enumerate(names)]
        table = _table(["node", *columns], rows)
    out = [
        head,
        _explain(
            "The latest collection per node. Nodes of one partition should agree on everything but their "
            "names; a difference (microcode, kernel, THP, governor, turbo, memory size) is the first "
            "suspect for a node that is slower than its peers."
        ),
        table,
    ]
    facts = {str(row["node"]): _flat_facts(row.get("facts")) for _, row in latest.iterrows()}
    if len(facts) > 1:
        out.append(_differing_facts(facts))
    for i, (node, flat) in enumerate(facts.items()):
        if i >= MAX_FACT_NODES:
            out.append(f"<p>Full facts of {len(facts) - MAX_FACT_NODES} more nodes are in the store.</p>")
            break
        fact_rows = [[_td(k), _td(v)] for k, v in flat.items()]
        out.append(
            f"<details><summary>All facts of node {esc(node)} ({len(flat)})</summary>"
            + _table(["fact", "value"], fact_rows)
            + "</details>"
        )
    out.append("</section>")
    return "\n".join(out)


def _fact_cell(column: str, value: object) -> str:
    if value is None or (not isinstance(value, str) and bool(pd.isna(value))):  # None, NaN, NaT, pd.NA
        return "-"
    if column in BYTE_COLUMNS:
        try:
            return bytes_text(float(value))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, pd.Timestamp):
        return value.isoformat(timespec="seconds")
    return str(value)


def _flat_facts(text: object) -> dict[str, str]:
    """The facts JSON as dotted keys -> short text; unreadable JSON is shown as one entry saying so."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return {}
    try:
        data = json.loads(str(text))
    except json.JSONDecodeError as err:
        return {"(facts)": f"not valid JSON ({err.msg} at character {err.pos}): {str(text)[:MAX_FACT_TEXT]}"}
    flat: dict[str, str] = {}

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, dict) and value:
            for k in sorted(value, key=str):
                walk(f"{prefix}.{k}" if prefix else str(k), value[k])
            return
        shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        if len(shown) > MAX_FACT_TEXT:
            shown = shown[:MAX_FACT_TEXT] + f"... ({len(shown)} characters)"
        flat[prefix or "(facts)"] = shown

    walk("", data)
    return flat


def _differing_facts(facts: Mapping[str, Mapping[str, str]]) -> str:
    keys = sorted({k for flat in facts.values() for k in flat})
    rows = []
    for key in keys:
        by_value: dict[str, list[str]] = defaultdict(list)
        for node, flat in facts.items():
            by_value[flat.get(key, "(missing)")].append(node)
        if len(by_value) < 2:
            continue
        groups = sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        text = "; ".join(f"{v}: {_node_list(ns)}" for v, ns in groups)
        rows.append([_td(key), _td(text, css="differ")])
    if not rows:
        return f"<p>All {len(facts)} nodes report the same facts.</p>"
    return f"<h3>Facts that differ between nodes ({len(rows)})</h3>" + _table(["fact", "value: nodes"], rows)


def _node_list(nodes: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(nodes[:limit])
    return shown + (f" and {len(nodes) - limit} more" if len(nodes) > limit else "")


def _methods_section(analysis: CampaignAnalysis) -> str:
    rows = [[_td(k), _td(v)] for k, v in sorted(analysis.methods.items())]
    return (
        '<section id="methods"><details><summary>Methods: how each statistic was computed</summary>'
        + _table(["statistic", "method"], rows)
        + _explain(explain.CAUSES)
        + "</details></section>"
    )
