"""`tailscope analyze`, `report` and `compare`: one campaign's analysis, judged with its settings
(verbs/settings.py), printed, written as HTML or compared variant against variant."""

from __future__ import annotations

import argparse

from tailscope.errors import EXIT_OK, STATE_EXIT, UsageError
from tailscope.verbs.settings import settings_of


def analyze(args: argparse.Namespace) -> int:
    """`tailscope analyze DIR`: the answer on the terminal, or every figure as JSON; exit by the verdict."""
    from tailscope.store.read import connect
    from tailscope.verbs.workflow import analyze_campaign

    settings = settings_of(args)
    # --json: every figure of every run, from the runs' stored summaries, read with the runs (one scan)
    with connect(args.campaign, runs_also=("probe", "summary") if args.json else ()) as con:
        analysis = analyze_campaign(args.campaign, settings, probe=args.probe, node=args.node, con=con)
        summaries = con.run_summaries() if args.json else []
    from tailscope.verbs.history import append_quietly  # --history: a failed append only warns

    append_quietly(args, args.campaign, settings, analysis)
    if args.json:
        from tailscope.analysis.figures import with_figures
        from tailscope.jsonout import write_json

        write_json(with_figures(analysis, summaries))
    else:
        from tailscope.report.terminal import render_answer, render_summary

        campaign = str(args.campaign.resolve())
        print("\n".join(render_answer(analysis, campaign_dir=campaign, verbose=args.verbose)))
        if args.verbose:
            print("\n".join(render_summary(analysis, verdict=False)))
    return STATE_EXIT[analysis.verdict.state]


def report(args: argparse.Namespace) -> int:
    """`tailscope report DIR -o FILE.html`."""
    from tailscope.verbs.workflow import analyze_and_report

    _, path = analyze_and_report(args.campaign, settings_of(args), args.output)
    print(f"report: {path.resolve()}")
    return EXIT_OK


def compare(args: argparse.Namespace) -> int:
    """`tailscope compare DIR [--by OPTION]`: variants differing in one option, as an experiment."""
    from tailscope.compare import compare as comparisons_of
    from tailscope.compare import render_comparison
    from tailscope.verbs.workflow import analyze_campaign

    analysis = analyze_campaign(args.campaign, settings_of(args))
    comparisons = comparisons_of(analysis, args.by)
    if not comparisons:
        names = ", ".join(sorted({v.variant for v in analysis.variants}))
        what = f"in {args.by}" if args.by else "in exactly one option"
        raise UsageError(
            f"{args.campaign}: no probe has two or more variants differing {what} (variants: {names}); "
            "run them with a comma list, e.g. `tailscope run l2sum --page 2m,1g --trials 100 --campaign DIR`"
        )
    if args.json:
        from tailscope.jsonout import write_json

        write_json([c.to_json() for c in comparisons])
        return EXIT_OK
    for c in comparisons:
        print("\n".join(render_comparison(c)))
    return EXIT_OK
