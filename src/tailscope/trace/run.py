"""`tailscope trace -- PROGRAM ARGS`: run an unmodified OpenMP program under the OMPT tool, store its regions,
placement and traffic in a campaign, and write the OTF2 archive and Chrome trace beside the shards.

The pipeline, one step per line in `run_trace`: resolve the program, decide how to run it under OMPT
(runtime.prepare), run it, read the tool's files, pair regions, placement and traffic, store, read back
from the store, export. Both exports are made from the rows read back, so they show what the campaign holds.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from tailscope import __version__
from tailscope.launch import LaunchError, launch, temporary_directory
from tailscope.native import native_library
from tailscope.store.campaign import Campaign, new_task_id, safe_name
from tailscope.store.load import load_into
from tailscope.store.runs_row import run_row, runs_table
from tailscope.store.schema import TABLES
from tailscope.trace import placement, runtime, uncore
from tailscope.trace.chrome import write_chrome
from tailscope.trace.errors import TraceInputError
from tailscope.trace.otf2_export import write_otf2
from tailscope.trace.records import ToolOutput, lost_processes, pair_processes, read_processes
from tailscope.trace.timeline import DEFAULT_BINS_MIBS
from tailscope.trace.topology import read_topology

NUMA_MODES = ("first", "every", "off")


@dataclass(frozen=True)
class TraceRequest:
    command: list[str]
    campaign: Path | None = None
    node: str | None = None
    events: tuple[str, ...] = ()
    uncore_events: tuple[str, ...] = ()
    numa: str = "first"
    bins_mibs: tuple[float, ...] = DEFAULT_BINS_MIBS
    sysfs: Path | None = None  # topology from another sysfs tree (tests: a 2-socket fixture)
    extra_env: dict[str, str] = field(default_factory=dict)


@dataclass
class TraceOutcome:
    campaign: Path
    run_id: str
    trace_dir: Path
    runtime: runtime.Runtime
    runs_on: str
    exit_code: int
    regions: pd.DataFrame
    traffic: pd.DataFrame
    placement: pd.DataFrame
    finding: placement.Finding
    unmatched: int
    skipped: list[str]
    otf2: Path
    chrome: Path
    child_processes: int = 0  # processes the program forked or started: their regions are in `regions`
    lost_processes: int = 0  # such processes that ended without writing their trace (killed, _exit)


def _run_id(campaign: str, node: str, variant: str, trial: int) -> str:
    """Like the runner's: a hash of (campaign, node, variant, trial)."""
    return hashlib.sha256(f"{campaign}|{node}|{variant}|{trial}".encode()).hexdigest()[:24]


def run_trace(req: TraceRequest) -> TraceOutcome:
    if not req.command:
        raise TraceInputError("trace: name the program to run after --, e.g. tailscope trace -- ./app args")
    if req.numa not in NUMA_MODES:
        raise TraceInputError(f"--numa {req.numa}: expected one of {', '.join(NUMA_MODES)}")
    from tailscope.campaign.runner import default_campaign_dir
    from tailscope.node.facts import node_name

    program = runtime.resolve_program(req.command[0])
    node = req.node or node_name()
    root = Path(req.campaign or default_campaign_dir("trace", node))
    variant = f"trace:{program.name}-" + hashlib.sha256(json.dumps(req.command[1:]).encode()).hexdigest()[:8]
    # removed by the launcher's watchdog too, if tailscope is killed while the program runs
    with temporary_directory(prefix="tailscope-trace-") as tmp:
        work = Path(tmp)
        raw = work / "ompt"
        plan = runtime.prepare(program, work)
        tool = native_library("tailscope_ompt")
        started = dt.datetime.now(dt.UTC)
        rc, wall = _run(program, req, plan, tool, raw)
        outs = read_processes(raw)  # the program, then the processes it forked or started
        out = outs[0]
        topo = read_topology(req.sysfs)
        pairing = pair_processes(outs, topo)
        if pairing.regions.empty:
            raise TraceInputError(
                f"{program}: the OMPT tool saw no OpenMP region (runtime {out.meta.get('runtime', '?')}); "
                "does the program open a parallel region?"
            )
        per_process = {o.pid: placement.read_snapshots(o.directory, o.numa) for o in outs}
        snaps = sorted((s for own in per_process.values() for s in own), key=lambda s: s.snapshot)
        traffic = pd.concat(
            [
                placement.process_traffic(pairing.regions, per_process, topo),
                uncore.link_traffic(out.uncore, topo.sockets, out.tsc_hz),
            ],
            ignore_index=True,
        )
        with load_into(root, f"trace {program.name}", create=True) as load:
            trial = load.claim_next_trials(node, variant, 1)[0]
            run_id = _run_id(load.campaign_id, node, variant, trial)
            tables = {
                "regions": pairing.regions.assign(run_id=run_id),
                "placement": placement.placement_rows(snaps, topo).assign(run_id=run_id),
                "traffic": traffic.assign(run_id=run_id),
            }
            for name, df in tables.items():
                load.write(name, _to_arrow(df, name), node=node)
            row = _run_row(
                run_id,
                load.campaign_id,
                node,
                program,
                variant,
                trial,
                req,
                out,
                pairing.unmatched,
                plan,
                started,
                wall,
                rc,
                int(pairing.regions["thread"].nunique()),
            )
            load.write("runs", runs_table([row]), node=node)
        children = len(outs) - 1  # processes it forked or started, traced beside it (column `process`)
        lost = lost_processes(raw)
        trace_dir = root / "traces" / f"{safe_name(program.name)}-{run_id[:12]}"
        trace_dir.mkdir(parents=True)
        shutil.move(str(raw), str(trace_dir / "ompt"))

    stored = load_trace(Campaign.open(root), run_id)
    regions, traffic_s, placement_s = stored["regions"], stored["traffic"], stored["placement"]
    otf2_path = write_otf2(trace_dir / "otf2", regions, traffic_s, topo.sockets, bins_mibs=req.bins_mibs)
    chrome_path = write_chrome(trace_dir / "trace.json", regions, traffic_s, bins_mibs=req.bins_mibs)
    return TraceOutcome(
        campaign=root,
        run_id=run_id,
        trace_dir=trace_dir,
        runtime=plan.runtime,
        runs_on=plan.runs_on,
        exit_code=rc,
        regions=regions,
        traffic=traffic_s,
        placement=placement_s,
        finding=placement.finding(traffic_s, topo),
        unmatched=pairing.unmatched,
        skipped=out.skipped,
        otf2=otf2_path,
        chrome=chrome_path,
        child_processes=children,
        lost_processes=lost,
    )


