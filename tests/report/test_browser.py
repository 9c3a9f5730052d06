"""The report opened in real headless Chromium: every figure renders, no console error, no request."""

from __future__ import annotations

import pytest
from report_builders import HOSTILE, render

pytestmark = pytest.mark.browser

EXPECTED_FIGURES = {  # (figure, variant) -> count, from demo_analysis: see test_html
    ("sorted", "l2sum-1a2b"): 1,
    ("ecdf", "l2sum-1a2b"): 1,
    ("histogram", "l2sum-1a2b"): 1,
    ("nodes", "l2sum-1a2b"): 1,
    ("timeline", "l2sum-1a2b"): 2,
    ("sorted", "fwq-9f9f"): 1,
    ("ecdf", "fwq-9f9f"): 1,
    ("histogram", "fwq-9f9f"): 1,
    ("timeline", "fwq-9f9f"): 1,
}

BOXES = """
return Array.from(document.querySelectorAll('svg.chart')).map(function (s) {
  var r = s.getBoundingClientRect();
  return [s.getAttribute('data-figure'), s.getAttribute('data-variant'), r.width, r.height];
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
    for figure, variant, width, height in boxes:
        counts[(figure, variant)] = counts.get((figure, variant), 0) + 1
        assert width > 100 and height > 100, f"{figure} of {variant} rendered {width} x {height}"
    assert counts == EXPECTED_FIGURES

    # The hostile node name is text on the page, and no element was injected by it.
    assert HOSTILE in chromium.execute_script("return document.body.innerText")
    assert chromium.execute_script("return document.scripts.length") == 0

    # Nothing was fetched (no resource entry), and the console is clean.
    assert chromium.execute_script("return performance.getEntriesByType('resource').length") == 0
    errors = [e for e in chromium.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
    assert errors == []
