"""The local runner: trials of probe variants on this node, each a fresh process, into the campaign store.

The pipeline of one trial reads top to bottom in `run_trial`: launch, wait, parse, validate, rows.
Trials are buffered and committed as one transaction of the store's load path (store/load.py) every
`flush_trials` trials or `flush_seconds` seconds, at the end, and when interrupted (SIGINT/SIGTERM) or stopped
by an input error in a later trial (the program gone, a first trial of another variant without its figure),
so such a campaign keeps every finished trial and `--resume` runs exactly the missing ones. A SIGKILL loses
at most the unflushed buffer, never a stored shard. The first commit creates the campaign (with its plans and
this node's facts): a run that stores nothing leaves nothing behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from tailscope.campaign.progress import Progress
from tailscope.counters import eventsets, procfs
from tailscope.counters.eventsets import SetEvent
from tailscope.errors import InputError
from tailscope.evidence.collector import EvidenceCollector
from tailscope.evidence.process import run_watched
from tailscope.node.facts import collect as collect_facts
from tailscope.node.facts import node_name, nodes_row
from tailscope.node.read import cpu_ranges
from tailscope.probes.catalogue import ProbeVariant
from tailscope.probes.parse import ProbeOutput, ProbeOutputError, parse_probe_output
from tailscope.store.campaign import Campaign, new_task_id, utcnow
from tailscope.store.load import load_into
from tailscope.store.manifest import Plan
from tailscope.store.runs_row import TrialRun
from tailscope.store.schema import TABLES
from tailscope.store.trial_rows import TrialRows

# Probe exit codes (docs/probes.md).
EXIT_USAGE, EXIT_RESOURCE, EXIT_INVALID = 2, 3, 4
# Stop a campaign after this many consecutive trials fail the same way: 1000 identical failures help nobody.
MAX_CONSECUTIVE_FAILURES = 3
# The result record's clocks, stored in the runs row as the probe reported them (docs/probes.md).
RESULT_TIMES = ("tsc_start", "tsc_end", "mono_start_ns", "mono_end_ns", "realtime_start_ns", "seconds")


class ProbeUsageError(InputError):
    """The probe rejected its options (exit 2/3 in the pre-flight check); nothing was stored."""


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while trials were running."""


@dataclass(frozen=True)
class Trial:
    variant: ProbeVariant
    index: int


@dataclass
class RunOutcome:
    campaign: Path
    stored: int = 0
    failed: int = 0
    interrupted: bool = False
    stopped_reason: str | None = None
    committed: int = 0  # transactions committed (0: nothing was stored, no campaign was created)
    notices: list[str] = field(default_factory=list)  # what the job environment did (probes/jobenv.py)
    stop: Any = None  # a campaign stopped when settled: how it ended (campaign/stopping.py StopSummary)


