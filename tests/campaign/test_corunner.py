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

from tailscope.store.campaign import Campaign
from tailscope.workflow import load_frames

pytestmark = pytest.mark.slow

WINDOW_START_S, WINDOW_LEN_S = 4.0, 4.0
MARGIN_S = 0.3  # trials this close to a window edge are ambiguous and not judged


@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng is not installed")
def test_corunner_window(tmp_path):
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
            "--campaign",
            str(campaign),
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(WINDOW_START_S)
    window_start = time.time()
    corunner = subprocess.Popen(
        ["stress-ng", "--cpu", "1", "--taskset", "1", "--quiet", "--timeout", f"{int(WINDOW_LEN_S) + 5}s"]
    )
    time.sleep(WINDOW_LEN_S)
    corunner.terminate()
    corunner.wait(timeout=30)
    window_end = time.time()
    _, err = run.communicate(timeout=600)
    assert run.returncode == 0, err

    analyze = subprocess.run(
        [sys.executable, "-m", "tailscope", "analyze", str(campaign), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert analyze.returncode == 0, analyze.stderr
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
    assert len(slow_inside) == len(inside), [
        (r["trial"], round(r["perf_ratio"], 3), round(window_times[r["run_id"]][0] - window_start, 2))
        for r in inside
        if not r["slow"]
    ]
    assert all(r["kind"] == "transient" for r in slow_inside), [
        (r["trial"], r["kind"], r["evidence"]) for r in slow_inside
    ]
    slow_outside = [(r["trial"], r["perf_ratio"]) for r in outside if r["slow"]]
    assert not slow_outside
