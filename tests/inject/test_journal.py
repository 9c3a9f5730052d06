"""The node-state journal (node/journal.py): what a SIGKILLed `inject` or `validate` changed is put back.

Real SIGKILLs of real runs; the node is checked afterwards where the change was made: /sys/fs/cgroup (the
cgroup, its quota, the victim's cgroup), /proc/sys/vm/compact_unevictable_allowed, the process table
(tsinject). Deadlines are generous (the restore itself takes ~0.01-0.05 s: bench/bench_restore.py).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from journal_tools import (
    COMPACT,
    LOCKED_S,
    as_the_node_has_it,
    helper_of,
    inject_restore,
    pids_named,
    plant,
    ready_line,
    sigkill,
    tailscope,
    wait_for,
)

from tailscope.inject.kinds import InjectInputError
from tailscope.node import journal
from tailscope.node.journal_entry import PLACES_ENV


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A journal of the test's own; restore may write the copies of sysfs files the test makes there."""
    return {journal.ENV_DIR: str(tmp_path / "journal"), PLACES_ENV: str(tmp_path)}


@pytest.fixture
def cpu_root() -> Path:
    from tailscope.inject.cgroups import cpu_hierarchy

    if os.geteuid() != 0:
        pytest.skip("needs root to create a cgroup")
    try:
        return cpu_hierarchy().root
    except InjectInputError as exc:
        pytest.skip(str(exc))


def cgroup_of(pid: int) -> str:
    from tailscope.inject.cgroups import cpu_hierarchy

    return str(cpu_hierarchy().cgroup_of(pid))


def quota_on(victim: subprocess.Popen[bytes], env: dict[str, str]) -> tuple[str, subprocess.Popen[str], Path]:
    """`tailscope inject cpu-quota` on the victim, once the victim is in the cgroup it made: (the victim's
    own cgroup, the tailscope process, that cgroup)."""
    origin = cgroup_of(victim.pid)
    proc = tailscope("inject", "cpu-quota", "--pid", str(victim.pid), "--intensity", "0.5", env=env)
    group = Path(str(ready_line(proc)["cgroup"]))
    assert group.is_dir() and cgroup_of(victim.pid) == str(group)
    return origin, proc, group


@pytest.mark.root
def test_sigkill_of_inject_cpu_quota_removes_its_cgroup_and_frees_the_victim(
    env: dict[str, str], cpu_root: Path, victim: subprocess.Popen[bytes]
) -> None:
    origin, proc, group = quota_on(victim, env)
    err = sigkill(proc)
    wait_for("the cgroup removed", lambda: not group.exists())
    assert cgroup_of(victim.pid) == origin
    assert victim.poll() is None  # the victim itself is left running, where it was
    assert f"pid {victim.pid} back to cgroup {origin}" in err and f"cgroup {group} removed" in err
    assert not list(Path(env[journal.ENV_DIR]).glob("*.json"))


@pytest.mark.root
def test_sigkill_with_cgroup_dir_puts_its_quota_back(
    env: dict[str, str], cpu_root: Path, tmp_path: Path
) -> None:
    from tailscope.inject.cgroups import cpu_hierarchy

    hierarchy = cpu_hierarchy()
    group = cpu_root / f"tailscope-test-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    try:
        files = [p for p, _ in hierarchy.quota_files(group, 1, 1)]
        before = [p.read_text() for p in files]
        proc = tailscope("inject", "cpu-quota", "--cgroup", str(group), "--intensity", "0.5", env=env)
        ready_line(proc)
        assert [p.read_text() for p in files] != before  # the quota is set (50000 of 100000 on one CPU...)
        sigkill(proc)
        wait_for("the quota put back", lambda: [p.read_text() for p in files] == before)
        assert group.is_dir()  # not ours: it stays
    finally:
        group.rmdir()


@pytest.mark.root
def test_sigkill_of_inject_thp_fragment_puts_the_sysctl_back_and_stops_tsinject(env: dict[str, str]) -> None:
    old = as_the_node_has_it(COMPACT)
    if old.strip() != "1":
        pytest.skip(f"compact_unevictable_allowed is {old.strip()} here: another run's, or the node's own")
    before = pids_named("tsinject")
    proc = tailscope("inject", "thp-fragment", "--intensity", "0.01", "--reserve", "1g", env=env)
    ready_line(proc)
    assert COMPACT.read_text().strip() == "0"
    mine = pids_named("tsinject") - before
    assert mine
    err = sigkill(proc)
    wait_for("compact_unevictable_allowed back to 1", lambda: as_the_node_has_it(COMPACT) == old)
    wait_for("tsinject gone", lambda: not (pids_named("tsinject") & mine))
    assert "compact_unevictable_allowed back to '1'" in err


