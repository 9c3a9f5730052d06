"""Campaigns on Slurm: the batch script, submission, per-node progress, shard collection and resume.

One job allocates the nodes exclusively; the batch script starts one `srun` step per node (all at once, or one
after the other with `steps = "serial"`), each bound to the node's CPUs and running

    python -m tailscope run --resume --campaign DIR --node $SLURMD_NODENAME

i.e. the same LocalRunner as on one node: each node writes its own shards into DIR on the shared file
system (store/campaign.py: one writer id per process, atomic renames, no locks). The plans (trials per node
of each probe variant) are written into DIR/campaign.json once, at submission, so every step only runs
the trials its node is missing: that is also what makes `resume` exact.

Resume after a node failure, a time limit or a preemption: for every node of the campaign, the trials the
plan wants minus the trials stored with status ok are missing; a new job is submitted for just the nodes
that miss some, and their steps run just those trials. A trial is never counted twice: the store's `runs`
view keeps one row per (node, variant, trial) — the first ok attempt (by start time), else the first
attempt — so even a trial written by two overlapping attempts is counted once (store/views.py), and
`resume` refuses to submit while a job of the campaign is still queued or running.

Files the campaign gets under DIR/slurm/: the spec it was submitted with (spec.toml), the batch script
(job.sh), the per-node step script (step.sh), the nodes of each job (job-<id>.nodes, written by the job) and
the job's output (job-<id>.out, step-<id>.<step>-<node>.out).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tailscope import hostlist
from tailscope.campaign.spec import CampaignSpec, load_spec
from tailscope.errors import InputError
from tailscope.printable import printable
from tailscope.store.campaign import MANIFEST, Campaign, StoreError, write_atomic_bytes
from tailscope.store.manifest import ClusterJob, ClusterRecord, Manifest
from tailscope.store.read import DamagedShard, connect, quarantine, validate_shards
from tailscope.tomlfile import MAX_BYTES as TOML_BYTES
from tailscope.userfile import UnreadableFile
from tailscope.userfile import read_bytes as read_user_file

SLURM_DIR = "slurm"
QUARANTINE = "quarantine"
DEDUPE_RULE = (
    "one row per (node, variant, trial): the first ok attempt by start time, else the first attempt "
    "(store/views.py)"
)
_ACTIVE = {
    "PENDING",
    "RUNNING",
    "CONFIGURING",
    "COMPLETING",
    "REQUEUED",
    "RESIZING",
    "SUSPENDED",
    "STAGE_OUT",
}


class SlurmError(InputError):
    """sbatch/srun/squeue failed or is missing, or the campaign cannot be submitted as asked."""


# --- scripts ----------------------------------------------------------------------------------------------
def step_script(spec: CampaignSpec, root: Path) -> str:
    """The per-node step: the node's missing trials through the local runner, beside its co-runner if any."""
    run = [sys.executable, "-m", "tailscope", "run", "--resume", "--campaign", str(root)]
    if spec.trial_timeout:
        run += ["--timeout", f"{spec.trial_timeout:g}"]
    run_text = " ".join(shlex.quote(a) for a in run) + ' --node "$node"'
    lines = [
        "#!/bin/bash",
        "# One node's step of a tailscope campaign: runs the trials this node is missing (generated).",
        'node="${SLURMD_NODENAME:-$(hostname -s)}"',
        'corunner=""',
    ]
    if spec.corunners:
        lines.append('case "$node" in')
        for node, command in sorted(spec.corunners.items()):
            lines.append(f"  {shlex.quote(node)}) corunner={shlex.quote(command)} ;;")
        lines.append("esac")
    lines += [
        'if [ -z "$corunner" ]; then',
        f"  exec {run_text}",
        "fi",
        "# A co-runner shares this node's CPUs while the trials run (in its own process group).",
        'setsid bash -c "exec $corunner" & corunner_pid=$!',
        "trap 'kill -TERM -- -$corunner_pid 2>/dev/null' EXIT",
        f"{run_text} &",
        "runner=$!",
        "# scancel signals every process of the step: outlive the runner while it stores its trials.",
        "trap : TERM INT",
        'while kill -0 "$runner" 2>/dev/null; do wait "$runner"; done',
        'wait "$runner"',
    ]
    return "\n".join(lines) + "\n"


