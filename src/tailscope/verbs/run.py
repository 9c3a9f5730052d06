"""`tailscope run` and `tailscope probes`: the variants a command line asks for, the trials run through the
workflow, and what is printed about them."""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import TYPE_CHECKING, Any

from tailscope.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_VERDICT, UsageError
from tailscope.options import type_words

if TYPE_CHECKING:
    from tailscope.campaign.runner import RunOutcome
    from tailscope.probes.catalogue import ProbeVariant

# Options whose own syntax has commas: never split into variants.
_COMMA_SYNTAX = {"cpus", "events"}


def probe_params(args: argparse.Namespace) -> dict[str, Any]:
    """The probe options given on the command line (the parser keeps them as `probe_<name>`)."""
    params = {}
    for key, value in vars(args).items():
        if key.startswith("probe_") and value not in (None, False):
            params[key.removeprefix("probe_")] = value
    return params


def probe_variants(probe: str, args: argparse.Namespace) -> list[ProbeVariant]:
    """The variants a `run` command line asks for: one per combination of comma-listed option values
    (`--page 2m,1g --offset 0,64m` is four), in the order given."""
    from tailscope.probes.catalogue import ProbeVariant, probe_spec

    spec = probe_spec(probe)
    by_dest = {o.dest: o for o in spec.all_options}
    choices: list[list[tuple[str, Any]]] = []
    for key, raw in probe_params(args).items():
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


def print_outcome(outcome: RunOutcome) -> None:
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


def outcome_code(outcome: RunOutcome) -> int:
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_VERDICT if outcome.failed or outcome.stopped_reason else EXIT_OK


def list_probes(args: argparse.Namespace) -> int:
    """`tailscope probes`: one line per probe."""
    from tailscope.probes.catalogue import PROBES

    for spec in PROBES.values():
        direction = "higher is better" if spec.higher_is_better else "lower is better"
        print(f"{spec.name:8s} {spec.summary} [{spec.metric}, {spec.unit}, {direction}]")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """`tailscope run`: the variants' trials into a campaign (or the missing ones with --resume)."""
    from tailscope.counters.monitor_cli import parse_interval

    if args.probe is None and not args.resume:
        raise UsageError("run: name a probe (tailscope probes lists them), or --resume --campaign DIR")
    variants: tuple[tuple[ProbeVariant, int], ...] = ()
    if args.probe is not None:
        if args.trials is None and not args.resume:
            raise UsageError("run: --trials N is required")
        if args.trials is not None and args.trials < 1:
            raise UsageError(f"--trials {args.trials}: expected at least 1")
        variants = tuple((v, args.trials or 0) for v in probe_variants(args.probe, args))
        if args.scaling:
            from tailscope.verbs.scaling import scaling_variants

            if len(variants) > 1:
                raise UsageError("--scaling: give each option one value (no comma lists) with --scaling")
            base = dict(variants[0][0].params)
            variants = tuple((v, args.trials or 0) for v in scaling_variants(args.probe, base))
    until = bool(getattr(args, "until_settled", False))
    if until and (args.resume or args.scaling):
        raise UsageError(f"--until-settled: not with {'--resume' if args.resume else '--scaling'}")
    from tailscope.verbs.workflow import RunRequest, run_campaign  # heavy: only once the arguments are right

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
            stopping=_until_settled(args, [v.variant_id for v, _ in variants]) if until else None,
        )
    )
    print_outcome(outcome)
    if outcome.stop is not None:
        trials = ", ".join(f"{n} of {outcome.stop.caps[v]}" for v, n in outcome.stop.trials.items())
        print(f"stopped after {outcome.stop.seconds:.0f} s: {outcome.stop.reason} ({trials} trials); "
              f"`tailscope analyze {outcome.campaign}` judges it as it stopped")  # fmt: skip
    if args.probe == "arith" and outcome.committed and not outcome.interrupted:  # the seed's table shape
        from tailscope.analysis.arith_table import campaign_tables

        print("\n".join(campaign_tables(outcome.campaign, [v.variant_id for v, _ in variants])))
    if args.scaling and not outcome.interrupted:
        from tailscope.verbs.scaling import render_scaling, scaling_table

        print("\n".join(render_scaling(scaling_table(outcome.campaign, args.probe))))
    return outcome_code(outcome)


def _until_settled(args: argparse.Namespace, variants: list[str]) -> Any:
    """`run --until-settled`: stop when settled, against the node's history where it has one."""
    from tailscope.campaign.stopping import StoppingRequest
    from tailscope.node.facts import node_name
    from tailscope.verbs.baseline import baselines_from_history, history_location, warn
    from tailscope.verbs.settings import judging_settings

    settings = judging_settings(None)
    baselines: dict[str, Any] = dict.fromkeys(variants)
    location = history_location(args)
    if location:
        baselines, warnings = baselines_from_history(location, args.node or node_name(), variants)
        warn(warnings)
    return StoppingRequest(settings, baselines)


def run_command(args: argparse.Namespace) -> int:
    """`run [OPTIONS] -- CMD` (parsed by app/cli.py): the application's variants as a campaign."""
    from tailscope.app.cli import variants_of
    from tailscope.app.errors import AppInputError
    from tailscope.app.variant import PREFIX
    from tailscope.counters.monitor_cli import parse_interval

    variants = variants_of(args)
    if args.trials is None and not args.resume:
        raise AppInputError("run: --trials N is required")
    for v in variants:
        v.preflight()  # before anything is created: the program, every pattern, the reference
    from tailscope.verbs.workflow import RunRequest, run_campaign  # heavy: once the arguments are right

    outcome = run_campaign(
        RunRequest(
            variants=tuple((v, args.trials or 0) for v in variants),  # type: ignore[misc]
            campaign_dir=args.campaign,
            resume=args.resume,
            node=args.node,
            timeout_s=args.timeout,
            show_progress=not args.no_progress,
            label=f"app-{variants[0].probe.removeprefix(PREFIX)}",
            monitor=args.monitor,
            monitor_interval_s=parse_interval(args.monitor_interval),
            monitor_events=args.monitor_events,
            evidence=not args.no_evidence,
        )
    )
    print_outcome(outcome)
    return outcome_code(outcome)
