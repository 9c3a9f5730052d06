"""The `jobs` verb's parser: its subcommands, each dispatched to one function."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

Handler = Callable[[argparse.Namespace], int]


def add_jobs_parser(sub: Any, verb: Callable[[str], Handler], help_text: str) -> None:
    p = sub.add_parser("jobs", help=help_text, description=help_text)
    jobs = p.add_subparsers(dest="jobs_command", metavar="COMMAND", required=True)
    add_slurmd_parsers(jobs, verb)


def add_slurmd_parsers(jobs: Any, verb: Callable[[str], Handler]) -> None:
    """`jobs prolog` and `jobs epilog`, the two that slurmd runs (scripts/slurm/tailscope-jobs)."""
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
            "--root",
            type=Path,
            metavar="DIR",
            help="read DIR/proc and DIR/sys instead of /proc and /sys (recorded files of a node)",
        )

    pro = jobs.add_parser(
        "prolog",
        help="for slurm.conf Prolog=: store this node's evidence at the job's start (exit 0 always)",
    )
    common(pro)
    pro.set_defaults(func=verb("tailscope.jobs.epilog:cmd_prolog"))
    epi = jobs.add_parser(
        "epilog",
        help="for slurm.conf Epilog=: append this node's evidence over the job to HISTORY (exit 0 always)",
    )
    epi.add_argument("history", metavar="HISTORY", help="the history: a directory or a postgresql:// URL")
    common(epi)
    epi.add_argument("--print", action="store_true", help="print the record as JSON instead of storing it")
    epi.set_defaults(func=verb("tailscope.jobs.epilog:cmd_epilog"))
