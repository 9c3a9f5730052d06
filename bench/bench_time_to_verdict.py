#!/usr/bin/env python3
"""Time to a verdict of `check` stopping when settled, against the fixed check (issue 33), on this node.

    PYTHONPATH=src .venv/bin/python bench/bench_time_to_verdict.py [--repeats 5] [--fixed-repeats 1]
        [--only healthy,quota,busy,budget,fixed] [--history DIR] [--keep DIR] [--take-as-healthy]

First a history of this node: one fixed `check --quick` (40/6/6/8 trials) added to a fresh history, unless
--history names one with this node's check variants. Then each case, --repeats times, each a real
`tailscope check --history COPY --json` (a fresh copy of the history each time, so one case's entries are no
other's baseline), timed from the command's start to its exit (start-up, trials, analysis, report):
- healthy: nothing else started. Target: healthy within 30 s.
- quota: the check runs under a cgroup CPU quota taking 10% of every CPU's time (`tailscope inject
  cpu-quota --intensity 0.1 --pid` of a launcher that then starts the check: its probes inherit the cgroup;
  the injection takes the node lock as every injection does). Target: degraded within 20 s.
- busy: `stress-ng --cpu NCPU` for the whole check. Target: inconclusive within 10 s.
- budget: `check --budget 20s`. Target: back within 20 s + 5 s (start-up and analysis).
- fixed: `check --fixed` (today's 200/20/20/30 trials), --fixed-repeats times: the ratio's denominator.
Prints each run (exit, verdict, seconds, trials, stop reason) and per case the median with the target,
PASS/MISS, and the ratio to the fixed check's median.

Disturbance: this machine may be shared. Before and after every run the bench reads the 1-minute load
average and /proc/stat's busy share of all CPUs over the run, and prints both beside the run together with
the check's own measure (others' share of its probe CPUs in the median trial, from its evidence): a run
beside other work says so, and its time is not a quiet node's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TAILSCOPE = [sys.executable, "-m", "tailscope"]
# waits on stdin while the quota is put on it, then becomes the check (exec): its probes inherit the cgroup
LAUNCHER = "import os, sys; sys.stdin.readline(); os.execv(sys.argv[1], sys.argv[1:])"
TARGETS = {"healthy": ("healthy", 30.0), "quota": ("degraded", 20.0), "busy": ("inconclusive", 10.0),
           "budget": (None, 25.0), "fixed": (None, None)}  # fmt: skip


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, sum(fields)


@dataclass
class Run:
    case: str
    code: int
    verdict: str
    seconds: float
    trials: str
    reason: str
    load_before: float
    load_after: float
    machine_busy: float  # busy share of all CPUs over the run (the check's own work included)
    others: float | None  # others' share of the probe CPUs in the check's median trial (its evidence)


def check(args: list[str], history: Path, workdir: Path, *, under_quota: bool = False) -> Run:
    case_history = workdir / f"h-{time.monotonic_ns()}"
    shutil.copytree(history, case_history)
    campaign = workdir / f"c-{time.monotonic_ns()}"
    argv = [*TAILSCOPE, "check", "--json", "--no-progress", "--history", str(case_history),
            "--campaign", str(campaign), *args]  # fmt: skip
    load_before = os.getloadavg()[0]
    busy0, total0 = cpu_times()
    start = time.monotonic()
    if under_quota:
        launcher = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        inject = ["inject", "cpu-quota", "--intensity", "0.1", "--pid", str(launcher.pid), "--wait", "120"]
        quota = subprocess.Popen(
            [*TAILSCOPE, *inject],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            ready = quota.stdout.readline() if quota.stdout else ""
            if '"ready"' not in ready:
                why = quota.stderr.read() if quota.stderr else ""
                raise SystemExit(f"cpu-quota did not start: {ready}{why}")
            start = time.monotonic()
            out, err = launcher.communicate(input="go\n")
            code = launcher.returncode
        finally:
            if launcher.poll() is None:
                launcher.kill()
                launcher.wait()
            quota.send_signal(signal.SIGTERM)  # the injector puts the quota back (its journal, the node lock)
            quota.wait(timeout=120)
    else:
        proc = subprocess.run(argv, capture_output=True, text=True)
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    seconds = time.monotonic() - start
    busy1, total1 = cpu_times()
    try:
        doc = json.loads(out)
    except ValueError:
        raise SystemExit(f"check gave no JSON (exit {code}): {err.strip()[-2000:]}") from None
    stop = doc.get("stopping") or {}
    trials = ", ".join(f"{v.split('-')[0]} {n}" for v, n in (stop.get("trials") or {}).items() if n)
    others = _others_share(campaign)
    shutil.rmtree(case_history, ignore_errors=True)
    return Run(
        case="",
        code=code,
        verdict=doc["verdict"],
        seconds=seconds,
        trials=trials or str(doc["trials"]["stored"]),
        reason=str(stop.get("reason", "fixed trial counts")),
        load_before=load_before,
        load_after=os.getloadavg()[0],
        machine_busy=(busy1 - busy0) / max(total1 - total0, 1.0),
        others=others,
    )


def _others_share(campaign: Path) -> float | None:
    proc = subprocess.run([*TAILSCOPE, "analyze", str(campaign), "--json"], capture_output=True, text=True)
    try:
        nodes = json.loads(proc.stdout)["nodes"]
    except (ValueError, KeyError):
        return None
    shares = [n["busy_share"] for n in nodes if n.get("busy_share") is not None]
    return shares[0] if shares else None


def make_history(workdir: Path, *, take_as_healthy: bool = False) -> Path:
    history = workdir / "history"
    campaign = workdir / "base"
    print("history: one fixed `check --quick` of this node ...", flush=True)
    proc = subprocess.run([*TAILSCOPE, "check", "--quick", "--no-progress", "--campaign", str(campaign),
                           *([] if take_as_healthy else ["--history", str(history)])],
                          capture_output=True, text=True)  # fmt: skip
    if take_as_healthy:
        add_as_healthy(history, campaign)
        print(f"history: {history} (the check's exit {proc.returncode}, its entries TAKEN AS HEALTHY by "
              f"--take-as-healthy; load {os.getloadavg()[0]:.2f})")
        return history
    print(f"history: {history} (the check's exit {proc.returncode}; load {os.getloadavg()[0]:.2f})")
    if not history.exists():
        raise SystemExit(f"no history was written: {proc.stderr.strip()[-2000:]}")
    if proc.returncode != 0:  # only healthy entries are a baseline (verbs/baseline.py)
        print(f"history: the check was not healthy (exit {proc.returncode}): its entries are no baseline, "
              "and the cases below run without one; rerun on a quiet node, or with --take-as-healthy")
    return history


def add_as_healthy(history: Path, campaign: Path) -> None:
    """The campaign's entries added through the history's own path with the verdict healthy, as an operator
    who knows the node is sound would declare it: on a guest whose neighbours never leave it quiet (the
    check's own verdict is then busy or noisy, and only healthy entries are a baseline) this is the only way
    to time the cases against a history at all. The level is the campaign's own (its trials' medians)."""
    import dataclasses

    from tailscope.analysis.model import Settings
    from tailscope.history.store import open_history
    from tailscope.verbs.history import summarize_campaign

    summary = summarize_campaign(campaign, Settings())
    entries = tuple(dataclasses.replace(e, verdict="healthy") for e in summary.entries)
    open_history(history).add(dataclasses.replace(summary, entries=entries))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fixed-repeats", type=int, default=1)
    parser.add_argument("--only", default="healthy,quota,busy,budget,fixed")
    parser.add_argument("--history", type=Path, help="a history with this node's check variants")
    parser.add_argument("--keep", type=Path, help="keep the campaigns here (default: a temporary directory)")
    parser.add_argument("--take-as-healthy", action="store_true",
                        help="add the baseline check's entries as healthy whatever it judged (noisy guests)")
    args = parser.parse_args()
    cases = args.only.split(",")
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="ts-ttv-"))
    workdir.mkdir(parents=True, exist_ok=True)
    ncpu = os.cpu_count() or 1
    history = args.history or make_history(workdir, take_as_healthy=args.take_as_healthy)
    runs: dict[str, list[Run]] = {}
    for case in cases:
        repeats = args.fixed_repeats if case == "fixed" else args.repeats
        for _ in range(repeats):
            stress = None
            if case == "busy":
                stress = subprocess.Popen(["stress-ng", "--cpu", str(ncpu), "--quiet"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
                time.sleep(0.5)
            try:
                extra = {"budget": ["--budget", "20s"], "fixed": ["--fixed"]}.get(case, [])
                run = check(extra, history, workdir, under_quota=case == "quota")
            finally:
                if stress is not None:
                    stress.send_signal(signal.SIGTERM)
                    stress.wait(timeout=30)
            run.case = case
            runs.setdefault(case, []).append(run)
            others = "-" if run.others is None else f"{100 * run.others:.0f}%"
            print(
                f"{case:8s} exit {run.code} {run.verdict:12s} {run.seconds:6.1f} s  trials: {run.trials}; "
                f"{run.reason}; disturbance: load {run.load_before:.2f}->{run.load_after:.2f}, all CPUs "
                f"{100 * run.machine_busy:.0f}% busy, others on the probe CPUs {others}",
                flush=True,
            )
    fixed = statistics.median(r.seconds for r in runs["fixed"]) if runs.get("fixed") else None
    print("\ncase     median s  target                verdicts                       vs fixed")
    for case, rs in runs.items():
        median = statistics.median(r.seconds for r in rs)
        want, limit = TARGETS[case]
        verdicts = ", ".join(sorted({r.verdict for r in rs}))
        met = (limit is None or median <= limit) and (want is None or all(r.verdict == want for r in rs))
        target = f"{want or 'any'} <= {limit:g} s" if limit else "-"
        ratio = f"{median / fixed:.2f}x" if fixed else "-"
        status = "" if limit is None else ("PASS" if met else "MISS")
        print(f"{case:8s} {median:8.1f}  {target:21s} {verdicts:30s} {ratio:>8s} {status}")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
