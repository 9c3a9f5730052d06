"""One application trial, top to bottom: working directory, prepare, launch, figures, cleanup, rows.

The runner (campaign/runner.py) calls `run_app_trial` where it calls `run_trial` for a probe, and gets the
same TrialRows back: the runs row (wall time, exit status, CPUs, figures or the failure's reason), the
iterations of --iteration-regex, and the evidence of tailscope.evidence over the CPUs the tree ran on.

Each trial runs in a directory of its own, `DIR/app/<node>/<variant>/trial-NNNNNN/`; the last 64 KiB of its
stdout and stderr are kept beside it (`trial-NNNNNN.stdout`, `.stderr`) for every trial, the working
directories themselves for the last KEEP_WORKDIRS trials of each variant (a program's output files can be
large). A trial that is discarded (Ctrl-C, an error) leaves neither.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tailscope.app.errors import AppInputError
from tailscope.app.figures import Figures, FigureSpec, Scan, feed_file, format_hint, judge
from tailscope.app.variant import AppVariant
from tailscope.errors import InputError
from tailscope.launch import MAX_LINE, Launched, launch
from tailscope.node.read import cpu_ranges
from tailscope.store.campaign import Campaign, safe_name
from tailscope.store.runs_row import TrialRun
from tailscope.store.trial_rows import TrialRows
from tailscope.userfile import MIB

KEEP_WORKDIRS = 8
MAX_METRIC_FILE = 256 * MIB  # a --metric-file larger than this fails the trial (userfile.read_lines)
BINDING_VARIABLES = (
    "OMP_NUM_THREADS",
    "OMP_PLACES",
    "OMP_PROC_BIND",
    "GOMP_CPU_AFFINITY",
    "KMP_AFFINITY",
    "OMPI_MCA_hwloc_base_binding_policy",
    "I_MPI_PIN_DOMAIN",
)


class FirstTrialError(InputError):
    """The first trial of a variant did not yield a declared figure: the run stops, nothing is stored."""


def variant_dir(root: Path, node: str, variant: AppVariant) -> Path:
    return root / "app" / safe_name(node) / safe_name(variant.variant_id)


def remove_trial_directories(root: Path) -> None:
    """The trials' directories and output tails under `root` (a run that created `root` and stored nothing:
    they belong to no campaign)."""
    shutil.rmtree(root / "app", ignore_errors=True)


def _shell(command: str, cwd: Path, env: dict[str, str], timeout_s: float) -> str | None:
    """--prepare / --cleanup through /bin/sh in the trial's directory: None, or why it failed."""
    done = launch(["/bin/sh", "-c", command], cwd=str(cwd), env=env, timeout_s=timeout_s)
    if done.timed_out:
        return f"{command!r}: killed after {timeout_s:g} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1][:200]
        return f"{command!r} exited with status {done.returncode}" + (f": {last}" if last else "")
    return None


def job_environment(env: dict[str, str]) -> dict[str, Any]:
    """What the job environment gives the application: affinity, cpuset, Slurm and binding variables."""
    from tailscope.node.facts import parse_cpu_list, read_text

    out: dict[str, Any] = {}
    with contextlib.suppress(OSError):
        out["inherited_cpus"] = sorted(os.sched_getaffinity(0))
    cpuset = read_text("/sys/fs/cgroup/cpuset.cpus.effective") or read_text(
        "/sys/fs/cgroup/cpuset/cpuset.cpus"
    )
    if cpuset:
        out["cgroup_cpuset"] = parse_cpu_list(cpuset)
    out["variables"] = {
        k: v for k, v in sorted(env.items()) if k.startswith("SLURM_") or k in BINDING_VARIABLES
    }
    return out


