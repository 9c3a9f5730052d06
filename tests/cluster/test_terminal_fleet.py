"""Terminal summary of a fleet: the cluster block names the slow node; 40 nodes do not print 40 rows."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tailscope.analysis.model import Settings
from tailscope.analysis.summary import analyze
from tailscope.report.terminal import MAX_GROUP_ROWS, SLOWEST_SHOWN, render_answer, render_summary

from .fleet import fleet_frame


def test_fleet_summary_lists_slowest_nodes_and_the_drain(capsys):
    seed = int(np.random.default_rng().integers(1 << 31))
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    factor = np.ones(40)
    factor[17] = 0.85  # node c0017 is 15% slow in every run
    runs = fleet_frame(factor, 12, 0.005, rng)
    iterations = pd.DataFrame(
        columns=["run_id", "iteration", "thread", "kernel", "cpu", "warmup", "seconds", "value"]
    )
    lines = render_summary(analyze(runs, iterations, Settings(), "fleet"))
    rows = [line for line in lines if line.startswith("l2sum  ")]
    assert len(rows) == SLOWEST_SHOWN < 40 and MAX_GROUP_ROWS < 40
    assert rows[0].split()[1] == "c0017"  # slowest first
    assert any(f"{40 - SLOWEST_SHOWN} faster (variant, node) rows not shown" in line for line in lines)
    (cluster,) = [line for line in lines if line.startswith("cluster ")]
    assert "40 nodes" in cluster and "ICC" in cluster
    assert "  drain (Bonferroni): c0017" in lines


def test_fleet_answer_names_the_degraded_node_and_counts_the_rest():
    rng = np.random.default_rng(7)
    factor = np.ones(40)
    factor[17] = 0.85
    runs = fleet_frame(factor, 12, 0.005, rng)
    iterations = pd.DataFrame(
        columns=["run_id", "iteration", "thread", "kernel", "cpu", "warmup", "seconds", "value"]
    )
    lines = render_answer(analyze(runs, iterations, Settings(), "fleet"), width=100, campaign_dir="/c")
    assert lines[0].startswith("verdict: 1 degraded, 39 healthy")
    assert re.match(r"  c0017: degraded: l2sum 1[45]\.\d% slower than its peers", lines[1])
    assert "  39 more healthy (--verbose lists them)" in lines
    assert len(lines) < 20 and all(len(line) <= 100 for line in lines)
    (finding,) = [line for line in lines if line.startswith("  1. ")]
    slower = r"  1\. node slower than its peers: c0017 l2sum median 1[45]\.\d% below the fleet"
    assert re.match(slower, finding)
