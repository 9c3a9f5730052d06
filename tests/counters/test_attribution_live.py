"""The live path on this VM: an l2sum campaign with the software event set, a co-runner on the probe's CPU for
known trials, and the attribution ranking the counters of lost CPU time (involuntary switches, context
switches, CPU time lost) at the top, with those trials flagged by the OS-interference check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quiet import require_quiet_cpus
from tailscope.native import NativeMissingError, native_path

pytestmark = pytest.mark.slow

QUIET, DISTURBED = 24, 6
# Counters of CPU time the probe lost: its own (task-clock vs wall, involuntary and all context switches) ...
LOST_CPU = {"derived/cpu_time_lost", "rusage/involuntary_switches", "software/context_switches"}


def about_cpu_time(counter: str) -> bool:
    """... and the CPU-time accounting around it: the probe's CPU share (task-clock per second) and, per CPU
    from /proc/stat and /proc/interrupts (system-wide), the co-runner's time on the probe's CPU."""
    return (
        counter in LOST_CPU
        or counter in {"software/task_clock/s", "proc_interrupts/interrupts/s"}
        or (counter.startswith("proc_stat/stat_") and counter.endswith("/s"))
    )


def tailscope(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tailscope", *argv], capture_output=True, text=True, timeout=600
    )


@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng is not installed")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs (probe and co-runner share CPU 1)")
def test_corunner_trials_are_explained_by_lost_cpu_time(tmp_path: Path) -> None:
    try:
        native_path("l2sum")
    except NativeMissingError as exc:
        pytest.skip(str(exc))
    print("CPU availability before the test:", require_quiet_cpus([0, 1]))
    campaign = str(tmp_path / "c")
    common = [
        "l2sum",
        "--cpus",
        "1",
        "--sums",
        "6000",
        "--events",
        "software",
        "--campaign",
        campaign,
        "--no-progress",
    ]
    first = tailscope("run", *common, "--trials", str(QUIET))
    if first.returncode == 2 and "events" in first.stderr:
        pytest.skip(f"this l2sum build takes no --events: {first.stderr.strip()}")
    assert first.returncode == 0, first.stderr
    corunner = subprocess.Popen(["stress-ng", "--cpu", "1", "--taskset", "1", "--quiet", "--timeout", "120s"])
    try:
        disturbed = tailscope("run", *common, "--trials", str(DISTURBED))
    finally:
        corunner.terminate()
        corunner.wait(timeout=30)
    assert disturbed.returncode == 0, disturbed.stderr
    assert tailscope("run", *common, "--trials", str(QUIET)).returncode == 0
    result = tailscope("analyze", campaign, "--json")
    assert result.returncode in (0, 1, 3), result.stderr  # the node verdict may be inconclusive (noisy VM)
    doc = json.loads(result.stdout)
    runs = {r["run_id"]: r for r in doc["runs"]}
    disturbed_ids = {rid for rid, r in runs.items() if QUIET <= r["trial"] < QUIET + DISTURBED}
    assert len(disturbed_ids) == DISTURBED
    (variant,) = doc["attribution"]["variants"]
    ranked = [c["counter"] for c in variant["counters"]]
    print("ranking:", ranked[:6], "slow runs:", variant["slow_runs"])
    print("disturbed perf ratios:", sorted(round(runs[r]["perf_ratio"], 3) for r in disturbed_ids))
    assert sum(runs[r]["slow"] for r in disturbed_ids) >= DISTURBED - 1
    # The group ranking: other slow runs (this VM is shared) dilute it, so lost CPU time must be near the top.
    scores = {c["counter"]: c for c in variant["counters"]}
    assert all(about_cpu_time(c) for c in ranked[:3]), ranked[:6]
    # Above it may rank only CPU-time accounting and system-wide counters that move with the co-runner itself
    # (its page allocations count in vmstat's numa_hit/numa_local); seen once in a clean-clone CI run:
    # user, idle, interrupts, numa_hit, numa_local, system, ... and cpu_time_lost 9th, with 10 quiet trials
    # slowed by the host beside the 6 disturbed ones.
    above = ranked[: ranked.index("derived/cpu_time_lost")]
    assert len(above) < 12 and all(about_cpu_time(c) or c.startswith("vmstat/") for c in above), above
    lost = scores["derived/cpu_time_lost"]
    assert lost["pearson_r"] > 0.8, lost  # the run time follows the CPU time lost
    assert {"rusage/involuntary_switches", "software/context_switches"} & set(ranked[:8]), ranked[:8]
    # Each disturbed trial on its own: its most abnormal counters are those of lost CPU time.
    per_run = {r["run_id"]: r for r in variant["slow_run_counters"]}
    explained = 0
    for run_id in disturbed_ids & set(per_run):
        names = [a["counter"] for a in per_run[run_id]["abnormal"][:3]]
        print("disturbed trial", runs[run_id]["trial"], names)
        explained += any(about_cpu_time(n) for n in names)
    assert explained >= DISTURBED - 2  # this VM is shared: a quiet trial may be hit too and raise the spread
    check = variant["interference"]
    assert check is not None
    print("interference check:", check["method"], check["flagged"], "flagged")
    assert check["counter"] == "derived/cpu_time_lost"
    assert len(disturbed_ids & set(check["flagged_runs"])) >= DISTURBED - 2, check
