"""`tailscope check`: the default suite on this node, then analysis and report — the main job.

Trial counts are sized so the whole check takes about 2-3 minutes on a 2-core machine (`--quick`: ~30 s):
l2sum is cheap per trial and is where rare slow runs show (many trials); stream and dgemm cost ~1 s per trial;
fwq's samples show OS noise and its period. `--trials N` runs N trials of every probe instead.
The answer is the node verdict of the analysis (analysis/health.py): healthy (exit 0), degraded with its
causes (exit 1) or inconclusive, too busy or too noisy to judge (exit 3), with the limits it used.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailscope.analysis.model import CampaignAnalysis, Settings
from tailscope.campaign.runner import RunOutcome, default_campaign_dir
from tailscope.errors import STATE_EXIT, UsageError
from tailscope.node.facts import collect, node_name
from tailscope.probes.catalogue import ParamValue, ProbeVariant
from tailscope.verbs.workflow import RunRequest, analyze_campaign, run_campaign, write_report

if TYPE_CHECKING:
    from tailscope.campaign.stopping import StoppingRequest
    from tailscope.report.models import DeepResult

# (probe, trials in a full check, trials with --quick). A median CI needs n >= 6 (notes/statistics.md).
SUITE: tuple[tuple[str, int, int], ...] = (
    ("l2sum", 200, 40),
    ("stream", 20, 6),
    ("dgemm", 20, 6),
    ("fwq", 30, 8),
)


@dataclass(frozen=True)
class CheckResult:
    outcome: RunOutcome
    analysis: CampaignAnalysis | None
    report: Path | None
    pages_advice: tuple[str, ...] = ()  # THP/hugetlb status of this node and the 1 GiB sweep (node.hugepages)
    deep: DeepResult | None = None  # with --deep
    baselines: int = 0  # probes with a baseline (stopping when settled)


# Sizes for a node that runs under an emulator (qemu-user: node/arm.py), with --quick: the suite's
# defaults take minutes a trial there (dgemm at N = 2000 is 16 GFLOP of emulated instructions); the
# timings mean nothing anyway, so the suite only has to run through and write its JSON, store and report.
EMULATED_SIZES: dict[str, dict[str, ParamValue]] = {
    "l2sum": {"sums": 20},
    "stream": {"max_bytes": "8m", "reps": 3},
    "dgemm": {"n": 256, "calls": 3},
    "fwq": {"samples": 200},
}


def check_variants(
    *, quick: bool, trials: int | None, common: dict[str, ParamValue], emulated: bool = False
) -> tuple[tuple[ProbeVariant, int], ...]:
    """The suite's variants and trial counts; an emulated node with --quick gets EMULATED_SIZES under the
    options the command line gave."""
    sizes = EMULATED_SIZES if emulated and quick else {}
    return tuple(
        (
            ProbeVariant(probe, {**sizes.get(probe, {}), **common}),
            trials if trials is not None else (quick_n if quick else full_n),
        )
        for probe, full_n, quick_n in SUITE
    )


# Trials of an application definition that gives none (`check --app FILE`), full and --quick.
APP_TRIALS = (10, 3)


def app_variants(apps: tuple[Path, ...], *, quick: bool, trials: int | None) -> tuple[tuple[Any, int], ...]:
    """The site's applications (`--app FILE`, app/definition.py) beside the suite: --trials, else the file's
    trials, else APP_TRIALS."""
    if not apps:  # the definitions' reader (and its pattern and figure modules) only where there are some
        return ()
    from tailscope.app.definition import load_definition

    out = []
    for path in apps:
        variant, own = load_definition(path)
        out.append((variant, trials or own or APP_TRIALS[1 if quick else 0]))
    return tuple(out)


@dataclass(frozen=True)
class Stop:
    """How `check` stops its probes (issue 33): when settled (the default), within a budget, or not at all
    (`--fixed`, `--trials N`: the fixed trial counts). `history`: where the baselines come from."""

    settled: bool = True
    budget_s: float | None = None
    history: str | None = None


FIXED = Stop(settled=False)
BETWEEN_JOBS_BUDGET_S = 20.0  # `check --between-jobs`: a Prolog/Epilog must not hold a job for long


def run_check(
    *,
    quick: bool = False,
    trials: int | None = None,
    campaign_dir: Path | None = None,
    report_path: Path | None = None,
    common: dict[str, ParamValue] | None = None,
    settings: Settings | None = None,
    show_progress: bool = True,
    evidence: bool = True,
    deep: bool = False,
    apps: tuple[Path, ...] = (),
    stop: Stop = FIXED,
    report: bool = True,
) -> CheckResult:
    node = node_name()
    campaign_dir = campaign_dir or default_campaign_dir("check", node)
    settings = settings or Settings()
    from tailscope.node.arm import emulation

    emulated = emulation()
    if emulated and quick:
        print(f"check: {emulated}: probes sized for emulation (--quick): timings mean nothing here",
              file=sys.stderr)
    variants = check_variants(quick=quick, trials=trials, common=common or {}, emulated=bool(emulated))
    variants += app_variants(apps, quick=quick, trials=trials)
    stopping = stopping_request(stop, settings, node, [v.variant_id for v, _ in variants], campaign_dir)
    request = RunRequest(
        variants=variants,
        campaign_dir=campaign_dir,
        show_progress=show_progress,
        label="check",
        evidence=evidence,
        stopping=stopping,
    )
    outcome = run_campaign(request)
    baselines = sum(b is not None for b in stopping.baselines.values()) if stopping else 0
    if outcome.interrupted:
        return CheckResult(outcome, None, None)
    analysis = analyze_campaign(outcome.campaign, settings)
    deep_result = None
    if deep:  # step 2 of the top-down workflow: follow-up probes into the same campaign, then re-analyse
        from tailscope.verbs.deep import DeepInterrupted, run_deep

        try:
            deep_result = run_deep(outcome.campaign, analysis, show_progress=show_progress)
        except DeepInterrupted as exc:  # exit 130 as `run` would, no report judged from half a chain
            return CheckResult(exc.outcome, None, None)
        if deep_result.steps:
            analysis = analyze_campaign(outcome.campaign, settings or Settings())
    if not report and report_path is None:  # --between-jobs: no report unless asked
        return CheckResult(outcome, analysis, None, (), deep_result, baselines)
    from tailscope.analysis.causes.page_placement import variants_it_explains
    from tailscope.node.hugepages import advice_lines

    report_file = write_report(outcome.campaign, analysis, report_path or outcome.campaign / "report.html")
    sweep_dir = f"{Path(outcome.campaign).resolve()}-sweep-1g"
    # the sweep's commands only where page placement is a run's best explanation
    placement = bool(variants_it_explains(analysis.runs))
    advice = list(advice_lines(collect(), brief=True, sweep_dir=sweep_dir, sweep=placement))
    if os.geteuid() != 0:
        advice.append(
            "pages: no physical pages were recorded: /proc/self/pagemap gives frame numbers only to root "
            "(CAP_SYS_ADMIN), so `tailscope addr explain` cannot test page placement; rerun as root for that"
        )
    return CheckResult(outcome, analysis, report_file, tuple(advice), deep_result, baselines)


def stopping_request(
    stop: Stop, settings: Settings, node: str, variants: list[str], campaign_dir: Path
) -> StoppingRequest | None:
    """The stopping of a check: None for the fixed trial counts; else the settings, the budget, and each
    variant's baseline from the history (verbs/baseline.py), where one is given."""
    if not stop.settled:
        return None
    from tailscope.campaign.stopping import StoppingRequest
    from tailscope.verbs.baseline import baselines_from_history, warn

    baselines: dict[str, Any] = dict.fromkeys(variants)
    if stop.history:
        baselines, warnings = baselines_from_history(
            stop.history, node, variants, exclude_campaign=_campaign_id(campaign_dir)
        )
        warn(warnings)
    return StoppingRequest(settings, baselines, stop.budget_s)