def run_app_trial(
    campaign: Campaign,
    variant: AppVariant,
    index: int,
    *,
    node: str,
    task: str,
    timeout_s: float,
    evidence: Any = None,
    first: bool = False,
    warmup: bool = False,
) -> Any:
    """One trial -> TrialRows (a failure is a row too). A first trial (`first`) whose declared figure did not
    match raises FirstTrialError; a warm-up trial (`warmup`) returns None and keeps nothing."""
    spec = FigureSpec.from_params(variant.params)
    base = variant_dir(campaign.root, node, variant)
    name = f"warmup-{index:06d}" if warmup else f"trial-{index:06d}"
    work = base / name
    if work.exists():  # an earlier attempt at this trial, killed before it was stored
        shutil.rmtree(work)
    work.mkdir(parents=True)
    env = {**os.environ, **variant.env, "TAILSCOPE_TRIAL": str(index)}
    kept = False
    scan: Scan | None = None
    try:
        run = TrialRun(campaign.campaign_id, node, task, variant, index)
        reason: str | None = None
        prepare = variant.params.get("prepare")
        if prepare:
            reason = _shell(str(prepare), work, env, timeout_s)
            if reason:
                reason = f"--prepare {reason}"
        done: Launched | None = None
        tracker = None
        counters = None
        if reason is None:
            if evidence is not None:
                evidence.begin(variant.variant_id)
            else:
                from tailscope.evidence.sched import TaskTracker

                tracker = _Tracker(TaskTracker)

            # the output's patterns are matched off the launcher's loop, until the trial's own deadline
            scan = Scan(spec, deadline=time.monotonic() + timeout_s) if spec.metric_file is None else None

            def on_line(stream: str, line: str) -> None:
                if scan is not None:
                    scan.feed(line)

            sampler = evidence if evidence is not None else tracker
            counters = _tree_counters(variant)
            done = launch(
                variant.argv,
                cwd=str(work),
                env=env,
                timeout_s=timeout_s,
                on_line=on_line,
                on_sample=sampler.sample,
                on_exit=sampler.at_exit,
                sample_interval_s=evidence.settings.sample_interval_s if evidence is not None else 0.25,
                child_setup=counters.child_setup if counters is not None else None,
                on_start=counters.attach if counters is not None else None,
                pass_fds=counters.reserve() if counters is not None else (),
            )
            _write_tails(base, name, done)
            if done.leftovers and variant.variant_id not in _TOLD:
                _TOLD.add(variant.variant_id)
                who = ", ".join(f"{m.comm} (pid {m.pid})" for m in done.leftovers[:5])
                print(
                    f"tailscope: trial {index} of {variant.name} left {len(done.leftovers)} process(es) "
                    f"running after its command ended: {who}; killed with the trial (config.killed_at_end)",
                    file=sys.stderr,
                )
        cpus = (evidence.cpus_seen() if evidence is not None else tracker.cpus() if tracker else []) or None
        status, error, figures = "ok", reason, None
        if done is not None:
            where = "the output"
            unreadable = None
            if scan is None:  # --metric-file: read after the trial, with the trial's time limit of its own
                where = spec.metric_file or ""
                scan = Scan(spec, deadline=time.monotonic() + timeout_s)
                unreadable = scan_file(scan, work, where)
            if unreadable is not None:
                declared = spec.metrics[0].name if spec.metrics else spec.format
                figures = Figures(None, [], [], unreadable, "failed", missing_metric=declared)
            else:
                figures = judge(scan, where, done.wall_s)
            hint = format_hint(scan) if first else None
            if hint:
                print(hint, file=sys.stderr)
            if done.timed_out:
                status, error = "timeout", f"killed after the {timeout_s:g} s trial time limit"
            elif done.returncode != 0:
                last = (done.stderr.strip().splitlines() or [""])[-1][:200]
                status = "failed"
                error = f"exit status {done.returncode}" + (f": {last}" if last else "")
            elif figures.status == "timeout":
                status, error = "timeout", f"{timeout_s:g} s trial time limit: {figures.error}"
            elif figures.error is not None:
                if first and figures.missing_metric is not None:
                    tail = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or [""])[-1]
                    raise FirstTrialError(
                        f"{figures.error} in the first trial of {variant.name} (nothing stored of it; its "
                        f"output ended with {tail[:120]!r})"
                    )
                status, error = figures.status, figures.error
        else:
            status = "failed"
        cleanup = variant.params.get("cleanup")
        if cleanup:
            why = _shell(str(cleanup), work, env, timeout_s)
            if why and status == "ok":
                status, error = "failed", f"--cleanup {why}"
        if warmup:
            return None
        rows = TrialRows()
        rows.runs.append(_runs_row(run, variant, done, status, error, figures, cpus, work))
        if figures is not None and status == "ok":
            rows.iterations = [
                {
                    "run_id": run.run_id,
                    "iteration": i,
                    "thread": None,
                    "kernel": None,
                    "cpu": None,
                    "warmup": False,
                    "seconds": None,
                    "value": v,
                    "tsc_start": None,
                    "tsc_end": None,
                    "mono_start_ns": None,
                    "mono_end_ns": None,
                }
                for i, v in enumerate(figures.iterations)
            ]
        if counters is not None:
            rows.counters += counters.rows(run.run_id)
        if evidence is not None and done is not None:
            found = evidence.finish(run.run_id, variant.variant_id, cpus, done.rusage)
            rows.counters += found.counters
            rows.corunners = found.corunners
        kept = True
        _bound_workdirs(base)
        return rows
    finally:
        if scan is not None:
            scan.close()
        if counters is not None:
            counters.close()
        if not kept:  # discarded (warm-up, Ctrl-C, an error): nothing of it stays
            shutil.rmtree(work, ignore_errors=True)
            for suffix in (".stdout", ".stderr"):
                (base / f"{name}{suffix}").unlink(missing_ok=True)
            for parent in (base, base.parent, base.parent.parent):  # app/<node>/<variant>, when empty
                with contextlib.suppress(OSError):
                    parent.rmdir()


