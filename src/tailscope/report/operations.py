"""Node verdicts for operations — NHC lines, drain commands, Prometheus metrics (the outputs of
`tailscope verdict`, whose verb is in verbs/verdict.py).

The verdicts are the analysis' node verdicts (analysis/health.py), the same ones `check` and `analyze`
print: *healthy*, *degraded* (a limit failed, or the fleet screen drains the node: Bonferroni across the
nodes, cluster.py) or *inconclusive* (too busy or too noisy to judge, or only selected for a re-test).
The limits are the analysis defaults, the campaign spec's [thresholds], or the options given here.

- `--nhc`: LBNL NHC's convention. A check prints nothing and returns 0 when the node is healthy; when it is
  degraded it prints the line NHC's die() logs, `ERROR:  nhc:  Health check failed:  check_tailscope:
  <why>`, and exits 1, so `* || check_cmd_status -t 30 -r 0 tailscope verdict DIR --nhc` drains the node
  with that reason. An inconclusive node prints its reason on stderr and exits 3 (EXIT_INCONCLUSIVE):
  `check_cmd_status -r 0` treats that as a failure too; a site that wants to drain only degraded nodes
  wraps the call (`tailscope verdict DIR --nhc; [ $? -ne 1 ]`). The node is $SLURMD_NODENAME, else the
  short host name, else --node.
- `--drain`: one `scontrol update nodename=N state=drain reason="tailscope: ..."` line per degraded node
  (report/drain.py: a name scontrol would read as a host list, `c[1-8]`, `a,b`, `ALL`, is refused, not
  passed on); `--apply` also runs them. Inconclusive nodes are listed in a comment (re-test, not drained).
- `--prometheus FILE`: node_exporter textfile-collector metrics: per node its verdict, and per (node,
  variant) the fleet screen's numbers; written atomically (a temporary file in the same directory, then
  rename), so the collector never reads half a file.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tailscope.errors import InputError
from tailscope.printable import printable
from tailscope.printable import prometheus_label as _label
from tailscope.report.drain import DrainPlan, drain_plan

# The analysis, the node facts and the store are imported when a verdict is given, not for `tailscope --help`.
if TYPE_CHECKING:
    from tailscope.analysis.cluster import ClusterSummary, NodeEffect
    from tailscope.analysis.model import CampaignAnalysis, NodeHealth

EXIT_OK, EXIT_FAIL, EXIT_INCONCLUSIVE = 0, 1, 3


class VerdictInputError(InputError):
    """A verdict that cannot be given (no cluster data, unknown node); exit 2."""


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    verdict: str  # healthy | degraded | inconclusive (analysis/health.py)
    reason: str  # plain words, for NHC and the drain reason
    health: NodeHealth
    findings: tuple[tuple[ClusterSummary, NodeEffect], ...]


def node_verdicts(analysis: CampaignAnalysis) -> dict[str, NodeVerdict]:
    """The analysis' node verdicts, with the fleet screen's findings of each node."""
    by_node: dict[str, list[tuple[ClusterSummary, NodeEffect]]] = {}
    for summary in analysis.cluster:
        for effect in summary.nodes:
            by_node.setdefault(effect.node, []).append((summary, effect))
    out = {}
    for health in analysis.nodes:
        reason = health.reasons[0] if health.reasons else health.verdict
        out[health.node] = NodeVerdict(
            health.node, health.verdict, reason, health, tuple(by_node.get(health.node, ()))
        )
    return out


def _p_text(p: float) -> str:
    return f"{p:.2g}" if p > 0 else "<1e-300"


def this_node() -> str:
    from tailscope.node.facts import node_name

    return node_name()  # the name every writer records (one function names this node everywhere)


def nhc_lines(verdict: NodeVerdict) -> list[str]:
    if verdict.verdict != "degraded":
        return []
    return [nhc_line(verdict.node, verdict.reason)]


def nhc_line(node: str, reason: str) -> str:
    """The line NHC's die() logs for a degraded node (a campaign's verdict or the jobs')."""
    return f"ERROR:  nhc:  Health check failed:  check_tailscope:  {printable(node)}: {printable(reason)}"


def drain_plan_of(verdicts: dict[str, NodeVerdict]) -> DrainPlan:
    """The drain lines of the degraded nodes (report/drain.py: one plain node name per scontrol call)."""
    return drain_plan((v.node, v.reason) for v in verdicts.values() if v.verdict == "degraded")


def command_text(argv: list[str]) -> str:
    """The command as a shell line that is safe to paste: every word quoted with shlex (a node name holding
    `$(...)` or `;` stays one literal word)."""
    return shlex.join(argv)


def prometheus_text(analysis: CampaignAnalysis, verdicts: dict[str, NodeVerdict], campaign: str) -> str:
    metrics: dict[str, tuple[str, list[str]]] = {
        "tailscope_node_drain": ("1 when the node is slower than its peers beyond false-alarm control", []),
        "tailscope_node_retest": ("1 when Benjamini-Hochberg selects the node for a re-test", []),
        "tailscope_node_slowdown_ratio": ("shrunken slowdown vs the median node (0.05 = 5% slower)", []),
        "tailscope_node_median": ("median of the node's runs, in the probe's unit", []),
        "tailscope_node_p_value": ("one-sided p-value of the node test", []),
        "tailscope_node_slow_run_rate": ("fraction of the node's runs slower than the threshold", []),
        "tailscope_node_speed_bin": ("speed bin, 1 = slowest", []),
        "tailscope_node_runs": ("runs of the node in the campaign", []),
    }
    for summary in analysis.cluster:
        for e in summary.nodes:
            labels = (
                f'node="{_label(e.node)}",probe="{_label(summary.probe)}",variant="{_label(summary.variant)}",'
                f'campaign="{_label(campaign)}"'
            )
            values = {
                "tailscope_node_drain": int(e.drain),
                "tailscope_node_retest": int(e.retest),
                "tailscope_node_slowdown_ratio": e.slowdown,
                "tailscope_node_median": e.median,
                "tailscope_node_p_value": e.p_value,
                "tailscope_node_slow_run_rate": e.slow_rate,
                "tailscope_node_speed_bin": e.speed_bin,
                "tailscope_node_runs": e.n,
            }
            for name, value in values.items():
                text = f"{value:.6g}" if isinstance(value, float) else str(value)
                if name == "tailscope_node_median":
                    metrics[name][1].append(f'{name}{{{labels},unit="{_label(summary.unit)}"}} {text}')
                else:
                    metrics[name][1].append(f"{name}{{{labels}}} {text}")
    states = ("healthy", "degraded", "inconclusive")
    verdict_samples = [
        f'tailscope_node_verdict{{node="{_label(v.node)}",verdict="{state}",campaign="{_label(campaign)}"}} '
        f"{int(v.verdict == state)}"
        for v in verdicts.values()
        for state in states
    ]
    lines = [
        "# HELP tailscope_node_verdict 1 for the node's verdict (healthy, degraded or inconclusive)",
        "# TYPE tailscope_node_verdict gauge",
        *verdict_samples,
    ]
    for name, (help_text, samples) in metrics.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *samples]
    lines += [
        "# HELP tailscope_verdict_timestamp_seconds when these verdicts were computed",
        "# TYPE tailscope_verdict_timestamp_seconds gauge",
        f'tailscope_verdict_timestamp_seconds{{campaign="{_label(campaign)}"}} {time.time():.3f}',
    ]
    return "\n".join(lines) + "\n"
