"""The report built around the answer, in real headless Chromium: a real `check` and a 1,000-node fleet.

- the verdict and the causes come before the first figure, a table of contents follows them;
- no element is wider than the 1000 px viewport, the console has no error, nothing is requested;
- hovering over a point with the mouse shows its node and trial;
- the fleet report (1,000 nodes x 50 trials) stays under 15 MB and opens within 5 s more than a one-node
  report opened in the same browser (the control: the machine is shared, absolute times vary).
"""

from __future__ import annotations

import datetime as dt
import re
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tailscope.analysis.model import Settings
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES
from tailscope.verbs.workflow import analyze_campaign, write_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDTH = 1000
TOO_WIDE = """
var w = document.documentElement.clientWidth, out = [];
document.querySelectorAll('body *').forEach(function (e) {
  var r = e.getBoundingClientRect();
  if (r.width > 0 && r.right > w + 1) out.push(e.tagName + '.' + e.className + ' ' + Math.round(r.right));
});
return [w, out.slice(0, 10)];
"""


def _open(chromium, path: Path) -> float:
    chromium.set_window_size(WIDTH, 1000)
    chromium.get("about:blank")
    chromium.get_log("browser")
    t0 = time.monotonic()
    chromium.get(path.as_uri())  # returns after the load event: the library parsed, first figures drawn
    return time.monotonic() - t0


def _hover_first_point(chromium, figure: str) -> str:
    from selenium.webdriver.common.action_chains import ActionChains

    sel = f"div.plot[data-figure={figure}]"
    plot = chromium.find_element("css selector", sel)  # the first such figure
    chromium.execute_script("arguments[0].scrollIntoView({block: 'center'})", plot)
    time.sleep(1.0)  # drawn when it scrolls into view
    points = plot.find_elements("css selector", ".scatterlayer path.point")
    assert points, f"no point drawn in the {figure} figure"
    point = points[len(points) // 2]
    ActionChains(chromium).move_to_element(point).perform()
    time.sleep(0.3)
    ActionChains(chromium).move_by_offset(1, 0).perform()
    time.sleep(0.5)
    return str(chromium.execute_script("return arguments[0].querySelector('.hoverlayer').textContent", plot))


def _assert_answer_first_and_clean(chromium) -> None:
    order = chromium.execute_script(
        """var v = document.getElementById('verdict'), t = document.getElementById('toc'),
               f = document.querySelector('div.plot');
           var top = function (e) { return e.getBoundingClientRect().top; };
           return [top(v), top(t), top(f), v.innerText];"""
    )
    verdict_top, toc_top, figure_top, verdict_text = order
    assert verdict_top < toc_top < figure_top
    # The analysis' own verdict (analysis/health.py), then one line per node, then the catalogue's causes.
    assert re.match(r"Verdict: (HEALTHY|DEGRADED|INCONCLUSIVE) \(", verdict_text)
    assert re.search(r"\n\S+: (healthy|degraded|inconclusive)", verdict_text)
    assert "Causes of the flagged runs" in verdict_text or "No flagged runs" in verdict_text
    links = chromium.execute_script(
        "return Array.from(document.querySelectorAll('#toc a')).map(a => a.getAttribute('href'))"
    )
    assert links and all(
        chromium.execute_script("return !!document.querySelector(arguments[0])", h) for h in links
    )
    width, wide = chromium.execute_script(TOO_WIDE)
    assert width <= WIDTH and wide == []
    chromium.execute_script("window.tailscopeDraw()")  # every figure, not only those scrolled into view
    time.sleep(0.5)
    width, wide = chromium.execute_script(TOO_WIDE)
    assert wide == [], wide
    assert chromium.execute_script("return performance.getEntriesByType('resource').length") == 0
    errors = [e for e in chromium.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
    assert errors == []


def test_check_report_leads_with_the_answer(chromium, check_run):
    _, report = check_run
    _open(chromium, report)
    assert chromium.execute_script("return document.querySelectorAll('div.plot').length") >= 12
    _assert_answer_first_and_clean(chromium)
    text = _hover_first_point(chromium, "time")
    assert "node " in text and "trial " in text and "started " in text


def fleet_campaign(root: Path, nodes: int = 1000, trials: int = 50) -> Path:
    """1,000 nodes x 50 l2sum trials: 1% node-to-node and run-to-run spread, five nodes 10% slow, 0.4% of
    runs 20% slow; written through the store as one chunk."""
    rng = np.random.default_rng(0)
    factor = np.exp(rng.normal(0.0, 0.01, nodes))
    factor[:5] *= 0.9
    node = np.repeat(np.arange(nodes), trials)
    value = 100.0 * factor[node] * np.exp(rng.normal(0.0, 0.01, node.size))
    value[rng.random(node.size) < 0.004] *= 0.8
    base = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    trial = np.tile(np.arange(trials), nodes)
    rows = {
        "run_id": [uuid.uuid4().hex for _ in range(node.size)],
        "campaign": ["fleet"] * node.size,
        "node": [f"c{i:04d}" for i in node],
        "probe": ["l2sum"] * node.size,
        "variant": ["l2sum-fleet000"] * node.size,
        "params": ["{}"] * node.size,
        "trial": trial.astype("int32").tolist(),
        "started_at": [
            base + dt.timedelta(seconds=int(30 * t + n % 30)) for t, n in zip(trial, node, strict=True)
        ],
        "metric": ["bandwidth"] * node.size,
        "value": value.tolist(),
        "unit": ["GB/s"] * node.size,
        "higher_is_better": [True] * node.size,
        "status": ["ok"] * node.size,
        "source": ["probe"] * node.size,
        "task": ["fleet"] * node.size,
    }
    spec = TABLES["runs"].schema
    table = pa.Table.from_pydict(rows).cast(pa.schema([spec.field(n) for n in rows]))
    with load_into(root, "test", create=True, name="fleet") as load:
        load.write_tables({"runs": table}, node="fleet")
    return root


def test_fleet_report_opens_fast_and_stays_small(chromium, tmp_path, check_run):
    root = fleet_campaign(tmp_path / "fleet")
    report = write_report(root, analyze_campaign(root, Settings()), tmp_path / "fleet.html")
    size = report.stat().st_size
    assert size < 15_000_000, f"{size / 1e6:.1f} MB"

    _, control = check_run
    control_s = _open(chromium, control)
    fleet_s = _open(chromium, report)
    print(f"fleet report {size / 1e6:.1f} MB opened in {fleet_s:.2f} s; one-node report {control_s:.2f} s")
    assert fleet_s < control_s + 5.0
    _assert_answer_first_and_clean(chromium)
    text = _hover_first_point(chromium, "sorted")
    assert "node c" in text and "trial " in text
