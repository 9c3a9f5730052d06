"""`tailscope validate`: the application side of inject/validate.py -- run the validate campaign through the
ordinary runner (workflow.run_campaign, its `before_trial` hook driving inject/validate.py's Scheduler), then
score tailscope's answers (inject/score.py) against the recorded schedule. `analysis_for_scoring` is the one
place the analysis is made for scoring.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import statistics
import sys
from pathlib import Path
from typing import Any

from tailscope.inject.control import signals_deferred
from tailscope.inject.kinds import InjectInputError
from tailscope.inject.score import score
from tailscope.inject.validate import (
    SCHEDULE_FILE,
    Scheduler,
    ValidateRequest,
    choose_kinds,
    make_schedule,
    outside_shares,
    plan_cpus,
    recover_schedule,
    render_scores,
    store_injections,
    store_scores,
)
from tailscope.store.campaign import MANIFEST, Campaign, new_task_id

EXIT_OK, EXIT_INTERRUPTED = 0, 130


def analysis_for_scoring(campaign_dir: Path, probe: str | None = None) -> dict[str, Any]:
    """THE integration point: the `analyze --json` object scoring reads (runs with `slow`, `perf_ratio` and,
    once the cause catalogue is wired into analyze, `causes`; nodes with `verdict`)."""
    from tailscope.analysis.model import Settings
    from tailscope.verbs.workflow import analyze_campaign

    return analyze_campaign(campaign_dir, Settings(), probe=probe).to_json()


def _key_values(given: list[str]) -> dict[str, str]:
    """`--param K=V` options as a dict; one without '=' or without a key is refused with the option."""
    out = {}
    for text in given:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise InjectInputError(f"--param {text!r}: expected K=V, a probe option and its value (page=thp)")
        out[key.strip()] = value
    return out


def _param(value: str) -> Any:
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def _probe_and_injectors(request: ValidateRequest) -> tuple[Any, Any, list[Any], dict[str, str]]:
    """The probe's variant (on the CPUs the plan leaves it), where each injector runs, the injectors that can
    act here and why the others cannot; an injector named with --injectors that cannot act is exit 2."""
    from tailscope.campaign.runner import preflight
    from tailscope.inject.control import online_cpus
    from tailscope.probes.catalogue import ProbeVariant

    kinds, skipped = choose_kinds(request.injectors)
    if not kinds:
        raise InjectInputError("validate: no injector can act on this node")
    params = {k.replace("-", "_"): _param(str(v)) for k, v in request.probe_params.items()}
    variant = ProbeVariant(request.probe, params)
    config = preflight(variant)
    cpus = [int(c) for c in config.get("cpus") or [0]]
    plan, kinds, more_skipped = plan_cpus(kinds, cpus, online_cpus(), pinned="cpus" in params)
    if request.injectors and more_skipped:  # asked for by name: say it cannot act, once, with exit 2
        name, why = next(iter(more_skipped.items()))
        raise InjectInputError(f"--injectors {name}: cannot act here: {why}")
    skipped.update(more_skipped)
    if not kinds:
        raise InjectInputError("validate: no injector can act on this node")
    if plan.probe != cpus:
        variant = ProbeVariant(request.probe, {**params, "cpus": ",".join(map(str, plan.probe))})
        preflight(variant)
    return variant, plan, kinds, skipped


def run_validate(request: ValidateRequest) -> dict[str, Any]:
    from tailscope.campaign.runner import default_campaign_dir
    from tailscope.node.facts import node_name
    from tailscope.verbs.workflow import RunRequest, run_campaign

    node = node_name()
    variant, plan, kinds, skipped = _probe_and_injectors(request)
    seed = request.seed if request.seed is not None else secrets.randbits(31)
    blocks = make_schedule(request.trials, request.block, request.inject_fraction, kinds, random.Random(seed))
    campaign_dir = request.campaign_dir or default_campaign_dir("validate", node)
    task = f"validate-{new_task_id()}"
    existed = campaign_dir.exists()
    scheduler = Scheduler(
        blocks,
        plan,
        request.reserve,
        schedule_file=campaign_dir / SCHEDULE_FILE,
        schedule_meta={"node": node, "task": task, "seed": seed},
    )
    try:
        outcome = run_campaign(
            RunRequest(
                variants=((variant, request.trials),),
                campaign_dir=campaign_dir,
                node=node,
                show_progress=request.show_progress,
                label="validate",
                before_trial=scheduler.before_trial,
                flush_trials=request.block,  # each block stored before the next injection starts
            )
        )
    finally:
        # a second Ctrl-C or SIGTERM must not cut the cleanup (cgroup, sysctl) or the schedule's record short
        with signals_deferred():
            scheduler.stop()
            if (campaign_dir / MANIFEST).is_file():  # nothing is stored when no trial finished
                store_injections(campaign_dir, scheduler.records, node=node, task=task, seed=seed)
            (campaign_dir / SCHEDULE_FILE).unlink(missing_ok=True)
            if not existed:  # no trial stored: leave nothing behind, as the runner does
                with contextlib.suppress(OSError):
                    campaign_dir.rmdir()
    result: dict[str, Any] = {
        "campaign": str(campaign_dir),
        "seed": seed,
        "injectors": [k.name for k in kinds],
        "skipped": skipped,
        "cpus": {"probe": plan.probe, "neighbours": plan.neighbours, "note": plan.note},
        "trials": outcome.stored,
        "failed": outcome.failed,
        "interrupted": outcome.interrupted,
        "schedule": [{k: v for k, v in r.items() if k != "details"} for r in scheduler.records],
    }
    if outcome.interrupted or not (campaign_dir / MANIFEST).is_file():
        return result
    analysis = analysis_for_scoring(campaign_dir, probe=request.probe)
    injections = [{**r, "node": node} for r in scheduler.records]
    scores = score(analysis, injections, threshold=request.threshold, outside=outside_shares(campaign_dir))
    store_scores(campaign_dir, scores, node=node, task=task)
    result["scores"] = scores
    return result


BASELINE_TRIALS = 10  # --until-settled: the clean round whose median is every later round's baseline
SETTLED_FILE = "validate-settled.json"


def run_validate_settled(request: ValidateRequest, rounds: int, cap: int) -> dict[str, Any]:
    """`validate --until-settled`: the stopping of `check` (campaign/stopping.py) against injected faults.

    A clean baseline round of BASELINE_TRIALS trials gives the probe's level on this node. Then `rounds`
    rounds, each its own campaign DIR/round-NNN stopped when settled (at most `cap` trials) with that level as
    its baseline: a share `inject_fraction` of them under one injection (drawn as `validate` draws its
    blocks: every cell of every kind's graded intensities alike, injected rounds between clean ones), the
    rest clean. Each round's verdict is its analysis' (the anytime-valid rules): a clean round judged
    degraded is a false alarm (the stated rate: 1 - confidence for the level, alpha for the slow-run rate);
    an injected one judged degraded, a detection. Scores: false alarms of the clean rounds with their
    Clopper-Pearson interval, detections per kind and intensity, trials to the verdict."""
    from tailscope.analysis.binomial import clopper_pearson
    from tailscope.analysis.model import Settings
    from tailscope.analysis.sequential import Baseline
    from tailscope.campaign.runner import default_campaign_dir
    from tailscope.campaign.stopping import StoppingRequest
    from tailscope.inject.control import Injection
    from tailscope.node.facts import node_name
    from tailscope.store.campaign import write_atomic_bytes
    from tailscope.store.read import connect
    from tailscope.verbs.workflow import RunRequest, analyze_campaign, run_campaign

    node = node_name()
    variant, plan, kinds, skipped = _probe_and_injectors(request)
    seed = request.seed if request.seed is not None else secrets.randbits(31)
    blocks = make_schedule(rounds, 1, request.inject_fraction, kinds, random.Random(seed))
    root = request.campaign_dir or default_campaign_dir("validate-settled", node)
    settings = Settings()
    base = run_campaign(
        RunRequest(
            variants=((variant, BASELINE_TRIALS),),
            campaign_dir=root / "baseline",
            node=node,
            show_progress=request.show_progress,
            label="validate",
        )
    )
    result: dict[str, Any] = {
        "campaign": str(root),
        "seed": seed,
        "settled": True,
        "cap": cap,
        "injectors": [k.name for k in kinds],
        "skipped": skipped,
        "rounds": [],
    }
    if base.interrupted or not base.committed:
        result["interrupted"] = True
        return result
    with connect(Campaign.open(root / "baseline")) as con:
        runs = con.runs()
    ok = runs.loc[(runs["status"] == "ok") & (runs["value"] > 0), "value"]
    if ok.empty:
        raise InjectInputError(f"validate: the baseline round of {request.probe} gave no ok trial")
    baseline = Baseline(float(ok.median()), "history", 1, len(ok))
    stopping = StoppingRequest(settings, {variant.variant_id: baseline})
    for block in blocks:
        where = root / f"round-{block.index:03d}"
        inj = None
        if block.kind is not None and block.intensity is not None:
            inj = Injection(
                block.kind,
                block.intensity,
                cpus=plan.neighbours if block.kind.placement == "neighbour" else plan.probe,
                pids=[os.getpid()] if block.kind.name == "cpu-quota" else [],
                reserve=request.reserve,
                home_cpus=(plan.neighbours or None) if block.kind.placement == "beside" else None,
            )
        try:
            if inj is not None:
                inj.start()
            outcome = run_campaign(
                RunRequest(
                    variants=((variant, cap),),
                    campaign_dir=where,
                    node=node,
                    show_progress=False,
                    label="validate",
                    stopping=stopping,
                )
            )
        finally:
            if inj is not None:
                with signals_deferred():
                    inj.stop()
        if outcome.interrupted:
            result["interrupted"] = True
            break
        analysis = analyze_campaign(where, settings)
        verdict = analysis.nodes[0].verdict if analysis.nodes else "inconclusive"
        result["rounds"].append(
            {
                "round": block.index,
                "kind": block.kind.name if block.kind else None,
                "intensity": block.intensity,
                "verdict": verdict,
                "trials": outcome.stored,
                "reason": outcome.stop.reason if outcome.stop else "",
                "claims": [c.text for c in analysis.claims],
            }
        )
    clean = [r for r in result["rounds"] if r["kind"] is None]
    false = sum(r["verdict"] == "degraded" for r in clean)
    low, high = clopper_pearson(false, len(clean), settings.confidence) if clean else (0.0, 1.0)
    cells: dict[str, list[dict[str, Any]]] = {}
    for r in result["rounds"]:
        if r["kind"] is not None:
            cells.setdefault(f"{r['kind']} {r['intensity']:g}", []).append(r)
    result["baseline"] = {"value": baseline.value, "trials": baseline.trials}
    result["scores"] = {
        "clean": {
            "rounds": len(clean),
            "degraded": false,
            "rate_low": low,
            "rate_high": high,
            "stated": 1.0 - settings.confidence,
            "mean_trials": statistics.fmean(r["trials"] for r in clean) if clean else None,
        },
        "injected": {
            cell: {
                "rounds": len(rs),
                "degraded": sum(r["verdict"] == "degraded" for r in rs),
                "inconclusive": sum(r["verdict"] == "inconclusive" for r in rs),
                "healthy": sum(r["verdict"] == "healthy" for r in rs),  # missed
                "mean_trials": statistics.fmean(r["trials"] for r in rs),
            }
            for cell, rs in sorted(cells.items())
        },
    }
    write_atomic_bytes(root / SETTLED_FILE, (json.dumps(result, indent=1, default=str) + "\n").encode())
    return result


def render_settled(result: dict[str, Any]) -> list[str]:
    """`validate --until-settled` in words."""
    from tailscope.analysis.wording import pct

    lines = [
        f"campaign: {result['campaign']} (seed {result['seed']}; rounds stopped when settled, at most "
        f"{result['cap']} trials)"
    ]
    if "scores" not in result:
        return [*lines, "interrupted before the rounds could be scored"]
    b, clean = result["baseline"], result["scores"]["clean"]
    lines.append(f"baseline: {b['value']:.4g} (median of {b['trials']} clean trials)")
    if clean["rounds"]:
        lines.append(
            f"clean rounds: {clean['degraded']} of {clean['rounds']} judged degraded ("
            f"{pct(clean['rate_low'])[:-1]}-{pct(clean['rate_high'])} at 95%; stated at most "
            f"{pct(clean['stated'])}), {clean['mean_trials']:.1f} trials to a verdict on average"
        )
    for cell, s in result["scores"]["injected"].items():
        lines.append(
            f"{cell}: of {s['rounds']} rounds {s['degraded']} judged degraded, {s['inconclusive']} "
            f"inconclusive (busy: a co-runner on the probe CPUs is), {s['healthy']} healthy (missed); "
            f"{s['mean_trials']:.1f} trials on average"
        )
    if result.get("interrupted"):
        lines.append("interrupted: the rounds so far are scored")
    return lines


def _injections(campaign: Campaign) -> Any:
    from tailscope.store.read import connect

    con = connect(campaign)
    try:
        return con.injections()
    finally:
        con.close()


def rescore(campaign_dir: Path, *, threshold: float = 0.10) -> dict[str, Any]:
    """Score a stored validate campaign again (after tailscope's analysis changed), storing the new scores."""
    from tailscope.store.read import connect

    saved = campaign_dir / SCHEDULE_FILE
    if not (campaign_dir / MANIFEST).is_file() and saved.is_file():
        raise InjectInputError(
            f"{campaign_dir}: validate was stopped before it stored a trial (it stores each block of trials "
            "when the block ends): nothing to score; run validate again"
        )
    campaign = Campaign.open(campaign_dir)
    frame = _injections(campaign)
    if frame.empty and saved.is_file():  # a validate that was killed: its schedule beside the store
        recover_schedule(campaign.root, saved)
        frame = _injections(campaign)
    if frame.empty:
        raise InjectInputError(f"{campaign_dir}: no injections stored (not a `tailscope validate` campaign)")
    con = connect(campaign)
    try:
        probes = con.probe_names()
    finally:
        con.close()
    injections = frame.to_dict("records")
    analysis = analysis_for_scoring(campaign.root, probe=probes[0] if len(probes) == 1 else None)
    scores = score(analysis, injections, threshold=threshold, outside=outside_shares(campaign.root))
    node = str(injections[0]["node"])
    store_scores(campaign.root, scores, node=node, task=f"validate-{new_task_id()}")
    return {
        "campaign": str(campaign.root),
        "seed": int(injections[0]["seed"]),
        "trials": len(analysis.get("runs") or []),
        "rescored": True,
        "schedule": [{k: v for k, v in r.items() if k != "seed"} for r in injections],
        "scores": scores,
    }


def validate(args: argparse.Namespace) -> int:
    """The `validate` verb: a new validate campaign and its scores, or `--rescore` of a stored one."""
    if args.rescore:
        if args.campaign is None:
            raise InjectInputError("--rescore needs --campaign DIR (a campaign `validate` wrote)")
        result = rescore(args.campaign)
        if args.json:
            json.dump(result, sys.stdout, indent=1, default=str)
            sys.stdout.write("\n")
        else:
            print("\n".join(render_scores(result)))
        return EXIT_OK
    from tailscope.node.journal import changing_the_node

    for p in args.param or []:
        if "=" not in p or not p.split("=", 1)[0]:
            raise InjectInputError(f"--param {p!r}: expected K=V (a probe option and its value)")
    settled = bool(getattr(args, "until_settled", False))
    if not settled:
        if args.trials < 4:
            raise InjectInputError(f"--trials {args.trials}: expected at least 4")
        if args.block < 1:
            raise InjectInputError(f"--block {args.block}: expected at least 1")
    if not 0 < args.inject_fraction < 1:
        raise InjectInputError(f"--inject-fraction {args.inject_fraction}: expected a fraction in (0, 1)")
    request = ValidateRequest(
        injectors=tuple(args.injectors.split(",")) if args.injectors else None,
        trials=args.trials,
        campaign_dir=args.campaign,
        seed=args.seed,
        probe=args.probe,
        probe_params=_key_values(args.param or []),
        block=args.block,
        inject_fraction=args.inject_fraction,
        reserve=args.reserve,
        show_progress=not args.no_progress and not args.json,
    )
    # the node lock for the whole campaign (a clean block is clean: no other injector starts between blocks);
    # what a killed inject or validate left is put back first
    with changing_the_node(args.wait):
        # --until-settled: rounds stopped when settled
        result = run_validate_settled(request, args.rounds, args.cap) if settled else run_validate(request)
    if args.json:
        json.dump(result, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        print("\n".join(render_settled(result) if settled else render_scores(result)))
    return EXIT_INTERRUPTED if result.get("interrupted") else EXIT_OK