@pytest.mark.root
def test_inject_restore_after_the_helper_died_too_and_never_a_live_run(
    env: dict[str, str], cpu_root: Path, victim: subprocess.Popen[bytes]
) -> None:
    origin, proc, group = quota_on(victim, env)
    out = inject_restore(env)  # a live run: --restore touches nothing
    assert out.returncode == 0 and out.stdout.startswith("nothing to restore"), out
    assert f"pid {proc.pid} still runs" in out.stdout
    assert group.is_dir() and cgroup_of(victim.pid) == str(group)
    helper = helper_of(proc.pid)
    assert helper is not None
    os.kill(helper, signal.SIGKILL)  # the helper dies first: nothing restores on its own now
    wait_for("the helper gone", lambda: journal.start_time(helper) is None)
    sigkill(proc)
    time.sleep(0.5)
    assert group.is_dir() and cgroup_of(victim.pid) == str(group)  # still changed
    out = inject_restore(env)
    assert out.returncode == 0, out
    assert f"restored what pid {proc.pid} left: cgroup {group} removed" in out.stdout
    assert not group.exists() and cgroup_of(victim.pid) == origin
    again = inject_restore(env)
    assert again.stdout.startswith("nothing to restore")


def test_read_only_verbs_and_help_never_touch_the_journal_restore_does(tmp_path: Path) -> None:
    d = tmp_path / "journal"
    env = {**os.environ, journal.ENV_DIR: str(d), PLACES_ENV: str(tmp_path)}
    me = journal.Owner.this_process()
    dead = journal.Owner(me.pid, me.start + 1, me.boot)  # this pid, another start time: that run is gone
    target, live_target = tmp_path / "knob", tmp_path / "live-knob"
    target.write_text("changed\n")
    live_target.write_text("changed\n")
    entry = plant(d, dead, target, "original\n")
    live = plant(d, me, live_target, "original\n")
    for argv in (["inject", "--help"], ["validate", "--help"], ["inject", "cpuoccupy", "--cpus", ""]):
        subprocess.run([sys.executable, "-m", "tailscope", *argv], capture_output=True, timeout=60, env=env)
    assert entry.exists() and target.read_text() == "changed\n"
    out = inject_restore(env)
    assert out.returncode == 0, out
    assert out.stdout.splitlines() == [
        f"restored what pid {me.pid} left: {target} back to 'original'",
        f"pid {me.pid} still runs: what it changed is its own to undo (left alone)",
    ]
    assert target.read_text() == "original\n" and not entry.exists()
    assert live.exists() and live_target.read_text() == "changed\n"  # the live run's entry: untouched


def test_an_entry_from_an_earlier_boot_is_restored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PLACES_ENV, str(tmp_path))
    me = journal.Owner.this_process()
    target = tmp_path / "knob"
    target.write_text("changed\n")
    plant(tmp_path / "j", journal.Owner(me.pid, me.start, "another-boot"), target, "original\n")
    restored = journal.restore_dead(directories=[tmp_path / "j"])
    assert [r.done for r in restored] == [[f"{target} back to 'original'"]]
    assert target.read_text() == "original\n"


@pytest.mark.root
def test_no_journal_no_change(tmp_path: Path) -> None:
    """The entry is written before the change: where it cannot be, nothing is changed."""
    old = as_the_node_has_it(COMPACT)
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = subprocess.run(
        [sys.executable, "-m", "tailscope", "inject", "thp-fragment", "--intensity", "0.01"],
        capture_output=True, text=True, timeout=60, env={**os.environ, journal.ENV_DIR: str(blocker / "j")},
    )  # fmt: skip
    assert out.returncode == 2, out
    assert "journal" in out.stderr and "nothing was changed" in out.stderr and "Traceback" not in out.stderr
    assert as_the_node_has_it(COMPACT) == old


def test_journal_lives_in_run_for_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(journal.ENV_DIR, raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert journal._candidates()[0] == Path("/run/tailscope/journal")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert journal._candidates() == [Path("/tmp/tailscope-1000/journal")]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["cpuoccupy", "--cpus", "0-99999999999999999999"], "--cpus"),
        (["cpuoccupy", "--cpus", ""], "--cpus"),
        (["cpuoccupy", "--cpus", "1-0"], "--cpus"),
        (["cpuoccupy", "--duration", "inf"], "--duration"),
        (["cpuoccupy", "--duration", "nan"], "--duration"),
        (["os-noise", "--intensity", "inf"], "--intensity"),
        (["os-noise", "--intensity", "1e7"], "--intensity"),
        (["memleak", "--intensity", "1e300"], "--intensity"),
        (["cpu-quota", "--pid", "99999999999999999999"], "--pid"),
    ],
)
def test_option_bounds_are_one_line_exit_2_in_bounded_memory(args: list[str], says: str) -> None:
    def limit() -> None:  # 1.5 GiB of address space: a list of 10^20 CPUs would blow through it
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))

    out = subprocess.run(
        [sys.executable, "-m", "tailscope", "inject", *args], capture_output=True, text=True, timeout=60,
        preexec_fn=limit,
    )  # fmt: skip
    assert out.returncode == 2, out
    lines = [line for line in out.stderr.splitlines() if not line.startswith(("usage:", " "))]
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in out.stderr, out.stderr


