"""The one entry point: `tailscope <verb>`. A thin table of verbs; each calls one library function.

Exit codes (for scripts and health checkers; `check`, `analyze`, `verdict --nhc`): 0 healthy, 1 degraded (a
node failed a limit or is slower than its peers; `run`: trials failed), 2 usage or input error,
3 inconclusive (a node too busy or too noisy to judge), 130 interrupted (finished trials are stored;
`--resume` continues).

A new verb: its name and one-line help in VERBS (the order of `tailscope --help`), a `_build_<verb>(sub,
probe)` that registers its parser (importing what it needs inside), and its entry in _BUILDERS. Only the
named verb's builder runs (tests/test_cli_startup.py checks the help lines and the errors against the parser
with every verb built).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

# Only argparse and tailscope.errors at import: `--help`, `--version`, `probes` and argument errors must stay
# close to a bare Python start (tests/test_cli_startup.py, bench/bench_analyze.py). The top-level parser knows
# each verb's name and one-line help (VERBS); a verb's own parser is built only when that verb is named
# (`_build`), and each verb imports what it needs when it runs.
from tailscope.errors import InputError, describe_os_error
from tailscope.options import type_words

TYPE_CHECKING = False  # typing costs more than argparse to import; mypy treats this name as typing's
if TYPE_CHECKING:
    from typing import Any, TypeAlias

    from tailscope.analysis.model import Settings
    from tailscope.campaign.runner import RunOutcome
    from tailscope.probes.catalogue import ProbeSpec, ProbeVariant

EXIT_OK, EXIT_VERDICT, EXIT_USAGE, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# The analysis' campaign state (the worst node verdict, analysis/health.py) -> exit code.
STATE_EXIT = {"healthy": EXIT_OK, "degraded": EXIT_VERDICT, "inconclusive": EXIT_INCONCLUSIVE}


class UsageError(InputError):
    """A command line that cannot be carried out (exit 2)."""


# --- shared option groups -------------------------------------------------------------------------
def _add_probe_options(
    parser: argparse.ArgumentParser, spec: ProbeSpec | None, *, list_values: bool = False
) -> None:
    """Options forwarded to the probe: the common ones always, the probe's own when it is known.
    With `list_values` the values stay text for `_probe_variants` (comma lists become variants)."""
    from tailscope.probes.catalogue import COMMON_OPTIONS

    options = spec.all_options if spec else COMMON_OPTIONS
    group = parser.add_argument_group(f"{spec.name} options" if spec else "probe options")
    for option in options:
        if option.type is bool:
            group.add_argument(
                option.flag, dest=f"probe_{option.dest}", action="store_true", help=option.help
            )
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


def _probe_params(args: argparse.Namespace) -> dict[str, Any]:
    params = {}
    for key, value in vars(args).items():
        if key.startswith("probe_") and value not in (None, False):
            params[key.removeprefix("probe_")] = value
    return params


# Options whose own syntax has commas: never split into variants.
_COMMA_SYNTAX = {"cpus", "events"}


def _probe_variants(probe: str, args: argparse.Namespace) -> list[ProbeVariant]:
    """The variants a `run` command line asks for: one per combination of comma-listed option values
    (`--page 2m,1g --offset 0,64m` is four), in the order given."""
    import itertools

    from tailscope.probes.catalogue import ProbeVariant, probe_spec

    spec = probe_spec(probe)
    by_dest = {o.dest: o for o in spec.all_options}
    choices: list[list[tuple[str, Any]]] = []
    for key, raw in _probe_params(args).items():
        option = by_dest[key]
        if option.type is bool:
            choices.append([(key, True)])
            continue
        pieces = [raw] if key in _COMMA_SYNTAX else [p.strip() for p in str(raw).split(",")]
        values = []
        for piece in pieces:
            if not piece:
                raise UsageError(f"{option.flag} {raw}: empty value in the comma list")
            try:
                value = option.type(piece)
            except ValueError:
                raise UsageError(f"{option.flag} {piece}: expected {type_words(option.type)}") from None
            if option.choices and value not in option.choices:
                raise UsageError(f"{option.flag} {piece}: expected one of {', '.join(option.choices)}")
            values.append((key, value))
        choices.append(values)
    variants: list[ProbeVariant] = []
    for combo in itertools.product(*choices):
        variant = ProbeVariant(probe, dict(combo))
        if variant.variant_id not in {v.variant_id for v in variants}:
            variants.append(variant)
    return variants


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


def _settings(args: argparse.Namespace) -> Settings:
    from tailscope.analysis.settings import settings_from_dict  # the analysis model: not for --help

    values: dict[str, Any] = {}
    if getattr(args, "threshold", None):
        for d in args.threshold:
            if not 0 < d < 1:
                raise UsageError(f"--threshold {d}: expected a fraction between 0 and 1 (0.05 = 5%)")
        values["thresholds"] = tuple(args.threshold)
    for name in (
        "allowed_slow_rate", "confidence", "max_slow_rate", "max_q01_drop", "max_cv", "max_cv_ratio",
        "max_busy_share",
    ):  # fmt: skip
        value = getattr(args, name, None)
        if value == OFF:
            values[name] = None
        elif value is not None:
            values[name] = value
    try:
        return settings_from_dict(values)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _given_settings(args: argparse.Namespace) -> Settings | None:
    """Settings when any analysis option was given, else None (the command's own default applies)."""
    names = ("threshold", "allowed_slow_rate", "confidence", "max_slow_rate", "max_q01_drop", "max_cv",
             "max_cv_ratio", "max_busy_share")  # fmt: skip
    return _settings(args) if any(getattr(args, n, None) is not None for n in names) else None


def _verdict(args: argparse.Namespace) -> int:
    from tailscope.report.verdict_cli import cmd_verdict

    args.settings = _given_settings(args)
    return cmd_verdict(args)


def _print_outcome(outcome: RunOutcome) -> None:
    for line in outcome.notices:  # what the job environment (OMP_PROC_BIND, taskset, srun) did to the probes
        print(line, file=sys.stderr)
    if not outcome.committed:
        print(f"campaign: {outcome.campaign} (nothing stored)")
    else:
        print(f"campaign: {outcome.campaign}")
    print(f"trials stored: {outcome.stored} ({outcome.failed} not ok)")
    if outcome.stopped_reason:
        print(f"tailscope: {outcome.stopped_reason}", file=sys.stderr)
    if outcome.interrupted and outcome.committed:
        print(
            f"interrupted: finished trials are stored; continue with "
            f"`tailscope run --resume --campaign {outcome.campaign}`",
            file=sys.stderr,
        )
    elif outcome.interrupted:
        print("interrupted before any trial finished: nothing stored, no campaign created", file=sys.stderr)


def _outcome_code(outcome: RunOutcome) -> int:
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_VERDICT if outcome.failed or outcome.stopped_reason else EXIT_OK


# --- verbs ----------------------------------------------------------------------------------------
def cmd_probes(args: argparse.Namespace) -> int:
    from tailscope.probes.catalogue import PROBES

    for spec in PROBES.values():
        direction = "higher is better" if spec.higher_is_better else "lower is better"
        print(f"{spec.name:8s} {spec.summary} [{spec.metric}, {spec.unit}, {direction}]")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from tailscope.counters.monitor_cli import parse_interval

    if args.probe is None and not args.resume:
        raise UsageError("run: name a probe (tailscope probes lists them), or --resume --campaign DIR")
    variants: tuple[tuple[ProbeVariant, int], ...] = ()
    if args.probe is not None:
        if args.trials is None and not args.resume:
            raise UsageError("run: --trials N is required")
        if args.trials is not None and args.trials < 1:
            raise UsageError(f"--trials {args.trials}: expected at least 1")
        variants = tuple((v, args.trials or 0) for v in _probe_variants(args.probe, args))
        if args.scaling:
            from tailscope.probes.scaling import scaling_variants

            if len(variants) > 1:
                raise UsageError("--scaling: give each option one value (no comma lists) with --scaling")
            base = dict(variants[0][0].params)
            variants = tuple((v, args.trials or 0) for v in scaling_variants(args.probe, base))
    from tailscope.workflow import RunRequest, run_campaign  # heavy: only once the arguments are right

    outcome = run_campaign(
        RunRequest(
            variants=variants,
            campaign_dir=args.campaign,
            resume=args.resume,
            node=args.node,
            timeout_s=args.timeout,
            show_progress=not args.no_progress,
            label=args.probe or "run",
            monitor=args.monitor,
            monitor_interval_s=parse_interval(args.monitor_interval),
            monitor_events=args.monitor_events,
            evidence=not args.no_evidence,
        )
    )
    _print_outcome(outcome)
    if args.scaling and not outcome.interrupted:
        from tailscope.probes.scaling import render_scaling, scaling_table

        print("\n".join(render_scaling(scaling_table(outcome.campaign, args.probe))))
    return _outcome_code(outcome)


def cmd_import(args: argparse.Namespace) -> int:
    from tailscope.importers.cli import run_import

    return run_import(args)


def cmd_analyze(args: argparse.Namespace) -> int:
    from tailscope.workflow import analyze_campaign

    analysis = analyze_campaign(args.campaign, _settings(args), probe=args.probe, node=args.node)
    if args.json:
        from tailscope.jsonout import write_json

        write_json(analysis)  # the dataclasses themselves: what to_json() gives, without the copy
    else:
        from tailscope.report.terminal import render_answer, render_summary

        campaign = str(args.campaign.resolve())
        print("\n".join(render_answer(analysis, campaign_dir=campaign, verbose=args.verbose)))
        if args.verbose:
            print("\n".join(render_summary(analysis, verdict=False)))
    return STATE_EXIT[analysis.verdict.state]


def cmd_report(args: argparse.Namespace) -> int:
    from tailscope.workflow import analyze_and_report

    _, path = analyze_and_report(args.campaign, _settings(args), args.output)
    print(f"report: {path.resolve()}")
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from tailscope.compare import compare, render_comparison
    from tailscope.workflow import analyze_campaign

    analysis = analyze_campaign(args.campaign, _settings(args))
    comparisons = compare(analysis, args.by)
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


def cmd_check(args: argparse.Namespace) -> int:
    from tailscope.check import run_check
    from tailscope.report.terminal import (
        SCREEN_LINES,
        render_answer,
        render_summary,
        terminal_width,
        wrap_lines,
    )

    if args.trials is not None and args.trials < 1:
        raise UsageError(f"--trials {args.trials}: expected at least 1")
    result = run_check(
        quick=args.quick,
        trials=args.trials,
        campaign_dir=args.campaign,
        report_path=args.output,
        common=_probe_params(args),
        settings=_settings(args),
        show_progress=not args.no_progress,
        evidence=not args.no_evidence,
        deep=args.deep,
    )
    if result.analysis is None or result.report is None:
        _print_outcome(result.outcome)
        return _outcome_code(result.outcome)
    width = terminal_width()
    outcome = result.outcome
    print(f"campaign: {outcome.campaign.resolve()} ({outcome.stored} trials stored, {outcome.failed} not ok)")
    campaign = str(outcome.campaign.resolve())
    advice = list(result.pages_advice)
    if not args.verbose:  # the VM statement in one line; --verbose and the report have all of it
        advice = [
            "pages: virtual machine: guest-physical addresses say nothing about host cache sets; slow runs "
            "may come from other guests (--verbose for more)"
            if line.startswith("pages: virtual machine:")
            else line
            for line in advice
        ]
    after = wrap_lines(advice, width) + (wrap_lines(result.deep.lines(), width) if result.deep else [])
    room = SCREEN_LINES - 2 - len(after)  # the campaign and report lines
    answer = render_answer(
        result.analysis, width=width, campaign_dir=campaign, verbose=args.verbose, max_lines=room
    )
    print("\n".join(answer))
    if args.verbose:
        print("\n".join(render_summary(result.analysis, verdict=False)))
    if after:
        print("\n".join(after))
    print(f"report: {result.report.resolve()}")
    return STATE_EXIT[result.analysis.verdict.state]


def cmd_facts(args: argparse.Namespace) -> int:
    from tailscope.node.facts import NODE_COLUMNS, collect
    from tailscope.node.knobs import advice

    facts = collect()
    if args.json:
        from tailscope.jsonout import write_json

        write_json(facts, sort_keys=True)
        return EXIT_OK
    for key in ("node", *NODE_COLUMNS):  # the columns of the nodes table, in its order
        print(f"{key:16s} {facts.get(key)}")
    for line in advice(facts):
        print(f"advice: {line}")
    from tailscope.node.hugepages import advice_lines

    print("\n".join(advice_lines(facts)))
    return EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
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
        **({"bins_mibs": bins} if bins else {}),
    )
    outcome = run_trace(request)
    print(f"runtime: {outcome.runtime.family} ({outcome.runtime.path}); traced on {outcome.runs_on}")
    for line in outcome.skipped:
        print(f"not counted: {line}")
    if outcome.child_processes:
        print(
            f"note: the program started {outcome.child_processes} other OpenMP process(es); their raw traces "
            f"are in {outcome.trace_dir / 'ompt'}/child-PID/ (not analysed)"
        )
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
    "(--page 2m,1g) runs one variant per value, interleaved trial by trial"
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
}

