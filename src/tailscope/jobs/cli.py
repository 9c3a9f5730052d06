"""The `jobs` verb's command line (`collect|show|report`, and `epilog` for Slurm's Epilog=): argparse only;
the handlers are verbs/jobs.py's. A subcommand is one entry of ACTIONS (its builder adds its options)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tailscope.history.cli import WHERE
from tailscope.jobs.classby import CLASS_FIELDS, DEFAULT_CLASS_BY
from tailscope.options import FRACTION, date

Handler = Callable[[argparse.Namespace], int]
HELP = "the site's own jobs (sacct, a per-job epilog): which nodes make them slow, since when"


def _collect(p: argparse.ArgumentParser) -> None:
    since = "jobs that ended from DATE on (default: the last collected end time less a day; first: 30 days)"
    p.add_argument("--since", type=date, metavar="DATE", help=since)
    cluster = "this Slurm cluster (sacct --clusters; the name a --sacct-file without a Cluster column gets)"
    p.add_argument("--cluster", metavar="NAME", help=cluster)
    dump = "read a saved `sacct -P -o FIELDS` dump (with its header line) instead of running sacct"
    p.add_argument("--sacct-file", type=Path, metavar="FILE", help=dump)


def _judging(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", type=date, metavar="DATE", help="only jobs that ended from DATE on")
    p.add_argument("--class-by", metavar="FIELDS", help=f"what makes two jobs the same work: a comma list of "
                   f"{', '.join(CLASS_FIELDS)} (default {','.join(DEFAULT_CLASS_BY)})")  # fmt: skip
    p.add_argument(
        "--threshold",
        type=FRACTION,
        metavar="F",
        help="slow threshold of the verdict (default: the judging settings', 0.05)",
    )


def _show(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", help="only this node (its sentence and its classes)")
    _judging(p)
    p.add_argument("--json", action="store_true", help="nodes, classes, verdict as JSON")
    p.add_argument("--prometheus", type=Path, metavar="FILE", help="write a node_exporter textfile (.prom)")


def _report(p: argparse.ArgumentParser) -> None:
    _judging(p)
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.html")


# name -> (help, its options' builder, its handler in verbs/jobs.py)
ACTIONS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], str]] = {
    "collect": ("store finished jobs from sacct (or a saved dump) and the epilog's records", _collect,
                "cmd_collect"),
    "show": ("which nodes make jobs slow: effects, intervals, q, since when, epilog evidence", _show,
             "cmd_show"),
    "report": ("the history report with a jobs section (effects per node, a node's jobs over time)", _report,
               "cmd_report"),
}  # fmt: skip


def add_jobs_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    handler: Callable[[str], Handler],
) -> argparse.ArgumentParser:
    """The `jobs` parser; `handler(name)` gives the function of each action (verbs/jobs.py)."""
    p = sub.add_parser("jobs", help=HELP)
    verbs = p.add_subparsers(dest="jobs_verb", metavar="ACTION", required=True)
    for name, (text, build, func) in ACTIONS.items():
        q = verbs.add_parser(name, help=text)
        q.add_argument("history", metavar="HISTORY", help=WHERE)
        build(q)
        q.set_defaults(func=handler(func))
    add_slurmd_parsers(verbs, handler)
    return p


def add_slurmd_parsers(
    verbs: argparse._SubParsersAction,  # type: ignore[type-arg]
    handler: Callable[[str], Handler],
) -> None:
    """`jobs prolog` and `jobs epilog`, the two slurmd runs (scripts/slurm/tailscope-jobs; jobs/epilog.py)."""
    from tailscope.jobs.epilog import DEFAULT_STATE_DIR, DEFAULT_TIMEOUT_S
    from tailscope.options import number

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--state-dir",
            type=Path,
            default=DEFAULT_STATE_DIR,
            metavar="DIR",
            help=f"node-local directory of the running jobs' start readings (default {DEFAULT_STATE_DIR})",
        )
        p.add_argument(
            "--timeout",
            type=number(0.2, 600),
            default=DEFAULT_TIMEOUT_S,
            metavar="S",
            help=f"finish within S seconds whatever hangs, exit 0 (default {DEFAULT_TIMEOUT_S:g})",
        )
        p.add_argument("--job-id", metavar="ID", help="the job (default $SLURM_JOB_ID)")
        p.add_argument(
            "--node", metavar="NAME", help="the node (default $SLURMD_NODENAME, else the host name)"
        )
        p.add_argument("--cluster", metavar="NAME", help="the cluster (default $SLURM_CLUSTER_NAME)")
        p.add_argument(
            "--apps",
            type=Path,
            metavar="DIR",
            help="application definitions NAME.toml: the epilog reads the figures of merit of a job tagged "
            "--comment=tailscope:NAME in its output (the prolog takes and ignores it)",
        )
        p.add_argument(
            "--root",
            type=Path,
            metavar="DIR",
            help="read DIR/proc and DIR/sys instead of /proc and /sys (recorded files of a node)",
        )

    pro = verbs.add_parser(
        "prolog", help="for slurm.conf Prolog=: store this node's evidence at the job's start (exit 0 always)"
    )
    common(pro)
    pro.set_defaults(func=handler("cmd_prolog"))
    epi = verbs.add_parser(
        "epilog",
        help="for slurm.conf Epilog=: append this node's evidence over the job to HISTORY (exit 0 always)",
    )
    epi.add_argument("history", metavar="HISTORY", help=WHERE)
    common(epi)
    epi.add_argument("--print", action="store_true", help="print the record as JSON instead of storing it")
    epi.set_defaults(func=handler("cmd_epilog"))
