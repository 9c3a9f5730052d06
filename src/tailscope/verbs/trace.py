"""`tailscope trace -- PROGRAM`: run it under the OMPT tool, store and print its regions."""

from __future__ import annotations

import argparse
import sys

from tailscope.errors import EXIT_OK, EXIT_VERDICT


def trace(args: argparse.Namespace) -> int:
    from tailscope.trace.run import TraceRequest, run_trace
    from tailscope.trace.summary import render
    from tailscope.trace.timeline import parse_bins

    command = list(args.program)
    if command and command[0] == "--":
        command = command[1:]
    bins = parse_bins(args.bins) if args.bins is not None else None
    request = TraceRequest(
        command=command,
        campaign=args.campaign,
        node=args.node,
        events=tuple(e for e in (args.events or "").split(";") if e),
        uncore_events=tuple(e for e in (args.uncore or "").split(";") if e),
        numa=args.numa,
        sysfs=args.sysfs,
        extra_env={"TAILSCOPE_OMPT_TOUCHED": getattr(args, "touched", "first")},
        **({"bins_mibs": bins} if bins else {}),
    )
    outcome = run_trace(request)
    print(f"runtime: {outcome.runtime.family} ({outcome.runtime.path}); traced on {outcome.runs_on}")
    for line in outcome.skipped:
        print(f"not counted: {line}")
    if outcome.child_processes:
        print(
            f"note: the program forked or started {outcome.child_processes} other OpenMP process(es), traced "
            f"beside it (regions column `process`; raw files in {outcome.trace_dir / 'ompt'}/fork-PID)"
        )
    if outcome.lost_processes:
        print(f"warning: {outcome.lost_processes} child process(es) ended without writing their trace")
    if outcome.unmatched:
        print(f"warning: {outcome.unmatched} region begin/end events did not pair")
    print(render(outcome.regions, outcome.traffic, outcome.placement, outcome.finding.text))
    print(f"campaign: {outcome.campaign} (run {outcome.run_id})")
    print(f"OTF2: {outcome.otf2}")
    print(f"Chrome trace: {outcome.chrome}")
    if outcome.exit_code != 0:
        print(f"tailscope: the program exited with status {outcome.exit_code}", file=sys.stderr)
        return EXIT_VERDICT
    return EXIT_OK
