"""`tailscope campaign submit|status|collect|resume|srun`: cluster campaigns on Slurm (campaign/slurm.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tailscope.errors import InputError
from tailscope.printable import printable

EXIT_OK, EXIT_INCOMPLETE = 0, 1


class CampaignCliError(InputError):
    """Bad spec or a Slurm command that failed (exit 2)."""


def _spec(path: Path):  # type: ignore[no-untyped-def]
    from tailscope.campaign.spec import SpecError, load_spec  # tomllib and the analysis model: not for --help

    try:
        return load_spec(path)
    except SpecError as exc:
        raise CampaignCliError(str(exc)) from exc


def cmd_submit(args: argparse.Namespace) -> int:
    from tailscope.campaign import slurm

    try:
        campaign, job, script = slurm.submit(_spec(args.spec), dry_run=args.dry_run)
    except slurm.SlurmError as exc:
        raise CampaignCliError(str(exc)) from exc
    print(f"campaign: {campaign.root}")
    print(f"batch script: {script}")
    if job:
        print(f"submitted job {job}")
    return EXIT_OK


def cmd_srun(args: argparse.Namespace) -> int:
    from tailscope.campaign import slurm

    try:
        campaign, rc = slurm.srun_in_allocation(_spec(args.spec))
    except slurm.SlurmError as exc:
        raise CampaignCliError(str(exc)) from exc
    print(f"campaign: {campaign.root}")
    return EXIT_OK if rc == 0 else EXIT_INCOMPLETE


def cmd_status(args: argparse.Namespace) -> int:
    from tailscope.campaign import slurm

    campaign = slurm.open_campaign(args.campaign)
    jobs = campaign.manifest.cluster.jobs if campaign.manifest.cluster else []
    states = slurm.job_states([j.job_id for j in jobs if j.kind != "srun"])
    for job in jobs:
        state = states.get(job.job_id, "-")
        print(f"job {printable(job.job_id)} ({printable(job.kind)}, {printable(job.submitted)}): {state}")
    rows = slurm.progress(campaign)
    complete = True
    for p in rows:
        gap = sum(len(t) for t in p.missing.values())
        complete &= gap == 0
        extra = f", {p.attempts_failed} not ok" if p.attempts_failed else ""
        missing = "" if not gap else f", {gap} missing"
        print(f"{printable(p.node):20s} {p.done}/{p.planned} trials{extra}{missing}")
    return EXIT_OK if complete else EXIT_INCOMPLETE


def cmd_collect(args: argparse.Namespace) -> int:
    from tailscope.campaign import slurm

    campaign = slurm.open_campaign(args.campaign)
    result = slurm.collect(campaign, quarantine_damaged=not args.no_quarantine)
    print(f"campaign: {campaign.root}")
    print(f"shards: {result.shards} ({len(result.bad)} damaged)")
    for bad in result.bad:
        print(f"damaged shard: {bad.path}: {bad.reason}", file=sys.stderr)
    if result.quarantined:
        print(
            f"moved {len(result.quarantined)} shard(s) of damaged chunks to "
            f"{campaign.root / 'quarantine'}; `tailscope run --resume --campaign {campaign.root}` (or, for "
            f"a Slurm campaign, `tailscope campaign resume {campaign.root}`) redoes their trials",
            file=sys.stderr,
        )
    if result.bad and not result.quarantined:
        print("no summary while damaged shards are in place (collect without --no-quarantine moves them)")
        return EXIT_INCOMPLETE
    total = sum(p.planned for p in result.nodes)
    done = sum(p.done for p in result.nodes)
    print(f"nodes: {len(result.nodes)}; trials: {done}/{total} ok (counted once: {slurm.DEDUPE_RULE})")
    incomplete = [p for p in result.nodes if p.missing]
    for p in incomplete:
        print(f"incomplete: {printable(p.node)} {p.done}/{p.planned}")
    return EXIT_OK if not result.bad and not incomplete else EXIT_INCOMPLETE


def cmd_resume(args: argparse.Namespace) -> int:
    from tailscope.campaign import slurm
    from tailscope.campaign.spec import SpecError

    campaign = slurm.open_campaign(args.campaign)
    try:
        todo, job = slurm.resume(campaign, dry_run=args.dry_run)
    except (slurm.SlurmError, SpecError) as exc:
        raise CampaignCliError(str(exc)) from exc
    if not todo:
        print("nothing missing: every planned (node, trial) is stored")
        return EXIT_OK
    for p in todo:
        print(f"{p.node}: {sum(len(t) for t in p.missing.values())} trial(s) missing")
    if job:
        print(f"submitted job {job}")
    return EXIT_OK


def add_campaign_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("campaign", help="cluster campaigns on Slurm: submit, status, collect, resume, srun")
    verbs = p.add_subparsers(dest="campaign_verb", metavar="ACTION", required=True)

    q = verbs.add_parser("submit", help="write the sbatch script of SPEC.toml and submit it")
    q.add_argument("spec", type=Path, metavar="SPEC.toml")
    q.add_argument("--dry-run", action="store_true", help="write the campaign and script, do not submit")
    q.set_defaults(func=cmd_submit)

    q = verbs.add_parser("srun", help="run SPEC.toml's steps inside the current allocation (salloc)")
    q.add_argument("spec", type=Path, metavar="SPEC.toml")
    q.set_defaults(func=cmd_srun)

    q = verbs.add_parser("status", help="jobs and per-node progress (exit 1 while trials are missing)")
    q.add_argument("campaign", type=Path, metavar="DIR|SPEC.toml")
    q.set_defaults(func=cmd_status)

    q = verbs.add_parser("collect", help="validate every shard, move damaged chunks aside, summarise")
    q.add_argument("campaign", type=Path, metavar="DIR|SPEC.toml")
    q.add_argument("--no-quarantine", action="store_true", help="only name damaged shards")
    q.set_defaults(func=cmd_collect)

    q = verbs.add_parser("resume", help="submit a job for exactly the nodes and trials that are missing")
    q.add_argument("campaign", type=Path, metavar="DIR|SPEC.toml")
    q.add_argument("--dry-run", action="store_true", help="say what is missing, do not submit")
    q.set_defaults(func=cmd_resume)