# sbatch reads an #SBATCH line as words split at white space; a word may be in double quotes, inside which a
# backslash escapes the next character (Slurm's src/sbatch/opt.c, _get_argument). A line break cannot be
# written at all: it would end the directive and start a line of the script.
_DIRECTIVE_PLAIN = re.compile(r'[^\s"\\]*')


def directive(option: str, value: str) -> str:
    """`--option=value` for an #SBATCH line, the value double-quoted when it holds white space, a quote or a
    backslash (a campaign directory '/scratch/my runs'); a value with a control character is refused."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise SlurmError(
            f"{option} {printable(value)}: a control character cannot be written in an #SBATCH line"
        )
    if _DIRECTIVE_PLAIN.fullmatch(value):
        return f"{option}={value}"
    return f'{option}="' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def batch_script(spec: CampaignSpec, root: Path, *, nodelist: str | None, node_count: int | None) -> str:
    """The sbatch script: exclusive nodes, one srun step per node bound to its CPUs."""
    slurm_dir = root / SLURM_DIR
    directives = [
        directive("--job-name", f"tailscope-{spec.name}"[:70]),
        "--exclusive",
        "--ntasks-per-node=1",
        directive("--output", f"{slurm_dir}/job-%j.out"),
    ]
    if nodelist:
        directives.append(directive("--nodelist", nodelist))
    if node_count:
        directives.append(f"--nodes={node_count}")
    if spec.partition:
        directives.append(directive("--partition", spec.partition))
    if spec.constraint:
        directives.append(directive("--constraint", spec.constraint))
    if spec.time_limit:
        directives.append(directive("--time", spec.time_limit))
    directives += spec.sbatch_options
    background = " &" if spec.steps == "parallel" else ""
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives)]
    lines += [
        "# tailscope campaign (generated): one srun step per node; each node writes its own shards.",
        f"campaign={shlex.quote(str(root))}",
        f"step={shlex.quote(str(slurm_dir / 'step.sh'))}",
        'job="${SLURM_JOB_ID:?not inside a Slurm allocation}"',
        'nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'printf "%s\\n" $nodes > "$campaign/slurm/job-$job.nodes"',
        "for node in $nodes; do",
        '  cpus=$(scontrol show node "$node" -o | sed -n "s/.* CPUTot=\\([0-9]*\\).*/\\1/p")',
        '  srun --nodes=1 --ntasks=1 --nodelist="$node" --exact --cpus-per-task="${cpus:-1}" \\',
        f"    --cpu-bind={shlex.quote(spec.cpu_bind)} --kill-on-bad-exit=0 \\",
        '    --output="$campaign/slurm/step-$job.%s-$node.out" bash "$step"' + background,
        "done",
        "wait",
    ]
    return "\n".join(lines) + "\n"


# --- campaign preparation ---------------------------------------------------------------------------------
def prepare(spec: CampaignSpec) -> Campaign:
    """Create (or open) the campaign, write the plans, the spec copy and the scripts."""
    campaign = Campaign.open_or_create(spec.directory, name=spec.name)

    def record(manifest: Manifest) -> None:
        for entry in spec.probes:
            manifest.add_plan(entry.variant.to_plan(entry.trials))
        jobs = manifest.cluster.jobs if manifest.cluster else []
        manifest.cluster = ClusterRecord.from_json(spec.to_manifest(), MANIFEST)
        manifest.cluster.jobs = jobs

    campaign.update_manifest(record)
    slurm_dir = campaign.root / SLURM_DIR
    slurm_dir.mkdir(exist_ok=True)
    if spec.path.resolve() != (slurm_dir / "spec.toml").resolve():
        try:  # the one bounded reader of a user's file, as when the spec was parsed
            text = read_user_file(spec.path, limit=TOML_BYTES)
        except UnreadableFile as exc:
            raise InputError(str(exc)) from None
        write_atomic_bytes(slurm_dir / "spec.toml", text)
    write_atomic_bytes(slurm_dir / "step.sh", step_script(spec, campaign.root).encode())
    return campaign


def _record_job(campaign: Campaign, job_id: str, kind: str, nodelist: str | None) -> None:
    def change(manifest: Manifest) -> None:
        if manifest.cluster is None:
            manifest.cluster = ClusterRecord()
        manifest.cluster.jobs.append(
            ClusterJob(job_id, kind, nodelist, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
        )

    campaign.update_manifest(change)


def _jobs(campaign: Campaign) -> list[ClusterJob]:
    return campaign.manifest.cluster.jobs if campaign.manifest.cluster else []


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SlurmError(f"{name} not found: is Slurm installed and on PATH (and SLURM_CONF set)?")
    return path


def _sbatch(script: Path) -> str:
    proc = subprocess.run([_tool("sbatch"), "--parsable", str(script)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SlurmError(f"sbatch {script}: {proc.stderr.strip() or f'exit code {proc.returncode}'}")
    return proc.stdout.strip().split(";")[0]


def submit(spec: CampaignSpec, *, dry_run: bool = False) -> tuple[Campaign, str | None, Path]:
    """Prepare the campaign and submit its job; returns (campaign, job id or None when dry, script)."""
    campaign = prepare(spec)
    script = campaign.root / SLURM_DIR / "job.sh"
    text = batch_script(spec, campaign.root, nodelist=spec.nodelist, node_count=spec.node_count)
    write_atomic_bytes(script, text.encode())
    if dry_run:
        return campaign, None, script
    job_id = _sbatch(script)
    _record_job(campaign, job_id, "submit", spec.nodelist)
    return campaign, job_id, script


def srun_in_allocation(spec: CampaignSpec) -> tuple[Campaign, int]:
    """Run the campaign's steps inside the current allocation (`salloc`, or a batch script of the user's)."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        raise SlurmError(
            "campaign srun: not inside a Slurm allocation (no SLURM_JOB_ID); use salloc or submit"
        )
    campaign = prepare(spec)
    script = campaign.root / SLURM_DIR / f"srun-{job_id}.sh"
    write_atomic_bytes(script, batch_script(spec, campaign.root, nodelist=None, node_count=None).encode())
    _record_job(campaign, job_id, "srun", os.environ.get("SLURM_JOB_NODELIST"))
    proc = subprocess.run(["bash", str(script)])
    return campaign, proc.returncode