def _campaign_id(campaign_dir: Path) -> str | None:
    """The id of an existing campaign `check --campaign DIR` adds to (its own entries are no baseline)."""
    from tailscope.store.campaign import MANIFEST, Campaign

    if not (Path(campaign_dir) / MANIFEST).is_file():
        return None
    try:
        return Campaign.open(campaign_dir).campaign_id
    except Exception:  # the run itself says what is wrong with the campaign
        return None


# the VM statement of the pages advice in one line on the terminal; --verbose and the report have all of it
_VM_LINE = (
    "pages: virtual machine: guest-physical addresses say nothing about host cache sets; slow runs "
    "may come from other guests (--verbose for more)"
)


def check_stop(args: argparse.Namespace) -> Stop:
    """How this check stops (see Stop), from its options; conflicting ones are one line and exit 2."""
    from tailscope.verbs.baseline import history_location

    fixed = bool(getattr(args, "fixed", False))
    budget = getattr(args, "budget", None)
    between = bool(getattr(args, "between_jobs", False))
    until = bool(getattr(args, "until_settled", False))
    if fixed and (budget is not None or between or until):
        given = "--budget" if budget is not None else "--between-jobs" if between else "--until-settled"
        raise UsageError(f"--fixed runs the fixed trial counts: it does not stop early, so not with {given}")
    history = history_location(args)
    if between:
        if not history:
            raise UsageError(
                "--between-jobs judges the node against its own history: give --history DIR|URL or set "
                "$TAILSCOPE_HISTORY"
            )
        return Stop(True, budget if budget is not None else BETWEEN_JOBS_BUDGET_S, history)
    if fixed or (args.trials is not None and not until and budget is None):
        return FIXED
    return Stop(True, budget, history)


