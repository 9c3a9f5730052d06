"""`tailscope jobs ...`: the application functions (jobs/cli.py declares their options)."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tailscope.errors import STATE_EXIT

if TYPE_CHECKING:
    from tailscope.analysis.model import Settings
    from tailscope.jobs.show import JobsAnswer

FIRST_COLLECT_DAYS = 30  # how far back the first collect reaches without --since
OVERLAP = dt.timedelta(days=1)  # a collect reads again the last day it had: records slurmdbd stored late


def _settings(args: argparse.Namespace) -> Settings:
    """The judging settings, resolved where every verb resolves them (verbs/settings.py), then --threshold."""
    from tailscope.verbs.settings import judging_settings

    threshold = getattr(args, "threshold", None)
    return judging_settings(None, {"thresholds": (threshold,)} if threshold is not None else {})


def cmd_collect(args: argparse.Namespace) -> int:
    from tailscope.jobs import sacct
    from tailscope.jobs.store import open_jobs
    from tailscope.printable import printable

    store = open_jobs(args.history)
    if args.sacct_file is not None:
        parsed = sacct.parse(args.sacct_file, cluster=args.cluster)
        source = f"sacct-file:{Path(args.sacct_file).name}"
        where = str(args.sacct_file)
    else:
        start = args.since
        if start is None:
            last = store.last_end(args.cluster)
            now = dt.datetime.now(dt.UTC)
            start = (
                (last.to_pydatetime() - OVERLAP)
                if last is not None
                else now - dt.timedelta(FIRST_COLLECT_DAYS)
            )
        parsed = sacct.run_sacct(start, args.cluster)
        source = "sacct"
        where = f"sacct from {start:%Y-%m-%dT%H:%M:%SZ}"
    print(printable(parsed.sentence(where)))
    result = store.write_jobs(sacct.to_table(parsed, source))  # everything parsed before anything is stored
    print(printable(result.sentence(str(store.location))))
    ingested, damaged = store.ingest_evidence()
    for line in damaged:
        print(f"tailscope: warning: {printable(line)}", file=sys.stderr)
    if ingested:
        print(f"jobs {printable(store.location)}: {ingested} epilog records stored")
    return 0


def jobs_answer(
    location: str,
    settings: Settings,
    *,
    node: str | None = None,
    since: dt.datetime | None = None,
    class_by: str | None = None,
) -> JobsAnswer:
    """The jobs' answer for a history (read only: the spool is read, not ingested)."""
    from tailscope.jobs.classby import DEFAULT_CLASS_BY, class_by_option
    from tailscope.jobs.show import answer
    from tailscope.jobs.store import open_jobs

    fields = class_by_option(class_by) if class_by else DEFAULT_CLASS_BY  # a bad option before any read
    store = open_jobs(location)
    jobs, damaged = store.read_jobs()
    records, bad = store.read_evidence()
    return answer(jobs, records, settings, node=node, since=since, class_by=fields, damaged=damaged + bad)


def cmd_show(args: argparse.Namespace) -> int:
    from tailscope.jobs.show import prometheus_text, render, to_json
    from tailscope.printable import printable

    result = jobs_answer(
        args.history, _settings(args), node=args.node, since=args.since, class_by=args.class_by
    )
    if args.prometheus:
        from tailscope.store.files import write_atomic_bytes

        args.prometheus.parent.mkdir(parents=True, exist_ok=True)
        write_atomic_bytes(args.prometheus, prometheus_text(result).encode())
    for line in result.damaged:
        print(f"tailscope: warning: {printable(line)}", file=sys.stderr)
    if args.json:
        from tailscope.jsonout import write_json

        write_json(to_json(result))
    else:
        print("\n".join(render(result)))
    return STATE_EXIT[result.verdict]


def cmd_report(args: argparse.Namespace) -> int:
    from tailscope.history.store import open_history
    from tailscope.jobs.report import write_report

    settings = _settings(args)
    result = jobs_answer(args.history, settings, since=args.since, class_by=args.class_by)
    history = open_history(
        args.history
    ).read()  # a history of jobs only has no entries: the jobs section alone
    path = write_report(result, history, settings, args.output)
    print(f"report: {path.resolve()}")
    return 0


def cmd_prolog(args: argparse.Namespace) -> int:
    """Slurm's Prolog= (scripts/slurm/tailscope-jobs): jobs/epilog.py, always exit 0 within its bound."""
    from tailscope.jobs.epilog import cmd_prolog as prolog

    return prolog(args)


def cmd_epilog(args: argparse.Namespace) -> int:
    """Slurm's Epilog=: jobs/epilog.py, which always exits 0 within its bound."""
    from tailscope.jobs.epilog import cmd_epilog as epilog

    return epilog(args)