# --- progress ---------------------------------------------------------------------------------------------
def spec_of(campaign: Campaign) -> CampaignSpec:
    path = campaign.root / SLURM_DIR / "spec.toml"
    if not path.is_file():
        raise StoreError(f"{campaign.root}: not a cluster campaign (no {SLURM_DIR}/spec.toml)")
    spec = load_spec(path)
    # The copy may hold a relative directory: the campaign is where it was found.
    return _with_directory(spec, campaign.root)


def _with_directory(spec: CampaignSpec, root: Path) -> CampaignSpec:
    from dataclasses import replace

    return replace(spec, directory=root.resolve())


def campaign_nodes(campaign: Campaign, stored: set[str] | None = None) -> list[str]:
    """The campaign's nodes: those the spec names, those its jobs were given, and those that stored data."""
    nodes: set[str] = set()
    nodelist = campaign.manifest.cluster.nodelist if campaign.manifest.cluster else None
    if nodelist:
        nodes.update(hostlist.expand(nodelist))
    for path in (campaign.root / SLURM_DIR).glob("job-*.nodes"):
        nodes.update(path.read_text().split())
    if stored is None:
        con = connect(campaign)
        try:
            stored = set(con.node_names())
        finally:
            con.close()
    return sorted(nodes | stored)


@dataclass
class NodeProgress:
    node: str
    planned: int
    done: int  # ok trials, counted once each
    attempts_failed: int  # stored attempts that were not ok (each trial once)
    missing: dict[str, list[int]] = field(default_factory=dict)  # variant -> trial indices


def progress(campaign: Campaign, *, check: bool = True) -> list[NodeProgress]:
    plans = campaign.manifest.planned_trials(include_imported=False)
    con = connect(campaign)
    try:
        rows = con.run_keys()
    finally:
        con.close()
    ok: dict[tuple[str, str], set[int]] = {}
    failed: dict[str, int] = {}
    for node, variant, trial, status in rows:
        if status == "ok":
            ok.setdefault((node, variant), set()).add(int(trial))
        else:
            failed[node] = failed.get(node, 0) + 1
    out = []
    for node in campaign_nodes(campaign, {str(r[0]) for r in rows}):
        missing = {}
        done = 0
        for variant, trials in sorted(plans.items()):
            have = ok.get((node, variant), set())
            done += len(have & set(range(trials)))
            gap = [t for t in range(trials) if t not in have]
            if gap:
                missing[variant] = gap
        out.append(NodeProgress(node, sum(plans.values()), done, failed.get(node, 0), missing))
    return out


