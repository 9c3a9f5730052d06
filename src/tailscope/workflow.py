"""The verbs as library calls: each CLI verb calls exactly one function here.

Data flows one way: probes -> campaign runner -> store -> analysis -> report. This module only wires them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from tailscope.analysis.cluster import cluster_settings_of
from tailscope.analysis.model import CampaignAnalysis, Settings
from tailscope.analysis.summary import analyze
from tailscope.campaign.runner import (
    LocalRunner,
    ProbeUsageError,
    RunOutcome,
    Trial,
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
    monitor: bool = False  # run tsmon beside the trials and cut each trial's deltas from its samples
    monitor_interval_s: float = 1.0
    monitor_events: str | None = None  # the monitor's event set (default: the probe's --events, or software)


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
        iterations = con.execute(
            f"""SELECT run_id, iteration, thread, kernel, cpu, warmup, seconds, value
                FROM iterations WHERE run_id IN (SELECT run_id FROM runs {clause})""",
            params,
        ).df()
    finally:
        if own:
            con.close()
    return runs, iterations


def analyze_campaign(
    campaign_dir: Path, settings: Settings, *, probe: str | None = None, node: str | None = None
) -> CampaignAnalysis:
    campaign = Campaign.open(campaign_dir)
    con = connect(campaign)  # one connection: every shard footer is read once
    try:
        runs, iterations = load_frames(campaign, probe=probe, node=node, con=con)
        if runs.empty:
            raise StoreError(f"{campaign_dir}: no runs stored" + (f" for probe {probe}" if probe else ""))
        cluster = cluster_settings_of(campaign.manifest)
        analysis = analyze(runs, iterations, settings, campaign.campaign_id, cluster)
        return with_attribution(con, analysis, runs)
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


def write_report(campaign_dir: Path, analysis: CampaignAnalysis, output: Path) -> Path:
    """The HTML report at `output`, and beside it `<stem>-runs.csv` and `<stem>-nodes.csv` (every row of
    the tables the report shortens to the slowest 20)."""
    campaign = Campaign.open(campaign_dir)
    wanted = sorted({run_id for ids in select_timeline_runs(analysis).values() for run_id in ids})
    con = connect(campaign)
    try:
        nodes = con.execute("SELECT * FROM nodes ORDER BY node").df()
        iterations = con.execute(
            "SELECT * FROM iterations WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [wanted]
        ).df()
        samples = _timeline_samples(con)
        injections = _optional_table(con, "injections")
        perf = con.execute("SELECT count(*) FROM counters_all WHERE source = 'perf'").fetchone()
    finally:
        con.close()
    output.parent.mkdir(parents=True, exist_ok=True)
    csv_files = {
        "runs": output.with_name(f"{output.stem}-runs.csv"),
        "nodes": output.with_name(f"{output.stem}-nodes.csv"),
    }
    write_atomic_bytes(csv_files["runs"], runs_csv(analysis).encode())
    write_atomic_bytes(csv_files["nodes"], nodes_csv(analysis).encode())
    html = render_html(
        analysis,
        manifest=campaign.manifest,
        nodes=nodes,
        iterations=iterations,
        generated_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        samples=samples,
        injections=injections,
        csv_files={k: p.name for k, p in csv_files.items()},
        campaign_dir=str(Path(campaign_dir).resolve()),
        hardware_counters=bool(perf and perf[0]),
    )
    write_atomic_bytes(output, html.encode())
    return output


def _optional_table(con: duckdb.DuckDBPyConnection, name: str) -> pd.DataFrame | None:
    """A table or view another part of tailscope may add (injections of `validate`); None when absent."""
    try:
        return con.execute(f"SELECT * FROM {name}").df()
    except duckdb.Error:
        return None


def runs_csv(analysis: CampaignAnalysis) -> str:
    """Every analysed run, one row each (the report lists only the slowest)."""
    from tailscope.probes.catalogue import variant_name
    from tailscope.report.answer import run_cause

    names = {v.variant: variant_name(v.probe, dict(v.params)) for v in analysis.variants}
    frame = pd.DataFrame(
        [
            {
                "run_id": r.run_id,
                "node": r.node,
                "probe": r.probe,
                "variant": names.get(r.variant, r.variant),
                "variant_id": r.variant,
                "trial": r.trial,
                "started_at": r.started_at,
                "value": r.value,
                "unit": r.unit,
                "perf_ratio": r.perf_ratio,
                "scaled_value": r.scaled_value,
                "slow": r.slow,
                "kind": r.kind,
                "cause": run_cause(r),
            }
            for r in sorted(analysis.runs, key=lambda r: (r.perf_ratio, r.node, r.trial))
        ]
    )
    return frame.to_csv(index=False)


def nodes_csv(analysis: CampaignAnalysis) -> str:
    """Every (variant, node) ensemble: runs, median with its interval, CV, slow counts, vs fleet."""
    from tailscope.probes.catalogue import variant_name

    names = {v.variant: variant_name(v.probe, dict(v.params)) for v in analysis.variants}
    rows = []
    for g in sorted(analysis.groups, key=lambda g: (g.variant, g.node_ratio)):
        row = {
            "variant": names.get(g.variant, g.variant),
            "variant_id": g.variant,
            "node": g.node,
            "runs": g.n,
            "failed": g.n_failed,
            "median": g.median,
            "median_low": g.median_ci.lower,
            "median_high": g.median_ci.upper,
            "cv": g.cv,
            "min": g.minimum,
            "max": g.maximum,
            "systematic": g.n_systematic,
            "transient": g.n_transient,
            "node_ratio": g.node_ratio,
            "node_outlier": g.node_outlier,
        }
        for t in g.tails:
            row[f"slow_{t.threshold:g}"] = t.k
            row[f"slow_{t.threshold:g}_p"] = t.p_value
        rows.append(row)
    return pd.DataFrame(rows).to_csv(index=False)


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
    "ProbeUsageError",
    "RunRequest",
    "analyze_campaign",
    "load_frames",
    "run_campaign",
    "write_report",
]
