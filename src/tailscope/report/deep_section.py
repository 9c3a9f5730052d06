"""The report's "Top-down follow-up" section: the chain `check --deep` walked (seed 003, SJTU).

Per degraded probe: why it was degraded, the micro-architecture probes that isolate its component with what
each found against what a healthy component shows (verbs/deep.py's expectations), the counters (or the
statement that no PMU recorded any), and the DIMM facts for a slow stream. Nothing is computed here except
formatting: the chain comes from DIR/deep.json (report/models.py: load_deep), the counters from the
analysis' attribution (analysis/attribution.py: the degraded probe's counters ranked by how well they
separate its slow runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tailscope.analysis.arith_table import figure_text
from tailscope.report.markup import esc
from tailscope.report.markup import explain as _explain
from tailscope.report.markup import table as _table
from tailscope.report.markup import td as _td
from tailscope.report.models import AS_EXPECTED, DIFFERS, NOT_JUDGED, DeepResult

_INTRO = (
    "check --deep follows each degraded probe of the suite top-down, as the SJTU study did: the probe that "
    "shows the anomaly, then the micro-architecture probes that isolate its component (arithmetic and clock "
    "for dgemm; load latency, bandwidth on 1..all cores and the DIMMs for stream; cache latency for l2sum; "
    "core-to-core latency for fwq), then the hardware counters where a PMU exists. Each follow-up is shown "
    "with what a healthy component would show and whether it did."
)
_STATUS_CSS = {DIFFERS: "bad", AS_EXPECTED: "good", NOT_JUDGED: ""}
_INCONCLUSIVE_WORD = "Followed up (the verdict is inconclusive: not called degraded)"
TOP_COUNTERS = 3  # counters quoted per degraded probe (the Counters section lists them all)


def deep_section(
    deep: DeepResult | None,
    attribution: Mapping[str, Any] | None = None,
    probe_of: Mapping[str, str] | None = None,
) -> str:
    """The HTML of the section, or "" when the campaign had no `check --deep`. `attribution` is the analysis'
    counter attribution (None without counters), `probe_of` maps its variant ids to probe names."""
    if deep is None:
        return ""
    parts = ['<section id="deep"><h2>Top-down follow-up (check --deep)</h2>', _explain(_INTRO)]
    if not deep.steps:
        parts.append("<p>No probe of the suite was degraded: nothing to follow up.</p>")
        parts.append(f"<p><b>Counters:</b> {esc(deep.counters)}</p></section>")
        return "\n".join(parts)
    for i, step in enumerate(deep.steps, start=1):
        counters = _counters_of(step.probe, attribution, probe_of or {})
        parts.append(_step(i, step.probe, step.why, step.follow_ups, deep, counters))
    parts.append("</section>")
    return "\n".join(parts)


def _counters_of(probe: str, attribution: Mapping[str, Any] | None, probe_of: Mapping[str, str]) -> str:
    """The degraded probe's top counters (slow vs normal runs) from the attribution, as HTML; "" if none."""
    if not attribution:
        return ""
    quoted = []
    for v in attribution.get("variants", []):
        if probe_of.get(v["variant"]) != probe or not v.get("slow_runs"):
            continue
        for c in v.get("counters", [])[:TOP_COUNTERS]:
            if c.get("slow_median") is None or c.get("normal_median") is None:
                continue
            q = c.get("q_value")
            quoted.append(
                f"{c['counter']}: slow runs {c['slow_median']:.4g}, normal {c['normal_median']:.4g}"
                + (f" (q = {q:.2g})" if q is not None else "")
            )
    if not quoted:
        return ""
    return (
        f"{esc('; '.join(quoted))} (the counters that best separate {esc(probe)}'s slow runs; all of them in "
        '<a href="#counters">Counters</a>)'
    )


def _step(
    i: int, probe: str, why: str, follow_ups: list[dict[str, Any]], deep: DeepResult, counters: str = ""
) -> str:
    differs = [f["probe"] for f in follow_ups if f.get("status") == DIFFERS]
    outcome = (
        f'<span class="bad">{esc(", ".join(differs))} differ{"s" if len(differs) == 1 else ""} from '
        "what a healthy component shows</span>"
        if differs
        else "no follow-up differs from what a healthy component shows"
        if any(f.get("status") == AS_EXPECTED for f in follow_ups)
        else "no follow-up was judged against an expectation"
    )
    rows = [
        [
            _td(f["probe"]),
            _td(f["isolates"]),
            _td(f["finding"]),
            _td(f.get("expected") or "(no rule)"),
            _td(f.get("status", NOT_JUDGED), css=_STATUS_CSS.get(f.get("status", NOT_JUDGED), "")),
        ]
        for f in follow_ups
    ]
    table = (
        _table(["probe", "isolates", "found", "expected when healthy", "verdict"], rows, css="follow-ups")
        if rows
        else "<p>No follow-up probe exists for this probe.</p>"
    )
    table += "".join(arith_tables_html(f["arith_table"]) for f in follow_ups if f.get("arith_table"))
    items = [
        f"<li><b>{_INCONCLUSIVE_WORD if deep.inconclusive else 'Degraded'}:</b> {esc(why)}</li>",
        f"<li><b>Component probes</b> ({len(follow_ups)} follow-up{'s' if len(follow_ups) != 1 else ''}, "
        f"their trials stored in this campaign): {outcome}.{table}</li>",
        f"<li><b>Counters:</b> {counters or esc(deep.counters)}</li>",
    ]
    if probe == "stream" and deep.dimms is not None:
        items.append(f"<li><b>DIMMs:</b> {esc(_dimms_text(deep.dimms))}</li>")
    return f'<h3 id="deep-{esc(probe)}">{i}. {esc(probe)}</h3><ol class="chain">{"".join(items)}</ol>'


def _dimms_text(dimms: dict[str, Any]) -> str:
    if dimms.get("dimms_unreadable"):
        return f"not readable here: {dimms['dimms_unreadable']}"
    s = dimms.get("summary") or {}
    speed = s.get("min_configured_speed_mts")
    return (
        f"{s.get('populated', 0)} populated, {s.get('empty_slots', 0)} empty slots, ranks "
        f"{s.get('ranks')}{' (mixed on this node)' if s.get('mixed_ranks') else ''}, slowest configured "
        f"speed {speed if speed else 'unknown'} MT/s, from {dimms.get('dimms_source')}"
    )


def arith_tables_html(tables: list[dict[str, Any]]) -> str:
    """arith's follow-up in the seed's shape: per width, rows ADD..SQRT, columns precision x
    absolute/pipelined (cycles per instruction; analysis/arith_table.py's data, stored in deep.json)."""
    out = []
    for t in tables:
        kinds = ("Absolute", "Pipelined")
        headers = ["Instruction"] + [f"{p.upper()} {k}" for p in t["precisions"] for k in kinds]
        rows = [
            [_td(op)] + [_td(figure_text(c[i], c[2]), num=True) for c in cells for i in (0, 1)]
            for op, cells in t["rows"]
        ]
        out.append(f"<p><b>{esc(t['title'])}</b></p>" + _table(headers, rows))
    return "".join(out)
