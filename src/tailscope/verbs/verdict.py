"""The `tailscope verdict CAMPAIGN` verb: analyse, then write the node verdicts for operations
(report/operations.py: NHC, drain, Prometheus); `verdict --jobs HISTORY` judges the nodes by the site's own
jobs (tailscope.jobs) and writes the same outputs with the same safety. Data flows one way: store -> analysis
-> these outputs. The limits are the campaign's judging settings (verbs/settings.py: its spec's [thresholds],
then the command line's options), the same as analyze and report use."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tailscope.printable import printable
from tailscope.report.drain import DrainPlan
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


def this_node_names() -> list[str]:
    """The names this node may have in a campaign, in the order they are looked up: $SLURMD_NODENAME,
    $HOSTNAME (NHC sets and exports it, `nhc HOSTNAME=...` overrides it), the host name, then the short
    forms of these (an FQDN c0005.cluster.local finds c0005)."""
    import os

    full = [os.environ.get("SLURMD_NODENAME", ""), os.environ.get("HOSTNAME", ""), this_node()]
    names = [n for n in full if n] + [n.split(".", 1)[0] for n in full if n]
    return list(dict.fromkeys(n for n in names if n))


def drain(plan: DrainPlan, *, apply: bool) -> int:
    """Print the drain commands (each a quoted shell line; a name scontrol would read as a list refused), and
    run them with `apply`. EXIT_FAIL when a node was refused or a command failed."""
    import shutil
    import subprocess

    code = EXIT_OK
    for argv in plan.commands:
        print(command_text(argv))
    for line in plan.refused:
        print(f"tailscope: {line}", file=sys.stderr)
        code = EXIT_FAIL
    if apply:
        if plan.commands and shutil.which("scontrol") is None:
            raise VerdictInputError("--apply: scontrol not found on PATH")
        for argv in plan.commands:
            proc = subprocess.run(argv, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"tailscope: {command_text(argv)}: {printable(proc.stderr.strip())}", file=sys.stderr)
                code = EXIT_FAIL
    return code


def jobs_verdict(args: argparse.Namespace, settings: Settings) -> int:
    """`verdict --jobs HISTORY`: the nodes judged by the site's own jobs (tailscope.jobs), written as NHC,
    drain or Prometheus with the campaign verdict's safety: plain node names only, quoted commands, --apply
    only with --drain; a node without timed jobs here is inconclusive (exit 3), never degraded."""
    from tailscope.analysis.health import EXIT_CODES
    from tailscope.jobs.show import prometheus_text as jobs_prometheus
    from tailscope.report.drain import drain_plan
    from tailscope.report.operations import nhc_line
    from tailscope.store.files import write_atomic_bytes
    from tailscope.verbs.jobs import jobs_answer

    result = jobs_answer(args.jobs, settings)
    for line in result.damaged:
        print(f"tailscope: warning: {printable(line)}", file=sys.stderr)
    code = EXIT_OK
    if args.prometheus:
        args.prometheus.parent.mkdir(parents=True, exist_ok=True)
        write_atomic_bytes(args.prometheus, jobs_prometheus(result).encode())
    if args.drain:
        code = drain(drain_plan((n.node, result.reason(n)) for n in result.degraded), apply=args.apply)
    if args.nhc:
        names = [args.node] if args.node else this_node_names()
        known = {n.node: n for n in result.nodes}
        node = next((n for n in names if n in known), None)
        if node is None:
            why = f"inconclusive: no timed job ran on it in {printable(args.jobs)}"
            print(f"tailscope: {printable(names[0])}: {why}", file=sys.stderr)
            return max(code, EXIT_CODES["inconclusive"])
        degraded = {n.node for n in result.degraded}
        if node in degraded:
            print(nhc_line(node, result.reason(known[node])))
        code = max(code, EXIT_CODES["degraded" if node in degraded else "healthy"])
    return code


def verdict(args: argparse.Namespace) -> int:
    """The `verdict` verb: the campaign judged with its settings, written as NHC, drain or Prometheus."""
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
    if getattr(args, "jobs", None) is not None:
        if args.campaign is not None:
            raise VerdictInputError("verdict: give a CAMPAIGN or --jobs HISTORY, not both")
        return jobs_verdict(args, judging_settings(None, overrides))
    if args.campaign is None:
        raise VerdictInputError("verdict: give a CAMPAIGN directory (or --jobs HISTORY: the site's own jobs)")
    campaign = Campaign.open(args.campaign)
    analysis = analyze_campaign(args.campaign, judging_settings(args.campaign, overrides))
    verdicts = node_verdicts(analysis)
    code = EXIT_OK
    if args.prometheus:
        text = prometheus_text(analysis, verdicts, campaign.manifest.name or campaign.campaign_id)
        args.prometheus.parent.mkdir(parents=True, exist_ok=True)
        write_atomic_bytes(args.prometheus, text.encode())
    if args.drain:
        code = drain(drain_plan_of(verdicts), apply=args.apply)
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
