"""A real probe trial with a real co-runner on its CPU: the evidence names the co-runner and shows the CPU
time it took, compared with control trials of the same test (never an absolute threshold: the machine may be
busy with other work)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from tailscope.campaign.runner import Trial, TrialRows, run_trial
from tailscope.evidence.collector import EvidenceCollector, EvidenceSettings
from tailscope.probes.catalogue import ProbeVariant
from tailscope.store.campaign import Campaign
from tailscope.store.schema import TABLES

BUSY_LOOP = "import os; os.sched_setaffinity(0, {0}); x = 0\nwhile True: x += 1"
TRIALS = 5
HOGS = 2  # two pinned busy loops: a clear step even when other work already keeps CPU 0 busy


def value(rows: TrialRows, pmu: str, unit: int, event: str) -> float:
    (v,) = [r["value"] for r in rows.counters if (r["pmu"], r["unit"], r["event"]) == (pmu, unit, event)]
    return float(v)


def test_corunner_is_named_and_its_time_shows(tmp_path: Path) -> None:
    campaign = Campaign.create(tmp_path / "c")
    variant = ProbeVariant("l2sum", {"cpus": "0", "sums": 4000, "no_pages": True})
    # budget 1: a process scan on every trial that wants one (the default budget spaces them out; that is
    # bench/bench_evidence.py's business, this test checks what a scan finds)
    collector = EvidenceCollector(EvidenceSettings(budget=1.0))

    def trial(i: int) -> TrialRows:
        rows = run_trial(campaign, Trial(variant, i), node="n", task="t", timeout_s=120, evidence=collector)
        assert rows.runs[0]["status"] == "ok", rows.runs[0]["error"]
        return rows

    control = [trial(i) for i in range(TRIALS)]
    hogs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(HOGS)]
    try:
        time.sleep(0.2)  # pinned and spinning
        loaded = [trial(TRIALS + i) for i in range(TRIALS)]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    pids = {hog.pid for hog in hogs}

    def per_wall(rows: TrialRows, pmu: str, unit: int, event: str) -> float:
        return value(rows, pmu, unit, event) / value(rows, "trial", None, "wall_s")  # type: ignore[arg-type]

    # CPU 0's time used by others, and the probe thread's wait on the run queue, both per second of trial
    for pmu, unit, event in (("cpu", 0, "others_s"), ("task", 0, "run_delay_s")):
        quiet = statistics.median(per_wall(r, pmu, unit, event) for r in control)
        busy = statistics.median(per_wall(r, pmu, unit, event) for r in loaded)
        assert busy > quiet, (event, quiet, busy)
    # the co-runners are named, with their pids and a substantial share of CPU 0, in the loaded trials only.
    # Substantial, on a machine that may be busy with other work: a busy loop and the probe's thread are both
    # CPU-bound with the same weight, so the scheduler gives each about the same share of CPU 0; judge each
    # hog's share against the probe thread's own share in the same trial.
    ratios = []
    for rows in loaded:
        mine = [c for c in rows.corunners if c["pid"] in pids]
        for c in mine:
            assert c["comm"].startswith("python") and "sched_setaffinity" in (c["cmdline"] or "")
        hog_share = sum(c["share"] for c in mine) / HOGS
        ratios.append(hog_share / per_wall(rows, "task", 0, "run_s"))
    assert statistics.median(ratios) >= 0.4, ratios
    assert not any(c["pid"] in pids for rows in control for c in rows.corunners)
    # the rows fit the store
    for rows in loaded:
        for name, table in rows.tables().items():
            assert table.schema.equals(TABLES[name].schema)


def test_quiet_trial_has_the_contract_rows(tmp_path: Path) -> None:
    campaign = Campaign.create(tmp_path / "c")
    variant = ProbeVariant("l2sum", {"cpus": "0,1", "sums": 500, "no_pages": True})
    collector = EvidenceCollector()
    rows = run_trial(campaign, Trial(variant, 0), node="n", task="t", timeout_s=120, evidence=collector)
    assert rows.runs[0]["status"] == "ok"
    got = {(r["pmu"], r["unit"], r["event"]) for r in rows.counters if r["source"] == "os"}
    for cpu in (0, 1):
        for event in ("user_s", "system_s", "idle_s", "steal_s", "others_s", "interrupts", "effective_mhz"):
            assert ("cpu", cpu, event) in got
    # The main thread is read exactly (from the zombie); the worker only while alive, so a short quiet trial
    # may end before its first read: its rows, when present, carry every event.
    threads = [0, 1] if any(k[:2] == ("task", 1) for k in got) else [0]
    for thread in threads:
        for event in ("run_s", "run_delay_s", "voluntary_switches", "involuntary_switches", "minflt"):
            assert ("task", thread, event) in got
    assert ("trial", None, "wall_s") in got and ("vm", None, "numa_hit") in got
    # the threads' time adds up to the process's own CPU time, which cannot exceed 2 CPUs x wall time
    run = sum(value(rows, "task", t, "run_s") for t in threads)
    assert 0 < run <= 2 * value(rows, "trial", None, "wall_s")  # type: ignore[arg-type]
    mhz = value(rows, "cpu", 0, "effective_mhz")
    assert 100 < mhz < 10000
    off = run_trial(campaign, Trial(variant, 1), node="n", task="t", timeout_s=120, evidence=None)
    assert not [r for r in off.counters if r["source"] == "os"] and not off.corunners


def test_optional_parts_wait_for_credit_but_a_new_variant_always_gets_its_clock(tmp_path: Path) -> None:
    campaign = Campaign.create(tmp_path / "c")
    a = ProbeVariant("l2sum", {"cpus": "0", "sums": 100, "no_pages": True})
    b = ProbeVariant("l2sum", {"cpus": "0", "sums": 101, "no_pages": True})
    collector = EvidenceCollector(EvidenceSettings(budget=0.0))  # no credit is ever earned

    def has_clock(variant: ProbeVariant, i: int) -> bool:
        rows = run_trial(campaign, Trial(variant, i), node="n", task="t", timeout_s=120, evidence=collector)
        return any(r["event"] == "effective_mhz" for r in rows.counters)

    assert has_clock(a, 0)  # the first trial of a variant
    collector._credit_s["clock"] = 0.0  # the starting credit spent
    assert not has_clock(a, 1)
    assert has_clock(b, 0)


def test_between_full_scans_the_busiest_processes_are_still_named(tmp_path: Path) -> None:
    campaign = Campaign.create(tmp_path / "c")
    variant = ProbeVariant("l2sum", {"cpus": "0", "sums": 4000, "no_pages": True})
    collector = EvidenceCollector()
    hog = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    try:
        time.sleep(0.2)
        named = []
        for i in range(3):
            if i > 0:
                collector._credit_s["scan"] = -1.0  # no full scan affordable: only the light re-read
            rows = run_trial(
                campaign, Trial(variant, i), node="n", task="t", timeout_s=120, evidence=collector
            )
            named.append([c["share"] for c in rows.corunners if c["pid"] == hog.pid])
    finally:
        hog.kill()
        hog.wait()
    assert named[0], "the full scan of the first trial names the hog"
    assert named[1] and named[2], named  # and so do the light re-reads of the next ones
