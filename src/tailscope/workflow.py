"""The verbs as library calls: each CLI verb calls exactly one function here.

Data flows one way: probes -> campaign runner -> store -> analysis -> report. This module only wires them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pandas as pd

from tailscope.analysis.cluster import cluster_settings_of
from tailscope.analysis.model import CampaignAnalysis, Settings
from tailscope.analysis.summary import analyze
from tailscope.node.facts import node_name
from tailscope.probes.catalogue import ProbeVariant
from tailscope.store.campaign import Campaign, StoreError, write_atomic_bytes
from tailscope.store.views import connect

# The runner (probes, counters) and the HTML report are imported by the verbs that use them: `analyze`
# loads neither.
if TYPE_CHECKING:
    from tailscope.campaign.runner import LocalRunner, RunOutcome, Trial


@dataclass(frozen=True)
class RunRequest:
    variants: tuple[tuple[ProbeVariant, int], ...]  # (variant, trials wanted for this request)
    campaign_dir: Path | None = None
    resume: bool = False
    node: str | None = None
    timeout_s: float | None = None
    show_progress: bool = True
    label: str = "run"
    monitor: bool = False  # run tsmon beside the trials and cut each trial's deltas from its samples
    monitor_interval_s: float = 1.0
    monitor_events: str | None = None  # the monitor's event set (default: the probe's --events, or software)


def run_campaign(request: RunRequest) -> RunOutcome:
    """Check every variant's options with the probe, plan the trials, run what is missing."""
    from tailscope.campaign.runner import LocalRunner, default_campaign_dir, pending_trials, preflight

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
    if not request.monitor:
        return runner.run(trials)
    return _run_with_monitor(request, runner, trials, variants)


def _run_with_monitor(
    request: RunRequest, runner: LocalRunner, trials: list[Trial], variants: list[ProbeVariant]
) -> RunOutcome:
    """The trials with tsmon beside them; then its samples are stored and cut per trial (source monitor)."""
    from tailscope.counters import monitor

    events = request.monitor_events or next(
        (str(v.params["events"]) for v in variants if v.params.get("events")), "software"
    )
    campaign, node, task = runner.campaign, runner.node, runner.task
    path = monitor.monitor_file_for(campaign, node, task)
    with monitor.running_monitor(path, interval_s=request.monitor_interval_s, events=events):
        outcome = runner.run(trials)
    mf = monitor.read(path)
    monitor.store_samples(mf, campaign, node=node, task=f"{task}-samples")
    monitor.store_cut(mf, campaign, node=node, task=task)
    return outcome


def load_frames(
    campaign: Campaign,
    *,
    probe: str | None = None,
    node: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs (every status) and the iterations of the selected runs (on `con` when given)."""
    own = con is None
    if con is None:
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
        # The iterations view holds the rows of `runs` already: filter again only for --probe/--node.
        iterations = con.execute(
            f"""SELECT run_id, iteration, thread, kernel, cpu, warmup, seconds, value FROM iterations
                {f"WHERE run_id IN (SELECT run_id FROM runs {clause})" if where else ""}""",
            params,
        ).df()
    finally:
        if own:
            con.close()
    return runs, iterations


def analyze_campaign(
    campaign_dir: Path,
    settings: Settings,
    *,
    probe: str | None = None,
    node: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> CampaignAnalysis:
    """The campaign's analysis (on `con` when given: a connection reads every shard once)."""
    campaign = Campaign.open(campaign_dir)
    own = con is None
    if con is None:
        con = connect(campaign)  # one connection: every shard footer is read once
    try:
        runs, iterations = load_frames(campaign, probe=probe, node=node, con=con)
        if runs.empty:
            raise StoreError(f"{campaign_dir}: no runs stored" + (f" for probe {probe}" if probe else ""))
        cluster = cluster_settings_of(campaign.manifest)
        analysis = analyze(runs, iterations, settings, campaign.campaign_id, cluster)
        return with_attribution(con, analysis, runs)
    finally:
        if own:
            con.close()


def analyze_and_report(campaign_dir: Path, settings: Settings, output: Path) -> tuple[CampaignAnalysis, Path]:
    """`report`: the analysis and its HTML from one store connection (connecting reads every shard)."""
    con = connect(Campaign.open(campaign_dir))
    try:
        analysis = analyze_campaign(campaign_dir, settings, con=con)
        return analysis, write_report(campaign_dir, analysis, output, con=con)
    finally:
        con.close()


def with_attribution(
    con: duckdb.DuckDBPyConnection, analysis: CampaignAnalysis, runs: pd.DataFrame
) -> CampaignAnalysis:
    """Add the counter attribution (analysis/attribution.py) when the analysed runs have counters."""
    if not con.execute("SELECT count(*) FROM counters_all").fetchone()[0]:  # type: ignore[index]
        return analysis
    from tailscope.analysis.attribution import METHOD, attribute

    counters = con.execute(
        "SELECT run_id, source, pmu, unit, event, value FROM counters "
        "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))",
        [[r.run_id for r in analysis.runs]],
    ).df()
    if counters.empty:
        return analysis
    section = attribute(analysis.runs, counters, runs, robust_cut=analysis.settings.robust_cut)
    if section is None:
        return analysis
    return dataclasses.replace(
        analysis, attribution=section, methods={**analysis.methods, "attribution": METHOD}
    )


def write_report(
    campaign_dir: Path,
    analysis: CampaignAnalysis,
    output: Path,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> Path:
    """The HTML report of `analysis` (reading nodes, timelines and samples on `con` when given)."""
    from tailscope.report.html import render_html, select_timeline_runs

    campaign = Campaign.open(campaign_dir)
    wanted = sorted({run_id for ids in select_timeline_runs(analysis).values() for run_id in ids})
    own = con is None
    if con is None:
        con = connect(campaign)
    try:
        nodes = con.execute("SELECT * FROM nodes ORDER BY node").df()
        iterations = con.execute(
            "SELECT * FROM iterations WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [wanted]
        ).df()
        samples = _timeline_samples(con)
    finally:
        if own:
            con.close()
    html = render_html(
        analysis,
        manifest=campaign.manifest,
        nodes=nodes,
        iterations=iterations,
        generated_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        samples=samples,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    write_atomic_bytes(output, html.encode())
    return output


MAX_TIMELINE_ROWS = 2_000_000  # monitor samples summed over units; more than this and no timelines are drawn


def _timeline_samples(con: duckdb.DuckDBPyConnection) -> pd.DataFrame | None:
    """Monitor samples summed over units, for the report's counter timelines (None when too many)."""
    query = (
        "SELECT node, source, pmu, event, sample, min(t_ns) AS t_ns, sum(value) AS value FROM samples "
        "GROUP BY node, source, pmu, event, sample"
    )
    rows = con.execute(f"SELECT count(*) FROM ({query})").fetchone()
    if not rows or rows[0] == 0 or rows[0] > MAX_TIMELINE_ROWS:
        return None
    return con.execute(query).df()


__all__ = [
    "RunRequest",
    "analyze_and_report",
    "analyze_campaign",
    "load_frames",
    "run_campaign",
    "write_report",
]
