"""The live path on this VM: an l2sum campaign with the software event set, a co-runner on the probe's CPU for
known trials, and the attribution ranking the counters of lost CPU time (involuntary switches, context
switches, CPU time lost) at the top, with those trials flagged by the OS-interference check. The quiet trials
are the control: they measure what the rest of the machine did, and the co-runner's share is judged only where
it stands out from that."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quiet import corunner_on
from tailscope.analysis import robust
from tailscope.native import NativeMissingError, native_path

pytestmark = pytest.mark.slow

QUIET, DISTURBED = 24, 6
ROBUST_CUT = 3.5  # tailscope analyze's default robust cut (modified z) for slow runs and abnormal counters
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


# The probe and its co-runner run at this nice level where permitted (root): CPU-bound work of others at
# nice 0 then takes little of their CPU (weight 1,024 beside 29,154 each), so the co-runner, not the rest
# of the machine, sets the contrast between quiet and disturbed trials.
PRIORITY = -15


def raised() -> None:
    with contextlib.suppress(OSError):  # not permitted: the trials run at the caller's priority
        os.nice(PRIORITY)


def tailscope(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tailscope", *argv],
        capture_output=True, text=True, timeout=600, preexec_fn=raised,
    )  # fmt: skip


@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng is not installed")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs (probe and co-runner share CPU 1)")
def test_corunner_trials_are_explained_by_lost_cpu_time(tmp_path: Path) -> None:
    try:
        native_path("l2sum")
    except NativeMissingError as exc:
        pytest.skip(str(exc))
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
    with corunner_on(1, preexec_fn=raised):
        disturbed = tailscope("run", *common, "--trials", str(DISTURBED))
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
    by_trial = sorted(runs.values(), key=lambda r: r["trial"])
    print("perf ratios by trial:", [round(r["perf_ratio"], 2) for r in by_trial])
    # The control: what the rest of the machine did to the quiet trials, against what the co-runner did.
    quiet = np.array([r["perf_ratio"] for rid, r in runs.items() if rid not in disturbed_ids])
    disturbed_median = float(np.median([runs[r]["perf_ratio"] for r in disturbed_ids]))
    noise = robust.robust_sigma(quiet)
    contrast = (float(np.median(quiet)) - disturbed_median) / noise if noise > 0 else math.inf
    print(f"quiet trials: median {np.median(quiet):.2f}, robust sigma {noise:.3f}; disturbed median "
          f"{disturbed_median:.2f}: the co-runner's effect is {contrast:.1f} sigma of the machine's")
    # Whatever slowed the trials, lost CPU time ranks among the counters of CPU time: above it may rank only
    # CPU-time accounting and system-wide counters that move with the co-runner or the rest of the machine
    # (page allocations count in vmstat's numa_hit/numa_local); seen once in a clean-clone CI run: user, idle,
    # interrupts, numa_hit, numa_local, system, ... and cpu_time_lost 9th, with 10 quiet trials slowed by the
    # host beside the 6 disturbed ones.
    scores = {c["counter"]: c for c in variant["counters"]}
    above = ranked[: ranked.index("derived/cpu_time_lost")]
    assert len(above) < 12 and all(about_cpu_time(c) or c.startswith("vmstat/") for c in above), above
    lost = scores["derived/cpu_time_lost"]
    # What the co-runner did is judged only where it stands out from what the rest of the machine did to the
    # quiet trials by the analysis's own cut. Where it does not (beside four CPU-bound loops and a loaded
    # host: quiet trials at 0.45-2.1 of the median, 20-24 of 54 trials slow, 0.9-2.9 sigma), the ranking
    # follows the machine (steal time, vmstat's allocation counters in the top 3, context switches not in
    # the top 8: no context switch counts steal time) and no trial stands out on its own.
    if contrast < ROBUST_CUT:
        pytest.skip(
            f"cpu_time_lost ranks {len(above) + 1}. (r = {lost['pearson_r']:.2f}), but the machine moved "
            f"the quiet trials by {noise:.3f} (robust sigma of their perf ratios) and the co-runner the "
            f"disturbed ones only {contrast:.1f} times that (needs {ROBUST_CUT}): the co-runner's share "
            "cannot be judged here now"
        )
    assert all(about_cpu_time(c) for c in ranked[:3]), ranked[:6]
    assert lost["pearson_r"] > 0.8, lost  # the run time follows the CPU time lost
    assert {"rusage/involuntary_switches", "software/context_switches"} & set(ranked[:8]), ranked[:8]
    assert sum(runs[r]["slow"] for r in disturbed_ids) >= DISTURBED - 1
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
