"""`tailscope validate` end to end: a few real trials with real injections, the schedule and scores stored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tailscope.inject.kinds import KINDS
from tailscope.inject.validate import choose_kinds, plan_cpus
from tailscope.store.read import connect


def test_named_injector_that_cannot_act_is_an_input_error() -> None:
    if Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq").exists():
        pytest.skip("this node has cpufreq")
    proc = subprocess.run(
        [sys.executable, "-m", "tailscope", "validate", "--injectors", "freq-cap", "--trials", "8"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "freq-cap: cannot act here: no cpufreq" in proc.stderr and "Traceback" not in proc.stderr


def test_default_injectors_skip_what_cannot_act_and_say_why() -> None:
    kinds, skipped = choose_kinds(None)
    assert {k.name for k in kinds} | set(skipped) == set(KINDS)
    for why in skipped.values():
        assert why


def test_memthrash_needs_swap_and_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tailscope.inject import validate

    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        "MemTotal:       24684108 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\n"
    )
    assert validate.swap_free_bytes(meminfo) == 0
    meminfo.write_text("SwapFree:        3145724 kB\n")
    assert validate.swap_free_bytes(meminfo) == 3145724 * 1024
    monkeypatch.setattr(validate, "swap_free_bytes", lambda: 0)
    why = validate.why_unavailable(KINDS["memthrash"])
    assert why is not None and why.startswith("no swap") and "OOM killer" in why
    with pytest.raises(validate.InjectInputError, match="--injectors memthrash: cannot act here: no swap"):
        choose_kinds(("memthrash",))
    monkeypatch.setattr(validate, "swap_free_bytes", lambda: 8 << 30)
    assert validate.why_unavailable(KINDS["memthrash"]) is None


def test_cache_and_bandwidth_injectors_get_a_cpu_beside_the_probe() -> None:
    kinds = [KINDS[k] for k in ("cpuoccupy", "cachecopy", "membw", "memeater")]
    plan, kept, skipped = plan_cpus(kinds, [0, 1], [0, 1], pinned=False)
    assert plan.probe == [0] and plan.neighbours == [1] and plan.note and "CPU 1" in plan.note
    assert [k.name for k in kept] == ["cpuoccupy", "cachecopy", "membw", "memeater"] and not skipped
    # the probe's CPUs given by the user are kept: the neighbour kinds cannot act, and say why
    plan, kept, skipped = plan_cpus(kinds, [0, 1], [0, 1], pinned=True)
    assert plan.probe == [0, 1] and not plan.neighbours
    assert [k.name for k in kept] == ["cpuoccupy", "memeater"]
    assert set(skipped) == {"cachecopy", "membw"} and "--param cpus=" in skipped["membw"]
    # one CPU: nothing can sit beside it
    plan, kept, skipped = plan_cpus(kinds, [0], [0], pinned=False)
    assert "one CPU" in skipped["cachecopy"]
    # CPUs left free already: the probe keeps all of its own
    plan, kept, skipped = plan_cpus(kinds, [0, 1], [0, 1, 2, 3], pinned=False)
    assert plan.probe == [0, 1] and plan.neighbours == [2, 3] and plan.note is None
    # only CPU-time kinds: nothing is narrowed
    plan, _, _ = plan_cpus([KINDS["cpuoccupy"], KINDS["os-noise"]], [0, 1], [0, 1], pinned=False)
    assert plan.probe == [0, 1] and plan.note is None


def _small_validate(campaign: Path) -> list[str]:
    """A 12-trial validate of a small stream, blocks of 2, seed 7."""
    return [
        sys.executable, "-m", "tailscope", "validate", "--injectors", "cpuoccupy,os-noise", "--trials", "12",
        "--block", "2", "--seed", "7", "--campaign", str(campaign), "--param", "elements=1000000",
        "--param", "reps=4", "--json",
    ]  # fmt: skip


@pytest.mark.slow
def test_validate_runs_scores_and_stores_the_schedule(tmp_path: Path) -> None:
    campaign = tmp_path / "val"
    proc = subprocess.run(
        _small_validate(campaign),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["seed"] == 7 and result["trials"] == 12
    schedule = result["schedule"]
    assert schedule and all(s["kind"] in ("cpuoccupy", "os-noise") for s in schedule)
    assert all(s["trial_last"] - s["trial_first"] == 1 for s in schedule)  # blocks of 2 trials
    scores = result["scores"]
    injected = sum(s["trial_last"] - s["trial_first"] + 1 for s in schedule)
    assert scores["clean"]["runs"] == 12 - injected
    assert sum(d["runs"] for d in scores["detection"] if d["intensity"] is None) == injected
    con = connect(campaign)
    try:
        rows = con.execute(
            "SELECT kind, intensity, trial_first, trial_last, expected_cause, seed, started_at < ended_at "
            "FROM injections_all ORDER BY trial_first"
        ).fetchall()
        measures = {m for (m,) in con.execute("SELECT DISTINCT measure FROM validation_all").fetchall()}
        n_runs = con.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    assert [(r[0], r[2], r[3]) for r in rows] == [
        (s["kind"], s["trial_first"], s["trial_last"]) for s in schedule
    ]
    assert all(r[4] == KINDS[r[0]].expected_cause and r[5] == 7 and r[6] for r in rows)
    assert {"false_positive_rate", "recall"} <= measures
    assert n_runs == 12
    # the same seed gives the same schedule
    again = subprocess.run(
        _small_validate(tmp_path / "again"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr
    pick = [(s["kind"], s["intensity"], s["trial_first"]) for s in schedule]
    assert [
        (s["kind"], s["intensity"], s["trial_first"]) for s in json.loads(again.stdout)["schedule"]
    ] == pick


@pytest.mark.slow
def test_sigterm_during_validate_stops_the_injection_and_keeps_the_schedule(tmp_path: Path) -> None:
    from tailscope.inject.cgroups import cpu_hierarchy

    quota = os.geteuid() == 0
    try:
        root = cpu_hierarchy().root
    except Exception:
        quota = False
    kinds = "cpuoccupy,cpu-quota" if quota else "cpuoccupy"
    campaign = tmp_path / "val"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tailscope",
            "validate",
            "--injectors",
            kinds,
            "--inject-fraction",
            "0.9",
            "--trials",
            "400",
            "--block",
            "50",
            "--seed",
            "11",
            "--campaign",
            str(campaign),
            "--no-progress",
            "--param",
            "elements=1000000",
            "--param",
            "reps=4",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (campaign / "shards").exists():
        time.sleep(0.2)
    time.sleep(3)  # inside the first injected block
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "--rescore" in out
    if quota:
        assert not list(root.glob(f"tailscope-inject-{proc.pid}-*"))
    con = connect(campaign)
    try:
        rows = con.execute("SELECT kind, ended_at IS NOT NULL, details FROM injections_all").fetchall()
        stored = con.execute("SELECT count(*) FROM runs").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    assert rows and all(ended for _, ended, _ in rows)
    for kind, _, details in rows:  # every tsinject was stopped and said so (its done record)
        if kind == "cpuoccupy":
            assert json.loads(details)["done"]["record"] == "done"
    assert 0 < stored < 400
