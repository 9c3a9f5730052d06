"""The `tailscope verdict CAMPAIGN` verb: analyse, then write the node verdicts for operations
(report/operations.py: NHC, drain, Prometheus). Data flows one way: store -> analysis -> these outputs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tailscope.report.operations import (
    EXIT_FAIL,
    EXIT_OK,
    VerdictInputError,
    command_text,
    drain_commands,
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


def this_node_names() -> list[str]:
    """The names this node may have in a campaign, in the order they are looked up: $SLURMD_NODENAME,
    $HOSTNAME (NHC sets and exports it, `nhc HOSTNAME=...` overrides it), the host name, then the short
    forms of these (an FQDN c0005.cluster.local finds c0005)."""
    import os

    full = [os.environ.get("SLURMD_NODENAME", ""), os.environ.get("HOSTNAME", ""), this_node()]
    names = [n for n in full if n] + [n.split(".", 1)[0] for n in full if n]
    return list(dict.fromkeys(n for n in names if n))


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
        names = [args.node] if args.node else this_node_names()
        node = next((n for n in names if n in verdicts), names[0])
        verdict = verdicts.get(node)
        if verdict is None:
            known = ", ".join(sorted(verdicts)[:8]) + (" ..." if len(verdicts) > 8 else "")
            raise VerdictInputError(
                f"{args.campaign}: node {' / '.join(names)} has no runs here (nodes: {known or 'none'}); "
                "nothing to judge (name the node with --node when its name in the campaign differs)"
            )
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
    p.add_argument(
        "--node",
        help="the node to check (default: the first of $SLURMD_NODENAME, NHC's $HOSTNAME, the host name and "
        "their short forms that has runs in the campaign)",
    )
    p.add_argument("--drain", action="store_true", help="print scontrol drain commands for the failing nodes")
    p.add_argument("--apply", action="store_true", help="with --drain: run them")
    p.add_argument("--prometheus", type=Path, metavar="FILE", help="write a node_exporter textfile (.prom)")
    p.set_defaults(func=cmd_verdict)
    return p
