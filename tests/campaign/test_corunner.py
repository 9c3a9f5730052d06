"""A co-runner during a known window of a campaign: the trials inside it are slow and transient, others not.

This is the whole pipeline for real: probes in fresh processes, store, analysis (`tailscope analyze --json`).
stress-ng shares one of the probe's CPUs for a few seconds; the probe thread on that CPU loses whole scheduler
slices, so a few of its iterations (and the team's, through the barrier) are many times slower while most are
normal: the signature of interference, not of a level shift.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
import time

import pytest
from scipy.stats import fisher_exact, mannwhitneyu

from quiet import require_quiet_cpus
from tailscope.store.campaign import Campaign
from tailscope.store.read import connect
from tailscope.verbs.workflow import load_frames

pytestmark = pytest.mark.slow

WINDOW_START_S, WINDOW_LEN_S = 4.0, 4.0
MARGIN_S = 0.3  # trials this close to a window edge are ambiguous and not judged
# 4000 sums: a ~50 ms timed region. At the default 12 ms a fresh probe process can finish inside the CPU time
# the scheduler owes a newcomer and escape the co-runner altogether (seen: 2 of 60 in-window trials).
SUMS = 4000
# The co-runner takes about half of one probe CPU, so in-window trials run at 0.4-0.65 of the node median.
# The slow threshold sits between that and the node's own noise: on the shared KVM hosts this suite runs on,
# quiet l2sum trials spread 15-25% around their median (bench/bench_noise_floor.py), so the default 5% would
# flag quiet trials too. Even so, the host itself now and then takes half a vCPU from this guest for a second
# or two (seen without any co-runner: 11 of 150 consecutive quiet trials at 0.56; 17 of 114 outside trials in
# one suite run). Their timed regions had 3-8 context switches; a sched_switch trace of a quiet campaign shows
# kernel threads (rcu_preempt, kworkers) and the sandbox's own agent taking the probe CPUs, and tailscope's
# runner on a CPU for only 0.07 s of the 150 probe lifetimes. Those slow runs are real and beyond the test's
# control, so outside the window it asks for a low slow rate (at most MAX_OUTSIDE_SLOW_RATE) and for the
# window to hold the slow runs beyond chance (Fisher's exact test); a dedicated node has none outside.
THRESHOLD = 0.3
MAX_OUTSIDE_SLOW_RATE = 0.25
MIN_TRANSIENT_SHARE = 0.6
MAX_INSIDE_ESCAPED = 0.05
MIN_CORUNNER_SHARE = (
    0.15  # stress-ng's share of the probe CPUs that counts as having reached a trial (~0.35 seen)
)


@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng is not installed")
def test_corunner_window(tmp_path):
    print("CPU availability before the test:", require_quiet_cpus([0, 1]))
    campaign = tmp_path / "c"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tailscope",
            "run",
            "l2sum",
            "--trials",
            "150",
            "--cpus",
            "0,1",
            "--sums",
            str(SUMS),
            "--campaign",
            str(campaign),
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(WINDOW_START_S)
    corunner = subprocess.Popen(
        ["stress-ng", "--cpu", "1", "--taskset", "1", "--quiet", "--timeout", f"{int(WINDOW_LEN_S) + 5}s"]
    )
    window_start = _worker_started(corunner.pid)  # stress-ng forks its worker a moment after it starts
    time.sleep(WINDOW_LEN_S)
    corunner.terminate()
    corunner.wait(timeout=30)
    window_end = time.time()
    _, err = run.communicate(timeout=600)
    assert run.returncode == 0, err

    analyze = subprocess.run(
        [
            sys.executable,
            "-m",
            "tailscope",
            "analyze",
            str(campaign),
            "--json",
            "--threshold",
            str(THRESHOLD),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    # 0 healthy, 1 degraded, 3 inconclusive (this shared guest's own noise may leave the node unjudgeable);
    # the per-run classification below is what this test judges
    assert analyze.returncode in (0, 1, 3), analyze.stderr
    runs = json.loads(analyze.stdout)["runs"]
    assert len(runs) == 150

    # Each trial's process window, as the store recorded it: started_at and wall_s of the runs table.
    stored = load_frames(Campaign.open(campaign))[0].set_index("run_id")
    inside, outside = [], []
    window_times = {}
    for r in runs:
        start = dt.datetime.fromisoformat(r["started_at"]).timestamp()
        end = start + float(stored.loc[r["run_id"], "wall_s"])
        window_times[r["run_id"]] = (start, end)
        if start >= window_start + MARGIN_S and end <= window_end - MARGIN_S:
            inside.append(r)
        elif end < window_start - MARGIN_S or start > window_end + MARGIN_S:
            outside.append(r)
    assert len(inside) >= 5 and len(outside) >= 50, (len(inside), len(outside))
    slow_inside = [r for r in inside if r["slow"]]
    # The evidence: every in-window trial recorded stress-ng's worker on the probe CPUs, with its share of
    # them, and no trial outside the window did. A fresh probe process now and then runs ahead of the
    # co-runner for its whole 50 ms timed region (seen: 1 of 23); at most MAX_INSIDE_ESCAPED of them may.
    with connect(Campaign.open(campaign)) as con:
        rows = con.corunners([r["run_id"] for r in runs])
    stress = rows[rows["comm"].str.startswith("stress-ng")].groupby("run_id")["share"].sum()
    escaped = [r for r in inside if stress.get(r["run_id"], 0.0) < MIN_CORUNNER_SHARE]
    assert len(escaped) <= MAX_INSIDE_ESCAPED * len(inside), [
        (r["trial"], round(r["perf_ratio"], 3), round(window_times[r["run_id"]][0] - window_start, 2))
        for r in escaped
    ]
    assert not [r["trial"] for r in outside if r["run_id"] in stress.index]
    # The effect: the in-window trials are slower than the others beyond chance. How much slower is the host's
    # to decide as much as the co-runner's: quiet l2sum trials on this guest move between two levels (ratios
    # 0.8 and 1.6 around the median in one run), so in one run the co-runner's 35% of CPU 1 made trials 0.55
    # of the median for 1.6 s and 0.83 for the next 2 s, below the 0.7 slow line only in the first part.
    inside_ratios = [r["perf_ratio"] for r in inside]
    outside_ratios = [r["perf_ratio"] for r in outside]
    assert mannwhitneyu(inside_ratios, outside_ratios, alternative="less").pvalue < 1e-4, (
        sorted(inside_ratios),
        sorted(outside_ratios),
    )
    # the slow flag follows the threshold, and a slow in-window trial is blamed on the co-runner by name
    assert all(r["slow"] == (r["perf_ratio"] < 1.0 - THRESHOLD) for r in runs)
    assert slow_inside, sorted(inside_ratios)
    for r in slow_inside:
        top = r["causes"][0]
        assert top["cause"] == "cpu-contention", (r["trial"], r["causes"])
        assert "stress-ng" in top["sentence"], top["sentence"]
    # Interference is transient: a few iterations lose whole scheduler slices. On this shared guest a trial
    # now and then runs every iteration at about half speed instead (the same uniform 0.55 seen outside the
    # window without any co-runner: the host's doing, see above); the classifier rightly calls those
    # systematic. And when the host moved the node's quiet runs between levels, the iteration noise of its
    # normal runs (sigma) can put the low cut 1 - max(s/2, 3 sigma) below every iteration of a slow run: the
    # classifier then says "unclassified", as its rule states (seen once in 14 runs: all 23 in-window trials).
    # Most classified in-window trials must be transient, and the others that uniform half speed.
    transient = [r for r in slow_inside if r["kind"] == "transient"]
    uniform = [r for r in slow_inside if r["kind"] == "systematic" and r["evidence"]["median_ratio"] < 0.7]
    noise_bound = [
        r
        for r in slow_inside
        if r["kind"] == "unclassified" and r["evidence"]["low_cut"] < 1.0 - r["slowdown"] / 2.0 - 1e-9
    ]
    kinds = f"{len(transient)} transient, {len(uniform)} uniform, {len(noise_bound)} noise-bound"
    print("in-window slow trials:", kinds)
    assert len(transient) >= MIN_TRANSIENT_SHARE * (len(slow_inside) - len(noise_bound)), [
        (r["trial"], r["kind"], r["evidence"]) for r in slow_inside if r["kind"] != "transient"
    ]
    assert len(transient) + len(uniform) + len(noise_bound) == len(slow_inside), [
        (r["trial"], r["kind"], r["evidence"])
        for r in slow_inside
        if r not in transient + uniform + noise_bound
    ]
    slow_outside = [(r["trial"], r["perf_ratio"]) for r in outside if r["slow"]]
    assert len(slow_outside) <= MAX_OUTSIDE_SLOW_RATE * len(outside), slow_outside
    table = [
        [len(slow_inside), len(inside) - len(slow_inside)],
        [len(slow_outside), len(outside) - len(slow_outside)],
    ]
    assert fisher_exact(table, alternative="greater").pvalue < 1e-3, table


def _worker_started(pid: int) -> float:
    """The time stress-ng's worker process exists (the co-runner really runs from then on)."""
    children = f"/proc/{pid}/task/{pid}/children"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(children) as f:
                if f.read().split():
                    return time.time()
        except FileNotFoundError:
            break
        time.sleep(0.01)
    pytest.fail(f"stress-ng (pid {pid}) started no worker within 10 s")