def job_states(job_ids: Sequence[str]) -> dict[str, str]:
    """State of each job: sacct when accounting works, else squeue (queued/running), else scontrol."""
    if not job_ids:
        return {}
    states: dict[str, str] = {}
    sacct = shutil.which("sacct")
    if sacct:
        proc = subprocess.run(
            [sacct, "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(job_ids)],
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            for line in proc.stdout.splitlines():
                job, _, state = line.partition("|")
                if job in job_ids and state:
                    states[job] = state.split()[0]
    rest = [j for j in job_ids if j not in states]
    squeue = shutil.which("squeue")
    if rest and squeue:
        proc = subprocess.run(
            [squeue, "-h", "-o", "%i|%T", "-j", ",".join(rest)], capture_output=True, text=True
        )
        if proc.returncode == 0:
            for line in proc.stdout.splitlines():
                job, _, state = line.partition("|")
                if job in rest:
                    states[job] = state
    scontrol = shutil.which("scontrol")
    for job in [j for j in job_ids if j not in states]:
        if scontrol:
            proc = subprocess.run([scontrol, "show", "job", "-o", job], capture_output=True, text=True)
            for token in proc.stdout.split():
                if token.startswith("JobState="):
                    states[job] = token.split("=", 1)[1]
        states.setdefault(job, "UNKNOWN")
    return states


def active_jobs(campaign: Campaign) -> dict[str, str]:
    jobs = [
        j.job_id for j in _jobs(campaign) if j.kind != "srun"
    ]
    return {j: s for j, s in job_states(jobs).items() if s in _ACTIVE}


# --- collect ---------------------------------------------------------------------------------------------
@dataclass
class Collected:
    shards: int
    bad: list[DamagedShard]
    quarantined: list[Path]
    nodes: list[NodeProgress]


def collect(campaign: Campaign, *, quarantine_damaged: bool = True) -> Collected:
    """Validate every committed shard in full (page checksums, schema: `store.read.validate_shards`); move
    every chunk with a damaged shard aside, whole, into DIR/quarantine/ (its trials become missing and
    `resume` redoes them; nothing is deleted); summarise per node."""
    count, bad = validate_shards(campaign)
    if bad and not quarantine_damaged:
        return Collected(count, bad, [], [])  # no summary: the views cannot read past a damaged shard
    moved = quarantine(campaign, bad)
    return Collected(count, bad, moved, progress(campaign))


# --- resume ----------------------------------------------------------------------------------------------
def resume(campaign: Campaign, *, dry_run: bool = False) -> tuple[list[NodeProgress], str | None]:
    """Submit a job for exactly the nodes that miss trials; returns (those nodes, job id or None)."""
    running = active_jobs(campaign)
    if running:
        listed = ", ".join(f"{j} ({s})" for j, s in sorted(running.items()))
        raise SlurmError(
            f"{campaign.root}: job {listed} of this campaign is still queued or running; wait for it or "
            "scancel it, then resume (two writers of one trial would waste the node time)"
        )
    spec = spec_of(campaign)
    collect(campaign)  # damaged chunks first, so their trials count as missing
    todo = [p for p in progress(campaign) if p.missing]
    if not todo:
        return [], None
    nodes = [p.node for p in todo]
    nodelist = ",".join(nodes)
    text = batch_script(spec, campaign.root, nodelist=nodelist, node_count=len(nodes))
    write_atomic_bytes(campaign.root / SLURM_DIR / "step.sh", step_script(spec, campaign.root).encode())
    script = (
        campaign.root / SLURM_DIR / f"resume-{len(_jobs(campaign))}.sh"
    )
    write_atomic_bytes(script, text.encode())
    if dry_run:
        return todo, None
    job_id = _sbatch(script)
    _record_job(campaign, job_id, "resume", nodelist)
    return todo, job_id


def open_campaign(target: Path) -> Campaign:
    """A campaign directory, or a spec file whose campaign directory exists."""
    target = Path(target)
    if target.is_file() and target.name != MANIFEST:
        return Campaign.open(load_spec(target).directory)
    return Campaign.open(target)
