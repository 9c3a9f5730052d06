"""The verbs as library calls: each CLI verb calls exactly one function here.

Data flows one way: probes -> campaign runner -> store -> analysis -> report. This module only wires them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tailscope.analysis.model import CampaignAnalysis, Settings
from tailscope.analysis.summary import analyze
from tailscope.campaign.runner import (
    LocalRunner,
    ProbeUsageError,
    RunOutcome,
    default_campaign_dir,
    pending_trials,
    preflight,
)
from tailscope.node.facts import node_name
from tailscope.probes.catalogue import ProbeVariant
from tailscope.report.html import render_html, select_timeline_runs
from tailscope.store.campaign import Campaign, StoreError, write_atomic_bytes
from tailscope.store.views import connect


@dataclass(frozen=True)
class RunRequest:
    variants: tuple[tuple[ProbeVariant, int], ...]  # (variant, trials wanted for this request)
    campaign_dir: Path | None = None
    resume: bool = False
    node: str | None = None
    timeout_s: float | None = None
    show_progress: bool = True
    label: str = "run"


def run_campaign(request: RunRequest) -> RunOutcome:
    """Check every variant's options with the probe, plan the trials, run what is missing."""
    node = request.node or node_name()
    for variant, _ in request.variants:
        preflight(variant)  # raises ProbeUsageError before anything is created or stored
    if request.campaign_dir is None:
        if request.resume:
            raise StoreError("--resume needs --campaign DIR (the campaign to continue)")
        campaign = Campaign.create(default_campaign_dir(request.label, node))
    elif request.resume:
        campaign = Campaign.open(request.campaign_dir)
    else:
        campaign = Campaign.open_or_create(request.campaign_dir)
    variants = []
    for variant, trials in request.variants:
        planned = {p["variant"]: int(p["trials"]) for p in campaign.manifest.get("plans", [])}
        have = planned.get(variant.variant_id, 0)
        # Without --resume a repeated `run` adds trials after the planned ones; with it the plan is completed.
        wanted = max(have, trials) if request.resume else have + trials
        campaign.add_plan(variant.to_plan(wanted))
        variants.append(variant)
    if request.resume and not request.variants:
        variants = [
            ProbeVariant.from_plan(p) for p in campaign.manifest.get("plans", []) if not p.get("imported")
        ]
        for variant in variants:
            preflight(variant)
    trials = pending_trials(campaign, variants, node)
    runner = LocalRunner(
        campaign, node=node, timeout_s=request.timeout_s, show_progress=request.show_progress
    )
    return runner.run(trials)


def load_frames(
    campaign: Campaign, *, probe: str | None = None, node: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs (every status) and the iterations of the selected runs."""
    con = connect(campaign)
    try:
        where, params = [], []
        if probe:
            where.append("probe = ?")
            params.append(probe)
        if node:
            where.append("node = ?")
            params.append(node)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        runs = con.execute(f"SELECT * FROM runs {clause} ORDER BY variant, node, trial", params).df()
        iterations = con.execute(
            f"""SELECT run_id, iteration, thread, kernel, cpu, warmup, seconds, value
                FROM iterations WHERE run_id IN (SELECT run_id FROM runs {clause})""",
            params,
        ).df()
    finally:
        con.close()
    return runs, iterations


def analyze_campaign(
    campaign_dir: Path, settings: Settings, *, probe: str | None = None, node: str | None = None
) -> CampaignAnalysis:
    campaign = Campaign.open(campaign_dir)
    runs, iterations = load_frames(campaign, probe=probe, node=node)
    if runs.empty:
        raise StoreError(f"{campaign_dir}: no runs stored" + (f" for probe {probe}" if probe else ""))
    return analyze(runs, iterations, settings, campaign.campaign_id)


def write_report(campaign_dir: Path, analysis: CampaignAnalysis, output: Path) -> Path:
    campaign = Campaign.open(campaign_dir)
    wanted = sorted({run_id for ids in select_timeline_runs(analysis).values() for run_id in ids})
    con = connect(campaign)
    try:
        nodes = con.execute("SELECT * FROM nodes ORDER BY node").df()
        iterations = con.execute(
            "SELECT * FROM iterations WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [wanted]
        ).df()
    finally:
        con.close()
    html = render_html(
        analysis,
        manifest=campaign.manifest,
        nodes=nodes,
        iterations=iterations,
        generated_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    write_atomic_bytes(output, html.encode())
    return output


__all__ = [
    "ProbeUsageError",
    "RunRequest",
    "analyze_campaign",
    "load_frames",
    "run_campaign",
    "write_report",
]
