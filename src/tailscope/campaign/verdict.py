"""`tailscope verdict CAMPAIGN`: per-node verdicts for operations — NHC checks, drain commands, Prometheus.

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
- `--drain`: one `scontrol update nodename=N state=drain reason="tailscope: ..."` line per degraded node;
  `--apply` also runs them. Inconclusive nodes are listed in a comment (re-test, not drained).
- `--prometheus FILE`: node_exporter textfile-collector metrics: per node its verdict, and per (node,
  variant) the fleet screen's numbers; written atomically (a temporary file in the same directory, then
  rename), so the collector never reads half a file.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tailscope.analysis.health import EXIT_CODES
from tailscope.analysis.model import CampaignAnalysis, NodeHealth, Settings
from tailscope.errors import InputError
from tailscope.node.facts import node_name
from tailscope.store.campaign import Campaign, write_atomic_bytes

if TYPE_CHECKING:
    from tailscope.analysis.cluster import ClusterSummary, NodeEffect

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
    return node_name()  # the name every writer records (one function names this node everywhere)


def nhc_lines(verdict: NodeVerdict) -> list[str]:
    if verdict.verdict != "degraded":
        return []
    return [f"ERROR:  nhc:  Health check failed:  check_tailscope:  {verdict.node}: {verdict.reason}"]


def drain_commands(verdicts: dict[str, NodeVerdict]) -> list[list[str]]:
    return [
        ["scontrol", "update", f"nodename={v.node}", "state=drain", f"reason=tailscope: {_reason_text(v)}"]
        for v in verdicts.values()
        if v.verdict == "degraded"
    ]


def _reason_text(v: NodeVerdict) -> str:
    return v.reason.replace('"', "'")[:200]


def command_text(argv: list[str]) -> str:
    """The command as a shell line that is safe to paste: every word quoted with shlex (a node name holding
    `$(...)` or `;` stays one literal word)."""
    return shlex.join(argv)


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


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


def _settings_for(campaign_dir: Path, given: Settings | None = None) -> Settings:
    """Options given on the command line, else the campaign spec's [thresholds], else the defaults."""
    if given is not None:
        return given
    spec_path = campaign_dir / "slurm" / "spec.toml"
    if spec_path.is_file():
        from tailscope.campaign.spec import SpecError, load_spec

        try:
            return load_spec(spec_path).settings
        except SpecError as exc:
            raise VerdictInputError(str(exc)) from exc
    return Settings()


def cmd_verdict(args: argparse.Namespace) -> int:
    from tailscope.workflow import analyze_campaign

    if not (args.nhc or args.drain or args.prometheus):
        args.nhc = True
    if args.apply and not args.drain:
        raise VerdictInputError("--apply runs the drain commands: use it with --drain")
    campaign = Campaign.open(args.campaign)
    given = getattr(args, "settings", None)
    analysis = analyze_campaign(args.campaign, _settings_for(args.campaign, given))
    verdicts = node_verdicts(analysis)
    code = EXIT_OK
    if args.prometheus:
        text = prometheus_text(analysis, verdicts, campaign.manifest.name or campaign.campaign_id)
        args.prometheus.parent.mkdir(parents=True, exist_ok=True)
        write_atomic_bytes(args.prometheus, text.encode())
    if args.drain:
        commands = drain_commands(verdicts)
        for argv in commands:
            print(command_text(argv))
        if args.apply:
            if commands and shutil.which("scontrol") is None:
                raise VerdictInputError("--apply: scontrol not found on PATH")
            for argv in commands:
                proc = subprocess.run(argv, capture_output=True, text=True)
                if proc.returncode != 0:
                    print(f"tailscope: {command_text(argv)}: {proc.stderr.strip()}", file=sys.stderr)
                    code = EXIT_FAIL
        retest = [v.node for v in verdicts.values() if v.verdict == "inconclusive"]
        if retest:
            print(f"# inconclusive, re-test (not drained): {' '.join(retest)}")
    if args.nhc:
        node = args.node or this_node()
        verdict = verdicts.get(node)
        if verdict is None:
            print(f"tailscope: node {node} has no runs in {args.campaign}; nothing to judge", file=sys.stderr)
        else:
            for line in nhc_lines(verdict):
                print(line)
            if verdict.verdict == "inconclusive":
                print(f"tailscope: {node}: inconclusive: {verdict.reason}", file=sys.stderr)
            code = max(code, EXIT_CODES[verdict.verdict])
    return code


def add_verdict_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = sub.add_parser("verdict", help="per-node verdicts of a cluster campaign: NHC, drain, Prometheus")
    p.add_argument("campaign", type=Path, metavar="CAMPAIGN")
    p.add_argument(
        "--nhc",
        action="store_true",
        help="NHC check for this node: exit 1 when degraded, 3 when inconclusive (default)",
    )
    p.add_argument("--node", help="the node to check (default $SLURMD_NODENAME, else the short host name)")
    p.add_argument("--drain", action="store_true", help="print scontrol drain commands for the failing nodes")
    p.add_argument("--apply", action="store_true", help="with --drain: run them")
    p.add_argument("--prometheus", type=Path, metavar="FILE", help="write a node_exporter textfile (.prom)")
    p.set_defaults(func=cmd_verdict)
    return p