if TYPE_CHECKING:
    _Sub: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def _build_probes(sub: _Sub, probe_for_run: str | None) -> None:
    p = sub.add_parser("probes", help=VERBS["probes"])
    p.set_defaults(func=cmd_probes)


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
        "--scaling",
        action="store_true",
        help="run on the first 1, 2, ..., all of the probe's CPUs (--trials each); min/median/max per count",
    )
    _add_probe_options(p, probe_spec(probe_for_run) if probe_for_run in PROBES else None, list_values=True)
    p.set_defaults(func=cmd_run)


def _build_import(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    from tailscope.importers.cli import COUNTER_FORMATS

    p = sub.add_parser("import", help=VERBS["import"])
    p.add_argument(
        "format",
        choices=["iterations", "hpl", *COUNTER_FORMATS],
        help="iterations: CSV node,run,iteration,value[,unit,...]; hpl: xhpl output or hpcc's hpccoutf.txt; "
        "perfcounts: the seed sampler's text; perf-csv: perf stat -I -x, output; "
        "likwid-csv: likwid-perfctr -O output",
    )
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
    p.set_defaults(func=cmd_import)


def _build_analyze(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    p = sub.add_parser("analyze", help=VERBS["analyze"])
    p.add_argument("campaign", type=Path, metavar="DIR")
    p.add_argument("--json", action="store_true", help="machine-readable output (every run)")
    p.add_argument("--verbose", action="store_true", help="also every (probe, node) row, check and note")
    p.add_argument("--probe", help="only this probe")
    p.add_argument("--node", help="only this node")
    _add_analysis_options(p)
    p.set_defaults(func=cmd_analyze)


def _build_report(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    p = sub.add_parser("report", help=VERBS["report"])
    p.add_argument("campaign", type=Path, metavar="DIR")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.html")
    _add_analysis_options(p)
    p.set_defaults(func=cmd_report)


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
    p.set_defaults(func=cmd_compare)


def _build_check(sub: _Sub, probe_for_run: str | None) -> None:
    from pathlib import Path

    from tailscope.options import TRIALS

    p = sub.add_parser("check", help=VERBS["check"])
    p.add_argument("--quick", action="store_true", help="about 30 s instead of 2-3 minutes")
    p.add_argument(
        "--deep",
        action="store_true",
        help="then follow each degraded probe with the micro-architecture probes that isolate its component",
    )
    p.add_argument("--trials", type=TRIALS, metavar="N", help="N trials of every probe")
    p.add_argument("--campaign", type=Path, metavar="DIR", help="campaign directory (default: a new one)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE.html", help="report (default DIR/report.html)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--verbose", action="store_true", help="also every (probe, node) row, check and note")
    p.add_argument("--cpus", dest="probe_cpus", metavar="LIST", help="CPUs for every probe (default: cores)")
    p.add_argument("--page", dest="probe_page", choices=["4k", "thp", "2m", "1g"], help="page policy")
    p.add_argument("--no-evidence", action="store_true", help=_NO_EVIDENCE_HELP)
    _add_analysis_options(p)
    p.set_defaults(func=cmd_check)


def _build_facts(sub: _Sub, probe_for_run: str | None) -> None:
    p = sub.add_parser("facts", help=VERBS["facts"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_facts)


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
    p.add_argument("--uncore", metavar="LIST", help="uncore counters read at parallel region edges, "
                   "';'-separated NAME:SPEC (e.g. upi_rx:uncore_upi/event=0x3,umask=0xf/)")
    p.add_argument("--numa", choices=["first", "every", "off"], default="first",
                   help="copy numa_maps after the first instance of each parallel region (default), each, "
                   "or never")
    p.add_argument("--bins", metavar="MIBS", help="bandwidth bins for OTF2 communicators, MiB/s edges "
                   "(default 100,200,1024,10240)")
    p.add_argument("--sysfs", type=Path, metavar="DIR", help="CPU/NUMA topology from this sysfs tree")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS]")
    p.set_defaults(func=cmd_trace)


def _build_addr(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.addr.cli import add_addr_parser

    add_addr_parser(sub)


def _build_campaign(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.campaign.cli import add_campaign_parser

    add_campaign_parser(sub)


def _build_verdict(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.report.verdict_cli import add_verdict_parser

    p = add_verdict_parser(sub)
    _add_analysis_options(p)
    p.set_defaults(func=_verdict)


def _build_export(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.importers.cli import add_export_parser

    add_export_parser(sub)


def _build_metrics(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.counters.metrics_cli import add_metrics_parser

    add_metrics_parser(sub)


def _build_monitor(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.counters.monitor_cli import add_monitor_parser

    add_monitor_parser(sub)


def _build_inject(sub: _Sub, probe_for_run: str | None) -> None:
    from tailscope.inject.cli import add_inject_parsers

    add_inject_parsers(sub)  # `inject` and `validate`


# verb -> the builder that registers it (one builder may register several verbs, in VERBS order)
_BUILDERS: dict[str, Callable[[Any, str | None], None]] = {
    "probes": _build_probes, "run": _build_run, "import": _build_import, "analyze": _build_analyze,
    "report": _build_report, "compare": _build_compare, "check": _build_check, "facts": _build_facts,
    "trace": _build_trace, "addr": _build_addr, "campaign": _build_campaign, "verdict": _build_verdict,
    "export": _build_export, "metrics": _build_metrics, "monitor": _build_monitor, "inject": _build_inject,
    "validate": _build_inject,
}  # fmt: skip


def build_parser(probe_for_run: str | None = None, *, verb: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Every verb's own parser is built (the whole command line, for tests and
    recipes) unless `verb` is given: then only that verb's, the others are names and one-line help (what
    `tailscope --help` and an unknown verb's error need), so a command builds and imports one verb."""
    parser = argparse.ArgumentParser(prog="tailscope", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="VERB", required=True)
    built: set[Callable[[Any, str | None], None]] = set()
    for name, help_text in VERBS.items():
        builder = _BUILDERS[name]
        if builder in built:
            continue
        if verb is None or builder is _BUILDERS.get(verb):
            builder(sub, probe_for_run)
            built.add(builder)
        else:
            sub.add_parser(name, help=help_text)
    return parser


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
    parser = build_parser(_probe_named(argv), verb=verb if verb in _BUILDERS else "")
    args = parser.parse_args(argv)
    if args.command == "run" and args.probe is not None:
        from tailscope.probes.catalogue import PROBES, UnknownProbeError

        if args.probe not in PROBES:
            print(f"tailscope: error: {UnknownProbeError(args.probe)}", file=sys.stderr)
            return EXIT_USAGE
    func: Callable[[argparse.Namespace], int] = args.func
    if _ONE_SHOT and args.command in _READ_ONLY_VERBS:
        _one_shot_gc()
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


# Verbs that only read a campaign and write their output before they return: their process may end without
# the interpreter's teardown (freeing pandas', pyarrow's and DuckDB's objects one by one: 0.1 s, a fifth
# of `analyze` on a small campaign). Verbs that run probes, hold claims or start processes end normally.
_READ_ONLY_VERBS = frozenset({"analyze", "report", "compare", "verdict"})


_ONE_SHOT = False  # set by `entry`: this process runs one command and ends (not `main` called in-process)


def _one_shot_gc() -> None:
    """No cyclic garbage collection in one read-only command (issue 11): its memory is freed at exit.

    Measured with gc.callbacks: `analyze --json` of 1,000 nodes spent 82-105 ms in 311 collections,
    `report` 149-166 ms, `analyze` of 5,000 nodes 578 ms in 861. Each older collection walks every object
    alive, the imported pandas/pyarrow/tailscope modules most of them, and what the analysis builds is
    acyclic (freed by reference counts). With a young-collection threshold of 50,000 instead of 700 and the
    modules frozen (gc.freeze), 44-48 ms were left, in two collections: one during the imports, one over the
    50,000 run verdicts. Disabled, peak memory is the same (/usr/bin/time: 277 MB, 310 MB and 835 MB for the
    three commands above). The modules are still frozen out of any explicit gc.collect() a library makes.
    Only for a process that ends after the command: `main` called in-process (tests) keeps Python's GC.
    """
    import gc

    gc.disable()
    import tailscope.workflow  # noqa: F401  (pandas, pyarrow, numpy and the analysis: what the verb loads)

    gc.freeze()


def entry() -> None:
    """The `tailscope` command (pyproject's script and `python -m tailscope`): `main`, then exit."""
    import os

    global _ONE_SHOT
    _ONE_SHOT = True

    # Arrow's buffers from the C library's malloc, not mimalloc (pyarrow's default), unless the user chose:
    # freed column buffers go back to the system, so `analyze` of 1,000 nodes peaks 20 MiB lower at the
    # same speed (issue 11). Read by pyarrow when it is first imported, which is after this.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    argv = sys.argv[1:]
    code = main(argv)
    if _verb_named(argv) in _READ_ONLY_VERBS:
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
