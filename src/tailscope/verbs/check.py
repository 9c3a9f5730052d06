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
from typing import Any

from tailscope.analysis.causes.page_placement import variants_it_explains
from tailscope.analysis.model import CampaignAnalysis, Settings
from tailscope.campaign.runner import RunOutcome, default_campaign_dir
from tailscope.errors import STATE_EXIT, UsageError
from tailscope.node.facts import collect, node_name
from tailscope.node.hugepages import advice_lines
from tailscope.probes.catalogue import ParamValue, ProbeVariant
from tailscope.report.models import DeepResult
from tailscope.verbs.workflow import RunRequest, analyze_campaign, run_campaign, write_report

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
    from tailscope.app.definition import load_definition

    out = []
    for path in apps:
        variant, own = load_definition(path)
        out.append((variant, trials or own or APP_TRIALS[1 if quick else 0]))
    return tuple(out)


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
) -> CheckResult:
    node = node_name()
    campaign_dir = campaign_dir or default_campaign_dir("check", node)
    from tailscope.node.arm import emulation

    emulated = emulation()
    if emulated and quick:
        print(f"check: {emulated}: probes sized for emulation (--quick): timings mean nothing here",
              file=sys.stderr)
    request = RunRequest(
        variants=check_variants(quick=quick, trials=trials, common=common or {}, emulated=bool(emulated))
        + app_variants(apps, quick=quick, trials=trials),
        campaign_dir=campaign_dir,
        show_progress=show_progress,
        label="check",
        evidence=evidence,
    )
    outcome = run_campaign(request)
    if outcome.interrupted:
        return CheckResult(outcome, None, None)
    analysis = analyze_campaign(outcome.campaign, settings or Settings())
    deep_result = None
    if deep:  # step 2 of the top-down workflow: follow-up probes into the same campaign, then re-analyse
        from tailscope.verbs.deep import DeepInterrupted, run_deep

        try:
            deep_result = run_deep(outcome.campaign, analysis, show_progress=show_progress)
        except DeepInterrupted as exc:  # exit 130 as `run` would, no report judged from half a chain
            return CheckResult(exc.outcome, None, None)
        if deep_result.steps:
            analysis = analyze_campaign(outcome.campaign, settings or Settings())
    report = write_report(outcome.campaign, analysis, report_path or outcome.campaign / "report.html")
    sweep_dir = f"{Path(outcome.campaign).resolve()}-sweep-1g"
    # the sweep's commands only where page placement is a run's best explanation
    placement = bool(variants_it_explains(analysis.runs))
    advice = list(advice_lines(collect(), brief=True, sweep_dir=sweep_dir, sweep=placement))
    if os.geteuid() != 0:
        advice.append(
            "pages: no physical pages were recorded: /proc/self/pagemap gives frame numbers only to root "
            "(CAP_SYS_ADMIN), so `tailscope addr explain` cannot test page placement; rerun as root for that"
        )
    return CheckResult(outcome, analysis, report, tuple(advice), deep_result)


# the VM statement of the pages advice in one line on the terminal; --verbose and the report have all of it
_VM_LINE = (
    "pages: virtual machine: guest-physical addresses say nothing about host cache sets; slow runs "
    "may come from other guests (--verbose for more)"
)


def check(args: argparse.Namespace) -> int:
    """`tailscope check`: the suite, its analysis and report; the answer fitted to one screen."""
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
    result = run_check(
        quick=args.quick,
        trials=args.trials,
        campaign_dir=args.campaign,
        report_path=args.output,
        common=probe_params(args),
        settings=judging_settings(None, given_options(args)),  # a new campaign of this node: no spec
        show_progress=not args.no_progress,
        evidence=not args.no_evidence,
        deep=args.deep,
        apps=tuple(args.app or ()),
    )
    if result.analysis is None or result.report is None:
        print_outcome(result.outcome)
        return outcome_code(result.outcome)
    from tailscope.verbs.history import append_quietly  # --history: a failed append only warns

    append_quietly(args, result.outcome.campaign, result.analysis.settings, result.analysis)
    width = terminal_width()
    outcome = result.outcome
    print(f"campaign: {outcome.campaign.resolve()} ({outcome.stored} trials stored, {outcome.failed} not ok)")
    campaign = str(outcome.campaign.resolve())
    advice = list(result.pages_advice)
    if not args.verbose:
        advice = [_VM_LINE if line.startswith("pages: virtual machine:") else line for line in advice]
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
