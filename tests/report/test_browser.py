"""The report opened in real headless Chromium: every figure draws, no console error, no request."""

from __future__ import annotations

import pytest
from report_builders import HOSTILE, render

pytestmark = pytest.mark.browser

EXPECTED_FIGURES = {  # (figure, variant) -> count, from demo_analysis: see test_html
    ("time", "l2sum-1a2b"): 1,
    ("sorted", "l2sum-1a2b"): 1,
    ("ecdf", "l2sum-1a2b"): 1,
    ("nodes", "l2sum-1a2b"): 1,
    ("timeline", "l2sum-1a2b"): 2,
    ("time", "fwq-9f9f"): 1,
    ("sorted", "fwq-9f9f"): 1,
    ("ecdf", "fwq-9f9f"): 1,
    ("timeline", "fwq-9f9f"): 1,
}

BOXES = """
document.querySelectorAll('details').forEach(function (d) { d.open = true; });
window.tailscopeDraw();
return Array.from(document.querySelectorAll('div.plot')).map(function (s) {
  var r = s.getBoundingClientRect(), svg = s.querySelector('svg.main-svg');
  return [s.getAttribute('data-figure'), s.getAttribute('data-variant'), r.width, r.height, !!svg];
});
"""


def test_report_renders_offline_in_chromium(chromium, tmp_path):
    path = tmp_path / "report.html"
    path.write_text(render(), encoding="utf-8")
    chromium.get_log("browser")  # drop anything logged before this page
    chromium.get(path.as_uri())

    assert chromium.title == "tailscope report: demo"
    assert chromium.execute_script("return document.readyState") == "complete"

    boxes = chromium.execute_script(BOXES)
    counts: dict[tuple[str, str], int] = {}
    for figure, variant, width, height, drawn in boxes:
        counts[(figure, variant)] = counts.get((figure, variant), 0) + 1
        assert drawn and width > 100 and height > 100, f"{figure} of {variant} drew {width} x {height}"
    assert counts == EXPECTED_FIGURES

    # The hostile node name is text on the page, and no element was injected by it.
    assert HOSTILE in chromium.execute_script("return document.body.innerText")
    # Scripts: the library and the drawer inline, the figures' JSON; none loaded from anywhere.
    assert chromium.execute_script("return Array.from(document.scripts).filter(s => s.src).length") == 0
    assert chromium.execute_script("return typeof Plotly") == "object"

    # Nothing was fetched (no resource entry), and the console is clean.
    assert chromium.execute_script("return performance.getEntriesByType('resource').length") == 0
    errors = [e for e in chromium.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
    assert errors == []
