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
    analysis = analyze(runs, iterations, Settings(), "fleet")
    lines = render_answer(analysis, width=100, campaign_dir="/c")
    # The analysis' node verdicts (analysis/health.py): the fleet screen drains c0017; the other degraded
    # nodes (if any) failed a limit; the healthy ones are counted, not listed.
    degraded = sorted(n.node for n in analysis.nodes if n.verdict == "degraded")
    healthy = sum(n.verdict == "healthy" for n in analysis.nodes)
    assert "c0017" in degraded and healthy > 30
    assert lines[0].startswith(f"verdict: DEGRADED ({len(degraded)} degraded, ")
    node_line = re.compile(r"  \S+: (degraded|inconclusive)")
    named = [line.split(":")[0].strip() for line in lines if node_line.match(line)]
    assert named == degraded  # the non-healthy nodes by name, in order
    (c17,) = [line for line in lines if line.startswith("  c0017: ")]
    assert re.match(r"  c0017: degraded - l2sum 1[45]\.\d% slower than the median node", c17)
    assert f"  {healthy} more healthy (--verbose lists them)" in lines
    assert len(lines) < 30 and all(len(line) <= 100 for line in lines)
    # The causes are the catalogue's, from the flagged runs: none is invented for the drained node.
    findings = [line for line in lines if re.match(r"  \d\. ", line)]
    causes = {c.cause for r in analysis.runs for c in r.causes[:1]}
    assert {line.split(". ", 1)[1].split(" [")[0] for line in findings} == causes
