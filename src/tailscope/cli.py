"""The one entry point: `tailscope <verb>`. A thin table of verbs; each calls one library function.

Parsing and dispatch only: each verb's parser calls one application function (`module:function`, mostly
under tailscope.verbs, imported when the verb runs), which does the work.

Exit codes: tailscope/errors.py (0 healthy, 1 degraded, 2 usage or input error, 3 inconclusive,
130 interrupted).

A new verb: its name and one-line help in VERBS (the order of `tailscope --help`), a `_build_<verb>(sub,
probe)` that registers its parser (importing what it needs inside) with `func=_verb("module:function")`,
and its entry in _BUILDERS. Only the named verb's builder runs (tests/test_cli_startup.py checks the help
lines and the errors against the parser with every verb built).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

# Only argparse and tailscope.errors at import: `--help`, `--version`, `probes` and argument errors must stay
# close to a bare Python start (tests/test_cli_startup.py, bench/bench_analyze.py). The top-level parser knows
# each verb's name and one-line help (VERBS); a verb's own parser is built only when that verb is named
# (`_build`), and each verb imports what it needs when it runs.
from tailscope.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, InputError, describe_os_error

TYPE_CHECKING = False  # typing costs more than argparse to import; mypy treats this name as typing's
if TYPE_CHECKING:
    from typing import Any, TypeAlias

    from tailscope.probes.catalogue import ProbeOption, ProbeSpec

    Handler: TypeAlias = Callable[[argparse.Namespace], int]


def _verb(target: str) -> Handler:
    """The handler of a verb: the application function `module:function` (under tailscope.verbs), imported
    only when the verb runs, called with the parsed command line."""

    def handler(args: argparse.Namespace) -> int:
        import importlib

        module, _, name = target.partition(":")
        function: Handler = getattr(importlib.import_module(module), name)
        return function(args)

    handler.__qualname__ = handler.__name__ = target
    return handler


# --- shared option groups -------------------------------------------------------------------------
def _add_probe_options(
    parser: argparse.ArgumentParser, spec: ProbeSpec | None, *, list_values: bool = False
) -> None:
    """Options forwarded to the probe: the common ones always, the probe's own when it is known.
    With `list_values` the values stay text for `verbs.run.probe_variants` (comma lists become variants)."""
    from tailscope.probes.catalogue import COMMON_OPTIONS

    options = spec.all_options if spec else COMMON_OPTIONS
    group = parser.add_argument_group(f"{spec.name} options" if spec else "probe options")
    for option in options:
        _add_probe_option(group, option, list_values=list_values)


def _add_probe_option(group: Any, option: ProbeOption, *, list_values: bool = False) -> None:
    """One probe option (probes/catalogue.py declares each once), kept as `probe_<name>`."""
    if option.type is bool:
        group.add_argument(option.flag, dest=f"probe_{option.dest}", action="store_true", help=option.help)
    elif list_values:  # `run`: any option may be a comma list of values, one variant each
        metavar = option.metavar or ("{" + ",".join(option.choices) + "}" if option.choices else None)
        group.add_argument(
            option.flag,
            dest=f"probe_{option.dest}",
            metavar=metavar or option.dest.upper(),
            help=option.help,
        )
    else:
        group.add_argument(
            option.flag,
            dest=f"probe_{option.dest}",
            type=option.type,
            choices=option.choices,
            metavar=option.metavar,
            help=option.help,
        )


def _add_common_options(parser: argparse.ArgumentParser, flags: Sequence[str]) -> None:
    """Some of the options every probe takes (COMMON_OPTIONS), for a verb that runs several probes."""
    from tailscope.probes.catalogue import COMMON_OPTIONS

    for option in COMMON_OPTIONS:
        if option.flag in flags:
            _add_probe_option(parser, option)


def _add_analysis_options(parser: argparse.ArgumentParser) -> None:
    from tailscope.options import FRACTION, NON_NEGATIVE, SHARE, number

    g = parser.add_argument_group("statistics")
    g.add_argument(
        "--threshold",
        type=FRACTION,
        action="append",
        metavar="D",
        help="slow if more than D below the node median (repeatable; default 0.05 and 0.10)",
    )
    g.add_argument(
        "--allowed-slow-rate",
        type=FRACTION,
        metavar="P0",
        help="rate of slow runs the tail-count test allows (default 0.01)",
    )
    g.add_argument("--confidence", type=FRACTION, help="coverage of confidence intervals (default 0.95)")
    v = parser.add_argument_group(
        "verdict limits (on by default, printed with the verdict; 'off' disables one; exit 1 degraded, "
        "3 inconclusive)"
    )
    v.add_argument(
        "--max-slow-rate",
        type=_limit(SHARE),
        metavar="P",
        help="degraded when the tail-count test shows more slow runs than P (default 0.01)",
    )
    v.add_argument(
        "--max-q01-drop",
        type=_limit(SHARE),
        metavar="X",
        help="degraded when (median - q01)/median > X, or 4 robust sds of the node's noise where larger "
        "(SJTU rule; default 0.005)",
    )
    v.add_argument(
        "--max-cv",
        type=_limit(NON_NEGATIVE),
        metavar="X",
        help="degraded when a node's CV exceeds X (default off)",
    )
    v.add_argument(
        "--max-cv-ratio",
        type=_limit(number(1)),
        metavar="K",
        help="degraded when a node's CV is more than K x its robust CV and above 1%% (default 3)",
    )
    v.add_argument(
        "--max-level-drop",
        type=_limit(SHARE),
        metavar="X",
        help="degraded when a stopped check's level is more than X below the node's history (anytime-valid "
        "confidence sequence; default 0.05)",
    )
    v.add_argument(
        "--max-busy-share",
        type=SHARE,
        metavar="S",
        help="inconclusive when others took more than S of the probe CPUs in the median trial (default 0.10)",
    )


OFF = "off"


def _limit(parse: Callable[[str], float]) -> Callable[[str], float | str]:
    """The bounded number `parse` accepts, or 'off' (the limit is not checked)."""

    def limit(text: str) -> float | str:
        if text.lower() in (OFF, "none"):
            return OFF
        try:
            return parse(text)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{exc} or 'off'") from None

    limit.__name__ = "limit"
    return limit


# --- parser ---------------------------------------------------------------------------------------
class _VersionAction(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked (importlib.metadata)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.update(nargs=0, default=argparse.SUPPRESS, help="show the version and exit")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from tailscope import __version__

        print(f"tailscope {__version__}")
        parser.exit()


_NO_EVIDENCE_HELP = (
    "do not record what else ran on the probe's CPUs around each trial (/proc, /sys, effective clock; "
    "docs/evidence.md); causes then read 'no evidence recorded'"
)

_RUN_HELP = (
    "run N trials of a probe, each a fresh process, into a campaign; an option given a comma list "
    "(--page 2m,1g) runs one variant per value, interleaved trial by trial; `run [OPTIONS] -- CMD` runs "
    "your application's command as the trials (its options: `tailscope run --help -- CMD`)"
)

# Every verb in `tailscope --help` order with its one-line help: the top-level parser is built from this
# table alone. A verb's own parser (its options) is built by its builder below only when the verb is named;
# tests/test_cli_startup.py checks that this help is the one each builder registers.
VERBS: dict[str, str] = {
    "probes": "list the probes",
    "run": _RUN_HELP,
    "import": "import results of other tools into a campaign",
    "analyze": "statistics, slow runs and verdicts of a campaign",
    "report": "one self-contained HTML report of a campaign",
    "compare": "variants of a probe differing in one option (page policy, offset) as an experiment",
    "check": "the default probe suite on this node, analysis and report",
    "facts": "this node's facts and tuning advice",
    "trace": "OpenMP regions, memory placement and socket traffic of an unmodified program (OMPT)",
    "addr": "physical addresses and the L3 slice hash: map, properties, infer, measure, explain",
    "campaign": "cluster campaigns on Slurm: submit, status, collect, resume, srun",
    "verdict": "per-node verdicts of a cluster campaign: NHC, drain, Prometheus",
    "export": "export a campaign's samples to a foreign format",
    "metrics": "the seed's derived counter metrics over an interval of a node's samples",
    "monitor": "sample counters in the background (pinned, streaming to disk)",
    "inject": "run one fault injector in the foreground (until --duration or Ctrl-C)",
    "validate": "a campaign with a random, recorded schedule of injections; scores tailscope's answers",
    "history": "a node's results across campaigns: add, show change points, report, note, exclude, compact",
    "jobs": "the site's own jobs (sacct, a per-job epilog): which nodes make them slow, since when",
}

if TYPE_CHECKING:
    _Sub: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def _build_probes(sub: _Sub, probe_for_run: str | None) -> None:
    p = sub.add_parser("probes", help=VERBS["probes"])
    p.set_defaults(func=_verb("tailscope.verbs.run:list_probes"))


def _build_run(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    from tailscope.options import SECONDS, TRIALS
    from tailscope.probes.catalogue import PROBES, probe_spec

    p = sub.add_parser("run", help=VERBS["run"])
    p.add_argument("probe", nargs="?", metavar="PROBE", help=f"one of: {', '.join(PROBES)}")
    p.add_argument("--trials", type=TRIALS, metavar="N", help="trials to run (with --resume: to complete)")
    p.add_argument("--campaign", type=Path, metavar="DIR", help="campaign directory (default: a new one)")
    p.add_argument("--resume", action="store_true", help="run only the planned trials that are missing")
    p.add_argument("--node", help="node name to record (default $SLURMD_NODENAME or the host name)")
    p.add_argument("--timeout", type=SECONDS, metavar="S", help="per-trial time limit in seconds (> 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--monitor", action="store_true", help="run the background monitor beside the trials")
    p.add_argument("--monitor-interval", default="1s", metavar="T", help="monitor interval (default 1s)")
    p.add_argument("--monitor-events", metavar="SET", help="monitor event set (default: --events/software)")
    p.add_argument("--no-evidence", action="store_true", help=_NO_EVIDENCE_HELP)
    p.add_argument(
        "--until-settled",
        action="store_true",
        help="stop when the probe's verdict is settled (anytime-valid; --trials N is then the cap), judged "
        "against the node's --history where it has one",
    )
    p.add_argument(
        "--history",
        metavar="DIR|URL",
        help="with --until-settled: the node's history, the probe's baseline (default: $TAILSCOPE_HISTORY)",
    )
    p.add_argument(
        "--scaling",
        action="store_true",
        help="run on the first 1, 2, ..., all of the probe's CPUs (--trials each); min/median/max per count",
    )
    _add_probe_options(p, probe_spec(probe_for_run) if probe_for_run in PROBES else None, list_values=True)
    p.set_defaults(func=_verb("tailscope.verbs.run:run"))


def _build_import(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    from tailscope.importers.cli import FORMATS, format_help

    p = sub.add_parser("import", help=VERBS["import"])
    p.add_argument("format", choices=list(FORMATS), help=format_help())
    p.add_argument(
        "--node",
        help="node the data belongs to (perf-csv, likwid-csv, hpl: these formats record none, so the "
        "importing host's name is used unless --node is given; perfcounts: the file name's "
        "<host>.perfcounts.lua)",
    )
    p.add_argument(
        "--start",
        metavar="T",
        help="perf-csv: start time (epoch seconds or ISO 8601) when the "
        "file has no '# started on' line (default: its modification time minus its duration)",
    )
    p.add_argument(
        "file",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="the file to import; perfcounts takes several (one node each), stored in one commit",
    )
    p.add_argument("--campaign", type=Path, required=True, metavar="DIR")
    p.add_argument("--name", help="probe name to import under (default: the file's stem)")
    p.add_argument("--unit", help="unit of the values when the file has no unit column")
    d = p.add_mutually_exclusive_group()
    d.add_argument("--higher-is-better", dest="higher_is_better", action="store_const", const=True)
    d.add_argument("--lower-is-better", dest="higher_is_better", action="store_const", const=False)
    p.set_defaults(func=_verb("tailscope.importers.cli:run_import"))


def _add_history_option(parser: argparse.ArgumentParser) -> None:
    from tailscope.history.cli import add_history_option  # --history DIR|URL (or $TAILSCOPE_HISTORY)

    add_history_option(parser)


def _build_analyze(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    p = sub.add_parser("analyze", help=VERBS["analyze"])
    p.add_argument("campaign", type=Path, metavar="DIR")
    p.add_argument("--json", action="store_true", help="machine-readable output (every run)")
    p.add_argument("--verbose", action="store_true", help="also every (probe, node) row, check and note")
    p.add_argument("--probe", help="only this probe")
    p.add_argument("--node", help="only this node")
    _add_analysis_options(p)
    _add_history_option(p)
    p.set_defaults(func=_verb("tailscope.verbs.analyze:analyze"))


def _build_report(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    p = sub.add_parser("report", help=VERBS["report"])
    p.add_argument("campaign", type=Path, metavar="DIR")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.html")
    _add_analysis_options(p)
    p.set_defaults(func=_verb("tailscope.verbs.analyze:report"))


def _build_compare(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    p = sub.add_parser("compare", help=VERBS["compare"])
    p.add_argument("campaign", type=Path, metavar="DIR")
    p.add_argument(
        "--by",
        metavar="OPTION",
        help="the option compared: page_policy, offset, ... (default: the one option the variants differ in)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_analysis_options(p)
    p.set_defaults(func=_verb("tailscope.verbs.analyze:compare"))


def _build_check(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    from tailscope.options import BUDGET, TRIALS

    p = sub.add_parser("check", help=VERBS["check"])
    p.add_argument("--quick", action="store_true", help="smaller trial caps (fixed: about 30 s, not 2-3 min)")
    p.add_argument(
        "--deep",
        action="store_true",
        help="then follow each degraded probe with the micro-architecture probes that isolate its component",
    )
    p.add_argument(
        "--trials", type=TRIALS, metavar="N", help="N trials of every probe (with --until-settled: at most N)"
    )
    s = p.add_argument_group(
        "stopping (default: each probe stops when its verdict is settled, judged against the node's "
        "history where --history has one; anytime-valid, README: How check stops)"
    )
    s.add_argument("--fixed", action="store_true", help="the fixed trial counts (200/20/20/30), no stopping")
    s.add_argument(
        "--until-settled", action="store_true", help="with --trials N: stop each probe when settled"
    )
    s.add_argument(
        "--budget",
        type=BUDGET,
        metavar="T",
        help="stop within T (20s, 1.5m): the most informative trials first; the verdict says what it claims",
    )
    s.add_argument(
        "--between-jobs",
        action="store_true",
        help="for a Prolog/Epilog or NHC: a 20 s budget (or --budget), the node's --history as baseline and "
        "appended, no report unless -o; NHC's output and exit codes (0 healthy, 1 degraded, 3 inconclusive)",
    )
    p.add_argument("--json", action="store_true", help="the verdict, claims and stopping as one JSON object")
    p.add_argument("--campaign", type=Path, metavar="DIR", help="campaign directory (default: a new one)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE.html", help="report (default DIR/report.html)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--verbose", action="store_true", help="also every (probe, node) row, check and note")
    _add_common_options(p, ("--cpus", "--page"))  # for every probe of the suite, as `run` declares them
    p.add_argument("--no-evidence", action="store_true", help=_NO_EVIDENCE_HELP)
    p.add_argument(
        "--app",
        type=Path,
        action="append",
        metavar="FILE",
        help="also your application, defined in a TOML file (README: Your own application)",
    )
    _add_analysis_options(p)
    _add_history_option(p)
    p.set_defaults(func=_verb("tailscope.verbs.check:check"))


def _build_facts(sub: _Sub, probe_for_run: str | None) -> None:
    p = sub.add_parser("facts", help=VERBS["facts"])
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--host",
        action="store_true",
        help="only what the CPU is (its part, read or inferred), the flags that decide the kernels (avx512*, "
        "amx*, sve*), the kernel, virtual machine or not and the PMU, in a few lines (CI prints them first)",
    )
    p.set_defaults(func=_verb("tailscope.verbs.facts:facts"))


def _build_trace(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    p = sub.add_parser(
        "trace",
        help=VERBS["trace"],
        description="Run PROGRAM under tailscope's OMPT tool (on LLVM's libomp; a gcc-built program runs on "
        "it through a libgomp.so.1 link) and store its regions, placement and traffic; writes an OTF2 "
        "archive and a Chrome trace JSON beside the campaign's shards.",
    )
    p.add_argument("--campaign", type=Path, metavar="DIR", help="campaign directory (default: a new one)")
    p.add_argument("--node", help="node name to record (default $SLURMD_NODENAME or the host name)")
    p.add_argument(
        "--events",
        metavar="LIST",
        help="per-thread counters read at each region edge, ';'-separated "
        "(task-clock;page-faults;cpu/event=0x..,umask=../)",
    )
    p.add_argument(
        "--uncore",
        metavar="LIST",
        help="uncore counters read at parallel region edges, "
        "';'-separated NAME:SPEC (e.g. upi_rx:uncore_upi/event=0x3,umask=0xf/)",
    )
    p.add_argument(
        "--numa",
        choices=["first", "every", "off"],
        default="first",
        help="copy numa_maps after the first instance of each parallel region (default), each, or never",
    )
    p.add_argument(
        "--touched",
        choices=["first", "every", "off"],
        default="first",
        help="measure the bytes a parallel region touched on its first two instances (default), "
        "each, or never (a measured instance runs slower: its pages' accessed bits are set anew)",
    )
    p.add_argument(
        "--bins",
        metavar="MIBS",
        help="bandwidth bins for OTF2 communicators, MiB/s edges (default 100,200,1024,10240)",
    )
    p.add_argument("--sysfs", type=Path, metavar="DIR", help="CPU/NUMA topology from this sysfs tree")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS]")
    p.set_defaults(func=_verb("tailscope.verbs.trace:trace"))


def _build_addr(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.addr.cli import add_addr_parser

    add_addr_parser(sub)


def _build_campaign(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.campaign.cli import add_campaign_parser

    add_campaign_parser(sub)
    actions = sub.choices["campaign"]._actions  # the campaign parser's ACTION subparsers
    collect = next(a for a in actions if isinstance(a, argparse._SubParsersAction)).choices["collect"]
    _add_history_option(collect)  # then the append: verbs/history.py
    collect.set_defaults(func=_verb("tailscope.verbs.history:collect"))


def _build_verdict(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    p = sub.add_parser("verdict", help=VERBS["verdict"])
    p.add_argument("campaign", type=Path, metavar="CAMPAIGN", nargs="?")
    p.add_argument(
        "--jobs",
        metavar="HISTORY",
        help="judge the nodes by the site's own jobs in this history (tailscope jobs) instead of a campaign",
    )
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
    _add_analysis_options(p)
    p.set_defaults(func=_verb("tailscope.verbs.verdict:verdict"))


def _build_export(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.importers.cli import add_export_parser

    add_export_parser(sub)


def _build_metrics(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.counters.metrics_cli import add_metrics_parser

    add_metrics_parser(sub)


def _build_monitor(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.counters.monitor_cli import add_monitor_parser

    add_monitor_parser(sub).set_defaults(func=_verb("tailscope.counters.monitor:cmd_monitor"))


def _build_inject(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.inject.cli import add_inject_parsers

    add_inject_parsers(sub)  # `inject` and `validate`
    sub.choices["validate"].set_defaults(func=_verb("tailscope.verbs.validate:validate"))


def _build_history(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.history.cli import add_history_parser

    add_history_parser(sub, lambda name: _verb(f"tailscope.verbs.history:{name}"))


def _build_jobs(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.jobs.cli import add_jobs_parser

    add_jobs_parser(sub, lambda name: _verb(f"tailscope.verbs.jobs:{name}"))


# verb -> the builder that registers it (one builder may register several verbs, in VERBS order)
_BUILDERS: dict[str, Callable[[Any, str | None], None]] = {
    "probes": _build_probes, "run": _build_run, "import": _build_import, "analyze": _build_analyze,
    "report": _build_report, "compare": _build_compare, "check": _build_check, "facts": _build_facts,
    "trace": _build_trace, "addr": _build_addr, "campaign": _build_campaign, "verdict": _build_verdict,
    "export": _build_export, "metrics": _build_metrics, "monitor": _build_monitor, "inject": _build_inject,
    "validate": _build_inject, "history": _build_history, "jobs": _build_jobs,
}  # fmt: skip


def build_parser(probe_for_run: str | None = None, *, verb: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Every verb's own parser is built (the whole command line, for tests and
    recipes) unless `verb` is given: then only that verb's, the others are names and one-line help (what
    `tailscope --help` and an unknown verb's error need), so a command builds and imports one verb."""
    parser = argparse.ArgumentParser(
        prog="tailscope", description=__doc__.split("\n")[0], formatter_class=_terminal_formatter
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    built: set[Callable[[Any, str | None], None]] = set()
    for name, help_text in VERBS.items():
        builder = _BUILDERS[name]
        if builder in built:
            continue
        if verb is None or builder is _BUILDERS.get(verb):
            builder(sub, probe_for_run)
            built.add(builder)
        else:  # a name in the list, never a parser of arguments (`verb` names the one that parses)
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _terminal_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter at the width shutil.get_terminal_size gives it ($COLUMNS, else stdout's terminal,
    else 80), found without importing shutil, and with it zlib, bz2 and lzma: 3 ms of `tailscope --help`,
    whose whole start is ~1.5x `python -c "import argparse"` (bench/bench_analyze.py)."""
    import os

    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return argparse.HelpFormatter(prog, width=(columns if columns > 0 else 80) - 2)


def _verb_named(argv: Sequence[str]) -> str | None:
    """The verb of a command line: its first word that is not an option (the top level has no option that
    takes a value), or None (`tailscope --help`, `tailscope`)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _probe_named(argv: Sequence[str]) -> str | None:
    """The PROBE positional of `run`, found before parsing so its own options can be declared."""
    if "run" not in argv:
        return None
    rest = list(argv)[list(argv).index("run") + 1 :]
    return next((a for a in rest if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verb = _verb_named(argv)
    args = None
    if verb == "run" and "--" in argv:  # `run [OPTIONS] -- CMD`: split before argparse sees CMD (app/cli.py)
        from tailscope.app.cli import parse_run_command

        args = parse_run_command(argv)
        if args is not None:
            args.func = _verb("tailscope.verbs.run:run_command")
    if args is None:
        parser = build_parser(_probe_named(argv), verb=verb if verb in _BUILDERS else "")
        args = parser.parse_args(argv)
    if args.verb == "run" and args.probe is not None:
        from tailscope.probes.catalogue import PROBES, UnknownProbeError

        if args.probe not in PROBES:
            print(f"tailscope: error: {UnknownProbeError(args.probe)}", file=sys.stderr)
            return EXIT_USAGE
    func: Callable[[argparse.Namespace], int] = args.func
    if _ONE_SHOT and args.verb in READ_ONLY_VERBS:
        from tailscope.verbs.oneshot import one_shot_gc

        one_shot_gc()
    try:
        return func(args)
    except InputError as exc:
        print(f"tailscope: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tailscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        import os

        # `tailscope analyze --json | head`: the reader left; silence the flush at exit too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # disk full, read-only or foreign-owned campaign, unreadable file, long name
        print(f"tailscope: error: {describe_os_error(exc)}", file=sys.stderr)
        return EXIT_USAGE


# Verbs that only read a campaign and write their output before they return: their process ends without the
# interpreter's teardown and without cyclic garbage collection (tailscope/verbs/oneshot.py).
READ_ONLY_VERBS = frozenset({"analyze", "report", "compare", "verdict"})

_ONE_SHOT = False  # set by `entry`: this process runs one command and ends (not `main` called in-process)


def entry() -> None:
    """The `tailscope` command (pyproject's script and `python -m tailscope`): `main`, then exit."""
    import os

    from tailscope.verbs.oneshot import prepare_process

    global _ONE_SHOT
    _ONE_SHOT = True
    prepare_process()
    argv = sys.argv[1:]
    code = main(argv)
    if _verb_named(argv) in READ_ONLY_VERBS:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:  # `tailscope analyze --json | head`: the reader left
            pass
        except OSError as exc:  # the output could not be written (disk full): one line, exit 2
            print(f"tailscope: error: {describe_os_error(exc)}", file=sys.stderr)
            sys.stderr.flush()
            code = EXIT_USAGE
        os._exit(code)
    raise SystemExit(code)


def one_line(exc: BaseException) -> str:
    """The error's message on one line (a message never spans lines on the terminal)."""
    from tailscope.printable import printable

    text = str(exc)
    return " ".join(printable(part) for part in text.splitlines() if part.strip()) or type(exc).__name__