def preflight(variant: ProbeVariant) -> dict[str, Any]:
    """Run the probe with --check-args: resolve CPUs, sizes and page policy before anything is stored."""
    argv = [*variant.argv(), "--check-args"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        message = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise ProbeUsageError(message)
    try:
        return parse_probe_output(proc.stdout, name=variant.probe).config
    except ProbeOutputError as exc:
        raise ProbeUsageError(str(exc)) from exc


def _rows_from_output(out: ProbeOutput, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    iterations = [
        {
            "run_id": run_id,
            "iteration": rec["iteration"],
            "thread": rec.get("thread"),
            "kernel": rec.get("kernel"),
            "cpu": rec.get("cpu"),
            "warmup": bool(rec["warmup"]),
            "seconds": float(rec["seconds"]),
            "value": float(rec["value"]),
            "tsc_start": rec.get("tsc_start"),
            "tsc_end": rec.get("tsc_end"),
            "mono_start_ns": rec.get("mono_start_ns"),
            "mono_end_ns": rec.get("mono_end_ns"),
        }
        for rec in out.iterations
    ]
    pages = []
    for rec in out.pages:
        size = int(rec["page_size"])
        va = int(rec["va"])
        for i, pa_ in enumerate(rec.get("pa", [])):
            pages.append(
                {
                    "run_id": run_id,
                    "array": str(rec.get("array", "data")),
                    "thread": rec.get("thread"),
                    "virtual_address": va + i * size,
                    "physical_address": int(pa_) or None,
                    "page_size": size,
                }
            )
    return iterations, pages


def counter_rows(out: ProbeOutput, run_id: str) -> list[dict[str, Any]]:
    """counters rows of the probe's counters records (docs/probes.md): perf events per thread and per uncore
    unit (pmu `uncore_cha:SOCKET`, unit = box), getrusage per thread (source proc, pmu rusage)."""
    rows = []
    for rec in out.counters:
        pmu = str(rec["pmu"])
        if rec.get("thread") is None and rec.get("socket") is not None and pmu.startswith("uncore_"):
            pmu = f"{pmu}:{rec['socket']}"
        source = "proc" if rec["source"] == "rusage" else str(rec["source"])
        rows.append(
            {
                "run_id": run_id,
                "source": source,
                "pmu": pmu,
                "unit": rec.get("unit"),
                "event": str(rec["event"]),
                "value": float(rec["value"]),
                "time_enabled": rec.get("time_enabled"),
                "time_running": rec.get("time_running"),
                "width": rec.get("width"),
            }
        )
    return rows


def run_trial(
    campaign: Campaign,
    trial: Trial,
    *,
    node: str,
    task: str,
    timeout_s: float,
    evidence: EvidenceCollector | None = None,
) -> TrialRows:
    """One trial: a fresh probe process, its output parsed into store rows (a failure is a row too).

    With `evidence`, what else ran on the probe's CPUs is read around the process (tailscope.evidence)."""
    variant = trial.variant
    spec = variant.spec
    run = TrialRun(campaign.campaign_id, node, task, variant, trial.index)
    proc_events = _proc_events(variant)
    proc_before = procfs.snapshot(proc_events) if proc_events else {}
    status, error, out = "ok", None, None
    if evidence is not None:
        evidence.begin(variant.variant_id)
    done = run_watched(
        variant.argv(),
        timeout_s,
        on_sample=evidence.sample if evidence else None,
        on_exit=evidence.at_exit if evidence else None,
        sample_interval_s=evidence.settings.sample_interval_s if evidence else 1.0,
    )
    stdout, stderr, wall_s = done.stdout, done.stderr, done.wall_s
    if done.timed_out:
        status, error = "timeout", f"killed after the {timeout_s:g} s trial time limit"
    proc_after = procfs.snapshot(proc_events) if proc_events else {}
    if status == "ok" and done.returncode != 0:
        status = "invalid" if done.returncode == EXIT_INVALID else "failed"
        error = (stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    if status in ("ok", "invalid"):
        try:
            out = parse_probe_output(stdout, name=variant.probe)
        except ProbeOutputError as exc:
            status, error = "failed", str(exc)
    if status == "ok" and out is not None and (out.result is None or not out.validated):
        status, error = "invalid", "no validated result record"
    result = (out.result if out else None) or {}
    config = out.config if out else {}
    rows = TrialRows()
    rows.runs.append(
        run.row(
            page_policy=config.get("page_policy", variant.page_policy),
            cpus=cpu_ranges(config["cpus"]) if config.get("cpus") else None,
            threads=config.get("threads"),
            tsc_hz=config.get("tsc_hz"),
            wall_s=wall_s,
            **{name: result.get(name) for name in RESULT_TIMES},
            metric=result.get("metric", spec.metric),
            value=float(result["value"]) if status == "ok" else None,
            unit=result.get("unit", spec.unit),
            higher_is_better=bool(result.get("higher_is_better", spec.higher_is_better)),
            status=status,
            error=error,
            source="probe",
            config=config or None,
            summary=result.get("summary") or None,
        )
    )
    if out is not None and status == "ok":
        rows.iterations, rows.pages = _rows_from_output(out, run.run_id)
        rows.counters = counter_rows(out, run.run_id) + procfs.delta_rows(proc_before, proc_after, run.run_id)
    if evidence is not None:
        found = evidence.finish(run.run_id, variant.variant_id, config.get("cpus"), done.rusage)
        rows.counters += found.counters
        rows.corunners = found.corunners
    return rows


def _proc_events(variant: ProbeVariant) -> list[SetEvent]:
    """The /proc events of the variant's --events set (read around the trial process by the runner)."""
    name = variant.params.get("events")
    if not name:
        return []
    return eventsets.load(str(name)).by_source("proc")


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interleave(trials: Sequence[Trial]) -> list[Trial]:
    """Trials of all variants mixed in proportion: the j-th of a variant's m trials in this run goes at the
    fraction (j + 0.5) / m of the run. Variants compared with each other (`run --page 2m,1g`) then alternate
    trial by trial, so drift on the node hits them alike; and every variant has measured trials early, which
    is what the per-variant ETA (progress.py) needs. Ties keep the order the variants were given.
    """
    by_variant: dict[str, list[Trial]] = {}
    for t in trials:
        by_variant.setdefault(t.variant.variant_id, []).append(t)
    keyed = []
    for k, mine in enumerate(by_variant.values()):
        mine = sorted(mine, key=lambda t: t.index)
        keyed += [((j + 0.5) / len(mine), k, t.index, t) for j, t in enumerate(mine)]
    return [t for *_, t in sorted(keyed, key=lambda x: x[:3])]


class Schedule(Protocol):
    """The trials of a campaign that stops when its verdict settles (campaign/stopping.py)."""

    def __iter__(self) -> Iterator[Trial]: ...

    def time_limit(self, trial: Trial, default: float) -> float: ...

    def accept(self, trial: Trial, rows: TrialRows) -> bool: ...

    def observe(self, trial: Trial, rows: TrialRows) -> None: ...


@dataclass
class LocalRunner:
    campaign: Campaign
    node: str = field(default_factory=node_name)
    task: str = field(default_factory=new_task_id)
    timeout_s: float | None = None
    flush_trials: int = 50
    flush_seconds: float = 60.0
    show_progress: bool = True
    evidence: bool = True  # read tailscope.evidence around every trial (--no-evidence turns it off)
    # Called before each trial (`tailscope validate` starts and stops injections here); may raise to stop.
    before_trial: Callable[[Trial], None] | None = None

    plans: list[Plan] = field(default_factory=list)  # recorded in the manifest with every commit
    committed: int = 0  # transactions committed by this runner

    _facts: pa.Table | None = None
    _app_started: set[str] = field(default_factory=set)  # application variants with a trial run here

    def _grow_plan(self, trial: Trial) -> None:
        """A stopped campaign's plan is the trials it ran: the variant's plan grows with each trial."""
        for plan in self.plans:
            if plan.variant == trial.variant.variant_id:
                plan.trials = max(plan.trials, trial.index + 1)

    def _node_facts(self) -> pa.Table:
        facts = collect_facts()
        facts["node"] = self.node
        row = nodes_row(facts, collected_at=utcnow(), task=self.task)
        return pa.Table.from_pylist([row], schema=TABLES["nodes"].schema)

    def _flush(self, buffer: TrialRows) -> None:
        """Commit the buffered trials as one transaction (with the node facts in the first one)."""
        if not buffer.runs:
            return
        tx = None
        try:
            with load_into(self.campaign.root, "run", create=True, manifest=self.campaign.manifest) as tx:
                for plan in self.plans:
                    if plan.trials:  # a stopped campaign's variant with no trial run yet: no plan
                        tx.add_plan(plan)
                if self.committed == 0:
                    facts = self._facts if self._facts is not None else self._node_facts()
                    tx.write("nodes", facts, node=self.node)
                tx.write_tables(buffer.tables(), node=self.node)
        finally:
            # A signal deferred through the commit surfaces right after it: the trials are stored then, and
            # the flush at the end must not store them a second time.
            if tx is not None and tx.committed:
                self.campaign.manifest = tx.manifest
                self.committed += 1
                buffer.clear()

    # --- application trials (`run -- CMD`: app/trial.py does the work) ---------------------------------
    def _is_app(self, trial: Trial) -> bool:
        from tailscope.app.variant import AppVariant

        return isinstance(trial.variant, AppVariant)

    def _app_trial(self, trial: Trial, timeout: float, collector: EvidenceCollector | None) -> TrialRows:
        """An application trial (`run -- CMD`); each variant's first one here must yield its figures."""
        from tailscope.app.trial import run_app_trial

        vid = trial.variant.variant_id
        found = run_app_trial(
            self.campaign,
            trial.variant,  # type: ignore[arg-type]
            trial.index,
            node=self.node,
            task=self.task,
            timeout_s=timeout,
            evidence=collector,
            first=vid not in self._app_started,
        )
        self._app_started.add(vid)
        return found

    def _warm_up(self, trials: Sequence[Trial], collector: EvidenceCollector | None) -> None:
        """`--warmup N`: each application variant's N trials, run (through the same checks) but not kept."""
        from tailscope.app.trial import run_app_trial

        seen: set[str] = set()
        for trial in trials:
            vid = trial.variant.variant_id
            if not self._is_app(trial) or vid in seen:
                continue
            seen.add(vid)
            for k in range(int(trial.variant.params.get("warmup") or 0)):
                run_app_trial(
                    self.campaign,
                    trial.variant,  # type: ignore[arg-type]
                    k,
                    node=self.node,
                    task=self.task,
                    timeout_s=self.timeout_s or trial.variant.spec.timeout_s,
                    evidence=None,
                    first=vid not in self._app_started,
                    warmup=True,
                )
                self._app_started.add(vid)

    def run(self, trials: Sequence[Trial], schedule: Schedule | None = None) -> RunOutcome:
        """Run `trials` in order; with a `schedule` (campaign/stopping.py), the trials it picks from them one
        at a time, each judged as it is stored, until it ends the campaign. The plans then record the
        trials run, not the trials claimed: a campaign stopped when settled is complete."""
        outcome = RunOutcome(self.campaign.root)
        plan = Counter(t.variant.variant_id for t in trials)
        progress = Progress(total=len(trials), plan=plan, enabled=self.show_progress)
        buffer, last_flush = TrialRows(), time.monotonic()
        recent_errors: list[str] = []
        refused: InputError | None = None
        collector = EvidenceCollector() if self.evidence else None
        try:
            with _sigterm_as_interrupt():
                self._facts = self._node_facts()
                self._warm_up(trials, collector)
                for trial in schedule if schedule is not None else trials:
                    if self.before_trial is not None:
                        self.before_trial(trial)
                    timeout = self.timeout_s or trial.variant.spec.timeout_s
                    if schedule is not None:
                        timeout = schedule.time_limit(trial, timeout)
                    if self._is_app(trial):
                        rows = self._app_trial(trial, timeout, collector)
                    else:
                        rows = run_trial(
                            self.campaign,
                            trial,
                            node=self.node,
                            task=self.task,
                            timeout_s=timeout,
                            evidence=collector,
                        )
                    if schedule is not None:
                        if not schedule.accept(trial, rows):
                            continue  # cut by the budget: it measured the cut, not the node
                        schedule.observe(trial, rows)
                        self._grow_plan(trial)
                    buffer.extend(rows)
                    run = rows.runs[0]
                    ok = run["status"] == "ok"
                    outcome.stored += 1
                    outcome.failed += 0 if ok else 1
                    progress.update(
                        run["value"] if ok else None,
                        variant=trial.variant.variant_id,
                        seconds=run["wall_s"],
                        label=trial.variant.name,
                        unit=trial.variant.spec.unit,
                    )
                    recent_errors = [] if ok else [*recent_errors, str(run["error"])]
                    if len(recent_errors) >= MAX_CONSECUTIVE_FAILURES and len(set(recent_errors)) == 1:
                        outcome.stopped_reason = (
                            f"stopped after {MAX_CONSECUTIVE_FAILURES} consecutive trials failed with: "
                            f"{recent_errors[0]}"
                        )
                        break
                    if (
                        len(buffer.runs) >= self.flush_trials
                        or time.monotonic() - last_flush >= self.flush_seconds
                    ):
                        self._flush(buffer)
                        buffer, last_flush = TrialRows(), time.monotonic()
        except (KeyboardInterrupt, Interrupted):
            outcome.interrupted = True
        except InputError as exc:  # a program gone, a first trial without its figure: the trials before stay
            refused = exc
        finally:
            progress.close()
            # Finished trials are written even when interrupted; a second signal here is deferred.
            old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
            old_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self._flush(buffer)
            finally:
                signal.signal(signal.SIGINT, old_int)
                signal.signal(signal.SIGTERM, old_term)
        if refused is not None:
            if outcome.stored and self.committed:
                root = self.campaign.root
                raise InputError(
                    f"{refused} ({outcome.stored} trial(s) finished before it are stored in {root}: once "
                    f"fixed, `tailscope run --resume --campaign {root}` runs the rest)"
                ) from None
            raise refused
        return outcome


def default_campaign_dir(label: str, node: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(os.environ.get("TAILSCOPE_CAMPAIGNS", "campaigns"))
    return base / f"{label}-{node}-{stamp}"
