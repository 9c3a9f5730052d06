"""Change points on a synthetic fleet with changes injected at known entries (tests/history/synthetic.py),
written day by day through the history's append path: recall, false changes, facts named, fleet events;
and the Prometheus file checked by promtool."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tailscope.analysis.model import Settings
from tailscope.cli import main
from tailscope.history.directory import DirectoryHistory
from tailscope.history.show import answer

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import day_rows, make_fleet, score


@pytest.fixture(scope="module")
def fleet_history(tmp_path_factory):
    fleet, y, facts = make_fleet(120, 60, probes=2, seed=11)
    root = tmp_path_factory.mktemp("fleet") / "H"
    store = DirectoryHistory(root)
    for day in range(fleet.days):
        store.write(*day_rows(fleet, y, facts, day))
    return fleet, root


def test_recall_false_changes_and_facts_named(fleet_history):
    fleet, root = fleet_history
    result = answer(DirectoryHistory(root).read(), Settings())
    s = score(fleet, list(result.changes))
    assert s["eligible"] >= 50
    assert s["recall"] >= 0.95, s
    assert s["false_per_100_years"] <= 1.0, s
    assert s["fact_changes"] >= 10 and s["facts_named"] == 1.0, s
    events = {e.shared.get("fact"): e for e in result.events}
    assert events["kernel"].shared["after"] == "6.1.0-21-amd64"
    assert events["rack"].shared["value"] == "r02" and len(events["rack"].nodes) == 40
    assert events["rack"].median_ratio == pytest.approx(0.95, abs=0.01)


def test_prometheus_file_is_promtool_clean(fleet_history, tmp_path, capsys):
    _, root = fleet_history
    prom = tmp_path / "history.prom"
    assert main(["history", "show", str(root), "--prometheus", str(prom)]) == 1  # the rack is degraded
    text = prom.read_text()
    assert 'tailscope_node_change_ratio{node="c0080",probe="stream",variant="stream-synthetic"} 0.95' in text
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian package prometheus) is not installed")
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def _chromium_fixture():
    import importlib.util

    path = Path(__file__).parent.parent / "report" / "conftest.py"
    spec = importlib.util.spec_from_file_location("report_browser_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.chromium


chromium = _chromium_fixture()  # the report tests' headless Debian Chromium (skips without it)


@pytest.mark.slow
def test_report_draws_offline_heat_maps_and_annotated_timelines(fleet_history, tmp_path, chromium):
    _, root = fleet_history
    out = tmp_path / "history.html"
    assert main(["history", "report", str(root), "-o", str(out)]) == 0
    html = out.read_text()
    assert html.count("<script>") == 2  # plotly.min.js once, then the drawing script
    chromium.get(out.as_uri())
    chromium.execute_script("window.tailscopeDraw()")
    drawn = chromium.execute_script(
        "return Array.from(document.querySelectorAll('div.plot')).map(d => [d.dataset.figure, "
        "d.querySelectorAll('.main-svg').length > 0, d.textContent])"
    )
    kinds = [k for k, ok, _ in drawn if ok]
    assert len(kinds) == len(drawn) and kinds.count("history-heatmap") == 2
    timelines = [text for k, _, text in drawn if k == "history-timeline"]
    assert any("kernel: 6.1.0-18-amd64 → 6.1.0-21-amd64" in t for t in timelines)
    assert any("microcode: 0x2b000590 → 0x2b000603" in t for t in timelines)
    errors = [e for e in chromium.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