_TOLD: set[str] = set()  # variants whose left-over daemons were reported (once per variant and run)
_RESOLVED: dict[str, Any] = {}  # event set -> its resolved events (tsevents runs once per set)


def _tree_counters(variant: AppVariant) -> Any:
    """The trial's perf counters (`--events`, app/counters.py), or None."""
    name = variant.params.get("events")
    if not name:
        return None
    from tailscope.app.counters import TreeCounters, resolve

    if name not in _RESOLVED:
        _RESOLVED[str(name)] = resolve(str(name))
    return TreeCounters(_RESOLVED[str(name)])


class _Tracker:
    """The CPUs of the tree's threads when the evidence is off (--no-evidence)."""

    def __init__(self, factory: Any) -> None:
        self.factory, self.tasks = factory, None

    def sample(self, pid: int, others: Sequence[int] = ()) -> None:
        if self.tasks is None:
            self.tasks = self.factory(pid)
        self.tasks.sample(others=others)

    def at_exit(self, pid: int, others: Sequence[int] = ()) -> None:
        if self.tasks is None:
            self.tasks = self.factory(pid)
        self.tasks.sample(final=True, others=others)

    def cpus(self) -> list[int]:
        return self.tasks.cpus() if self.tasks is not None else []


def scan_file(scan: Scan, work: Path, relative: str) -> str | None:
    """--metric-file: the file the program wrote in its directory, read line by line through the one bounded
    reader (userfile.py: a regular file inside the trial's directory, at most MAX_METRIC_FILE bytes); None, or
    why it was not read."""
    why = feed_file(scan, relative, limit=MAX_METRIC_FILE, piece=MAX_LINE, beneath=work)
    return None if why is None else f"--metric-file {why}"


def _write_tails(base: Path, name: str, done: Launched) -> None:
    (base / f"{name}.stdout").write_text(done.stdout, errors="replace")
    (base / f"{name}.stderr").write_text(done.stderr, errors="replace")


def _bound_workdirs(base: Path) -> None:
    dirs = sorted(p for p in base.glob("trial-*") if p.is_dir())
    for old in dirs[:-KEEP_WORKDIRS]:
        shutil.rmtree(old, ignore_errors=True)


def _runs_row(
    run: TrialRun,
    variant: AppVariant,
    done: Launched | None,
    status: str,
    error: str | None,
    figures: Figures | None,
    cpus: list[int] | None,
    work: Path,
) -> dict[str, Any]:
    head = figures.headline if figures is not None else None
    spec = variant.spec
    ok = status == "ok" and head is not None
    config: dict[str, Any] = {
        "argv": variant.argv,
        "env": variant.env,
        "workdir": str(work),
        "job_environment": job_environment({**os.environ, **variant.env}),
    }
    if done is not None:
        config.update(
            exit_status=done.returncode,
            tree=done.mode,
            stdout_bytes=done.stdout_bytes,
            stderr_bytes=done.stderr_bytes,
        )
        if done.leftovers:
            config["killed_at_end"] = [
                {"pid": m.pid, "comm": m.comm, "cmdline": m.cmdline} for m in done.leftovers
            ]
    summary: dict[str, Any] = {}
    if figures is not None and figures.figures:
        summary["figures"] = figures.figures
    return run.row(
        cpus=cpu_ranges(cpus) if cpus else None,
        wall_s=done.wall_s if done is not None else None,
        mono_start_ns=done.mono_start_ns if done is not None else None,
        mono_end_ns=done.mono_end_ns if done is not None else None,
        realtime_start_ns=done.realtime_start_ns if done is not None else None,
        seconds=done.wall_s if done is not None else None,
        metric=head[0] if head else spec.metric,
        value=float(head[1]) if ok and head else None,
        unit=head[2] if head else spec.unit,
        higher_is_better=bool(head[3]) if head else spec.higher_is_better,
        status=status,
        error=error,
        source="app",
        config=config,
        summary=summary or None,
    )


__all__ = ["AppInputError", "FirstTrialError", "run_app_trial", "variant_dir"]
