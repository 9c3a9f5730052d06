"""The `tailscope verdict CAMPAIGN` verb: analyse, then write the node verdicts for operations
(report/operations.py: NHC, drain, Prometheus). Data flows one way: store -> analysis -> these outputs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tailscope.printable import printable
from tailscope.report.operations import (
    EXIT_FAIL,
    EXIT_OK,
    VerdictInputError,
    command_text,
    drain_plan_of,
    nhc_lines,
    node_verdicts,
    prometheus_text,
    this_node,
)

if TYPE_CHECKING:
    from tailscope.analysis.model import Settings


def _settings_for(campaign_dir: Path, given: Settings | None = None) -> Settings:
    """Options given on the command line, else the campaign spec's [thresholds], else the defaults."""
    from tailscope.analysis.model import Settings

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
    import shutil
    import subprocess

    from tailscope.analysis.health import EXIT_CODES
    from tailscope.store.campaign import Campaign, write_atomic_bytes
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
        plan = drain_plan_of(verdicts)
        commands = plan.commands
        for argv in commands:
            print(command_text(argv))
        for line in plan.refused:
            print(f"tailscope: {line}", file=sys.stderr)
            code = EXIT_FAIL
        if args.apply:
            if commands and shutil.which("scontrol") is None:
                raise VerdictInputError("--apply: scontrol not found on PATH")
            for argv in commands:
                proc = subprocess.run(argv, capture_output=True, text=True)
                if proc.returncode != 0:
                    print(
                        f"tailscope: {command_text(argv)}: {printable(proc.stderr.strip())}", file=sys.stderr
                    )
                    code = EXIT_FAIL
        retest = [v.node for v in verdicts.values() if v.verdict == "inconclusive"]
        if retest:
            print(f"# inconclusive, re-test (not drained): {' '.join(printable(n) for n in retest)}")
    if args.nhc:
        node = args.node or this_node()
        verdict = verdicts.get(node)
        if verdict is None:
            known = ", ".join(printable(n) for n in sorted(verdicts)[:8]) + (
                " ..." if len(verdicts) > 8 else ""
            )
            raise VerdictInputError(
                f"{args.campaign}: node {printable(node)} has no runs here (nodes: {known or 'none'}); "
                "nothing to judge "
                "(name the node with --node when its name in the campaign differs)"
            )
        else:
            for line in nhc_lines(verdict):
                print(line)
            if verdict.verdict == "inconclusive":
                print(
                    f"tailscope: {printable(node)}: inconclusive: {printable(verdict.reason)}",
                    file=sys.stderr,
                )
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
