"""The report's section for a `tailscope validate` campaign: how often tailscope was right here.

It draws the `validation` table (inject/score.py's `validation_rows`; the latest scoring when the campaign
was rescored): detection recall per injector and intensity, the false-positive rate on clean runs and the
placebo rate (noise alone), each with its Clopper-Pearson interval; top-1 / top-2 cause accuracy per
injected cause; the confusion matrix (injected cause x tailscope's top cause) as a Plotly heatmap with its
counts in a table below. One paragraph says which causes cannot be told apart on this machine: the causes
the catalogue finds by elimination when no hardware counter was recorded, and any injected cause that was
named first in less than half of its runs (with the cause it was taken for).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from tailscope.analysis.causes import page_placement
from tailscope.analysis.wording import pct
from tailscope.inject.score import QUIET_LIMIT
from tailscope.report import plotly_figures as plots
from tailscope.report.markup import esc, explain, table, td

ANCHOR = "validation"
HEADING = "Validation: how often tailscope was right"
# Found by elimination (no direct evidence) when no hardware counter is recorded: the catalogue's own list
ELIMINATION_CAUSES = (*sorted(page_placement.ELIMINATION), page_placement.NAME)
TOLD_APART = 0.5  # an injected cause named first in fewer of its runs than this is reported as confused


def latest_scores(validation: pd.DataFrame | None) -> pd.DataFrame:
    """The rows of the latest scoring (`validate --rescore` adds a new one each time); empty when none."""
    if validation is None or validation.empty or "measure" not in validation.columns:
        return pd.DataFrame()
    frame = validation
    if "scored_at" in frame.columns and frame["scored_at"].notna().any():
        frame = frame.loc[frame["scored_at"] == frame["scored_at"].max()]
    return frame.reset_index(drop=True)


def _value(x: Any) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _text(x: Any) -> str | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA else str(x)


def rate_text(row: pd.Series | None) -> tuple[str, str, str]:
    """(rate, interval, k/n) of one stored row; '-' where it has no runs."""
    if row is None:
        return "-", "-", "-"
    k, n = int(row["successes"]), int(row["trials"])
    rate, low, high = _value(row["rate"]), _value(row["ci_low"]), _value(row["ci_high"])
    if n == 0 or rate is None:
        return "-", "-", f"{k}/{n}"
    interval = f"{pct(low)} - {pct(high)}" if low is not None and high is not None else "-"
    return pct(rate), interval, f"{k}/{n}"


def _one(frame: pd.DataFrame, measure: str) -> pd.Series | None:
    rows = frame.loc[frame["measure"] == measure]
    return None if rows.empty else rows.iloc[0]


def _recall_table(frame: pd.DataFrame) -> str:
    rows = frame.loc[frame["measure"] == "recall"].copy()
    if rows.empty:
        return "<p>No injected run was scored for recall.</p>"
    rows["_all"] = rows["intensity"].isna()
    rows = rows.sort_values(["kind", "_all", "intensity"], kind="stable")
    cells = []
    for _, r in rows.iterrows():
        rate, interval, counts = rate_text(r)
        intensity = _value(r["intensity"])
        low = _value(r["rate"])
        css = "" if low is None else ("bad" if low < 0.5 else "good" if low >= 0.95 else "")
        cells.append(
            [
                td(r["kind"]),
                td("all" if intensity is None else f"{intensity:g}", num=True),
                td(counts, num=True),
                td(rate, num=True, css=css),
                td(interval, num=True),
            ]
        )
    return table(["injector", "intensity", "detected / effective runs", "recall", "interval"], cells)


QUIET = f"quiet clean runs (outside work took less than {pct(QUIET_LIMIT)} of the probe CPUs)"


def _rates_table(frame: pd.DataFrame) -> str:
    cells = []
    measures = [
        ("false_positive_rate", "false-positive rate: clean runs flagged slow"),
        ("placebo_rate", "placebo rate: clean runs as much slower than their neighbours as an injection"),
    ]
    flag_rows = [
        ("placebo_rate_flag", "placebo rate at the flag threshold: what a never-wrong flag would count"),
        ("unbacked_flag_rate", "own false alarms: clean runs flagged, not that much slower than their "
         "neighbours or the clean median"),
    ]  # fmt: skip
    if _one(frame, "unbacked_flag_rate") is not None:  # scored by a tailscope that parts the two
        measures += flag_rows
    if _one(frame, "false_positive_rate_quiet") is not None:  # validate knew what else ran (score.py)
        measures += [
            ("false_positive_rate_quiet", f"false-positive rate on {QUIET}"),
            ("placebo_rate_quiet", f"placebo rate on {QUIET}"),
        ]
        if _one(frame, "unbacked_flag_rate_quiet") is not None:
            measures += [(f"{m}_quiet", f"{label.split(':')[0]} on {QUIET}") for m, label in flag_rows]
    for measure, label in measures:
        row = _one(frame, measure)
        if row is None:
            cells.append([td(label), td("not stored (scored by an older tailscope)"), td("-"), td("-")])
            continue
        rate, interval, counts = rate_text(row)
        cells.append([td(label), td(counts, num=True), td(rate, num=True), td(interval, num=True)])
    return table(["measure", "runs", "rate", "interval"], cells)


def _by_cause(frame: pd.DataFrame, measure: str) -> dict[str, pd.Series]:
    return {str(r["expected_cause"]): r for _, r in frame.loc[frame["measure"] == measure].iterrows()}


def _accuracy_table(frame: pd.DataFrame) -> str:
    top1 = frame.loc[frame["measure"] == "top1"]
    if top1.empty:
        return "<p>No effective injected run was scored for its cause.</p>"
    top2, top1_quiet = _by_cause(frame, "top2"), _by_cause(frame, "top1_quiet")
    quiet = (frame["measure"] == "top1_quiet").any()
    cells = []
    for _, r in top1.sort_values("expected_cause", kind="stable").iterrows():
        cause = str(r["expected_cause"])
        r1, i1, n1 = rate_text(r)
        r2, i2, _ = rate_text(top2.get(cause))
        row = [td(cause), *(td(x, num=True) for x in (n1, r1, i1, r2, i2))]
        if quiet:
            rq, iq, nq = rate_text(top1_quiet.get(cause))
            row += [td(x, num=True) for x in (nq, rq, iq)]
        cells.append(row)
    headers = ["injected cause", "named first / runs", "top-1", "interval", "top-2", "interval"]
    if quiet:
        headers += ["quiet runs: named first", "top-1", "interval"]
    return table(headers, cells)


def confusion_of(frame: pd.DataFrame) -> tuple[list[str], list[str], dict[tuple[str, str], int]]:
    """(injected causes, predicted causes, counts) of the stored confusion rows; `none` comes last in both."""
    rows = frame.loc[frame["measure"] == "confusion"]
    counts: dict[tuple[str, str], int] = {}
    for _, r in rows.iterrows():
        expected, predicted = _text(r["expected_cause"]), _text(r["predicted_cause"])
        if expected is None or predicted is None:
            continue
        counts[(expected, predicted)] = counts.get((expected, predicted), 0) + int(r["successes"])

    def order(names: set[str]) -> list[str]:
        return sorted(names, key=lambda n: (n == "none", n))

    expected = order({e for e, _ in counts})
    # the injected causes are columns too, so the diagonal (right answers) is there even where it is empty
    return expected, order({p for _, p in counts} | set(expected)), counts


def _confusion(frame: pd.DataFrame, figs: plots.Figures) -> str:
    expected, predicted, counts = confusion_of(frame)
    if not counts:
        return "<p>No confusion matrix: no scored run was given a cause or flagged.</p>"
    # colour: the share of the row (the injected cause's runs); text: the count
    z, text = [], []
    for e in expected:
        total = sum(counts.get((e, p), 0) for p in predicted) or 1
        z.append([round(counts.get((e, p), 0) / total, 4) for p in predicted])
        text.append([str(counts.get((e, p), 0)) for p in predicted])
    data = [
        {
            "type": "heatmap",
            "x": predicted,
            "y": expected,
            "z": z,
            "text": text,
            "texttemplate": "%{text}",
            "zmin": 0,
            "zmax": 1,
            "colorscale": "Blues",
            "reversescale": True,  # Plotly's Blues runs dark to light: more runs, darker
            "colorbar": {"title": {"text": "share<br>of row"}, "tickformat": ".0%"},
            "hovertemplate": "injected %{y}<br>named first %{x}<br>%{text} runs (%{z:.0%} of the row)"
            "<extra></extra>",
        }
    ]
    layout = {
        "margin": {"l": 64, "r": 16, "t": 16, "b": 84},
        "xaxis": {"title": {"text": "tailscope's top cause"}, "automargin": True, "type": "category"},
        "yaxis": {
            "title": {"text": "injected cause"},
            "automargin": True,
            "type": "category",
            "autorange": "reversed",
        },
    }
    height = max(300, 120 + 44 * len(expected))
    figure = figs.html("confusion", "validation", data, layout, height)
    rows = [[td(e), *(td(counts.get((e, p), 0) or "", num=True) for p in predicted)] for e in expected]
    return (
        f'<div class="figs"><figure class="plotbox">{figure}</figure></div>'
        + "<details><summary>Confusion matrix as a table</summary>"
        + table(["injected \\ named first", *predicted], rows)
        + "</details>"
    )


def apart_text(frame: pd.DataFrame, hardware_counters: bool | None) -> str:
    """Which causes cannot be told apart on this machine, in one or two sentences."""
    parts = []
    if hardware_counters is not True:
        names = ", ".join(ELIMINATION_CAUSES)
        parts.append(
            "No hardware counter was recorded here, so the catalogue finds "
            f"{names} by elimination only (no evidence of their own): they cannot be told apart from each "
            "other on this machine, and a figure for them below measures the elimination rule, not evidence."
        )
    _, _, counts = confusion_of(frame)
    confused = []
    for _, r in frame.loc[frame["measure"] == "top1"].sort_values("expected_cause").iterrows():
        rate = _value(r["rate"])
        if rate is None or rate >= TOLD_APART:
            continue
        cause = str(r["expected_cause"])
        taken = sorted(
            ((n, p) for (e, p), n in counts.items() if e == cause and p != cause), key=lambda x: (-x[0], x[1])
        )
        as_what = ""
        if taken:
            n, what = taken[0]
            as_what = f", mostly {'with no cause' if what == 'none' else 'as ' + what} ({n} runs)"
        named = f"{int(r['successes'])} of {int(r['trials'])}"
        confused.append(f"{cause} was named first in {named} runs{as_what}")
    if confused:
        parts.append(
            "In this campaign tailscope did not tell these injected causes apart (named first in fewer than "
            f"{pct(TOLD_APART)} of their runs): " + "; ".join(confused) + "."
        )
    if not parts:
        parts.append("Every injected cause scored here was named first in at least half of its runs.")
    return " ".join(parts)


def validation_section(
    validation: pd.DataFrame | None, figs: plots.Figures, *, hardware_counters: bool | None = None
) -> str:
    """The section, or "" when the campaign stores no validation scores."""
    frame = latest_scores(validation)
    if frame.empty:
        return ""
    confidence = _value(frame["confidence"].iloc[0]) or 0.95
    scored = str(frame["scored_at"].iloc[0])[:19] if "scored_at" in frame.columns else ""
    out: Sequence[str] = [
        f'<section id="{ANCHOR}"><h2>{esc(HEADING)}</h2>',
        explain(
            "Scores of `tailscope validate` (scored "
            + scored
            + "): interference was injected in a random, recorded schedule of trial blocks, with clean "
            "blocks between them, and the campaign's own analysis was scored against it. An injected run "
            "counts for recall and cause accuracy when it really was slower than the clean runs around it "
            "by at least the scoring threshold (10% unless validate was given --threshold): the effective "
            f"runs. Intervals are {pct(confidence)} Clopper-Pearson (exact binomial)."
        ),
        f'<p class="apart" data-apart="1">{esc(apart_text(frame, hardware_counters))}</p>',
        "<h3>Detection recall per injector and intensity</h3>",
        _recall_table(frame),
        "<h3>False positives and placebo</h3>",
        _rates_table(frame),
        explain(
            "When the placebo rate is not far below the recall, the node's own run-to-run noise makes "
            "clean runs look injected as often, and the figures measure that noise as much as tailscope. "
            "Runs are flagged at analyze's slow threshold, usually below the scoring threshold: the placebo "
            "rate at that threshold is the false-positive rate a flag that is never wrong would have on this "
            "node, and the own false alarms are the clean runs flagged beyond it."
        ),
        "<h3>Cause accuracy per injected cause</h3>",
        _accuracy_table(frame),
        "<h3>Confusion matrix</h3>",
        _confusion(frame, figs),
        explain(
            "Rows: the cause the injector should produce (none: clean runs flagged slow); columns: the "
            "cause tailscope ranked first (none: the run got no cause). Colour is the share of the row."
        ),
        "</section>",
    ]
    return "\n".join(out)
