"""The `tailscope verdict CAMPAIGN` verb: analyse, then write the node verdicts for operations
(report/operations.py: NHC, drain, Prometheus). Data flows one way: store -> analysis -> these outputs.
The limits are the campaign's judging settings (verbs/settings.py: its spec's [thresholds], then the
command line's options), the same as analyze and report use."""

from __future__ import annotations

import argparse
import sys

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


def this_node_names() -> list[str]:
    """The names this node may have in a campaign, in the order they are looked up: $SLURMD_NODENAME,
    $HOSTNAME (NHC sets and exports it, `nhc HOSTNAME=...` overrides it), the host name, then the short
    forms of these (an FQDN c0005.cluster.local finds c0005)."""
    import os

    full = [os.environ.get("SLURMD_NODENAME", ""), os.environ.get("HOSTNAME", ""), this_node()]
    names = [n for n in full if n] + [n.split(".", 1)[0] for n in full if n]
    return list(dict.fromkeys(n for n in names if n))


def verdict(args: argparse.Namespace) -> int:
    """The `verdict` verb: the campaign judged with its settings, written as NHC, drain or Prometheus."""
    import shutil
    import subprocess

    from tailscope.analysis.health import EXIT_CODES
    from tailscope.store.campaign import Campaign, write_atomic_bytes
    from tailscope.verbs.settings import checked_overrides, given_options, judging_settings
    from tailscope.verbs.workflow import analyze_campaign

    overrides = given_options(args)
    checked_overrides(overrides)  # a bad option before anything else, as the parser's own errors
    if not (args.nhc or args.drain or args.prometheus):
        args.nhc = True
    if args.apply and not args.drain:
        raise VerdictInputError("--apply runs the drain commands: use it with --drain")
    campaign = Campaign.open(args.campaign)
    analysis = analyze_campaign(args.campaign, judging_settings(args.campaign, overrides))
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
        names = [args.node] if args.node else this_node_names()
        node = next((n for n in names if n in verdicts), names[0])
        verdict = verdicts.get(node)
        if verdict is None:
            known = ", ".join(printable(n) for n in sorted(verdicts)[:8]) + (
                " ..." if len(verdicts) > 8 else ""
            )
            raise VerdictInputError(
                f"{args.campaign}: node {' / '.join(printable(n) for n in names)} has no runs here "
                f"(nodes: {known or 'none'}); nothing to judge (name the node with --node when its name in "
                "the campaign differs)"
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
