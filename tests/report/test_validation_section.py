"""validation_section.py: a `tailscope validate` campaign's scores, stored through the store and read back,
drawn as the report's validation section (tables, confusion heatmap spec, the "cannot be told apart" text)."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from report_builders import render
from test_html import specs

from tailscope.analysis.wording import pct
from tailscope.inject.score import score, validation_rows
from tailscope.report import plotly_figures as plots
from tailscope.report.validation_section import latest_scores, validation_section
from tailscope.store.load import load_into
from tailscope.store.read import connect
from tailscope.store.schema import TABLES


def _run(trial: int, ratio: float, slow: bool, causes: list[str]) -> dict[str, Any]:
    return {
        "run_id": f"r{trial}",
        "node": "n1",
        "variant": "stream-x",
        "trial": trial,
        "perf_ratio": ratio,
        "slowdown": 1 - ratio,
        "slow": slow,
        "causes": [{"cause": c, "score": 1.0 - 0.1 * i, "evidence": {}} for i, c in enumerate(causes)],
    }


def _inj(first: int, last: int, kind: str, intensity: float, cause: str) -> dict[str, Any]:
    return {
        "node": "n1",
        "variant": "stream-x",
        "trial_first": first,
        "trial_last": last,
        "kind": kind,
        "intensity": intensity,
        "expected_cause": cause,
    }


def campaign_scores() -> dict[str, Any]:
    """40 trials: cpuoccupy 0.5 on 8-11 and 24-27 (cpu-contention named first in 7 of 8, one missed),
    os-noise 5000 on 16-19 (taken for cpu-contention in 3 of 4, os-noise second), two clean runs flagged."""
    injections = [
        _inj(8, 11, "cpuoccupy", 0.5, "cpu-contention"),
        _inj(24, 27, "cpuoccupy", 0.5, "cpu-contention"),
        _inj(16, 19, "os-noise", 5000.0, "os-noise"),
    ]
    runs = []
    for t in range(40):
        if 8 <= t <= 11 or 24 <= t <= 27:
            missed = t == 27
            runs.append(_run(t, 0.6, not missed, [] if missed else ["cpu-contention", "os-noise"]))
        elif 16 <= t <= 19:
            first = "os-noise" if t == 16 else "cpu-contention"
            second = "cpu-contention" if t == 16 else "os-noise"
            runs.append(_run(t, 0.7, True, [first, second]))
        elif t in (3, 33):
            runs.append(_run(t, 0.97, True, ["unknown"]))
        else:
            runs.append(_run(t, 1.0 + 0.001 * (t % 3), False, []))
    outside = {r["run_id"]: 0.01 if r["trial"] % 2 == 0 else 0.2 for r in runs}  # even trials quiet
    return score({"runs": runs}, injections, outside=outside)


def store_scores(root: Path, scores: dict[str, Any], when: dt.datetime, *, create: bool) -> None:
    with load_into(root, "validate", create=create, name="val") as tx:
        rows = [{**r, "campaign": tx.campaign_id, "task": f"validate-{when:%H%M}", "scored_at": when}
                for r in validation_rows(scores)]  # fmt: skip
        tx.write("validation", pa.Table.from_pylist(rows, schema=TABLES["validation"].schema), node="n1")


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory):
    """The validation table of a campaign scored twice: an older scoring with other figures, then ours."""
    root = tmp_path_factory.mktemp("val") / "c"
    scores = campaign_scores()
    older = json.loads(json.dumps(scores))
    older["clean"] = {**older["clean"], "successes": 30, "rate": 30 / 32}
    t0 = dt.datetime(2026, 11, 2, 10, 0, tzinfo=dt.UTC)
    store_scores(root, older, t0, create=True)
    store_scores(root, scores, t0 + dt.timedelta(hours=1), create=False)
    con = connect(root)
    try:
        table = con.table("validation")
    finally:
        con.close()
    return scores, table


def _cells(html: str, first_cell: str) -> list[str]:
    """The text of each cell of the table row whose first cell is `first_cell`."""
    row = re.search(rf"<tr><td>{re.escape(first_cell)}</td>(.*?)</tr>", html)
    assert row, first_cell
    return [first_cell, *re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))]


def test_latest_scoring_only(stored) -> None:
    scores, table = stored
    latest = latest_scores(table)
    assert len(table) == 2 * len(latest)
    fpr = latest.loc[latest["measure"] == "false_positive_rate"].iloc[0]
    assert (fpr["successes"], fpr["trials"]) == (2, 28)
    assert (scores["clean"]["successes"], scores["clean"]["runs"]) == (2, 28)


def test_section_tables_show_the_stored_figures(stored) -> None:
    scores, table = stored
    html = validation_section(table, plots.Figures(), hardware_counters=False)
    assert html.startswith('<section id="validation">')
    recall = {(d["kind"], d["intensity"]): d for d in scores["detection"]}
    cpu = recall[("cpuoccupy", 0.5)]
    assert (cpu["successes"], cpu["trials"]) == (7, 8)
    rows = re.findall(r"<tr><td>(cpuoccupy|os-noise)</td><td[^>]*>([^<]+)</td><td[^>]*>([^<]+)</td>", html)
    assert ("cpuoccupy", "0.5", "7/8") in rows and ("cpuoccupy", "all", "7/8") in rows
    assert ("os-noise", "5000", "4/4") in rows
    recall_cells = _cells(html, "cpuoccupy")
    assert recall_cells[3:] == ["87.5%", f"{pct(cpu['ci'][0])} - {pct(cpu['ci'][1])}"]
    fpr = _cells(html, "false-positive rate: clean runs flagged slow")
    assert fpr[1:3] == ["2/28", "7.1%"]
    placebo = _cells(html, "placebo rate: clean runs as much slower than their neighbours as an injection")
    assert placebo[1] == f"{scores['placebo']['successes']}/28"
    at_flag = _cells(html, "placebo rate at the flag threshold: what a never-wrong flag would count")
    assert at_flag[1] == f"{scores['placebo_flag']['successes']}/28"
    own_label = "own false alarms: clean runs flagged, not that much slower than their neighbours or the "
    own = _cells(html, own_label + "clean median")
    assert own[1] == f"{scores['unbacked']['successes']}/28"
    causes = html.split("<h3>Cause accuracy per injected cause</h3>", 1)[1]
    accuracy = _cells(causes, "os-noise")
    assert accuracy[1:3] == ["1/4", "25%"] and accuracy[4] == "100%"  # named second in the other three
    assert _cells(causes, "cpu-contention")[1:3] == ["7/8", "87.5%"]  # the missed run got no cause


def test_quiet_figures_where_validate_knew_what_else_ran(stored) -> None:
    scores, table = stored
    html = validation_section(table, plots.Figures(), hardware_counters=False)
    quiet = scores["clean_quiet"]
    assert quiet["runs"] == 14  # the even clean trials
    label = "false-positive rate on quiet clean runs (outside work took less than 5% of the probe CPUs)"
    assert _cells(html, label)[1] == f"{quiet['successes']}/14"
    causes = html.split("<h3>Cause accuracy per injected cause</h3>", 1)[1]
    assert "quiet runs: named first" in causes
    cpu = next(c for c in scores["causes_quiet"] if c["expected_cause"] == "cpu-contention")["top1"]
    assert _cells(causes, "cpu-contention")[6] == f"{cpu['successes']}/{cpu['trials']}"
    assert cpu["trials"] == 4  # trials 8, 10, 24, 26


def test_section_says_which_causes_cannot_be_told_apart(stored) -> None:
    _, table = stored
    html = validation_section(table, plots.Figures(), hardware_counters=False)
    apart = re.search(r'<p class="apart" data-apart="1">(.*?)</p>', html).group(1)
    assert "cache-contention, memory-bandwidth-contention, page-placement by elimination" in apart
    assert "os-noise was named first in 1 of 4 runs, mostly as cpu-contention (3 runs)" in apart
    assert "cpu-contention was named" not in apart
    with_pmu = validation_section(table, plots.Figures(), hardware_counters=True)
    assert "by elimination" not in with_pmu and "os-noise was named first in 1 of 4" in with_pmu


def test_confusion_heatmap_spec(stored) -> None:
    scores, table = stored
    html = validation_section(table, plots.Figures(), hardware_counters=False)
    ((figure, _, spec),) = specs(html)
    assert figure == "confusion"
    heat = spec["data"][0]
    assert heat["type"] == "heatmap"
    assert heat["y"] == ["cpu-contention", "os-noise", "none"] and heat["x"][-1] == "none"
    rows = scores["confusion"]["rows"]
    for i, expected in enumerate(heat["y"]):
        counts = [int(t) for t in heat["text"][i]]
        assert counts == [rows[expected].get(p, 0) for p in heat["x"]]
        assert sum(heat["z"][i]) == pytest.approx(1.0, abs=1e-3)


def test_report_links_the_section_only_for_a_validate_campaign(stored) -> None:
    _, table = stored
    with_scores = render(validation=table)
    toc = re.search(r'<nav id="toc">.*?</nav>', with_scores).group(0)
    assert '<a href="#validation">Validation</a>' in toc
    assert with_scores.count('<section id="validation">') == 1
    assert '<section id="validation">' not in render()
