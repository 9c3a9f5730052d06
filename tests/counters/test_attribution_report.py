"""The report's counters section: ranking table, time-vs-counter scatter, per-unit pair bars, "
"monitor timelines."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import seed_file

from tailscope.analysis.model import Settings
from tailscope.cli import main
from tailscope.verbs.workflow import analyze_campaign, write_report

sys.path.insert(0, str(Path(__file__).parents[1] / "analysis"))
from test_attribution import build_campaign


def test_report_has_counter_figures(tmp_path: Path) -> None:
    build_campaign(tmp_path / "c", nodes=2, trials=80, random_counters=3)
    samples = tmp_path / "n0.perfcounts.lua"
    samples.write_text(seed_file.big_text(6, cpus=4, chas=2, channels=2))
    assert main(["import", "perfcounts", str(samples), "--campaign", str(tmp_path / "c")]) == 0
    analysis = analyze_campaign(tmp_path / "c", Settings())
    html = write_report(tmp_path / "c", analysis, tmp_path / "r.html").read_text()
    section = html[html.index('<section id="counters">') :]
    section = section[: section.index("</section>")]
    assert "<code>cpu/L2_LINES_IN.ALL</code>" in section
    assert len(re.findall(r'data-figure="counter-scatter"', section)) == 3
    assert 'data-figure="counter-pair"' in section and 'data-counter="cpu/L2_LINES_IN.ALL"' in section
    assert len(re.findall(r'data-figure="monitor"', section)) == 4
    assert "counters furthest above the normal runs" in section
    assert "<script>" not in section  # figures are data (JSON specs); the library is embedded once, later


def test_no_section_without_counters(tmp_path: Path) -> None:
    csv = tmp_path / "it.csv"
    csv.write_text(
        "node,run,iteration,value,unit\n"
        + "".join(f"n1,{r},{i},{1.0 + r / 100},s\n" for r in range(8) for i in range(3))
    )
    assert main(["import", "iterations", str(csv), "--campaign", str(tmp_path / "c")]) == 0
    analysis = analyze_campaign(tmp_path / "c", Settings())
    assert analysis.attribution is None
    assert 'id="counters"' not in write_report(tmp_path / "c", analysis, tmp_path / "r.html").read_text()
