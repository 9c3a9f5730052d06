"""`tailscope run [OPTIONS] -- CMD ARGS...`: the command line of an application campaign.

The command line is split at the first `--` before argparse sees it (cli.main calls `parse_run_command`), so
nothing of CMD is taken for one of tailscope's options. PROBE together with CMD, or a probe-only option with
CMD, is refused (exit 2). verbs/run.py's `run_command` runs it through the probes' path:
workflow.run_campaign, the local runner, the store's load path; only the trial itself is the application's
(app/trial.py).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tailscope.app.variant import (
    PREFIX,
    AppInputError,
    AppVariant,
    app_params,
    application_word,
    default_name,
)

# The options that only a probe understands (their values select what the probe allocates or measures).
PROBE_ONLY = ("--page", "--offset", "--scaling", "--no-pages", "--iterations")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_APP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]*\Z")


def split_at_command(argv: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """(tailscope's words up to `run` and its options, CMD) when `run` is followed by `--`, else None."""
    words = list(argv)
    if "run" not in words:
        return None
    at = words.index("run")
    if "--" not in words[at + 1 :]:
        return None
    cut = words.index("--", at + 1)
    return words[:cut], words[cut + 1 :]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line and exit 2, as argparse does, with our prefix
        self.exit(2, f"tailscope run: error: {message}\n")


def run_parser() -> argparse.ArgumentParser:
    from tailscope.options import SECONDS, TRIALS, WARMUP

    p = _Parser(
        prog="tailscope run",
        usage="tailscope run [OPTIONS] -- CMD [ARGS...]",
        description="Run your application's command as the trials of a campaign: each trial a fresh process "
        "tree in a directory of its own, with its figures of merit, evidence, causes and verdicts.",
    )
    p.add_argument("probe", nargs="?", help=argparse.SUPPRESS)
    p.add_argument("--trials", type=TRIALS, metavar="N", help="N trials of each variant (required)")
    p.add_argument("--campaign", type=Path, metavar="DIR", help="campaign directory (default: a new one)")
    p.add_argument("--resume", action="store_true", help="run the planned trials this node misses")
    p.add_argument("--node", help="node name to record (default $SLURMD_NODENAME or the host name)")
    p.add_argument("--timeout", type=SECONDS, metavar="S", help="trial time limit (default 3600 s)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-evidence", action="store_true", help="no per-trial evidence (/proc, /sys, clock)")
    p.add_argument(
        "--events",
        metavar="SET",
        help="perf counters of the whole process tree: an event set (software, ...) or a ';' list",
    )
    p.add_argument("--monitor", action="store_true", help="run the counter monitor beside the trials")
    p.add_argument("--monitor-interval", default="1s", metavar="T", help="monitor interval (default 1s)")
    p.add_argument("--monitor-events", metavar="SET", help="monitor event set (default: software)")
    a = p.add_argument_group("the application")
    a.add_argument("--name", help="variant name app:NAME (default: the first word of CMD not a launcher)")
    a.add_argument(
        "--env",
        action="append",
        metavar="NAME=VALUE",
        help="one variant per occurrence, with this variable set (the value keeps its commas); interleaved",
    )
    a.add_argument("--prepare", metavar="CMD", help="shell command run in the trial's directory before it")
    a.add_argument("--cleanup", metavar="CMD", help="shell command run in the trial's directory after it")
    a.add_argument("--warmup", type=WARMUP, metavar="N", help="N trials run, not kept")
    f = p.add_argument_group("figures of merit (default: the trial's wall time, lower is better)")
    f.add_argument(
        "--metric",
        action="append",
        metavar="NAME[:UNIT][:higher|lower]=REGEX",
        help="a figure read from stdout+stderr as they stream (last match; first capture group; the first "
        "--metric is the headline; repeatable)",
    )
    f.add_argument("--metric-file", metavar="PATH", help="read the figures from this file of the trial's dir")
    f.add_argument("--sanity", metavar="REGEX", help="a line must match or the trial fails")
    f.add_argument("--iteration-regex", metavar="REGEX", help="every match is an iteration (capture group)")
    f.add_argument("--reference", metavar="VALUE:-TOL,+TOL", help="the expected headline, tolerances in %%")
    f.add_argument("--format", metavar="FORMAT", help="a built-in program reader (hpl, hpcc, lammps, ...)")
    return p


def parse_run_command(argv: Sequence[str]) -> argparse.Namespace | None:
    """The Namespace of `run [OPTIONS] -- CMD` (SystemExit 2 on bad usage, as argparse); None when no `--`
    follows `run`."""
    split = split_at_command(argv)
    if split is None:
        return None
    before, command = split
    options = before[before.index("run") + 1 :]
    parser = run_parser()
    for word in options:
        flag = word.split("=", 1)[0]
        if flag in PROBE_ONLY:
            parser.error(
                f"{flag} is a probe option: it does not apply to a command after -- (run PROBE {flag})"
            )
    args = parser.parse_args(options)
    if args.probe is not None:
        parser.error(f"give a probe ({args.probe}) or a command after --, not both")
    args.command_argv = command
    args.verb = "run"  # cli.main dispatches it to verbs/run.py's run_command
    return args


def variants_of(args: argparse.Namespace, cwd: Path | None = None) -> list[AppVariant]:
    """One variant per --env (or one), all sharing the command and the figures' declaration."""
    command = list(args.command_argv)
    if not command or not command[0]:
        raise AppInputError("run: empty command after -- (give the program to run, e.g. -- lmp -in in.lj)")
    if command[0].startswith("-"):
        raise AppInputError(f"run: the command after -- starts with {command[0]!r}: give the program first")
    for at in {0, application_word(command)}:  # each trial runs in a directory of its own: `./app` is here
        if "/" in command[at] and not os.path.isabs(command[at]):
            command[at] = str((cwd or Path.cwd()) / command[at])
    name = args.name or default_name(command)
    if not _APP_NAME.match(name) or len(name) > 64:
        raise AppInputError(f"--name {name!r}: expected a word of letters, digits and _ . + - (up to 64)")
    options = {
        "metrics": args.metric,
        "metric_file": args.metric_file,
        "sanity": args.sanity,
        "iteration_regex": args.iteration_regex,
        "format": args.format,
        "reference": args.reference,
        "prepare": args.prepare,
        "cleanup": args.cleanup,
        "warmup": args.warmup,
        "timeout_s": args.timeout,
        "events": args.events,
    }
    if args.metric_file == "":  # FigureSpec checks a path given (app_params leaves an empty one out)
        raise AppInputError("--metric-file '': expected a path inside the trial's directory")
    envs = args.env or []
    for setting in envs:
        var, sep, _ = setting.partition("=")
        if not sep or not _ENV_NAME.match(var):
            raise AppInputError(f"--env {setting!r}: expected NAME=VALUE (NAME: letters, digits, _)")
    probe = PREFIX + name
    variants = [AppVariant(probe, app_params(command, [e], **options)) for e in envs] or [
        AppVariant(probe, app_params(command, **options))
    ]
    seen: set[str] = set()
    unique = []
    for v in variants:
        if v.variant_id not in seen:
            seen.add(v.variant_id)
            unique.append(v)
    return unique
