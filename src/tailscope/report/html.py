"""The offline HTML report: one self-contained file (inline CSS and SVG, no script, nothing fetched).

`render_html` lays out, in order: the verdict and its checks, the findings (`analysis.notes`), an overview
of every (variant, node), then per probe variant its figures (sorted node-scaled runs, ECDF and histogram
of the performance ratio, per-node min/median/max when there are several nodes), its group table, its slow
runs and their iteration timelines; then the node facts, the methods and the settings. Each figure and
table has a "what the numbers mean" paragraph (explain.py).

The caller (workflow.write_report) passes the store's `nodes` table and the `iterations` rows of the runs
that `select_timeline_runs` names; every other number comes from the CampaignAnalysis.
A Content-Security-Policy meta tag forbids the page any network access, so even a stray URL in a node
fact cannot make the browser fetch anything.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

import pandas as pd

from tailscope.analysis.health import SEVERITY
from tailscope.analysis.model import (
    CampaignAnalysis,
    GroupSummary,
    RunVerdict,
    Settings,
    VariantSummary,
)
from tailscope.analysis.wording import p_value, pct, period
from tailscope.report import explain, figures
from tailscope.report.cluster_section import render_cluster_section
from tailscope.report.counters_section import counters_section
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
from tailscope.report.pages_section import pages_section
from tailscope.report.svg import esc
from tailscope.report.timelines import TimelinePick, iteration_series, pick_timelines
from tailscope.store.manifest import Manifest
from tailscope.store.schema import NODES

__all__ = ["render_html", "select_timeline_runs"]

MAX_SLOW_ROWS = 100  # slow runs listed per variant; the rest are counted
MAX_FACT_NODES = 32  # nodes whose full facts are listed; the table of differing facts covers all
MAX_FACT_TEXT = 300  # characters of one fact value shown (long lists: cpu flags)

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;
margin:0 auto;max-width:1400px;padding:0 16px 40px}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;margin:26px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #d4d4d4;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.meta td:first-child{color:#555}
.verdict{padding:10px 14px;border-radius:4px;margin:14px 0}
.verdict.pass{background:#e8f5e9;border:1px solid #66bb6a}
.verdict.fail{background:#fdecea;border:1px solid #e57373}
.verdict.unsure{background:#fff8e1;border:1px solid #f0c36d}
.verdict .word{font-size:20px;font-weight:bold}
.notes{background:#fff8e1;border:1px solid #f0c36d;padding:8px 14px 8px 34px;border-radius:4px}
.notes li{margin:4px 0}
.explain{color:#444;max-width:980px;font-size:13px;margin:4px 0 10px}
.figs{display:flex;flex-wrap:wrap;gap:12px}
.scroll{max-width:100%;overflow-x:auto}
figure{margin:0;max-width:100%}svg.chart{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:12px;color:#555;max-width:640px}
.bad{color:#b71c1c;font-weight:bold}.good{color:#1b5e20}
.differ{background:#fff3e0}
details>summary{cursor:pointer;font-weight:bold;margin:6px 0}
code{font-size:12px}
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
) -> str:
    """The whole report as one HTML document (str)."""
    name = str(manifest.name or analysis.campaign)
    title = f"tailscope report: {name}"
    variants = {v.variant: v for v in analysis.variants}
    groups_of: dict[str, list[GroupSummary]] = defaultdict(list)
    for g in analysis.groups:
        groups_of[g.variant].append(g)
    runs_of: dict[str, list[RunVerdict]] = defaultdict(list)
    for r in analysis.runs:
        runs_of[r.variant].append(r)
    picks = pick_timelines(analysis)
    anchors = {v: f"v{i + 1}" for i, v in enumerate(variants)}

    body: list[str] = [
        f"<h1>{esc(title)}</h1>",
        _meta_table(analysis, manifest, generated_at),
        _verdict_section(analysis),
        _notes_section(analysis.notes),
        _overview_section(analysis, anchors),
    ]
    for variant in variants.values():
        body.append(
            _variant_section(
                variant,
                groups_of[variant.variant],
                runs_of[variant.variant],
                [p for k, p in picks.items() if k[0] == variant.variant],
                iterations,
                analysis.settings,
                anchors[variant.variant],
            )
        )
    body += [
        counters_section(analysis, samples),
        render_cluster_section(analysis),
        _nodes_section(nodes),
        pages_section(nodes),
        _methods_section(analysis),
        f'<footer class="explain">Generated {esc(generated_at)} by tailscope '
        f"{esc(manifest.tool_version)}. This file is self-contained: it loads nothing from the "
        "network and runs no script.</footer>",
    ]
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
    )
    return head + "\n".join(body) + "\n</body>\n</html>\n"


# --- small HTML helpers ----------------------------------------------------------------------------------


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _fraction(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else pct(x)


# --- sections --------------------------------------------------------------------------------------------


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
                f"{label} {pct(v)}"
                for label, v in (
                    ("max slow rate", s.max_slow_rate),
                    ("max q01 drop", s.max_q01_drop),
                    ("max CV", s.max_cv),
                )
                if v is not None
            )
            or "none set",
        ),
    ]
    return _table(None, ([_td(k), _td(v)] for k, v in rows), css="meta")


def _verdict_section(analysis: CampaignAnalysis) -> str:
    """The campaign state (the worst node verdict), one row per node, then the checks. The box is green
    only when every node is healthy, so it never sits above a failing cell."""
    verdict = analysis.verdict
    state = verdict.state if analysis.nodes else "inconclusive"  # nothing judged is not healthy
    css = {"healthy": "pass", "degraded": "fail", "inconclusive": "unsure"}[state]
    counts = ", ".join(
        f"{sum(n.verdict == s for n in analysis.nodes)} {s}"
        for s in ("degraded", "inconclusive", "healthy")
        if any(n.verdict == s for n in analysis.nodes)
    )
    out = [
        f'<section id="verdict" class="verdict {css}">',
        f'<span class="word">Verdict: {esc(state.upper())}</span> ({esc(counts or "no nodes")})',
        _explain(explain.verdict_text(bool(verdict.checks))),
    ]
    if analysis.nodes:
        node_rows = [
            [
                _td(n.node),
                _td(n.verdict, css={"healthy": "good", "degraded": "bad"}.get(n.verdict, "")),
                _td(", ".join(dict.fromkeys(c.cause for c in n.causes)) or "-"),
                _td("; ".join(n.reasons)),
            ]
            for n in sorted(analysis.nodes, key=lambda n: (-SEVERITY[n.verdict], n.node))
        ]
        out.append(_table(["node", "verdict", "causes", "reasons"], node_rows))
        out.append(f'<p class="explain">Limits: {esc("; ".join(analysis.nodes[0].limits))}.</p>')
    if verdict.checks:
        rows = [
            [
                _td(c.name),
                _td(c.scope),
                _td(_fraction(c.observed), num=True),
                _td(_fraction(c.limit), num=True),
                _td("passed" if c.passed else "FAILED", css="good" if c.passed else "bad"),
                _td(c.message),
            ]
            for c in sorted(verdict.checks, key=lambda c: (c.passed, c.scope, c.name))
        ]
        out.append(_table(["check", "variant/node", "observed", "limit", "result", "what was seen"], rows))
    out.append("</section>")
    return "\n".join(out)


def _notes_section(notes: Sequence[str]) -> str:
    if not notes:
        return '<section id="notes"><h2>Findings</h2><p>No findings.</p></section>'
    items = "\n".join(f"<li>{esc(n)}</li>" for n in notes)
    return (
        '<section id="notes"><h2>Findings</h2>'
        f'<p class="explain">Most important first.</p><ol class="notes">\n{items}\n</ol></section>'
    )


def _overview_section(analysis: CampaignAnalysis, anchors: Mapping[str, str]) -> str:
    if not analysis.groups:
        return '<section id="overview"><h2>Overview</h2><p>No successful runs to analyse.</p></section>'
    s = analysis.settings
    headers = [
        "variant",
        "node",
        "n",
        "failed",
        f"median [{pct(s.confidence)} CI]",
        "CV",
        *(f"slow >{pct(d)}" for d in s.thresholds),
        "kinds",
        "node vs all",
    ]
    rows = []
    for g in analysis.groups:
        link = f'<td><a href="#{anchors[g.variant]}">{esc(g.variant)}</a></td>'
        rows.append(
            [
                link,
                _td(g.node),
                _td(g.n, num=True),
                _td(g.n_failed, num=True, css="bad" if g.n_failed else ""),
                _td(median_ci_text(g), num=True),
                _td(_fraction(g.cv), num=True),
                *(_td(tail_text(t), num=True, css="bad" if t.rejects else "") for t in g.tails),
                _td(kinds_text(g)),
                _td(
                    f"{pct(g.node_ratio - 1.0)}" + (" (slower than peers)" if g.node_outlier else ""),
                    num=True,
                    css="bad" if g.node_outlier else "",
                ),
            ]
        )
    return '<section id="overview"><h2>Overview</h2>' + _table(headers, rows) + "</section>"


def _variant_section(
    variant: VariantSummary,
    groups: Sequence[GroupSummary],
    runs: Sequence[RunVerdict],
    picks: Sequence[TimelinePick],
    iterations: pd.DataFrame,
    settings: Settings,
    anchor: str,
) -> str:
    direction = "higher is better" if variant.higher_is_better else "lower is better"
    params = json.dumps(variant.params, sort_keys=True, default=str)
    out = [
        f'<section class="variant" id="{anchor}" data-variant="{esc(variant.variant)}">',
        f"<h2>{esc(variant.probe)}: {esc(variant.variant)}</h2>",
        f"<p>{esc(variant.metric)} in {esc(variant.unit)} ({direction}); {variant.n} ok runs on "
        f"{_count(variant.nodes, 'node')}; median of all runs "
        f"{esc(value_text(variant.global_median, decimals_for(variant.global_median)))} {esc(variant.unit)}. "
        f"Parameters: <code>{esc(params)}</code></p>",
        '<div class="figs">',
        _figure(
            figures.sorted_chart(variant, runs, settings),
            explain.sorted_text(settings, variant.higher_is_better),
        ),
        "</div>",
        '<div class="figs">',
        _figure(figures.ecdf_chart(variant, runs, settings), explain.ecdf_text(settings)),
        _figure(figures.histogram_chart(variant, runs, settings), explain.histogram_text()),
        "</div>",
    ]
    if len(groups) > 1:
        out.append(_figure(figures.nodes_chart(variant, groups), explain.nodes_text(settings)))
    out.append(f"<h3>Nodes of {esc(variant.variant)}</h3>")
    out.append(_groups_table(groups, settings))
    out.append(_explain(explain.table_text(settings)))
    extras = _extras_table(groups)
    if extras:
        out.append(extras)
    out.append(_slow_runs_table(runs, settings))
    out.append(_timelines(variant, picks, iterations, settings))
    out.append("</section>")
    return "\n".join(out)


def _figure(svg: str, text: str) -> str:
    return f"<figure>{svg}<figcaption>{esc(text)}</figcaption></figure>"


def _groups_table(groups: Sequence[GroupSummary], settings: Settings) -> str:
    headers = [
        "node",
        "n (failed)",
        f"median [{pct(settings.confidence)} CI]",
        "min - max",
        "CV",
        "MAD",
        "slow-side quantile [CI]",
        "quantile rule",
    ]
    for d in settings.thresholds:
        headers += [f"slow >{pct(d)} k/n", "rate [CI]", "p"]
    headers += ["kinds", "trials needed (95% / 99%)", "node vs all"]
    rows = []
    for g in groups:
        d = decimals_for(g.median)
        lq = g.low_quantile
        lq_text = value_text(lq.estimate, d) + (
            f" [{value_text(lq.lower, d)}, {value_text(lq.upper, d)}]"
            if lq.lower is not None and lq.upper is not None
            else " [no CI]"
        )
        rule = g.quantile_rule
        cells = [
            _td(g.node),
            _td(f"{g.n} ({g.n_failed})", num=True, css="bad" if g.n_failed else ""),
            _td(
                median_ci_text(g),
                num=True,
                title=f"coverage {g.median_ci.coverage:.3f}" if g.median_ci.coverage is not None else "",
            ),
            _td(f"{value_text(g.minimum, d)} - {value_text(g.maximum, d)}", num=True),
            _td(_fraction(g.cv), num=True),
            _td(value_text(g.mad, d), num=True),
            _td(lq_text, num=True, title=f"q = {lq.q:g}"),
            _td(
                f"{pct(rule.drop)} vs {pct(rule.limit)}: {'pass' if rule.passed else 'FAIL'}",
                num=True,
                css="" if rule.passed else "bad",
            ),
        ]
        for t in g.tails:
            css = "bad" if t.rejects else ""
            cells += [
                _td(tail_text(t), num=True, css=css),
                _td(tail_rate_text(t), num=True),
                _td(p_value(t.p_value), num=True, css=css),
            ]
        cells += [
            _td(kinds_text(g)),
            _td(_trials_needed_text(g)),
            _td(
                f"{pct(g.node_ratio - 1.0)} (score {g.node_score:.2f})",
                num=True,
                css="bad" if g.node_outlier else "",
            ),
        ]
        rows.append(cells)
    return _table(headers, rows)


def _trials_needed_text(g: GroupSummary) -> str:
    parts = []
    for source in ("observed", "given"):
        chosen = sorted((t for t in g.trials_needed if t.rate_source == source), key=lambda t: t.confidence)
        if not chosen or chosen[0].trials is None:
            continue
        counts = " / ".join(str(t.trials) for t in chosen if t.trials is not None)
        parts.append(
            f"{counts} at {'observed' if source == 'observed' else 'given'} rate {pct(chosen[0].rate)}"
        )
    return "; ".join(parts) or "-"


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


def _slow_runs_table(runs: Sequence[RunVerdict], settings: Settings) -> str:
    slow = sorted((r for r in runs if r.slow), key=lambda r: (r.perf_ratio, r.node, r.trial))
    head = f"<h3>Slow runs (more than {pct(settings.primary_threshold)} slower than their node's median)</h3>"
    if not slow:
        outliers = sum(1 for r in runs if r.robust_outlier)
        extra = (
            f" {outliers} run{'s are' if outliers != 1 else ' is'} a robust outlier on the slow side "
            "but within the threshold."
            if outliers
            else ""
        )
        return head + f"<p>None of {len(runs)} runs.{esc(extra)}</p>"
    rows = []
    with_extras = any(r.extras for r in slow[:MAX_SLOW_ROWS])
    for r in slow[:MAX_SLOW_ROWS]:
        d = decimals_for(r.value)
        ev = r.evidence
        evidence = (
            f"{ev.low} of {ev.iterations} iterations low; median iteration ratio {ev.median_ratio:.3f}, "
            f"min {ev.min_ratio:.3f}, IQR {ev.spread:.3f}"
            if ev is not None
            else "no iterations to judge"
        )
        rows.append(
            [
                _td(r.run_id),
                _td(r.node),
                _td(r.trial, num=True),
                _td(r.started_at),
                _td(f"{value_text(r.value, d)} {r.unit}", num=True),
                _td(f"{r.perf_ratio:.4f}", num=True),
                _td(pct(r.slowdown), num=True, css="bad"),
                _td(f"{r.robust_score:.2f}", num=True),
                _td(r.kind),
                _td(evidence),
                *(
                    [_td(", ".join(f"{k} {_extra_value(k, v)}" for k, v in sorted(r.extras.items())))]
                    if with_extras
                    else []
                ),
            ]
        )
    more = (
        f"<p>{len(slow) - MAX_SLOW_ROWS} more slow runs are not listed (see `tailscope analyze --json`).</p>"
        if len(slow) > MAX_SLOW_ROWS
        else ""
    )
    headers = [
        "run",
        "node",
        "trial",
        "started (UTC)",
        "value",
        "ratio",
        "slower by",
        "robust z",
        "kind",
        "evidence",
        *(["probe-specific"] if with_extras else []),
    ]
    return head + _table(headers, rows) + more


def _timelines(
    variant: VariantSummary, picks: Sequence[TimelinePick], iterations: pd.DataFrame, settings: Settings
) -> str:
    if not picks:
        return ""
    out = [
        "<details open><summary>Iteration timelines of the slowest runs</summary>",
        _explain(explain.timeline_text()),
        '<div class="figs">',
    ]
    for pick in picks:
        hib = variant.higher_is_better
        typical_series = (
            iteration_series(iterations, pick.typical.run_id, hib) if pick.typical is not None else None
        )
        for slow in pick.slow:
            series = iteration_series(iterations, slow.run_id, hib)
            caption = f"run {slow.run_id}"
            if pick.typical is not None:
                caption += f" vs typical run {pick.typical.run_id}"
            if series.empty:
                caption += ": no iterations stored for the slow run"
            if typical_series is not None and typical_series.empty:
                caption += ": no iterations stored for the typical run"
            svg = figures.timeline_chart(variant, slow, series, pick.typical, typical_series, settings)
            out.append(f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>")
    out += ["</div>", "</details>"]
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
