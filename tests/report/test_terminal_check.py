"""The terminal output of a real `check` on this node: the answer first, one screen at 100 columns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tailscope.analysis.causes import CATALOGUE
from tailscope.analysis.model import Settings
from tailscope.report.terminal import render_answer
from tailscope.verbs.workflow import analyze_campaign

pytestmark = pytest.mark.slow


def test_check_fits_one_screen_with_the_verdict_first(check_run):
    out, report = check_run
    print(out)
    lines = out.rstrip("\n").splitlines()
    assert len(lines) <= 40, "\n".join(lines)
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    assert lines[0].startswith("campaign: /")
    assert lines[1].startswith("verdict: ")
    assert re.match(r"  \S+: (healthy|degraded|inconclusive)", lines[2])
    probes = lines.index(next(line for line in lines if line.startswith("probes")))
    assert {line.split(":")[0].strip() for line in lines[probes + 1 : probes + 5]} == {
        "l2sum",
        "stream",
        "dgemm",
        "fwq",
    }
    terms = next(i for i, line in enumerate(lines) if line.startswith("terms: "))
    explained = " ".join(lines[terms : terms + 5])
    for term in ("slow =", "systematic =", "transient =", "! ="):
        assert explained.count(term) == 1
    assert f"report: {report.resolve()}" == lines[-1]
    for line in lines:  # every path printed is absolute
        for path in re.findall(r"(?:--campaign|campaign:|report:) (\S+)", line):
            assert Path(path).is_absolute(), line


def test_findings_are_grouped_by_cause_and_capped(check_run):
    _, report = check_run
    analysis = analyze_campaign(report.parent / "c", Settings())
    lines = render_answer(analysis, width=100, campaign_dir=str(report.parent / "c"))
    findings = [line for line in lines if re.match(r"  \d\. ", line)]
    assert len(findings) <= 5
    causes = [line.split(". ", 1)[1].split(" [")[0] for line in findings]
    assert len(causes) == len(set(causes))  # one finding per cause, never one per probe
    # Each a cause of the catalogue (analysis/causes), with what to do about it.
    assert set(causes) <= set(CATALOGUE)
    todo = [line for line in lines if line.strip().startswith("do: ")]
    assert len(todo) == len(findings)
    narrow = render_answer(analysis, width=60, campaign_dir="/x")
    assert all(len(line) <= 60 for line in narrow)
