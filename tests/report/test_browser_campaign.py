"""A real campaign's report in headless Chromium: every section a real run can produce renders, offline.

Three node names on this host (the runner's --node), per-run software counters and the background monitor,
and a co-runner during part of the last node's trials, so the report has the base figures, the cluster
section (>= 3 nodes), the counter attribution (slow runs with counters) and the monitor timelines.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FIGURES = """
window.tailscopeDraw();
return Array.from(document.querySelectorAll('svg.chart, div.plot')).map(function (s) {
  var r = s.getBoundingClientRect();
  return [s.getAttribute('data-figure'), r.width, r.height];
});
"""


def tailscope(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tailscope", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return out


@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng is not installed")
def test_campaign_report_with_counters_cluster_and_monitor(chromium, tmp_path):
    campaign = tmp_path / "c"
    common = ["l2sum", "--trials", "16", "--cpus", "0,1", "--sums", "2000", "--campaign", str(campaign)]
    counting = ["--events", "software", "--monitor", "--monitor-interval", "50ms", "--no-progress"]
    for node in ("n1", "n2"):
        finish(tailscope("run", *common, "--node", node, *counting))
    run = tailscope("run", *common, "--node", "n3", *counting)
    time.sleep(1.0)
    corunner = subprocess.Popen(["stress-ng", "--cpu", "1", "--taskset", "1", "--quiet", "--timeout", "10s"])
    time.sleep(1.5)
    corunner.terminate()
    corunner.wait(timeout=30)
    finish(run)

    report = tmp_path / "report.html"
    finish(tailscope("report", str(campaign), "-o", str(report), "--threshold", "0.2"))

    chromium.get_log("browser")
    chromium.get(report.as_uri())
    assert chromium.execute_script("return document.readyState") == "complete"
    counts: dict[str, int] = {}
    for figure, width, height in chromium.execute_script(FIGURES):
        counts[figure] = counts.get(figure, 0) + 1
        assert width > 100 and height > 100, f"{figure} rendered {width} x {height}"
    for figure in ("time", "sorted", "ecdf", "nodes", "monitor", "counter-scatter"):
        assert counts.get(figure, 0) >= 1, (figure, counts)
    text = chromium.execute_script("return document.body.innerText")
    assert "n3" in text and "guest-physical" in text
    assert chromium.execute_script("return Array.from(document.scripts).filter(s => s.src).length") == 0
    assert chromium.execute_script("return performance.getEntriesByType('resource').length") == 0
    errors = [e for e in chromium.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
    assert errors == []
