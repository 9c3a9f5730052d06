"""An HPL-Light campaign of the hpl probe, its report in headless Chromium: the Findings state SJTU's rule
for the hpl variant, PASSED or FAILED as the analysis judged it, and the checks table carries it too.

SJTU ran 500 trials at N = 32768; this runs 30 at N = 160 (the 500-trial campaign is run by hand)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def tailscope(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tailscope", *argv], capture_output=True, text=True, timeout=600, check=False
    )


def test_hpl_light_rule_is_stated_in_the_report(chromium, tmp_path):
    campaign = tmp_path / "c"
    trials = ["--trials", "30", "--n", "160", "--cpus", "0"]
    run = tailscope("run", "hpl", *trials, "--campaign", str(campaign), "--no-progress")
    assert run.returncode == 0, run.stderr
    analysis = json.loads(tailscope("analyze", str(campaign), "--json").stdout)
    (note,) = [n for n in analysis["notes"] if n.startswith("SJTU's HPL-Light rule on ")]
    result = "FAILED" if "FAILED (limit 0.5%)" in note else "PASSED"

    report = tmp_path / "report.html"
    assert tailscope("report", str(campaign), "-o", str(report)).returncode == 0
    chromium.get(report.as_uri())
    assert chromium.execute_script("return document.readyState") == "complete"
    findings = chromium.execute_script(
        "return Array.from(document.querySelectorAll('#notes li')).map(li => li.innerText)"
    )
    (shown,) = [f for f in findings if f.startswith("SJTU's HPL-Light rule on ")]
    assert f"over 30 runs: {result} (limit 0.5%)" in shown
    assert "N = 32768, NB = 128" in shown
    chromium.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    rows = chromium.execute_script(
        "return Array.from(document.querySelectorAll('tr')).map(r => r.innerText)"
        ".filter(t => t.startsWith('max_q01_drop'))"
    )
    assert len(rows) == 1 and f"from the median, {result}" in rows[0]