def check(args: argparse.Namespace) -> int:
    """`tailscope check`: the suite, its analysis and report; the answer fitted to one screen (`--json`:
    the verdict, claims and stopping as one object; `--between-jobs`: NHC's convention, nothing when
    healthy)."""
    from tailscope.report.terminal import (
        SCREEN_LINES,
        render_answer,
        render_summary,
        terminal_width,
        wrap_lines,
    )
    from tailscope.verbs.run import outcome_code, print_outcome, probe_params
    from tailscope.verbs.settings import given_options, judging_settings

    if args.trials is not None and args.trials < 1:
        raise UsageError(f"--trials {args.trials}: expected at least 1")
    stop = check_stop(args)
    between = bool(getattr(args, "between_jobs", False))
    result = run_check(
        quick=args.quick,
        trials=args.trials,
        campaign_dir=args.campaign,
        report_path=args.output,
        common=probe_params(args),
        settings=judging_settings(None, given_options(args)),  # a new campaign of this node: no spec
        show_progress=not (args.no_progress or between or getattr(args, "json", False)),
        evidence=not args.no_evidence,
        deep=args.deep,
        apps=tuple(args.app or ()),
        stop=stop,
        report=not between,
    )
    if result.analysis is None or (result.report is None and not between):
        print_outcome(result.outcome)
        return outcome_code(result.outcome)
    from tailscope.verbs.history import append_quietly  # --history: a failed append only warns

    if stop.history and not getattr(args, "history", None):
        args.history = stop.history  # $TAILSCOPE_HISTORY: append_quietly reads it too; one location
    append_quietly(args, result.outcome.campaign, result.analysis.settings, result.analysis)
    code = STATE_EXIT[result.analysis.verdict.state]
    if getattr(args, "json", False):
        from tailscope.jsonout import write_json

        write_json(check_json(result))
        return code
    if between:
        return _between_jobs_answer(result)
    width = terminal_width()
    outcome = result.outcome
    print(f"campaign: {outcome.campaign.resolve()} ({outcome.stored} trials stored, {outcome.failed} not ok)")
    campaign = str(outcome.campaign.resolve())
    advice = list(result.pages_advice)
    if not args.verbose:
        advice = [_VM_LINE if line.startswith("pages: virtual machine:") else line for line in advice]
    after = wrap_lines(stopping_lines(result), width) + wrap_lines(advice, width)
    after += wrap_lines(result.deep.lines(), width) if result.deep else []
    room = SCREEN_LINES - 2 - len(after)  # the campaign and report lines
    answer = render_answer(
        result.analysis, width=width, campaign_dir=campaign, verbose=args.verbose, max_lines=room
    )
    print("\n".join(answer))
    if args.verbose:
        print("\n".join(render_summary(result.analysis, verdict=False)))
    if after:
        print("\n".join(after))
    assert result.report is not None
    print(f"report: {result.report.resolve()}")
    return code


def stopping_lines(result: CheckResult) -> list[str]:
    """How the check stopped and what it claims, in words: 'stopped after 23 s: every probe settled
    (l2sum 40, stream 4, dgemm 4, fwq 5 trials)', then 'claims (anytime-valid): ...'."""
    stop = result.outcome.stop
    analysis = result.analysis
    if stop is None or analysis is None:
        return []
    names = {v.variant: v.probe for v in analysis.variants}
    counts = ", ".join(f"{names.get(v, v)} {n}" for v, n in stop.trials.items() if n)
    budget = f" of the {stop.budget_s:g} s budget" if stop.budget_s is not None else ""
    lines = [f"stopped after {stop.seconds:.0f} s{budget}: {stop.reason or 'settled'}; trials: {counts}"]
    if analysis.claims:
        lines.append("claims (anytime-valid): " + "; ".join(c.text for c in analysis.claims))
    elif not result.baselines:
        lines.append("claims: none; no probe has a baseline: give --history (the node's own, or its fleet's)")
    else:
        lines.append("claims: none: too few trials")
    return lines


def check_json(result: CheckResult) -> dict[str, Any]:
    """`check --json`: the node verdicts, the claims (`claims: [{probe, kind, bound, confidence, ...}]`)
    and how the check stopped."""
    import dataclasses

    analysis = result.analysis
    assert analysis is not None
    stop = result.outcome.stop
    return {
        "campaign": str(result.outcome.campaign.resolve()),
        "report": str(result.report.resolve()) if result.report else None,
        "verdict": analysis.verdict.state,
        "exit": STATE_EXIT[analysis.verdict.state],
        "nodes": [
            {"node": n.node, "verdict": n.verdict, "reasons": list(n.reasons), "limits": list(n.limits)}
            for n in analysis.nodes
        ],
        "claims": [dataclasses.asdict(c) for c in analysis.claims],
        "stopping": dataclasses.asdict(stop) if stop is not None else None,
        "trials": {"stored": result.outcome.stored, "failed": result.outcome.failed},
    }


def _between_jobs_answer(result: CheckResult) -> int:
    """NHC's convention, as `verdict --nhc` (report/operations.py): nothing and 0 when healthy; the line
    NHC's die() logs and 1 when degraded; the reason on stderr and 3 when inconclusive."""
    from tailscope.printable import printable
    from tailscope.report.operations import nhc_lines, node_verdicts

    analysis = result.analysis
    assert analysis is not None
    verdicts = node_verdicts(analysis)
    for v in verdicts.values():
        for line in nhc_lines(v):
            print(line)
        if v.verdict == "inconclusive":
            print(f"tailscope: {printable(v.node)}: inconclusive: {printable(v.reason)}", file=sys.stderr)
    return STATE_EXIT[analysis.verdict.state]
