"""A real `tailscope validate` campaign's report in real headless Chromium: its validation section is linked
from the table of contents, its confusion heatmap is drawn, no element is wider than the 1000 px viewport,
the console has no error and nothing is requested."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from test_browser_answer import TOO_WIDE, WIDTH, _open

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def validate_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("validate")
    campaign, report = root / "val", root / "report.html"
    common = [sys.executable, "-m", "tailscope"]
    proc = subprocess.run(
        [
            *common,
            "validate",
            "--injectors",
            "cpuoccupy,os-noise",
            "--trials",
            "8",
            "--block",
            "2",
            "--seed",
            "3",
            "--no-progress",
            "--param",
            "elements=1000000",
            "--param",
            "reps=4",
            "--campaign",
            str(campaign),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(
        [*common, "report", str(campaign), "-o", str(report)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    return report


def test_validation_section_in_chromium(chromium, validate_report):
    _open(chromium, validate_report)
    links = chromium.execute_script(
        "return Array.from(document.querySelectorAll('#toc a')).map(a => a.getAttribute('href'))"
    )
    assert "#validation" in links
    assert all(chromium.execute_script("return !!document.querySelector(arguments[0])", h) for h in links)
    chromium.find_element("css selector", '#toc a[href="#validation"]').click()
    time.sleep(1.0)
    section_top = chromium.execute_script(
        "return document.getElementById('validation').getBoundingClientRect().top"
    )
    assert abs(section_top) < 5  # the link scrolled the section to the top of the window
    text = chromium.execute_script("return document.getElementById('validation').innerText")
    for heading in ("Detection recall", "False positives and placebo", "Cause accuracy", "Confusion matrix"):
        assert heading in text
    assert "cpuoccupy" in text and "false-positive rate" in text
    assert chromium.execute_script("return document.querySelector('#validation p.apart').innerText")
    chromium.execute_script("window.tailscopeDraw()")
    time.sleep(0.5)
    drawn = chromium.execute_script(
        "var p = document.querySelector('#validation div.plot[data-figure=confusion]');"
        "return p ? p.querySelectorAll('.heatmaplayer image, .heatmaplayer .hm').length : -1"
    )
    if drawn == -1:  # 8 trials on a quiet node can leave no flagged and no effective run: said so instead
        assert "No confusion matrix" in text
    else:
        assert drawn > 0, "the confusion heatmap was not drawn"
    width, wide = chromium.execute_script(TOO_WIDE)
    assert width <= WIDTH and wide == [], wide
    assert chromium.execute_script("return performance.getEntriesByType('resource').length") == 0
    errors = [e for e in chromium.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
    assert errors == []
    chromium.save_screenshot(str(validate_report.with_name("validation.png")))
