"""The live path on this machine with the software set: a probe counts around its timed region, and an l2sum
campaign with --events software and --monitor stores per-run counters (perf, proc) and monitor samples cut
to each trial."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from counter_tools import tool

from tailscope.cli import main
from tailscope.counters.eventsets import find
from tailscope.probes.parse import ProbeOutputError, parse_probe_output
from tailscope.store.campaign import Campaign
from tailscope.store.views import connect


def run_l2sum(*args: str, user: str | None = None) -> tuple[subprocess.CompletedProcess, list[dict]]:
    exe = str(tool("l2sum"))
    argv = [exe, "--cpus", "0", "--sums", "200", "--no-pages", *args]
    if user:
        argv = ["runuser", "-u", user, "--", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return proc, [json.loads(x) for x in proc.stdout.splitlines()]


def test_probe_counts_its_timed_region():
    proc, recs = run_l2sum("--events", str(find("software")))
    assert proc.returncode == 0, proc.stderr
    out = parse_probe_output(proc.stdout, name="l2sum")
    by = {(c["source"], c["event"]): c for c in out.counters}
    tc = by[("perf", "task_clock")]
    seconds = out.result["seconds"]
    # task-clock covers the timed region only: not more than it, and most of it for one pinned thread
    assert 0.3 * seconds * 1e9 < tc["value"] < 1.2 * seconds * 1e9 + 2e5
    assert tc["time_enabled"] >= tc["value"] and tc["time_running"] == tc["time_enabled"]
    assert tc["width"] == 64 and tc["thread"] == 0 and tc["cpu"] == 0
    assert ("rusage", "involuntary_switches") in by and ("rusage", "voluntary_switches") in by
    kinds = [r["record"] for r in recs]
    assert kinds.index("counters") > max(i for i, k in enumerate(kinds) if k == "iteration")
    assert kinds.index("counters") < kinds.index("validation")


def test_unprivileged_probe_falls_back_to_user_only():
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("needs root to run the probe as an unprivileged user")
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if paranoid < 2:
        pytest.skip(f"perf_event_paranoid is {paranoid}: user-only fallback not needed")
    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # pytest's tmp_path is private to root
        os.chmod(d, 0o755)
        exe = os.path.join(d, "l2sum")
        shutil.copy(tool("l2sum"), exe)
        os.chmod(exe, 0o755)
        proc = subprocess.run(
            [
                "runuser",
                "-u",
                "nobody",
                "--",
                exe,
                "--cpus",
                "0",
                "--sums",
                "100",
                "--no-pages",
                "--events",
                "task-clock;cycles",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    out = parse_probe_output(proc.stdout)
    (tc,) = [c for c in out.counters if c["event"] == "task-clock"]
    assert tc["user_only"] and tc["value"] > 0
    codes = [w["code"] for w in out.warnings]
    assert "counters_user_only" in codes
    msg = next(w["message"] for w in out.warnings if w["code"] == "counters_user_only")
    assert "perf_event_paranoid" in msg and "CAP_PERFMON" in msg


def test_bad_events_are_usage_errors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("EVENTS\nx rusage:bogus\n")
    proc, _ = run_l2sum("--events", str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "rusage:bogus" in proc.stderr and proc.stderr.count("\n") == 1


def test_parse_rejects_a_bad_counters_record():
    text = '{"record":"config","probe":"x"}\n{"record":"counters","source":"perf","pmu":"cpu","event":"e"}\n'
    with pytest.raises(ProbeOutputError, match="line 2: counters record lacks value"):
        parse_probe_output(text)


def test_campaign_with_events_and_monitor(tmp_path, capsys):
    camp = tmp_path / "camp"
    rc = main(
        [
            "run",
            "l2sum",
            "--trials",
            "3",
            "--cpus",
            "0,1",
            "--sums",
            "300",
            "--no-pages",
            "--events",
            "software",
            "--monitor",
            "--monitor-interval",
            "20ms",
            "--campaign",
            str(camp),
            "--no-progress",
        ]
    )
    assert rc == 0, capsys.readouterr()
    con = connect(Campaign.open(camp))
    runs = con.execute("SELECT run_id, seconds FROM runs WHERE status = 'ok'").fetchall()
    assert len(runs) == 3, con.execute("SELECT status, error FROM runs").fetchall()
    for run_id, seconds in runs:
        rows = con.execute(
            "SELECT source, pmu, unit, event, value FROM counters WHERE run_id = ?", [run_id]
        ).fetchall()
        perf = {(u, e): v for s, p, u, e, v in rows if s == "perf"}
        why = f"run {run_id} ({seconds} s): {sorted(rows)[:40]}"
        assert perf[(0, "task_clock")] > 0 and perf[(1, "task_clock")] > 0, why
        # CPU time of the pinned thread within the timed region: never more than the region (preemption by
        # the monitor or other processes on a 2-CPU machine can make it less)
        assert perf[(0, "task_clock")] < 1.2 * seconds * 1e9 + 2e5, why
        proc_rows = {(p, e) for s, p, u, e, v in rows if s == "proc"}
        assert ("proc_stat", "stat_user") in proc_rows and ("rusage", "involuntary_switches") in proc_rows
        assert ("proc_interrupts", "interrupts") in proc_rows and ("vmstat", "thp_fault_alloc") in proc_rows
        mon = {(p, u, e): v for s, p, u, e, v in rows if s == "monitor"}
        # the monitor's system-wide task-clock on a CPU running the pinned thread covers the trial
        assert mon.get(("software", 0, "task_clock"), 0) > 0.5 * seconds * 1e9, why
        assert mon[("software", 0, "task_clock")] < 1.5 * seconds * 1e9 + 2e7, why  # the trial, not the run
    samples = con.execute("SELECT count(DISTINCT sample), count(*) FROM samples").fetchone()
    assert samples[0] >= 2 and samples[1] > samples[0]
    assert list((camp / "monitor").glob("*.tsmon.jsonl"))