def _run(program: Path, req: TraceRequest, plan: runtime.Plan, tool: Path, raw: Path) -> tuple[int, float]:
    """Run the program under the tool; (exit status, wall seconds)."""
    env = dict(os.environ)
    env.update(plan.env)
    env.update(
        {
            "OMP_TOOL": "enabled",
            "OMP_TOOL_LIBRARIES": str(tool),
            "TAILSCOPE_OMPT_OUT": str(raw),
            "TAILSCOPE_OMPT_NUMA": req.numa,
            "TAILSCOPE_OMPT_EVENTS": ";".join(req.events),
            "TAILSCOPE_OMPT_UNCORE": ";".join(req.uncore_events),
        }
    )
    env.update(req.extra_env)
    # one launcher (tailscope.launch): the program and everything it starts die with the trace, SIGKILL too
    try:
        done = launch([str(program), *req.command[1:]], env=env, capture=False)
    except LaunchError as exc:
        raise TraceInputError(str(exc)) from exc
    return done.returncode, done.wall_s


def _run_row(
    run_id: str,
    campaign_id: str,
    node: str,
    program: Path,
    variant: str,
    trial: int,
    req: TraceRequest,
    out: ToolOutput,
    unmatched: int,
    plan: runtime.Plan,
    started: dt.datetime,
    wall: float,
    rc: int,
    threads: int,
) -> dict[str, Any]:
    """The trace's `runs` row (its commit record): probe trace:<program>, source ompt, metric wall."""
    return run_row(
        run_id=run_id,
        campaign=campaign_id,
        node=node,
        probe=f"trace:{program.name}",
        variant=variant,
        params={
            "command": req.command,
            "events": list(req.events),
            "uncore": list(req.uncore_events),
            "numa": req.numa,
        },
        trial=trial,
        started_at=started,
        wall_s=wall,
        threads=threads,
        tsc_start=int(out.meta["start_tsc"]),
        tsc_end=int(out.meta["end_tsc"]),
        tsc_hz=out.tsc_hz,
        mono_start_ns=int(out.meta["start_mono_ns"]),
        mono_end_ns=int(out.meta["end_mono_ns"]),
        realtime_start_ns=int(out.meta["start_real_ns"]),
        seconds=wall,
        metric="wall",
        value=wall,
        unit="s",
        higher_is_better=False,
        status="ok" if rc == 0 else "failed",
        error=None if rc == 0 else f"{program.name} exited with status {rc}",
        source="ompt",
        task=new_task_id(),
        config={
            "runtime": plan.runtime.path,
            "runs_on": plan.runs_on,
            "omp_runtime_version": out.meta.get("runtime"),
            "tailscope": __version__,
            "skipped": out.skipped,
            "unmatched": unmatched,
        },
    )


def _to_arrow(df: pd.DataFrame, table: str) -> pa.Table:
    spec = TABLES[table]
    cols = {}
    for c in spec.columns:
        if c.name in df.columns:
            values = df[c.name].astype(object).where(df[c.name].notna(), None).tolist()
            cols[c.name] = pa.array(values, type=c.type)
    return pa.Table.from_pydict(cols)


def load_trace(campaign: Campaign, run_id: str) -> dict[str, pd.DataFrame]:
    """The trace tables of one run, through the store's one read path."""
    from tailscope.store.read import read_table

    out = {}
    for name in ("regions", "placement", "traffic"):
        df = read_table(campaign, name).to_pandas()
        out[name] = df[df["run_id"] == run_id].reset_index(drop=True)
    return out
