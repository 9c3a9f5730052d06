"""`tailscope run` end to end with the real probes: trials stored, interrupts, resume, bad input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shell import as_from_a_shell
from store_tools import stored
from tailscope.cli import main

# Small, fast l2sum trials (a 256 KiB chunk per thread, 40 passes): ~20-40 ms per process.
FAST = ["--chunk-bytes", "256k", "--sums", "40", "--sums-per-iteration", "4", "--cpus", "0"]


def tailscope(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tailscope", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_shell,
        **kwargs,
    )


def test_run_stores_trials_iterations_and_node_facts(tmp_path, capsys):
    campaign = tmp_path / "c"
    assert main(["run", "l2sum", "--trials", "4", "--campaign", str(campaign), "--no-progress", *FAST]) == 0
    out = capsys.readouterr().out
    assert f"campaign: {campaign}" in out and "trials stored: 4 (0 not ok)" in out
    runs = stored(
        campaign,
        "SELECT trial, status, probe, unit, higher_is_better, value, cpus, threads FROM runs ORDER BY trial",
    )
    assert [r[0] for r in runs] == [0, 1, 2, 3]
    assert all(
        r[1:5] == ("ok", "l2sum", "GB/s", True) and r[5] > 0 and r[6] == "0" and r[7] == 1 for r in runs
    )
    # 40 passes in iterations of 4 = 10 timed iterations + 1 warm-up, each with a thread and a team record.
    counts = stored(
        campaign,
        "SELECT run_id, count(*) FILTER (WHERE NOT warmup), "
        "count(*) FILTER (WHERE warmup), count(DISTINCT thread) FROM iterations GROUP BY 1",
    )
    assert len(counts) == 4 and all(c[1:] == (20, 2, 1) for c in counts)
    node = stored(campaign, "SELECT node, cpu_vendor, threads, facts FROM nodes")
    assert len(node) == 1 and node[0][2] == os.cpu_count()
    # A second `run` of the same variant adds trials after the stored ones.
    assert main(["run", "l2sum", "--trials", "2", "--campaign", str(campaign), "--no-progress", *FAST]) == 0
    assert [r[0] for r in stored(campaign, "SELECT trial FROM runs ORDER BY trial")] == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_interrupted_campaign_resumes_without_duplicates_or_losses(tmp_path, how):
    campaign = tmp_path / "c"
    total = 400  # enough trials after the first commit (every 50) for the signal to land mid-run
    proc = tailscope(
        "run", "l2sum", "--trials", str(total), "--campaign", str(campaign), "--no-progress", *FAST
    )
    shard_dir = campaign / "shards" / "runs"
    deadline = time.monotonic() + 120
    # Let some trials finish (a first chunk is flushed every 50 trials) and interrupt in the middle.
    while time.monotonic() < deadline and not (shard_dir.is_dir() and any(shard_dir.glob("*.parquet"))):
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(how)
    _, err = proc.communicate(timeout=60)
    if how == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 130, err
        assert "--resume" in err
    before = stored(campaign, "SELECT count(*), count(DISTINCT trial) FROM runs")[0]
    assert 0 < before[0] < total and before[0] == before[1]
    assert main(["run", "--resume", "--campaign", str(campaign), "--no-progress"]) == 0
    trials = [r[0] for r in stored(campaign, "SELECT trial FROM runs WHERE status = 'ok' ORDER BY trial")]
    assert trials == list(range(total))
    # Every iteration row belongs to exactly one visible run; nothing orphaned is visible.
    assert stored(campaign, "SELECT count(DISTINCT run_id) FROM iterations")[0][0] == total


def test_unknown_probe_is_usage_error(tmp_path, capsys):
    assert main(["run", "l3sum", "--trials", "3", "--campaign", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "unknown probe 'l3sum'" in err and "l2sum" in err
    assert not (tmp_path / "c").exists()


def test_cpu_that_does_not_exist_is_named_and_nothing_is_created(tmp_path, capsys):
    bad = str(os.cpu_count() + 5)
    assert (
        main(["run", "l2sum", "--trials", "3", "--campaign", str(tmp_path / "c"), "--cpus", f"0,{bad}"]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("tailscope: error: l2sum: error: --cpus") and f"CPU {bad}" in err
    assert "\n" not in err
    assert not (tmp_path / "c").exists()


def test_impossible_page_policy_names_the_knob(tmp_path, capsys):
    reserved = Path("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages")
    if reserved.exists() and int(reserved.read_text()) > 0:
        pytest.skip("1 GiB pages are reserved on this machine")
    assert main(["run", "l2sum", "--trials", "3", "--campaign", str(tmp_path / "c"), "--page", "1g"]) == 2
    err = capsys.readouterr().err
    assert "1g" in err.lower() or "1 gib" in err.lower()
    assert "nr_hugepages" in err or "hugepages=" in err
    assert not (tmp_path / "c").exists()
    # A comma list is checked value by value (each value is one variant).
    assert main(["run", "l2sum", "--trials", "3", "--page", "2m,3m"]) == 2
    assert "--page 3m: expected one of 4k, thp, 2m, 1g" in capsys.readouterr().err


def test_existing_campaign_is_untouched_by_a_rejected_run(tmp_path, capsys):
    campaign = tmp_path / "c"
    assert main(["run", "l2sum", "--trials", "2", "--campaign", str(campaign), "--no-progress", *FAST]) == 0
    manifest = (campaign / "campaign.json").read_bytes()
    shards = sorted(p.name for p in (campaign / "shards").rglob("*.parquet"))
    assert main(["run", "l2sum", "--trials", "2", "--campaign", str(campaign), "--cpus", "999"]) == 2
    assert (campaign / "campaign.json").read_bytes() == manifest
    assert sorted(p.name for p in (campaign / "shards").rglob("*.parquet")) == shards
