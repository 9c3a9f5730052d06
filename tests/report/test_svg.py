"""svg.py: nice ticks on known ranges, binning, decimation, and charts from degenerate or hostile input."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from tailscope.report.svg import (
    Chart,
    ecdf,
    esc,
    histogram,
    minmax_decimate,
    nice_number,
    nice_ticks,
    tick_labels,
)

SVG_NS = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # fails on any unescaped text or broken markup


def _circles(root: ET.Element) -> list[ET.Element]:
    return list(root.iter(f"{SVG_NS}circle"))


@pytest.mark.parametrize(
    ("x", "round_", "expected"),
    [
        (0.12, True, 0.1),
        (0.16, True, 0.2),  # fraction 1.6 rounds to 2
        (3.4, True, 5.0),
        (7.5, True, 10.0),
        (0.12, False, 0.2),  # next nice number at or above
        (1.0, False, 1.0),
        (501.0, False, 1000.0),
    ],
)
def test_nice_number(x, round_, expected):
    assert nice_number(x, round_=round_) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (0, 100, (0, 20, 40, 60, 80, 100)),
        (0.93, 1.02, (0.92, 0.94, 0.96, 0.98, 1.0, 1.02)),  # seed-like ratio axis: step 0.02
        (2277, 2571, (2200, 2300, 2400, 2500, 2600)),  # seed Fig. 1 GFLOPS range
        (-0.3, 0.3, (-0.4, -0.2, 0.0, 0.2, 0.4)),
        (1e-6, 3e-6, (1e-6, 2e-6, 3e-6)),
        (3, 1, (1.0, 1.5, 2.0, 2.5, 3.0)),  # reversed bounds are sorted
    ],
)
def test_nice_ticks_known_ranges(lo, hi, expected):
    ticks = nice_ticks(lo, hi)
    assert ticks == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert ticks[0] <= min(lo, hi) and ticks[-1] >= max(lo, hi)


def test_nice_ticks_degenerate():
    # One value: +-5% around it, still containing it.
    assert nice_ticks(5, 5) == pytest.approx((4.7, 4.8, 4.9, 5.0, 5.1, 5.2, 5.3))
    assert nice_ticks(0, 0) == pytest.approx((-1.0, -0.5, 0.0, 0.5, 1.0))
    assert nice_ticks(float("nan"), 1.0) == pytest.approx((0.0, 0.2, 0.4, 0.6, 0.8, 1.0))
    assert nice_ticks(float("-inf"), float("inf")) == pytest.approx((0.0, 0.2, 0.4, 0.6, 0.8, 1.0))
    assert [math.copysign(1.0, t) for t in nice_ticks(-1, 1) if t == 0] == [1.0]  # a zero tick is never -0.0


def test_tick_labels_share_decimals():
    assert tick_labels((0.92, 0.94, 0.96)) == ["0.92", "0.94", "0.96"]
    assert tick_labels((0.0, 2.5, 5.0)) == ["0.0", "2.5", "5.0"]
    assert tick_labels((0.0, 0.25, 0.5)) == ["0.00", "0.25", "0.50"]
    assert tick_labels((2200.0, 2300.0)) == ["2200", "2300"]
    assert tick_labels((-0.0, 1.0)) == ["0", "1"]  # never "-0"
    assert tick_labels((1e-6, 2e-6)) == ["1e-06", "2e-06"]
    assert tick_labels(()) == []


def test_histogram_bins_by_hand():
    # width: 0.12 / 6 = 0.02 (a nice number); bins start at 0.90; a value on an edge goes right.
    edges, counts = histogram([0.90, 0.95, 1.0, 1.01, 1.02, float("nan")], target_bins=6)
    assert edges == pytest.approx([0.90, 0.92, 0.94, 0.96, 0.98, 1.00, 1.02, 1.04])
    assert counts == [1, 0, 1, 0, 0, 2, 1]
    # All values equal: one populated bin holding all of them.
    edges, counts = histogram([3.0, 3.0, 3.0])
    assert sum(counts) == 3 and counts.count(3) == 1
    i = counts.index(3)
    assert edges[i] <= 3.0 < edges[i + 1]
    assert histogram([float("nan")]) == ([], [])


def test_ecdf_by_hand():
    xs, ys = ecdf([3.0, 1.0, float("nan"), 2.0, 2.0])
    assert xs == [1.0, 2.0, 2.0, 3.0]
    assert ys == [0.25, 0.5, 0.75, 1.0]


def test_minmax_decimate_keeps_spikes_and_order():
    n = 10_000
    ys = [1.0] * n
    ys[5123] = 0.2  # a one-iteration dip
    ys[77] = 1.7  # a one-iteration spike
    xs, out = minmax_decimate(list(range(n)), ys, 400)
    assert len(out) <= 400
    assert 0.2 in out and 1.7 in out
    assert xs == sorted(xs)
    assert xs[out.index(0.2)] == 5123 and xs[out.index(1.7)] == 77
    # Short series pass through unchanged, non-finite points dropped.
    assert minmax_decimate([0, 1, 2], [1.0, float("nan"), 3.0], 400) == ([0.0, 2.0], [1.0, 3.0])


def test_point_lands_where_the_axes_say():
    # Plot area: left 66, right 18 of 640 -> 556 px wide. x ticks 0..100, so x = 50 is at 66 + 278.
    chart = Chart(title="t", x_label="x", y_label="y").scatter([0, 50, 100], [0, 50, 100], label="")
    root = _parse(chart.render())
    cx = [float(c.get("cx")) for c in _circles(root)]
    assert cx == [66.0, 344.0, 622.0]
    cy = [float(c.get("cy")) for c in _circles(root)]
    assert cy[0] > cy[1] > cy[2]  # y grows upwards
    assert cy[1] == pytest.approx((cy[0] + cy[2]) / 2, abs=0.1)


def test_hostile_text_is_escaped_everywhere():
    bad = "<script>alert(1)</script> & \"q\" 'a'"
    chart = Chart(title=bad, x_label=bad, y_label=bad, x_categories=[bad, "n2"])
    chart.scatter([0, 1], [1.0, 2.0], label=bad, tooltips=[bad, bad])
    chart.error_bars([0], [1.0], [1.5], [2.0], label=bad, tooltips=[bad])
    chart.hline(1.5, label=bad)
    svg = chart.render(data={"variant": bad})
    assert "<script" not in svg
    root = _parse(svg)
    titles = [t.text for t in root.iter(f"{SVG_NS}title")]
    assert titles.count(bad) >= 4  # chart title, two point tooltips, error bar, reference line
    assert root.get("data-variant") == bad
    assert esc(bad) in svg


def test_degenerate_charts_render():
    empty = _parse(Chart(title="e", x_label="x", y_label="y").render())
    assert any(t.text == "no data" for t in empty.iter(f"{SVG_NS}text"))

    one = _parse(Chart(title="o", x_label="x", y_label="y").scatter([1.0], [42.0], label="").render())
    (c,) = _circles(one)
    assert math.isfinite(float(c.get("cx"))) and math.isfinite(float(c.get("cy")))

    nan = Chart(title="n", x_label="x", y_label="y")
    nan.scatter([1, 2, float("nan"), 4], [1.0, float("nan"), 3.0, float("inf")], label="p")
    nan.line([1, 2, 3, 4], [1.0, float("nan"), 2.0, 2.5], label="l")
    nan.step([], [], label="empty")
    nan.bars([0.0], [1.0], [float("nan")], label="b")
    root = _parse(nan.render())
    (points,) = [g for g in root.iter(f"{SVG_NS}g") if g.get("data-layer") == "p"]
    assert len(_circles(points)) == 1  # only (1, 1) is finite
    paths = [p.get("d") for p in root.iter(f"{SVG_NS}path")]
    assert len(paths) == 1 and paths[0].count("M") == 2  # the NaN breaks the line in two
    assert not re.search(r'="[^"]*(nan|inf)', nan.render(), re.IGNORECASE)  # no NaN reaches a coordinate


def test_equal_values_and_categories():
    chart = Chart(title="t", x_label="node", y_label="v", x_categories=["a", "b", "c"])
    chart.error_bars([0, 1, 2], [5.0, 5.0, 5.0], [5.0, 5.0, 5.0], [5.0, 5.0, 5.0], label="nodes")
    root = _parse(chart.render())
    assert len(_circles(root)) == 3 + 1  # three medians and the legend mark
    labels = [t.text for t in root.iter(f"{SVG_NS}text")]
    assert {"a", "b", "c"} <= set(labels)


def test_many_categories_are_thinned():
    names = [f"node{i:03d}" for i in range(200)]
    chart = Chart(title="t", x_label="node", y_label="v", x_categories=names)
    chart.error_bars(list(range(200)), [1.0] * 200, [2.0] * 200, [3.0] * 200, label="")
    labels = [t.text for t in _parse(chart.render()).iter(f"{SVG_NS}text")]
    shown = [x for x in labels if x and re.fullmatch(r"node\d{3}", x)]
    assert 20 <= len(shown) <= 40 and shown[0] == "node000"


def test_render_is_deterministic_and_bars_are_visible():
    def build() -> str:
        chart = Chart(title="h", x_label="ratio", y_label="runs", y_from_zero=True)
        chart.bars([0.9, 1.0], [1.0, 1.1], [1, 1000], label="runs", tooltips=["one", "many"])
        chart.vline(0.95, label="5% slower")
        chart.hband(0.5, 700, label="band")
        return chart.render()

    assert build() == build()
    root = _parse(build())
    rects = [r for r in root.iter(f"{SVG_NS}rect") if r.find(f"{SVG_NS}title") is not None]
    heights = {r.find(f"{SVG_NS}title").text: float(r.get("height")) for r in rects}
    assert heights["one"] >= 1.5  # a single run next to 1000 is still drawn
    assert heights["many"] > 100
    assert re.search(r"stroke-dasharray", build())


def test_step_path_is_post_step():
    chart = Chart(title="s", x_label="x", y_label="y").step([0.0, 1.0], [0.5, 1.0], label="e")
    (path,) = _parse(chart.render()).iter(f"{SVG_NS}path")
    d = path.get("d")
    # Start at (x0, 0), up to 0.5, across to x1, up to 1: one M, then H/V segments only.
    assert d.startswith("M") and "L" not in d and d.count("V") == 2


def test_layer_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="same length"):
        Chart(title="t", x_label="x", y_label="y").scatter([1, 2], [1], label="p")
