"""The report's top-down section (`check --deep`), in real headless Chromium, from a real chain.

A real l2sum campaign on this node, then `run_deep` following l2sum, dgemm and stream for real (latency,
arith, stream on 1..all cores, DIMM facts; no PMU here, which the section must say), then the report:
the section follows the verdict, the table of contents links to it, every link resolves, nothing is wider
than the 1000 px viewport, the console has no error. The section's screenshot is written beside the report
(deep-section.png) to be looked at.
"""

from __future__ import annotations

import time

import pytest
from test_browser_answer import TOO_WIDE, WIDTH

from tailscope.analysis.model import Settings
from tailscope.probes.catalogue import ProbeVariant
from tailscope.verbs.deep import run_deep
from tailscope.verbs.workflow import RunRequest, analyze_campaign, run_campaign, write_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_deep_section_walks_the_chain(chromium, tmp_path):
    campaign = tmp_path / "c"
    run_campaign(
        RunRequest(
            variants=((ProbeVariant("l2sum", {"sums": 20}), 3),), campaign_dir=campaign, show_progress=False
        )
    )
    result = run_deep(
        campaign,
        analyze_campaign(campaign, Settings()),
        force=["l2sum", "dgemm", "stream"],
        show_progress=False,
    )
    report = write_report(campaign, analyze_campaign(campaign, Settings()), tmp_path / "report.html")

    chromium.set_window_size(WIDTH, 1000)
    chromium.get("about:blank")
    chromium.get_log("browser")
    chromium.get(report.as_uri())
    tops = chromium.execute_script(
        """var top = function (id) { return document.getElementById(id).getBoundingClientRect().top; };
           return [top('verdict'), top('toc'), top('deep')];"""
    )
    assert tops[0] < tops[1] < tops[2], tops  # verdict, contents, then the chain it explains
    links = chromium.execute_script(
        "return Array.from(document.querySelectorAll('#toc a')).map(a => a.getAttribute('href'))"
    )
    assert links[0] == "#deep"  # the first section after the verdict
    assert all(chromium.execute_script("return !!document.querySelector(arguments[0])", h) for h in links)
    chromium.find_element("css selector", "#toc a[href='#deep']").click()
    time.sleep(0.3)
    assert (
        abs(chromium.execute_script("return document.getElementById('deep').getBoundingClientRect().top")) < 5
    )

    text = chromium.execute_script("return document.getElementById('deep').innerText")
    chains = [s.probe for s in result.steps]
    assert chains == ["l2sum", "dgemm", "stream"]
    for i, probe in enumerate(chains, start=1):
        assert f"{i}. {probe}" in text
    # a probe is called degraded only under a verdict that is not inconclusive (a busy machine: followed up)
    word = "not called degraded):" if result.inconclusive else "Degraded:"
    assert text.count(word) == 3 and text.count("Component probes") == 3
    assert text.count("Counters:") == 3 and result.counters in text  # no PMU here: said, per chain
    assert "DIMMs:" in text  # stream's chain: the DIMM facts, or why they cannot be read here
    rows = chromium.execute_script(
        "return Array.from(document.querySelectorAll('#deep table.follow-ups tbody tr')).map("
        "r => Array.from(r.cells).map(c => c.innerText))"
    )
    follow_ups = [f for s in result.steps for f in s.follow_ups]
    assert [r[0] for r in rows] == [f["probe"] for f in follow_ups]
    assert all(r[4] in ("as expected", "differs", "not judged") for r in rows)
    # the clock against the node's usual clock (and the nominal where the node names one)
    assert any(r[0] == "arith" and "effective clock" in r[2] and "node's usual" in r[3] for r in rows)
    assert any(r[0] == "latency" and "L1 < L2" in r[3] for r in rows)

    width, wide = chromium.execute_script(TOO_WIDE)
    assert width <= WIDTH and wide == [], wide
    assert chromium.execute_script("return performance.getEntriesByType('resource').length") == 0
    errors = [e for e in chromium.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
    assert errors == []
    shot = tmp_path / "deep-section.png"
    chromium.find_element("css selector", "#deep").screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
