"""plotly_figures.py: what each figure's spec holds (drawing itself is checked in Chromium)."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pandas as pd
from report_builders import run_verdict, variant_summary

from tailscope.analysis.model import Settings
from tailscope.report import plotly_figures as plots


def _spec(html: str) -> dict:
    return json.loads(re.search(r'type="application/json" id="plot\d+-spec">(.*?)</script>', html).group(1))


def test_injected_windows_are_shaded_on_the_time_axis():
    runs = [run_verdict("l2sum-1a2b", "n1", t, 0.8 if t == 3 else 1.0) for t in range(6)]
    injections = pd.DataFrame(
        {
            "node": ["n1"],
            "started_at": [pd.Timestamp("2026-11-02T10:00:05Z")],
            "ended_at": [pd.Timestamp("2026-11-02T10:00:09Z")],
        }
    )
    windows = plots.windows_of(injections)
    assert windows == [("n1", "2026-11-02T10:00:05+00:00", "2026-11-02T10:00:09+00:00")]
    spec = _spec(
        plots.time_figure(
            plots.Figures(), variant_summary("l2sum-1a2b", nodes=1, n=6), "l2sum", runs, windows
        )
    )
    (shade,) = spec["layout"]["shapes"]
    assert shade["x1"] - shade["x0"] == 4000 and shade["yref"] == "paper"
    assert plots.windows_of(pd.DataFrame({"node": ["n1"], "when": [1]})) == []  # no time columns: nothing
    assert plots.windows_of(None) == []


def test_log_axis_only_when_the_values_span_more_than_ten_times():
    narrow = [run_verdict("v-1", "n1", t, 1.0 - 0.01 * t) for t in range(5)]
    wide = [*narrow, run_verdict("v-1", "n1", 9, 0.05)]
    v = variant_summary("v-1", nodes=1, n=6)
    assert (
        _spec(plots.sorted_figure(plots.Figures(), v, "v", narrow, Settings()))["layout"]["yaxis"]["type"]
        == "linear"
    )
    spec = _spec(plots.sorted_figure(plots.Figures(), v, "v", wide, Settings()))
    assert spec["layout"]["yaxis"]["type"] == "log"
    # threshold labels sit in log10 units on a log axis, the lines in data units
    assert spec["layout"]["annotations"][0]["y"] < 3 < spec["layout"]["shapes"][0]["y0"]


def test_thinning_keeps_every_slow_run():
    runs = [run_verdict("v-1", "n1", t, 0.5 if t % 500 == 0 else 1.0) for t in range(10_000)]
    spec = _spec(
        plots.sorted_figure(plots.Figures(), variant_summary("v-1", nodes=1, n=10_000), "v", runs, Settings())
    )
    normal, slow = spec["data"]
    assert len(slow["y"]) == 20 and len(normal["y"]) == plots.MAX_POINTS
    assert normal["name"] == f"normal (9980, {plots.MAX_POINTS} drawn)"


def test_a_timeline_whose_low_cut_is_below_zero_draws_no_low_line():
    """On a busy node the iteration noise can be so wide that 3 sds reach below zero (classify.low_cut < 0):
    no iteration can be low, and the 'low' line would sit at a negative value, which a log axis cannot
    place (the suite under stress-ng: `check --deep` failed with a math domain error). Only the reference
    is drawn."""
    from tailscope.analysis.model import KindEvidence
    from tailscope.report.timelines import IterationSeries

    evidence = KindEvidence(20, 0, 0.0, 0.4, 0.01, 0.9, low_cut=-1.85, reference=150.0)
    slow = run_verdict("v-1", "n1", 3, 0.4, kind="unclassified", evidence=evidence)
    series = IterationSeries(np.arange(20), np.geomspace(1.0, 400.0, 20), "team")  # a log axis
    spec = _spec(plots.timeline_figure(plots.Figures(), variant_summary("v-1", nodes=1, n=6), slow, series,
                                       None, None, Settings()))  # fmt: skip
    assert spec["layout"]["yaxis"]["type"] == "log"
    (line,) = spec["layout"]["shapes"]
    assert line["y0"] == 150.0 and "noise too wide" in spec["layout"]["annotations"][0]["text"]
    fine = dataclasses.replace(evidence, low_cut=0.95)
    shapes = _spec(plots.timeline_figure(plots.Figures(), variant_summary("v-1", nodes=1, n=6),
                                         dataclasses.replace(slow, evidence=fine), series, None, None,
                                         Settings()))["layout"]["shapes"]  # fmt: skip
    assert [s["y0"] for s in shapes] == [150.0, 142.5]


def test_the_embedded_library_is_the_one_plotly_gives():
    """plotly_js reads plotly.min.js without importing plotly: the same text its get_plotlyjs() gives."""
    import subprocess
    import sys

    from plotly.offline import get_plotlyjs

    from installed import tailscope_env

    assert plots.plotly_js() == get_plotlyjs() and "plotly.js v" in plots.plotly_js()[:200]
    check = "import sys\nfrom tailscope.report import plotly_figures as p\np.plotly_js()\nprint(*sys.modules)"
    child = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True, env=tailscope_env()
    )
    loaded = child.stdout.split()
    assert "plotly" not in loaded and "tailscope.report.plotly_figures" in loaded