@pytest.mark.root
@pytest.mark.slow
def test_sigkill_of_validate_restores_and_rescore_scores_what_was_stored(
    env: dict[str, str], cpu_root: Path, tmp_path: Path
) -> None:
    campaign = tmp_path / "campaign"
    # seed 3: blocks of 2 trials, clean, clean, cpu-quota 0.5, clean, cpu-quota 0.8, clean
    proc = tailscope(
        "validate", "--injectors", "cpu-quota", "--trials", "12", "--block", "2", "--seed", "3",
        "--campaign", str(campaign), "--param", "elements=1000000", "--param", "reps=4", "--no-progress",
        env=env,
    )  # fmt: skip
    mine = f"tailscope-inject-{proc.pid}-"
    wait_for("the injection", lambda: any(p.name.startswith(mine) for p in cpu_root.iterdir()), 240)
    groups = [p for p in cpu_root.iterdir() if p.name.startswith(mine)]
    sigkill(proc)
    wait_for("the cgroup removed", lambda: not any(g.exists() for g in groups))
    out = subprocess.run(
        [sys.executable, "-m", "tailscope", "validate", "--rescore", "--campaign", str(campaign), "--json"],
        capture_output=True, text=True, timeout=240, env={**os.environ, **env},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["seed"] == 3 and result["trials"] == 4  # the two clean blocks before the injection
    assert [(s["kind"], s["intensity"]) for s in result["schedule"]] == [("cpu-quota", 0.5)]
    assert not (campaign / "validate-schedule.json").exists()  # now in the store


@pytest.mark.parametrize("value", ["1e300", "604801", "inf"])
def test_tsinject_refuses_a_duration_beyond_a_week(value: str) -> None:
    """It was accepted: 1e300 s overflowed the timespec and tsinject died in sigtimedwait (EINVAL, exit 1)."""
    from tailscope.native import native_path

    out = subprocess.run(
        [str(native_path("tsinject")), "cpuoccupy", "--intensity", "0.01", "--duration", value],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr.startswith(f"tsinject: error: --duration {value}:"), out


def test_a_verb_that_changes_the_node_first_restores_what_a_dead_run_left(tmp_path: Path) -> None:
    d = tmp_path / "journal"
    me = journal.Owner.this_process()
    target = tmp_path / "knob"
    target.write_text("changed\n")
    entry = plant(d, journal.Owner(me.pid, me.start - 1, me.boot), target, "original\n")
    out = subprocess.run(
        [sys.executable, "-m", "tailscope", "inject", "cpuoccupy", "--intensity", "0.05", "--duration", ".2"],
        capture_output=True, text=True, timeout=LOCKED_S,
        env={**os.environ, journal.ENV_DIR: str(d), PLACES_ENV: str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out
    assert f"tailscope: restored what pid {me.pid} left: {target} back to 'original'" in out.stderr
    assert target.read_text() == "original\n" and not entry.exists()
    assert not list(d.glob("*.json"))  # and its own entries are gone after its own clean stop


FREQ_RUN = """
import sys, time
from pathlib import Path
from tailscope.inject.control import Injection
inj = Injection.of("freq-cap", 0.5, cpus=[0], cpufreq_root=Path(sys.argv[1]))
inj.start()
print("ready", flush=True)
time.sleep(300)
"""


def test_sigkill_during_freq_cap_puts_scaling_max_freq_back(env: dict[str, str], tmp_path: Path) -> None:
    """No cpufreq in this VM: the cpufreq files are a copy in their real format (kHz, one number and a
    newline, as on a Xeon with intel_pstate); the journal and its helper are the real ones. On hardware
    freq-cap writes /sys/devices/system/cpu/cpuN/cpufreq/scaling_max_freq the same way (untested here)."""
    d = tmp_path / "sys" / "cpu0" / "cpufreq"
    d.mkdir(parents=True)
    khz = {"cpuinfo_max_freq": 3800000, "cpuinfo_min_freq": 800000, "scaling_max_freq": 3800000}
    for name, value in khz.items():
        (d / name).write_text(f"{value}\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", FREQ_RUN, str(tmp_path / "sys")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env},
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    assert (d / "scaling_max_freq").read_text() == "1900000\n"
    sigkill(proc)
    wait_for("scaling_max_freq back", lambda: (d / "scaling_max_freq").read_text() == "3800000\n")


def test_a_journal_directory_others_may_write_is_not_obeyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "journal"
    me = journal.Owner.this_process()
    target = tmp_path / "knob"
    target.write_text("changed\n")
    plant(d, journal.Owner(me.pid, me.start + 1, me.boot), target, "original\n")
    d.chmod(0o777)  # a /tmp fallback another user made, with an entry saying what root should write where
    monkeypatch.setenv(journal.ENV_DIR, str(d))
    assert journal.existing_dirs() == []
    assert journal.restore_dead() == []
    assert target.read_text() == "changed\n"
    with pytest.raises(journal.JournalError, match="not owned by this user alone"):
        journal.journal_dir(create=True)
