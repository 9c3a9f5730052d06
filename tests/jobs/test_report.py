"""`tailscope jobs report`: the jobs section (the answer, every node's effect, the slow node's jobs over time)
on its own page for a history of jobs only, and after the probe history's sections when the history has both;
opened in headless Chromium: every figure draws, nothing is fetched, user strings stay text."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tailscope.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "history"))
from report.conftest import chromium  # noqa: F401  (the browser fixture of the report tests)

FIGURES = """
window.tailscopeDraw();
return Array.from(document.querySelectorAll('div.plot')).map(function (s) {
  var r = s.getBoundingClientRect();
  return [s.getAttribute('data-figure'), s.getAttribute('data-variant'), r.width, r.height,
          !!s.querySelector('svg.main-svg')];
});
"""


def test_jobs_report_alone_and_after_the_history(history, tmp_path, capsys):
    from synthetic import day_rows, make_fleet

    from tailscope.history.directory import DirectoryHistory

    root, slow, _, _ = history
    out = tmp_path / "jobs.html"
    assert main(["jobs", "report", str(root), "-o", str(out)]) == 0
    html = out.read_text()
    assert "<title>tailscope jobs</title>" in html and "<h2>Jobs</h2>" in html
    assert 'data-figure="jobs-effects"' in html and f'data-variant="{slow}"' in html
    assert "\x1b" not in html and "\x07" not in html
    both = tmp_path / "both"
    fleet, y, facts = make_fleet(6, 20, probes=1, seed=5)
    for day in range(20):
        DirectoryHistory(both).write(*day_rows(fleet, y, facts, day))
    dump = root.parent / "sacct.txt"
    assert main(["jobs", "collect", str(both), "--sacct-file", str(dump)]) == 0
    out2 = tmp_path / "both.html"
    assert main(["jobs", "report", str(both), "-o", str(out2)]) == 0
    html = out2.read_text()
    assert html.index("<h2>Fleet</h2>") < html.index("<h2>Jobs</h2>")  # jobs after the history
    capsys.readouterr()


@pytest.mark.browser
def test_jobs_report_draws_in_chromium(history, tmp_path, chromium):  # noqa: F811
    root, slow, _, _ = history
    out = tmp_path / "jobs.html"
    assert main(["jobs", "report", str(root), "-o", str(out)]) == 0
    chromium.get_log("browser")
    chromium.get(out.as_uri())
    boxes = chromium.execute_script(FIGURES)
    assert [(f, v) for f, v, *_ in boxes] == [("jobs-effects", "nodes"), ("jobs-node", slow)]
    assert all(w > 300 and h > 200 and drawn for _, _, w, h, drawn in boxes), boxes
    text = chromium.execute_script("return document.body.innerText")
    assert f"{slow}: jobs that ran on it were" in text
    assert chromium.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert [e for e in chromium.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")] == []


def test_names_and_job_names_reach_plotly_as_text_not_markup():
    """Plotly applies pseudo-HTML in its strings (a tick label, a title, a hover label): a job's class holds
    the user's job name, a node name comes from sacct. Both reach the figures with markup as entities."""
    import json

    import numpy as np
    import pandas as pd

    from tailscope.jobs.attribution import NodeResult
    from tailscope.jobs.report import effects_figure, node_figure
    from tailscope.jobs.show import JobsAnswer, NodeAnswer
    from tailscope.report.plotly_figures import Figures

    node = 'n1<img src=x onerror="alert(1)">'
    result = NodeResult(node, 0.1, 0.05, 0.15, 30, 3, 0.001, 0.003, "jobs", np.arange(3), slow=True)
    answer = NodeAnswer(result, None, pd.Timestamp("2026-11-02", tz="UTC"), (), 0)
    jobs = JobsAnswer([answer], [], 0.05, 30, 30, {}, (None, None))
    series = pd.DataFrame({
        "start": pd.to_datetime(["2026-11-02", "2026-11-03", "2026-11-04"], utc=True),
        "difference": [0.1, 0.12, 0.08],
        "class": ['u:<a href="https://example.com">click</a> N=1', "u:<b>bold</b>", "u:plain"],
    })  # fmt: skip
    figs = Figures()
    html = effects_figure(figs, jobs) + node_figure(figs, answer, series)
    specs = [json.loads(part.split(">", 1)[1].split("</script>")[0]) for part in html.split("<script")[1:]]
    strings = json.dumps(specs)
    assert "&lt;a href=\\\"https://example.com\\\"&gt;click&lt;/a&gt;" in strings
    assert "&lt;b&gt;bold&lt;/b&gt;" in strings and "&lt;img src=x" in strings
    assert "<a href" not in strings and "<b>" not in strings and "<img" not in strings
