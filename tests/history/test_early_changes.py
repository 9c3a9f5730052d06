"""History that speaks early (issue 33, item 4): the change-point rule finds a step of 5 noise sds within 5
entries of it on a history of any length from 8 entries on, without false changes on the sibling nodes;
`history show` says when a series has too few entries to judge a change of the threshold's size, and that
statement is the truth. Small simulations here; full size in bench/bench_history_early.py."""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tailscope.cli import main
from tailscope.history.changes import find_changes
from tailscope.history.directory import DirectoryHistory

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import START, day_rows, make_fleet


def _fleet_history(root: Path, y: np.ndarray) -> Path:
    """Nodes c0000.. with one stream entry a day: y[node, day] the log of the median over 180 GB/s."""
    nodes, days = y.shape
    fleet, _y, facts = make_fleet(max(nodes, 4), 20, probes=1, seed=2)
    fleet.nodes = fleet.nodes[:nodes]
    facts = [[(0, per[0][1])] for per in facts[:nodes]]  # no fact changes: the change is the data's alone
    store = DirectoryHistory(root)
    for day in range(days):
        store.write(*day_rows(fleet, y[:, None, :], facts, day))
    return root


def test_ten_entries_one_percent_noise_a_six_percent_step_at_entry_six(tmp_path, capsys):
    """20 nodes, 10 daily entries each with 1% noise; c0000 6% slower from its 6th entry on. Before: the
    noise from the entry differences read 2.1% (its 95% bound over 9 differences, and the step among them)
    and the step was not found."""
    y = np.random.default_rng(2026).normal(0.0, 0.01, (20, 10))
    y[0, 5:] += math.log(0.94)
    h = _fleet_history(tmp_path / "H", y)
    capsys.readouterr()
    assert main(["history", "show", str(h), "--json"]) == 1  # c0000: 6% below its history
    data = json.loads(capsys.readouterr().out)
    (change,) = data["changes"]
    sixth = (START + dt.timedelta(days=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (change["node"], change["at"]) == ("c0000", sixth)
    assert change["ratio_ci"]["lower"] < 0.94 < change["ratio_ci"]["upper"] < 1
    verdicts = {n["node"]: n["verdict"] for n in data["nodes"]}
    assert verdicts == {f"c{i:04d}": "degraded" if i == 0 else "healthy" for i in range(20)}
    # one node's view judges it as the fleet's does (the fleet's noise is used whatever --node shows)
    assert main(["history", "show", str(h), "--node", "c0000", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["changes"] == [change]


def _frame(y: np.ndarray) -> pd.DataFrame:
    nodes, days = y.shape
    day = np.tile(np.arange(days), nodes)
    return pd.DataFrame({
        "node": np.repeat([f"n{i:02d}" for i in range(nodes)], days), "probe": "stream",
        "variant": "stream-x", "unit": "GB/s", "campaign": [f"{d + 1:032x}" for d in day],
        "median": 100.0 * np.exp(y.reshape(-1)),
        "higher_is_better": True, "started_at": pd.Timestamp(START) + pd.to_timedelta(day, unit="D"),
        "facts_digest": "x", "excluded": False,
    })  # fmt: skip


@pytest.mark.parametrize("before", [3, 5, 30, 100])
def test_a_five_sd_step_is_found_within_five_entries(before):
    """10 nodes with 1% noise, n00 5% slower after `before` entries; the rule on the first before + k
    entries (k = 1..5, at least 8 entries): found at its entry (+-1) by k = 5 in each of 8 repeats, and no
    change on any other node at any k."""
    rng = np.random.default_rng(before)
    for _ in range(8):
        y = rng.normal(0.0, 0.01, (10, before + 5))
        y[0, before:] -= 0.05
        found_at = None
        for k in range(max(1, 8 - before), 6):
            changes = find_changes(_frame(y[:, : before + k]), {}, pd.DataFrame())
            assert all(c.node == "n00" for c in changes), changes
            if any(abs(c.index - before) <= 1 for c in changes):
                found_at = k
                break
        assert found_at is not None and found_at <= 5


@pytest.mark.parametrize("days", [8, 10, 20, 60])
def test_no_change_on_quiet_fleets_of_any_length(days):
    """20 fleets of 10 nodes without a change (200 series of 8-60 entries): no change reported; the rule
    allows 0.2% / n per series (0.025% at 8 entries)."""
    rng = np.random.default_rng(days)
    fleets = [_frame(rng.normal(0.0, 0.01, (10, days))) for _ in range(20)]
    assert [c for f in fleets for c in find_changes(f, {}, pd.DataFrame())] == []


def test_too_few_entries_is_said_where_it_is_the_truth(tmp_path, capsys):
    """One node alone (no fleet to learn the noise from), 10 entries of 2% noise: `history show` says the
    smallest slowdown X its latest entries could show; the same history with its last 3 entries 1.5 X lower
    shows the change, 0.6 X lower does not."""
    from tailscope.history.changepoint import judge_series

    y = np.random.default_rng(7).normal(0.0, 0.02, (1, 10))
    h = _fleet_history(tmp_path / "H", y)
    capsys.readouterr()
    assert main(["history", "show", str(h), "--json"]) == 0
    (limit,) = json.loads(capsys.readouterr().out)["too_few_entries"]
    x = limit["detectable"]
    assert 0.05 < x < 0.3 and limit["entries"] == 10
    assert main(["history", "show", str(h)]) == 0
    assert f"c0000 stream: too few entries to judge a change below {x:.1%}" in capsys.readouterr().out
    for factor, found in ((1.5, True), (0.6, False)):
        z = y[0].copy()
        z[-3:] += math.log(1 - factor * x)
        steps = judge_series(np.exp(z)).steps
        assert any(abs(s.index - 7) <= 1 for s in steps) is found, (factor, steps)
    # with 19 siblings of 1% noise the fleet's noise is known: 10 entries judge 5%
    siblings = np.random.default_rng(8).normal(0.0, 0.01, (20, 10))
    h2 = _fleet_history(tmp_path / "H2", siblings)
    assert main(["history", "show", str(h2), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["too_few_entries"] == []


def test_any_series_of_any_sign(tmp_path):
    """`judge_series` on values that cross zero (log=False: differences, a job's effect in seconds): a step
    down of 5 sds after 12 of 17 entries is found, its shift negative and its interval around the truth."""
    from tailscope.history.changepoint import judge_series

    rng = np.random.default_rng(3)
    v = rng.normal(0.0, 2.0, 17)
    v[12:] -= 10.0
    judged = judge_series(v, log=False)
    (step,) = judged.steps
    assert step.index == 12 and step.lower < -10.0 < step.upper < 0
    flipped = judge_series(-v, log=False, higher_is_better=False)  # lower is better: the same step
    assert flipped.steps == judged.steps
